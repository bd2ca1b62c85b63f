package worksclient

import (
	"context"
	"sync"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/outbound"
)

// minSweep is the number of counters below which a Pacer's store is never
// swept.
const minSweep = 64

// PacerOption configures a Pacer.
type PacerOption func(*Pacer)

// WithClock sets the time of the Pacer: its Now and its timers. Default:
// SystemClock.
func WithClock(c Clock) PacerOption {
	return func(p *Pacer) {
		if c != nil {
			p.clock = c
		}
	}
}

// Pacer is a RateLimiter for one process: for each key, requests start at
// least interval apart, one at a time, with no burst; keys do not wait on
// each other.
//
// It is one configuration of outbound.Limiter: outbound.Rate(1, interval,
// 0) (GCRA, one start per interval, no burst) in a memory store on the
// Pacer's clock. The model is a queue per key. A request whose key is free
// (no one waiting, the last start at least interval ago, no Retry-After
// hold) starts at once, without a timer. Otherwise it joins the key's
// queue; the request at the head sleeps until the key is free, starts, and
// hands the head to the next, which measures its interval from that
// actual start. Starts are therefore at least interval apart even when a
// timer fires late, and come in the order the requests arrived. A request
// whose context is done while it waits leaves the queue at once with
// ctx.Err() and takes no slot: whoever is behind it starts when it would
// have.
//
// A start is the instant the store decides it, just before Wait returns.
// The request reaches the API a little later, by a varying amount (the
// network, the scheduler), so the API may see two starts slightly less
// than interval apart; pace at a slightly longer interval if it must never
// see that.
//
// Memory is bounded: a key's counter whose last start is an interval old
// and that has no hold is in the state of a key never seen, and is dropped
// by a sweep that runs when a new key finds the store at twice the size
// the last sweep left (and at least 64 counters): amortised O(1) per new
// key, so the store holds at most 64 counters, or twice the keys that
// were busy at the last sweep, whichever is more. The queues and holds of
// the outbound.Limiter underneath are bounded as its documentation says
// (a key's entry goes once it has been idle for a minute).
//
// A Pacer is safe for concurrent use. Its counters live in one table
// under one mutex, held for a few operations, never while waiting: the
// Works API has a few dozen keys.
type Pacer struct {
	interval time.Duration
	clock    Clock
	lim      *outbound.Limiter
	store    *memstore.Store

	mu      sync.Mutex // guards sweepAt
	sweepAt int

	onStart func(key string, at time.Time) // tests: each start
}

var (
	_ RateLimiter = (*Pacer)(nil)
	_ Delayer     = (*Pacer)(nil)
)

// NewPacer returns a Pacer that starts requests of one key at least
// interval apart. An interval ≤ 0 means DefaultInterval (250 ms, 240 a
// minute); one above 2^60 ns (36 years) is 2^60 ns.
func NewPacer(interval time.Duration, opts ...PacerOption) *Pacer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	interval = min(interval, algo.MaxDrain)
	p := &Pacer{interval: interval, clock: SystemClock, sweepAt: minSweep}
	for _, o := range opts {
		o(p)
	}
	cfg, err := outbound.Rate(1, interval, 0)
	if err != nil { // an interval in (0, 2^60 ns] is always a valid rate
		panic("worksclient: " + err.Error())
	}
	p.store = memstore.New(memstore.WithShards(1), memstore.WithClock(outbound.CoreClock(p.clock)))
	p.lim, err = outbound.New(cfg, pacerStore{p}, outbound.WithClock(p.clock))
	if err != nil {
		panic("worksclient: " + err.Error())
	}
	return p
}

// Interval returns the spacing of starts per key.
func (p *Pacer) Interval() time.Duration { return p.interval }

// Wait implements RateLimiter: it returns when a request under key may
// start, after the requests that were waiting under key before it; or
// ctx.Err() as soon as ctx is done, without taking a slot. A ctx already
// done when Wait is called gets its error even if the key is free.
func (p *Pacer) Wait(ctx context.Context, key string) error {
	return p.lim.Wait(ctx, "", "/", key)
}

// Delay implements Delayer: no request under key starts until d from now
// has passed. It never fails.
func (p *Pacer) Delay(ctx context.Context, key string, d time.Duration) error {
	return p.lim.Delay(ctx, key, d)
}

// pacerStore is the Pacer's memory store: it reads the instant of each
// decision (so that a start is the instant decided on) and sweeps the
// store as it grows.
type pacerStore struct{ p *Pacer }

var _ store.Store = pacerStore{}

// Take implements store.Store.
func (s pacerStore) Take(_ context.Context, key string, pol *store.Policy, cost int64) (r store.Result, _ error) {
	p := s.p
	now := p.clock.Now()
	p.store.TakeAt(&r, key, pol, cost, now.UnixNano())
	if r.Allowed {
		if p.onStart != nil {
			p.onStart(key, now)
		}
		p.sweep()
	}
	return r, nil
}

// Peek implements store.Store.
func (s pacerStore) Peek(ctx context.Context, key string, pol *store.Policy, cost int64) (store.Result, error) {
	return s.p.store.Peek(ctx, key, pol, cost)
}

// Reset implements store.Store.
func (s pacerStore) Reset(ctx context.Context, key string, pol *store.Policy) (bool, error) {
	return s.p.store.Reset(ctx, key, pol)
}

// Local implements store.LocalStore: the counters are in this process.
func (pacerStore) Local() bool { return true }

// sweep drops the expired counters when the store has doubled since the
// last sweep.
func (p *Pacer) sweep() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store.Len() < p.sweepAt {
		return
	}
	p.store.Sweep()
	p.sweepAt = max(minSweep, 2*p.store.Len())
}
