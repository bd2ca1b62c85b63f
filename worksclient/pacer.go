package worksclient

import (
	"context"
	"sync"
	"time"
)

// minSweep is the number of keys below which a Pacer never sweeps.
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
// The model is a queue per key. A request whose key is free (no one
// waiting, the last start at least interval ago, no Retry-After hold)
// starts at once, without a timer. Otherwise it joins the key's queue;
// the request at the head sleeps until the key is free, starts, and hands
// the head to the next, which measures its interval from that actual
// start. Starts are therefore at least interval apart even when a timer
// fires late, and come in the order the requests arrived. A request whose
// context is done while it waits leaves the queue at once with ctx.Err()
// and takes no slot: whoever is behind it starts when it would have.
//
// A start is the instant Wait takes for it, just before it returns. The
// request reaches the API a little later, by a varying amount (the
// network, the scheduler), so the API may see two starts slightly less
// than interval apart; pace at a slightly longer interval if it must never
// see that.
//
// Memory is bounded: a key whose last start is an interval old and that
// has no waiter and no hold is in the same state as a key never seen, and
// is dropped by a sweep that runs when a new key finds the map at twice
// the size the last sweep left (and at least 64 keys): amortised O(1) per
// new key. The map so holds at most 64 keys, or twice the keys that were
// busy at the last sweep, whichever is more.
//
// A Pacer is safe for concurrent use. Its keys live in one map under one
// mutex, held for a few map operations, never while waiting: the Works API
// has a few dozen keys.
type Pacer struct {
	interval time.Duration
	clock    Clock

	mu      sync.Mutex
	keys    map[string]*paceKey
	sweepAt int

	onStart func(key string, at time.Time) // tests: each start, under mu
}

var (
	_ RateLimiter = (*Pacer)(nil)
	_ Delayer     = (*Pacer)(nil)
)

// paceKey is the state of one key.
type paceKey struct {
	last       time.Time // the latest start; zero: none yet
	hold       time.Time // no start before this (Retry-After); zero: none
	head, tail *waiter   // requests waiting, in arrival order
}

// waiter is one request in a key's queue.
type waiter struct {
	prev, next *waiter
	turn       chan struct{} // closed when the waiter becomes the head
}

// NewPacer returns a Pacer that starts requests of one key at least
// interval apart. An interval ≤ 0 means DefaultInterval (250 ms, 240 a
// minute).
func NewPacer(interval time.Duration, opts ...PacerOption) *Pacer {
	if interval <= 0 {
		interval = DefaultInterval
	}
	p := &Pacer{
		interval: interval,
		clock:    SystemClock,
		keys:     make(map[string]*paceKey),
		sweepAt:  minSweep,
	}
	for _, o := range opts {
		o(p)
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
	if err := ctx.Err(); err != nil {
		return err
	}
	p.mu.Lock()
	now := p.clock.Now()
	k := p.key(key, now)
	if k.head == nil && !now.Before(k.free(p.interval)) {
		p.start(k, key, now)
		p.mu.Unlock()
		return nil
	}
	w := &waiter{turn: make(chan struct{})}
	k.push(w)
	head := k.head == w
	p.mu.Unlock()

	if !head {
		select {
		case <-w.turn:
		case <-ctx.Done():
			p.mu.Lock()
			k.remove(w) // hands the head on if w had just got it
			p.mu.Unlock()
			return ctx.Err()
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			p.mu.Lock()
			k.remove(w)
			p.mu.Unlock()
			return err
		}
		p.mu.Lock()
		now := p.clock.Now()
		d := k.free(p.interval).Sub(now)
		if d <= 0 {
			p.start(k, key, now)
			k.remove(w)
			p.mu.Unlock()
			return nil
		}
		p.mu.Unlock()
		// Sleep, then look again: a Delay may have moved the hold.
		ch, stop := p.clock.NewTimer(d)
		select {
		case <-ch:
		case <-ctx.Done():
			stop()
		}
	}
}

// start records a start of key at now. p.mu is held.
func (p *Pacer) start(k *paceKey, key string, now time.Time) {
	k.last = now
	if p.onStart != nil {
		p.onStart(key, now)
	}
}

// Delay implements Delayer: no request under key starts until d from now
// has passed. It never fails.
func (p *Pacer) Delay(_ context.Context, key string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	k := p.key(key, now)
	if until := now.Add(d); until.After(k.hold) {
		k.hold = until
	}
	return nil
}

// key returns key's state, made when missing. p.mu is held.
func (p *Pacer) key(key string, now time.Time) *paceKey {
	if k := p.keys[key]; k != nil {
		return k
	}
	if len(p.keys) >= p.sweepAt {
		p.sweep(now)
		p.sweepAt = max(minSweep, 2*len(p.keys))
	}
	k := new(paceKey)
	p.keys[key] = k
	return k
}

// sweep drops the keys that are in the state of a key never seen. p.mu is
// held.
func (p *Pacer) sweep(now time.Time) {
	for key, k := range p.keys {
		if k.head == nil && !now.Before(k.free(p.interval)) {
			delete(p.keys, key)
		}
	}
}

// free returns when the key's next request may start.
func (k *paceKey) free(interval time.Duration) time.Time {
	at := k.hold
	if !k.last.IsZero() {
		if t := k.last.Add(interval); t.After(at) {
			at = t
		}
	}
	return at
}

func (k *paceKey) push(w *waiter) {
	if k.tail == nil {
		k.head, k.tail = w, w
		return
	}
	w.prev, k.tail.next, k.tail = k.tail, w, w
}

// remove takes w out of the queue; when w was the head, the next waiter
// becomes the head and is told so.
func (k *paceKey) remove(w *waiter) {
	if w.prev != nil {
		w.prev.next = w.next
	} else {
		k.head = w.next
		if k.head != nil {
			close(k.head.turn)
		}
	}
	if w.next != nil {
		w.next.prev = w.prev
	} else {
		k.tail = w.prev
	}
	w.prev, w.next = nil, nil
}
