package memstore

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// keysOnShards returns a key of shard 1 and one of shard 2 of s.
func keysOnShards(t *testing.T, s *Store) (string, string) {
	t.Helper()
	var ks [3]string
	for i := 0; ks[1] == "" || ks[2] == ""; i++ {
		if i > 1_000_000 {
			t.Fatal("no keys of shards 1 and 2")
		}
		k := "k" + strconv.Itoa(i)
		if x := s.shardIndex(s.keyHash(k)); x < len(ks) && ks[x] == "" {
			ks[x] = k
		}
	}
	return ks[1], ks[2]
}

// TestTakeAllNoDeadlock: goroutines call TakeAll over keys of two
// shards, in both orders of the takes, with one-limit, two-limit and
// calendar policies, and over new keys that fill their shards and evict,
// while others decide on the same keys without the shards' mutexes
// (Take, Charge, Acquire, Release) and with them (Reset, Sweep, which
// compacts holding every shard's mutex). Every goroutine ends within 30 s
// (a lock taken in the takes' order would deadlock), under -race.
func TestTakeAllNoDeadlock(t *testing.T) {
	s := New(WithShards(4), WithMaxKeys(4*64))
	a, b := keysOnShards(t, s)
	one := &store.Policy{Name: "one", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 1_000_000, Period: time.Hour}}}
	two := &store.Policy{Name: "two", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 1_000_000, Period: time.Minute}, {Count: 10_000_000, Period: time.Hour}}}
	day, err := algo.ParseCalendarLimit("1000000/day")
	if err != nil {
		t.Fatal(err)
	}
	cal := &store.Policy{Name: "cal", Limits: []algo.Limit{day}}
	slots := &store.Concurrency{Name: "slots", Limit: 1_000_000}
	const rounds = 2000
	var wg sync.WaitGroup
	var wrong atomic.Int64
	takeAll := func(takes ...store.Take) {
		var rs [store.MaxTakes]store.Result
		if ok, err := s.TakeAll(ctx, takes, rs[:]); err != nil || !ok {
			wrong.Add(1)
		}
	}
	for g := range 2 {
		x, y := a, b
		if g == 1 {
			x, y = b, a
		}
		wg.Go(func() {
			for i := range rounds {
				takeAll(store.Take{Key: x, Policy: one, Cost: 1}, store.Take{Key: y, Policy: two, Cost: 1},
					store.Take{Key: y, Policy: one, Cost: 1}, store.Take{Key: x, Policy: cal, Cost: 1})
				if i%64 == 0 {
					runtime.Gosched()
				}
			}
		})
	}
	wg.Go(func() { // new keys: inserts, and eviction once the shards are full
		for i := range rounds {
			takeAll(store.Take{Key: "new" + strconv.Itoa(i), Policy: one, Cost: 1}, store.Take{Key: a, Policy: two, Cost: 1},
				store.Take{Key: "new" + strconv.Itoa(i), Policy: two, Cost: 1})
		}
	})
	wg.Go(func() { // without the shards' mutexes
		for i := range rounds {
			k := []string{a, b}[i%2]
			_, _ = s.Take(ctx, k, one, 1)
			_, _ = s.Charge(ctx, k, two, 1)
			if _, ok, _ := s.Acquire(ctx, k, slots); ok {
				_ = s.Release(ctx, k, slots, 0)
			}
		}
	})
	wg.Go(func() { // with them
		for i := range rounds / 10 {
			_, _ = s.Reset(ctx, []string{a, b}[i%2], cal)
			s.Sweep()
		}
	})
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("TakeAll deadlocked")
	}
	if wrong.Load() != 0 {
		t.Fatalf("%d calls failed or were denied under limits no call reaches", wrong.Load())
	}
	if n, st := s.Len(), s.Stats(); n > int(st.MaxKeys) || st.Evictions == 0 {
		t.Fatalf("%d counters held, %d evicted, bound %d: want eviction, within the bound", n, st.Evictions, st.MaxKeys)
	}
}

// TestTakeAllExactUnderSweep: two goroutines call TakeAll for a key of
// one shard under a one-limit policy and a key of another under a
// two-limit one, 300 a day each, while a third takes from the first key
// alone without the shard's mutex and a fourth sweeps, moving the
// counters into other cells (the burst before them expires): exactly 300
// are admitted from the first key, and the second's counters show
// exactly what TakeAll admitted.
func TestTakeAllExactUnderSweep(t *testing.T) {
	const limit = 300
	for _, alg := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		t.Run(alg.String(), func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0).Truncate(24 * time.Hour).Add(time.Second)
			clock := store.NewManualClock(start)
			s := New(WithShards(4), WithMaxKeys(100_000), WithClock(clock))
			a, b := keysOnShards(t, s)
			one := &store.Policy{Name: "one", Algorithm: alg, Limits: []algo.Limit{{Count: limit, Period: 24 * time.Hour}}}
			two := &store.Policy{Name: "two", Algorithm: alg, Limits: []algo.Limit{{Count: limit, Period: 24 * time.Hour}, {Count: 1000, Period: 7 * 24 * time.Hour}}}
			short := &store.Policy{Name: "short", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 1, Period: time.Second}}}
			for i := range 3000 { // a burst first: the counters below are created in high cells
				_, _ = s.Take(ctx, "b"+strconv.Itoa(i), short, 1)
			}
			var all, alone, moves atomic.Int64
			var wg sync.WaitGroup
			for range 2 {
				wg.Go(func() {
					var rs [2]store.Result
					for i := range limit {
						if ok, _ := s.TakeAll(ctx, []store.Take{{Key: a, Policy: one, Cost: 1}, {Key: b, Policy: two, Cost: 1}}, rs[:]); ok {
							all.Add(1)
						}
						if i%8 == 0 {
							runtime.Gosched()
						}
					}
				})
			}
			wg.Go(func() {
				for i := range limit {
					if r, _ := s.Take(ctx, a, one, 1); r.Allowed {
						alone.Add(1)
					}
					if i%8 == 0 {
						runtime.Gosched()
					}
				}
			})
			wg.Go(func() {
				for range 20 {
					before := s.next.Load()
					clock.Advance(1100 * time.Millisecond)
					s.Sweep()
					if s.next.Load() < before {
						moves.Add(1)
					}
					time.Sleep(time.Millisecond)
				}
			})
			wg.Wait()
			n := all.Load()
			if n+alone.Load() != limit {
				t.Fatalf("%d calls of TakeAll and %d Takes admitted, want %d in all", n, alone.Load(), limit)
			}
			if r, _ := s.Peek(ctx, a, one, 0); r.Remaining != 0 {
				t.Fatalf("%s under one: %d left, want 0", a, r.Remaining)
			}
			if r, _ := s.Peek(ctx, b, two, 0); r.Limits[0].Remaining != limit-n || r.Limits[1].Remaining != 1000-n {
				t.Fatalf("%s under two: %+v left, want %d and %d", b, r.Limits[:2], limit-n, 1000-n)
			}
			if moves.Load() == 0 {
				t.Fatal("no sweep moved the counters")
			}
		})
	}
}

// TestTakeAllSharedCounter: two policies of the same name, algorithm and
// period share their counter whatever their counts (store.Policy.CounterID);
// takes under both in one call count against that one counter, the second
// on what the first left.
func TestTakeAllSharedCounter(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0).Truncate(time.Hour))
	s := New(WithClock(clock))
	ten := &store.Policy{Name: "p", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 10, Period: time.Hour}}}
	five := &store.Policy{Name: "p", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 5, Period: time.Hour}}}
	var rs [2]store.Result
	ok, err := s.TakeAll(ctx, []store.Take{{Key: "u", Policy: ten, Cost: 3}, {Key: "u", Policy: five, Cost: 1}}, rs[:])
	if err != nil || !ok || rs[0].Remaining != 7 || rs[1].Remaining != 1 {
		t.Fatalf("3 under 10 then 1 under 5: %v, %v, remaining %d and %d; want admitted, 7 and 1", ok, err, rs[0].Remaining, rs[1].Remaining)
	}
	ok, _ = s.TakeAll(ctx, []store.Take{{Key: "u", Policy: ten, Cost: 1}, {Key: "u", Policy: five, Cost: 1}}, rs[:])
	if ok || !rs[0].Allowed || rs[0].Remaining != 6 || rs[1].Allowed {
		t.Fatalf("1 under 10 then 1 under 5 with 4 taken: %v, %+v / %+v; want denied by the second, the first with 6 left", ok, rs[0], rs[1])
	}
	if r, _ := s.Take(ctx, "u", ten, 6); !r.Allowed || r.Remaining != 0 || s.Len() != 1 {
		t.Fatalf("6 more under 10: %+v, %d counters; want admitted with 0 left, one counter", r, s.Len())
	}
}
