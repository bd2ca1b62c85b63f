package store

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"sync/atomic"
	"time"
)

// Concurrency bounds the requests of one key in flight at once under one
// rule (core.RuleSpec.Concurrent): at most Limit of them hold a slot
// together. Name identifies the slots: two Concurrency values with the
// same Name share them whatever their Limit and Lease, so that the
// requests in flight stay counted when a reloaded configuration changes
// the limit.
//
// A Concurrency must not change once it is in use: stores identify its
// slots by its Fingerprint, computed once.
type Concurrency struct {
	Name string
	// Limit is the most requests of one key in flight at once: at least 1.
	Limit int64
	// Lease is how long a slot stays taken when nothing releases it (the
	// process that took it died), in a store that outlives processes
	// (package redisstore); a store in this process, whose slots go with
	// it, ignores it. At least a second.
	Lease time.Duration

	fingerprint atomic.Uint64
}

// Fingerprint is a 64-bit digest (FNV-1a) of the name, the same in every
// process, and never the fingerprint of a Policy of the same name: a store
// that keeps slots beside counters keys them apart by it.
func (c *Concurrency) Fingerprint() uint64 {
	if f := c.fingerprint.Load(); f != 0 {
		return f
	}
	h := fnv.New64a()
	h.Write([]byte(c.Name))
	h.Write([]byte{0, 0xff, 'i', 'n', 'f', 'l', 'i', 'g', 'h', 't'}) // a Policy's digest goes on with its algorithm, at most 3
	f := max(h.Sum64(), 1)
	c.fingerprint.Store(f)
	return f
}

// ErrBadConcurrency is returned by stores for a Concurrency without a
// name, with a Limit below 1 or a Lease below a second (see
// Concurrency.Validate).
var ErrBadConcurrency = errors.New("concurrency limit needs a name, a limit of at least 1 and a lease of at least a second")

// Validate reports whether c can be counted: a Name, a Limit of at least
// 1, a Lease of at least a second. The error wraps ErrBadConcurrency.
func (c *Concurrency) Validate() error {
	if c.Name == "" || c.Limit < 1 || c.Lease < time.Second {
		return fmt.Errorf("concurrency %q: limit %d, lease %v: %w", c.Name, c.Limit, c.Lease, ErrBadConcurrency)
	}
	return nil
}

// ConcurrencyStore is a Store that also bounds requests in flight: the
// limiter asks it for a rule that sets concurrent (core.RuleSpec.Concurrent),
// and a configuration with such a rule cannot run on a store without it.
// Implementations must be safe for concurrent use, and must pass the
// conformance suite of package storetest, which runs its checks on every
// store that implements it.
type ConcurrencyStore interface {
	Store
	// Acquire takes one of c.Limit slots of key under c when fewer are
	// held, and reports ok; when all are held it takes nothing and
	// reports ok false. Concurrent calls never take more than c.Limit
	// slots together. lease names the slot taken, for Release. A slot
	// not released comes back c.Lease after it was taken in a store
	// shared by processes. An error means the store failed; a slot may
	// then have been taken (a call that timed out after the server
	// answered), and comes back with its lease. ctx is as Take's.
	Acquire(ctx context.Context, key string, c *Concurrency) (lease uint64, ok bool, err error)
	// Release gives back the slot of key under c that the Acquire that
	// returned lease took. The limiter calls it once per slot taken. A
	// store that names its slots does nothing for one not held (already
	// released, or past its lease); one that only counts them (package
	// memstore) never counts below zero.
	Release(ctx context.Context, key string, c *Concurrency, lease uint64) error
}
