package redisstore

import (
	"sync/atomic"

	"github.com/rlkit/rlkit/core/store"
)

// ErrCircuitOpen is returned (wrapped in a NodeError naming the node),
// without calling Redis, while a node's circuit is open: the node failed
// several times in a row and the cool-down has not ended (or another call
// is probing it). Its StoreErrorKind is "circuit_open".
var ErrCircuitOpen error = &kindError{"redisstore: circuit open after consecutive Redis failures", "circuit_open"}

// breaker opens after threshold consecutive failures, for cooldown; then
// one call probes, and its outcome closes or reopens it. Each node has its
// own.
type breaker struct {
	threshold int64
	cooldown  int64
	failures  atomic.Int64
	openUntil atomic.Int64 // 0 while closed
	probing   atomic.Bool
}

// allow reports whether a call may go to Redis at instant now, and whether
// it is the probe.
func (b *breaker) allow(now int64) (ok, probe bool) {
	until := b.openUntil.Load()
	if until == 0 {
		return true, false
	}
	if now < until || !b.probing.CompareAndSwap(false, true) {
		return false, false
	}
	return true, true
}

func (b *breaker) success(probe bool) {
	if b.failures.Load() != 0 {
		b.failures.Store(0)
	}
	if probe || b.openUntil.Load() != 0 {
		b.openUntil.Store(0)
		b.probing.Store(false)
	}
}

func (b *breaker) failure(now int64, probe bool) {
	n := b.failures.Add(1)
	if b.threshold > 0 && (probe || n >= b.threshold) {
		b.openUntil.Store(now + b.cooldown)
		b.probing.Store(false)
	}
}

// open reports whether the circuit is open at instant now.
func (b *breaker) open(now int64) bool {
	until := b.openUntil.Load()
	return until != 0 && now < until
}

// tripped reports whether the breaker holds anything to remember: a
// failure since the last success, or an open circuit.
func (b *breaker) tripped() bool {
	return b.failures.Load() != 0 || b.openUntil.Load() != 0
}

// state returns the breaker's state at instant now: closed, open until
// the cool-down ends, then half-open (the next call probes) until a probe
// closes or reopens it.
func (b *breaker) state(now int64) store.BreakerState {
	switch until := b.openUntil.Load(); {
	case until == 0:
		return store.BreakerClosed
	case now < until:
		return store.BreakerOpen
	}
	return store.BreakerHalfOpen
}
