package core

import (
	"context"
	"errors"
	"net"
	"strconv"
	"time"
)

// Outcome is what became of one request the limiter saw.
type Outcome uint8

const (
	// OutcomeAllowed: counted and admitted.
	OutcomeAllowed Outcome = iota
	// OutcomeDenied: counted and denied (429).
	OutcomeDenied
	// OutcomeShadowDenied: a rule in shadow mode would have denied the
	// request; it was let through (see RuleSpec.Mode).
	OutcomeShadowDenied
	// OutcomeBypassed: the bypass predicate (a super-admin) or the allow
	// list (AllowSpec) let the request through uncounted.
	OutcomeBypassed
	// OutcomeExempt: the path is exempt; nothing was counted.
	OutcomeExempt
	// OutcomeStoreError: the store failed; Event.Allowed tells what the
	// failure policy did with the request.
	OutcomeStoreError
	// OutcomeBanned: the client IP is in a banned network (BanSpec); the
	// request was refused with 403 before anything else (Event.Rule "").
	OutcomeBanned
	// OutcomePenalized: the identity is under the rule's penalty
	// (PenaltySpec); the request was refused with 429 without counting.
	OutcomePenalized
	// OutcomeOvershoot: a request served under a rule that counts by
	// outcome (CountMode) whose outcome could not be counted: requests in
	// flight with it filled the counter first (the overshoot CountMode
	// bounds). Event.Allowed is true: it was served.
	OutcomeOvershoot

	numOutcomes
)

// NumOutcomes is the number of outcomes: Outcome values are 0 to
// NumOutcomes-1, for observers that keep one counter per outcome in an
// array.
const NumOutcomes = int(numOutcomes)

var outcomeNames = [...]string{"allowed", "denied", "shadow_denied", "bypassed", "exempt", "store_error", "banned", "penalized", "overshoot"}

// String returns the outcome's metric label: allowed, denied,
// shadow_denied, bypassed, exempt, store_error, banned, penalized or
// overshoot.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Event describes one request the limiter saw while limiting is enabled,
// for metrics: every outcome, counted or not.
type Event struct {
	// Rule is the name of the rule the request fell under ("default" for
	// the default limit); "" for an exempt path and a banned network.
	Rule string
	// Plan is the plan whose limits the rule counted under (see
	// Decision.Plan): a tier's name, CustomPlan, or "". Plans are named
	// by the configuration, so it suits a metric label.
	Plan string
	// Key is the store key of a counted request (the identity, bounded by
	// BoundKey; a secret identity as its keyed hash: see
	// SecretIdentity); "" when nothing was counted. Never use it as a
	// metric label: clients choose it.
	Key     string
	Outcome Outcome
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Cost is what the request weighed under Rule (0 when not counted).
	Cost int64
	// Err is the store's error, if it failed.
	Err error
	// Latency is the time the store took, for one call in 16 taken at
	// random (WithLatencySampling); 0 for the others, when the store was
	// not asked, or when it keeps its counters in this process (see
	// LocalStore).
	Latency time.Duration
}

// Observer receives an Event for every request the limiter decides while
// limiting is enabled (under a rule counted by outcome, for a request
// that reaches the handler, when Limiter.Complete counts it or not). It is called synchronously on the request path: it
// must be fast and safe for concurrent use.
type Observer func(Event)

// StoreErrorKind classifies a store error into a small fixed set, for a
// metric label: an error that has a method StoreErrorKind() string (a
// store's own errors, anywhere in the chain) gives that; else "timeout"
// for a deadline, "canceled" for a cancelled context, "connection" for a
// network error, and "other".
func StoreErrorKind(err error) string {
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

// StoreStats is what a store reports about itself, for metrics. Stores
// that can report implement StatsStore; metrics packages read it when
// scraped, never on the request path.
type StoreStats struct {
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

// StatsStore is a Store that reports StoreStats. Stats must be safe to
// call concurrently with the store's use, and cheap enough for a scrape.
type StatsStore interface {
	Store
	Stats() StoreStats
}

// LocalStore is a Store that keeps its counters in this process (package
// memstore): a call takes tens of nanoseconds, less than reading the clock
// twice to time it would, so the limiter does not time its calls:
// Event.Latency is 0 for them.
type LocalStore interface {
	Store
	// Local reports whether the store is in this process.
	Local() bool
}
