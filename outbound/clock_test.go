package outbound

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a Clock whose time moves only by Advance, which fires the
// timers that are due.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at time.Time
	ch chan time.Time
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func newFakeClock() *fakeClock { return &fakeClock{now: t0} }

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	t := &fakeTimer{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	if d <= 0 {
		t.ch <- c.now
		return t.ch, func() bool { return false }
	}
	c.timers = append(c.timers, t)
	return t.ch, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		for i, x := range c.timers {
			if x == t {
				c.timers = append(c.timers[:i], c.timers[i+1:]...)
				return true
			}
		}
		return false
	}
}

// Advance moves the time by d and fires the timers due.
func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	kept := c.timers[:0]
	for _, t := range c.timers {
		if t.at.After(c.now) {
			kept = append(kept, t)
			continue
		}
		t.ch <- c.now
	}
	clear(c.timers[len(kept):])
	c.timers = kept
}

// pending returns the timers not yet fired, and the earliest one's delay.
func (c *fakeClock) pending() (n int, next time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range c.timers {
		if d := t.at.Sub(c.now); i == 0 || d < next {
			next = d
		}
	}
	return len(c.timers), next
}

// waitTimers waits (in real time, at most 10 s) until n timers are
// pending, and returns the earliest one's delay.
func (c *fakeClock) waitTimers(t testing.TB, n int) time.Duration {
	t.Helper()
	return eventually(t, func() (time.Duration, bool) {
		got, next := c.pending()
		return next, got == n
	})
}

// eventually polls f until it reports true (at most 10 s of real time):
// it synchronises with goroutines, and asserts nothing about timing.
func eventually[T any](t testing.TB, f func() (T, bool)) T {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, ok := f()
		if ok {
			return v
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within 10s (last value %v)", v)
		}
		time.Sleep(time.Millisecond)
	}
}
