package memstore_test

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// TestTakeAllZeroAllocsOnExistingKeys: TakeAll over existing keys, with
// one-limit, two-limit and calendar policies, two takes of one counter,
// admitted and denied, allocates nothing.
func TestTakeAllZeroAllocsOnExistingKeys(t *testing.T) {
	s := memstore.New()
	cal := calendarPolicy(t, "cal", time.UTC, "1000000/day", "10000000/month")
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		one, two := pol("one", a, "1000000/hour"), pol("two", a, "1000000/minute", "2000000/hour")
		full := pol("full", a, "1/hour")
		takes := []store.Take{{Key: "u", Policy: one, Cost: 1}, {Key: "u", Policy: two, Cost: 1}, {Key: "v", Policy: two, Cost: 1}, {Key: "u", Policy: cal, Cost: 1}, {Key: "u", Policy: one, Cost: 1}}
		denied := []store.Take{{Key: "u", Policy: one, Cost: 1}, {Key: "u", Policy: full, Cost: 1}}
		var rs [store.MaxTakes]store.Result
		if ok, err := s.TakeAll(ctx, takes, rs[:]); !ok || err != nil {
			t.Fatalf("%v: %v, %v; want admitted", a, ok, err)
		}
		if ok, err := s.TakeAll(ctx, denied[1:], rs[:]); !ok || err != nil {
			t.Fatalf("%v: %v, %v; want admitted", a, ok, err)
		}
		if n := testing.AllocsPerRun(1000, func() { _, _ = s.TakeAll(ctx, takes, rs[:]) }); n != 0 {
			t.Errorf("%v: %v allocs per TakeAll admitted, want 0", a, n)
		}
		if n := testing.AllocsPerRun(1000, func() { _, _ = s.TakeAll(ctx, denied, rs[:]) }); n != 0 {
			t.Errorf("%v: %v allocs per TakeAll denied, want 0", a, n)
		}
	}
}
