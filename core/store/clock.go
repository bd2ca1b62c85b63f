package store

import (
	"cmp"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// Clock tells the time as Unix nanoseconds. Every decision reads it once and
// passes the instant down, so a fake clock controls everything.
type Clock interface {
	Now() int64
}

// SystemClock is the wall clock, read through the runtime's monotonic clock:
// about half the cost of time.Now (one vDSO call instead of two). Its
// wall-clock offset is re-read at most once per second, so a stepped system
// clock is followed within a second. It is the clock of every decision
// and every counter, unless a store or limiter is given another.
var SystemClock Clock = &systemClock{}

type systemClock struct{}

//go:linkname nanotime runtime.nanotime
func nanotime() int64

var (
	wallOffset atomic.Int64 // Unix ns − monotonic ns
	lastSync   atomic.Int64 // monotonic ns of the last re-read
)

func init() { syncWall(nanotime()) }

func syncWall(mono int64) {
	wallOffset.Store(time.Now().UnixNano() - nanotime())
	lastSync.Store(mono)
}

func (*systemClock) Now() int64 {
	mono := nanotime()
	if mono-lastSync.Load() >= int64(time.Second) {
		syncWall(mono)
	}
	return mono + wallOffset.Load()
}

// ManualClock is a Clock that only moves when told to: for tests and
// examples. Its timers (NewTimer) fire as it moves. The zero value reads
// 0; it is safe for concurrent use.
type ManualClock struct {
	ns      atomic.Int64
	pending atomic.Int64 // len(timers), read without the lock
	mu      sync.Mutex   // guards timers, and orders firing after a move
	timers  []*manualTimer
}

// manualTimer is a ManualClock's timer: it fires at at (Unix ns) on ch.
type manualTimer struct {
	at int64
	ch chan time.Time
}

// NewManualClock returns a ManualClock reading t.
func NewManualClock(t time.Time) *ManualClock {
	c := new(ManualClock)
	c.Set(t)
	return c
}

// Now returns the clock's reading in Unix nanoseconds.
func (c *ManualClock) Now() int64 { return c.ns.Load() }

// Time returns the clock's reading as a time.Time.
func (c *ManualClock) Time() time.Time { return time.Unix(0, c.ns.Load()) }

// Set moves the clock to t, firing the timers due by then.
func (c *ManualClock) Set(t time.Time) {
	c.ns.Store(t.UnixNano())
	c.fire()
}

// Advance moves the clock forward by d (backwards when d < 0), firing
// the timers due by then.
func (c *ManualClock) Advance(d time.Duration) {
	c.ns.Add(int64(d))
	c.fire()
}

// NewTimer returns a channel that receives the clock's time once the
// clock has moved d past its reading now (at once when d ≤ 0), and a
// function that stops the timer, reporting whether it had not fired. It
// is how a core.Limiter on this clock times the waits of its rules'
// wait (core.RuleSpec.Wait), so that a test moves them with the clock.
func (c *ManualClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	ch := make(chan time.Time, 1)
	c.mu.Lock()
	now := c.ns.Load()
	if d <= 0 {
		c.mu.Unlock()
		ch <- time.Unix(0, now)
		return ch, func() bool { return false }
	}
	t := &manualTimer{at: now + int64(d), ch: ch}
	c.timers = append(c.timers, t)
	c.pending.Add(1)
	c.mu.Unlock()
	return ch, func() bool { return c.stop(t) }
}

// Timers returns the number of the clock's timers that have neither fired
// nor been stopped: a test moves the clock once its waiters sleep.
func (c *ManualClock) Timers() int { return int(c.pending.Load()) }

// stop removes t from the pending timers and reports whether it was one.
func (c *ManualClock) stop(t *manualTimer) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, p := range c.timers {
		if p == t {
			c.timers = append(c.timers[:i], c.timers[i+1:]...)
			c.pending.Add(-1)
			return true
		}
	}
	return false
}

// fire sends the time to every pending timer due by now, in the order of
// their instants, and forgets them.
func (c *ManualClock) fire() {
	if c.pending.Load() == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.ns.Load()
	slices.SortStableFunc(c.timers, func(a, b *manualTimer) int { return cmp.Compare(a.at, b.at) })
	n := 0
	for _, t := range c.timers {
		if t.at > now {
			break
		}
		t.ch <- time.Unix(0, now)
		n++
	}
	c.timers = append(c.timers[:0], c.timers[n:]...)
	c.pending.Add(int64(-n))
}
