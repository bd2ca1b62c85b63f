package store

import (
	"context"
	"errors"
	"net"
	"strconv"
)

// ErrorKind classifies a store error into a small fixed set, for a
// metric label: an error that has a method StoreErrorKind() string (a
// store's own errors, anywhere in the chain) gives that; else "timeout"
// for a deadline, "canceled" for a cancelled context, "connection" for a
// network error, and "other".
func ErrorKind(err error) string {
	var k interface{ StoreErrorKind() string }
	switch {
	case err == nil:
		return ""
	case errors.As(err, &k):
		return k.StoreErrorKind()
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return "connection"
	}
	return "other"
}

// Stats is what a store reports about itself, for metrics. Stores
// that can report implement StatsStore; metrics packages read it when
// scraped, never on the request path.
type Stats struct {
	// Store names the kind of store: "memory", "redis".
	Store string
	// Keys is the number of keys held now; -1 when the store cannot tell
	// cheaply (Redis).
	Keys int64
	// MaxKeys is the most keys the store holds; 0 when unbounded.
	MaxKeys int64
	// Evictions counts keys dropped to make room before they expired.
	Evictions uint64
	// DenyCacheHits counts denials answered from a local cache without
	// asking the store's server.
	DenyCacheHits uint64
	// Nodes holds one entry per server node the store talks to (none for
	// an in-process store).
	Nodes []NodeStats
}

// NodeStats is one server node of a store.
type NodeStats struct {
	// Node is its address (host:port).
	Node string
	// Breaker is its circuit breaker's state.
	Breaker BreakerState
}

// BreakerState is the state of a circuit breaker.
type BreakerState uint8

const (
	BreakerClosed   BreakerState = iota // calls go through
	BreakerOpen                         // calls fail fast
	BreakerHalfOpen                     // one trial call goes through
)

var breakerNames = [...]string{"closed", "open", "half_open"}

// String returns closed, open or half_open.
func (s BreakerState) String() string {
	if int(s) < len(breakerNames) {
		return breakerNames[s]
	}
	return "breaker(" + strconv.Itoa(int(s)) + ")"
}

// StatsStore is a Store that reports Stats. Stats must be safe to
// call concurrently with the store's use, and cheap enough for a scrape.
type StatsStore interface {
	Store
	Stats() Stats
}

// LocalStore is a Store that keeps its counters in this process (package
// memstore): a call takes tens of nanoseconds, less than reading the clock
// twice to time it would, so the limiter does not time its calls:
// core.Event.Latency is 0 for them.
type LocalStore interface {
	Store
	// Local reports whether the store is in this process.
	Local() bool
}
