package memstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func slots(name string, limit int64) *store.Concurrency {
	return &store.Concurrency{Name: name, Limit: limit, Lease: 30 * time.Second}
}

func TestInFlightZeroAllocsOnExistingKey(t *testing.T) {
	s := memstore.New()
	c := slots("api", 4)
	_, _, _ = s.Acquire(ctx, "user-1", c)
	_ = s.Release(ctx, "user-1", c, 0)
	if n := testing.AllocsPerRun(1000, func() {
		_, _, _ = s.Acquire(ctx, "user-1", c)
		_ = s.Release(ctx, "user-1", c, 0)
	}); n != 0 {
		t.Errorf("%v allocs per Acquire and Release, want 0", n)
	}
	if n := testing.AllocsPerRun(1000, func() { _ = s.Release(ctx, "user-unknown", c, 0) }); n != 0 {
		t.Errorf("%v allocs per Release of a key never acquired, want 0", n)
	}
}

// TestInFlightNeverBelowZero: Releases past the slots held leave the
// count at zero, so they free no slot to come.
func TestInFlightNeverBelowZero(t *testing.T) {
	s := memstore.New()
	c := slots("api", 2)
	for range 3 {
		if err := s.Release(ctx, "k", c, 0); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.InFlight("k", c); n != 0 {
		t.Fatalf("InFlight after Releases of nothing: %d, want 0", n)
	}
	_, _, _ = s.Acquire(ctx, "k", c)
	for range 3 {
		_ = s.Release(ctx, "k", c, 0)
	}
	if n := s.InFlight("k", c); n != 0 {
		t.Fatalf("InFlight after one Acquire and three Releases: %d, want 0", n)
	}
	for i, want := range []bool{true, true, false} {
		if _, ok, _ := s.Acquire(ctx, "k", c); ok != want {
			t.Fatalf("Acquire %d: got %v, want %v", i, ok, want)
		}
	}
	if n := s.InFlight("k", c); n != 2 {
		t.Fatalf("InFlight: %d, want 2", n)
	}
}

// TestInFlightIdleDropped: a key with no slot held is dropped by Sweep,
// one holding a slot is kept.
func TestInFlightIdleDropped(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.WithClock(clock))
	c := slots("api", 2)
	for i := range 10 {
		_, _, _ = s.Acquire(ctx, "k"+strconv.Itoa(i), c)
	}
	for i := range 9 {
		_ = s.Release(ctx, "k"+strconv.Itoa(i), c, 0)
	}
	if n := s.Len(); n != 10 {
		t.Fatalf("Len: %d, want 10", n)
	}
	clock.Advance(time.Second)
	s.Sweep()
	if n := s.Len(); n != 1 {
		t.Fatalf("Len after Sweep: %d, want 1 (the key holding a slot)", n)
	}
	if n := s.InFlight("k9", c); n != 1 {
		t.Fatalf("InFlight of the key kept: %d, want 1", n)
	}
}

// TestInFlightHeldSurviveFlood: a key whose slots are all held is the
// last to be evicted: a flood of fresh counters in a full store, each at
// its limit, frees none of its slots.
func TestInFlightHeldSurviveFlood(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(100))
	c := slots("api", 2)
	for range 2 {
		if _, ok, _ := s.Acquire(ctx, "held", c); !ok {
			t.Fatal("Acquire refused in an empty store")
		}
	}
	p := &store.Policy{Name: "flood", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 1, Period: time.Hour}}}
	for i := range 10_000 {
		_, _ = s.Take(ctx, "fresh-"+strconv.Itoa(i), p, 1)
	}
	if st := s.Stats(); st.Keys > 100 || st.Evictions == 0 {
		t.Fatalf("stats after the flood: %+v, want at most 100 keys and evictions", st)
	}
	if n := s.InFlight("held", c); n != 2 {
		t.Fatalf("InFlight after the flood: %d, want 2", n)
	}
	if _, ok, _ := s.Acquire(ctx, "held", c); ok {
		t.Fatal("a third Acquire was admitted after the flood: the held slots were forgotten")
	}
}
