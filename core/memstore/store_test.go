package memstore_test

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

var ctx = context.Background()

func pol(name string, a algo.Algorithm, limits ...string) *store.Policy {
	p := &store.Policy{Name: name, Algorithm: a}
	for _, s := range limits {
		l, err := algo.ParseLimit(s)
		if err != nil {
			panic(err)
		}
		p.Limits = append(p.Limits, l)
	}
	return p
}

func TestZeroAllocsOnExistingKey(t *testing.T) {
	s := memstore.New()
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		for _, p := range []*store.Policy{pol("one", a, "1000000/hour"), pol("two", a, "1000000/minute", "2000000/hour")} {
			_, _ = s.Take(ctx, "user-1", p, 1)
			if n := testing.AllocsPerRun(1000, func() { _, _ = s.Take(ctx, "user-1", p, 1) }); n != 0 {
				t.Errorf("%v, %d limits: %v allocs per decision, want 0", a, len(p.Limits), n)
			}
			if n := testing.AllocsPerRun(1000, func() { _, _ = s.Peek(ctx, "user-1", p, 1) }); n != 0 {
				t.Errorf("%v, %d limits: %v allocs per peek, want 0", a, len(p.Limits), n)
			}
			if n := testing.AllocsPerRun(1000, func() { _, _ = s.Peek(ctx, "user-unknown", p, 1) }); n != 0 {
				t.Errorf("%v, %d limits: %v allocs per peek at a key never counted, want 0", a, len(p.Limits), n)
			}
		}
	}
}

// present reports whether key still has its counter under a 1-per-window
// policy it already used: a present counter denies.
func present(s *memstore.Store, key string, p *store.Policy) bool {
	r, _ := s.Take(ctx, key, p, 1)
	return !r.Allowed
}

func TestEvictsAboutATenthOfTheOldest(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(100))
	p := pol("tb", algo.TokenBucket, "1/hour") // each counter expires 1h after its use
	for i := range 100 {
		_, _ = s.Take(ctx, "k"+strconv.Itoa(i), p, 1)
		clock.Advance(time.Second)
	}
	_, _ = s.Take(ctx, "new", p, 1)
	if got := s.Len(); got != 91 {
		t.Fatalf("Len after eviction = %d, want 91 (10 of 100 dropped, then one added)", got)
	}
	for i := 11; i < 100; i++ {
		if !present(s, "k"+strconv.Itoa(i), p) {
			t.Fatalf("counter k%d (not among the 11 oldest) was evicted", i)
		}
	}
}

func TestTiesCannotEmptyAShard(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(100))
	p := pol("fw", algo.FixedWindow, "1/hour") // all in one window: one expiry
	for i := range 101 {
		_, _ = s.Take(ctx, "k"+strconv.Itoa(i), p, 1)
	}
	if got := s.Len(); got != 91 {
		t.Fatalf("Len = %d, want 91", got)
	}
}

func TestCapHoldsUnderAFlood(t *testing.T) {
	s := memstore.New(memstore.WithMaxKeys(1000), memstore.WithShards(8))
	p := pol("flood", algo.FixedWindow, "5/hour")
	for i := range 100_000 {
		_, _ = s.Take(ctx, "attacker-"+strconv.Itoa(i), p, 1)
		if i%10_000 == 0 && s.Len() > 1000 {
			t.Fatalf("after %d keys: %d counters, cap 1000", i, s.Len())
		}
	}
	if n := s.Len(); n > 1000 || n < 800 {
		t.Fatalf("Len = %d after the flood, want between 800 and 1000", n)
	}
	// The store still decides correctly.
	for i := range 5 {
		if r, _ := s.Take(ctx, "victim", p, 1); !r.Allowed || r.Remaining != int64(4-i) {
			t.Fatalf("victim request %d: %+v", i, r)
		}
	}
}

func TestResetAndSweep(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.WithClock(clock))
	p := pol("sw", algo.SlidingWindow, "1/second", "10/minute")
	for i := range 50 {
		_, _ = s.Take(ctx, "k"+strconv.Itoa(i), p, 1)
	}
	if got := s.Len(); got != 100 {
		t.Fatalf("Len = %d, want 100 (two limits per key)", got)
	}
	if cleared, err := s.Reset(ctx, "k0", p); !cleared || err != nil {
		t.Fatalf("Reset of a counted key = %v, %v; want true", cleared, err)
	}
	if got := s.Len(); got != 98 {
		t.Fatalf("Len after Reset = %d, want 98", got)
	}
	clock.Advance(90 * time.Second) // the per-second counters have expired, the per-minute ones not
	s.Sweep()
	if got := s.Len(); got != 49 {
		t.Fatalf("Len after Sweep = %d, want 49", got)
	}
	clock.Advance(time.Hour)
	s.Sweep()
	if got := s.Len(); got != 0 {
		t.Fatalf("Len after the last Sweep = %d, want 0", got)
	}
}

func TestSweeperStopsOnClose(t *testing.T) {
	defer goleak.VerifyNone(t)
	s := memstore.New(memstore.WithSweepInterval(time.Millisecond))
	_, _ = s.Take(ctx, "k", pol("p", algo.GCRA, "1/second"), 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMemoryPerKey(t *testing.T) {
	if testing.Short() {
		t.Skip("inserts 1,000,000 keys")
	}
	if got := heapBytesPerKey(1_000_000); got > 80 {
		t.Fatalf("%.1f bytes per key at 1,000,000 keys, want at most 80", got)
	}
}

func TestSmallCapIsHonoured(t *testing.T) {
	for _, max := range []int{1, 10, 100, 1000} {
		s := memstore.New(memstore.WithMaxKeys(max))
		p := pol("cap", algo.FixedWindow, "5/hour")
		for i := range 20 * max {
			_, _ = s.Take(ctx, "k"+strconv.Itoa(i), p, 1)
		}
		if n := s.Len(); n > max || n == 0 {
			t.Errorf("WithMaxKeys(%d): %d counters held", max, n)
		}
	}
}

func TestBadPolicies(t *testing.T) {
	s := memstore.New()
	for _, p := range []*store.Policy{
		{Name: "none"},
		pol("five", algo.FixedWindow, "1/second", "2/minute", "3/hour", "4/day", "5/5d"),
	} {
		r, err := s.Take(ctx, "k", p, 1)
		if !errors.Is(err, store.ErrBadPolicy) || r.Allowed {
			t.Errorf("policy %q: got %+v, %v; want a denial and ErrBadPolicy", p.Name, r.Allowed, err)
		}
		var res store.Result
		s.TakeAt(&res, "k", p, 1, 1)
		if res.Allowed {
			t.Errorf("policy %q: TakeAt admitted", p.Name)
		}
	}
}

// TestResetCleared: Reset reports whether a counter was live, at the
// store's clock, and removes a counter that had expired without reporting
// it.
func TestResetCleared(t *testing.T) {
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
		s := memstore.New(memstore.WithClock(clock))
		p := pol("rc", a, "1/second", "10/hour")
		r, _ := s.Take(ctx, "k", p, 1)
		// The hour limit's counter outlives the second's: the key is live
		// until the last of them expires.
		clock.Advance(r.Limits[0].ResetAfter)
		if cleared, _ := s.Reset(ctx, "k", p); !cleared {
			t.Fatalf("%v: Reset with the hour counter live = false, want true", a)
		}
		if s.Len() != 0 {
			t.Fatalf("%v: %d counters after Reset, want 0", a, s.Len())
		}
		one := pol("rc1", a, "2/second")
		r, _ = s.Take(ctx, "k", one, 1)
		clock.Advance(r.ResetAfter)
		if cleared, _ := s.Reset(ctx, "k", one); cleared {
			t.Fatalf("%v: Reset %v after the take (its ResetAfter) = true, want false: the counter had expired", a, r.ResetAfter)
		}
		if s.Len() != 0 {
			t.Fatalf("%v: the expired counter was not removed: %d held", a, s.Len())
		}
	}
}

// TestStats: Keys counts the counters held (expired ones until they are
// dropped), MaxKeys the bound, Evictions only the live counters eviction
// dropped, not the expired ones.
func TestStats(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(100))
	want := store.Stats{Store: "memory", MaxKeys: 100}
	if got := s.Stats(); !reflect.DeepEqual(got, want) {
		t.Fatalf("empty store: %+v, want %+v", got, want)
	}
	short, long := pol("short", algo.FixedWindow, "1/second"), pol("long", algo.FixedWindow, "1/hour")
	for i := range 30 {
		_, _ = s.Take(ctx, "s"+strconv.Itoa(i), short, 1)
	}
	for i := range 70 {
		_, _ = s.Take(ctx, "l"+strconv.Itoa(i), long, 1)
	}
	want.Keys = 100
	if got := s.Stats(); !reflect.DeepEqual(got, want) {
		t.Fatalf("full store: %+v, want %+v", got, want)
	}
	// The 30 short counters expire: the next insert drops them, a tenth
	// of the shard or more, and evicts nothing live.
	clock.Advance(time.Second)
	_, _ = s.Take(ctx, "x", long, 1)
	want.Keys = 71
	if got := s.Stats(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after dropping expired counters: %+v, want %+v", got, want)
	}
	// Full of live counters: an insert evicts a tenth, 10 live ones.
	for i := range 29 {
		_, _ = s.Take(ctx, "y"+strconv.Itoa(i), long, 1)
	}
	_, _ = s.Take(ctx, "z", long, 1)
	want.Keys, want.Evictions = 91, 10
	if got := s.Stats(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after an eviction: %+v, want %+v", got, want)
	}
	// A sweep drops expired counters: no eviction.
	clock.Advance(time.Hour)
	s.Sweep()
	want.Keys = 0
	if got := s.Stats(); !reflect.DeepEqual(got, want) {
		t.Fatalf("after a sweep: %+v, want %+v", got, want)
	}
	// Several shards: MaxKeys is the bound they enforce together (64
	// shards asked for, 32 used so that each holds 16 keys or more, 31
	// each).
	if got := memstore.New(memstore.WithMaxKeys(1000), memstore.WithShards(64)).Stats().MaxKeys; got != 32*31 {
		t.Fatalf("MaxKeys 1000 over 64 shards: Stats().MaxKeys = %d, want %d", got, 32*31)
	}
}
