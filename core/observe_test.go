package core_test

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
)

// steppingClock advances by a millisecond at each read.
type steppingClock struct{ now int64 }

func (c *steppingClock) Now() int64 { c.now += int64(time.Millisecond); return c.now }

// TestLocalStoreNotTimed: the memory store's calls are not timed (Latency
// 0), as store.LocalStore says; the clock is never read for them.
func TestLocalStoreNotTimed(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(reloadA), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := &steppingClock{}
	var events []core.Event
	store := memstore.New()
	defer store.Close()
	l := core.NewLimiter(cfg, core.WithStore(store), core.WithClock(clock), core.WithObserver(func(e core.Event) { events = append(events, e) }))
	l.Decide(t.Context(), "GET", "/stable", "alice", false)
	if len(events) != 1 || events[0].Latency != 0 || events[0].Outcome != core.OutcomeAllowed {
		t.Errorf("events %+v, want one allowed with latency 0", events)
	}
	if clock.now != 0 {
		t.Errorf("the limiter read its clock %d times, want none", clock.now/int64(time.Millisecond))
	}
}
