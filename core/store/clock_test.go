package store_test

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

// fired reports whether ch has received, and what.
func fired(ch <-chan time.Time) (time.Time, bool) {
	select {
	case t := <-ch:
		return t, true
	default:
		return time.Time{}, false
	}
}

// TestManualClockTimers: a timer fires once the clock has moved its
// duration, not before, with the clock's time then; a stopped one never
// fires; Timers counts those pending; a duration ≤ 0 fires at once.
func TestManualClockTimers(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	c := store.NewManualClock(t0)
	a, _ := c.NewTimer(2 * time.Second)
	b, stopB := c.NewTimer(time.Second)
	d, stopD := c.NewTimer(3 * time.Second)
	if n := c.Timers(); n != 3 {
		t.Fatalf("%d timers pending, want 3", n)
	}
	c.Advance(999 * time.Millisecond)
	if _, ok := fired(b); ok {
		t.Fatal("the 1s timer fired after 999ms")
	}
	c.Advance(time.Millisecond)
	if at, ok := fired(b); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("the 1s timer at 1s: fired %v at %v, want at %v", ok, at, t0.Add(time.Second))
	}
	if stopB() {
		t.Error("stopping a fired timer reported it pending")
	}
	if !stopD() || c.Timers() != 1 {
		t.Fatalf("stopping a pending timer: %d left, want 1", c.Timers())
	}
	c.Set(t0.Add(time.Hour))
	if at, ok := fired(a); !ok || !at.Equal(t0.Add(time.Hour)) {
		t.Errorf("the 2s timer after Set: fired %v at %v, want at %v", ok, at, t0.Add(time.Hour))
	}
	if _, ok := fired(d); ok {
		t.Error("a stopped timer fired")
	}
	if n := c.Timers(); n != 0 {
		t.Errorf("%d timers pending, want 0", n)
	}
	now, stop := c.NewTimer(0)
	if _, ok := fired(now); !ok || stop() || c.Timers() != 0 {
		t.Error("a timer of 0 did not fire at once")
	}
}
