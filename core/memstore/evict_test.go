package memstore_test

import (
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

var algorithms = []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA}

// t0 is 20 s into a minute and 13 min 20 s into an hour: the tests below
// stay inside one window of every limit they use.
var t0 = time.Unix(1_700_000_000, 0)

// consumed returns how many units key holds under the one-limit policy p,
// without consuming any (a zero-cost Take neither writes nor inserts): 0
// when its counter was evicted.
func consumed(t *testing.T, s *memstore.Store, key string, p *store.Policy) int64 {
	t.Helper()
	r, err := s.Take(ctx, key, p, 0)
	if err != nil {
		t.Fatal(err)
	}
	return p.Limits[0].Count - r.Remaining
}

// drain takes from key under p until denied and returns how many were
// admitted.
func drain(t *testing.T, s *memstore.Store, key string, p *store.Policy) int {
	t.Helper()
	for n := 0; ; n++ {
		r, err := s.Take(ctx, key, p, 1)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Allowed {
			return n
		}
		if n > 1000 {
			t.Fatalf("%s: more than 1000 admitted", key)
		}
	}
}

// TestEvictionKeepsCountersAtTheirLimit: users at their limit of a
// 5/minute rule, polling (denied: nothing is written), survive a flood of
// ten times the store's capacity in fresh keys of a 10/hour rule, though
// the fresh counters expire later: at their limit they are the last to go.
// (Closest to expiry first would drop the users.)
func TestEvictionKeepsCountersAtTheirLimit(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := store.NewManualClock(t0)
			s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(100))
			users, flood := pol("users", a, "5/minute"), pol("flood", a, "10/hour")
			for i := range 20 {
				if n := drain(t, s, "user"+strconv.Itoa(i), users); n != 5 {
					t.Fatalf("user%d: %d admitted, want 5", i, n)
				}
			}
			for i := range 1000 {
				clock.Advance(time.Millisecond) // 1 s in all: nothing refills
				if r, _ := s.Take(ctx, "flood"+strconv.Itoa(i), flood, 1); !r.Allowed {
					t.Fatalf("flood%d denied", i)
				}
				if i%50 == 0 {
					for u := range 20 {
						if r, _ := s.Take(ctx, "user"+strconv.Itoa(u), users, 1); r.Allowed {
							t.Fatalf("after %d flood keys: user%d admitted again", i+1, u)
						}
					}
				}
			}
			for u := range 20 {
				if got := consumed(t, s, "user"+strconv.Itoa(u), users); got != 5 {
					t.Errorf("user%d holds %d of 5 after the flood, want 5", u, got)
				}
			}
			if n := s.Len(); n > 100 {
				t.Errorf("Len = %d, cap 100", n)
			}
		})
	}
}

// TestEvictionLeastConsumedFirst: a full shard of counters that consumed
// 1 to 10 of 10, ten of each; one insert frees a tenth: exactly the ten
// that consumed 1. Filled again (with counters at their limit), the next
// pass frees exactly the ten that consumed 2.
func TestEvictionLeastConsumedFirst(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := store.NewManualClock(t0)
			s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(100))
			p := pol("p", a, "10/hour")
			use := func(i int) int64 { return int64(1 + i%10) }
			for i := range 100 {
				if r, _ := s.Take(ctx, "k"+strconv.Itoa(i), p, use(i)); !r.Allowed {
					t.Fatalf("k%d denied", i)
				}
			}
			check := func(after string, gone int64) {
				t.Helper()
				for i := range 100 {
					want := use(i)
					if want <= gone {
						want = 0
					}
					if got := consumed(t, s, "k"+strconv.Itoa(i), p); got != want {
						t.Fatalf("after %s: k%d (consumed %d) holds %d, want %d", after, i, use(i), got, want)
					}
				}
			}
			_, _ = s.Take(ctx, "new0", p, 10)
			if n := s.Len(); n != 91 {
				t.Fatalf("Len = %d after one eviction, want 91", n)
			}
			check("one eviction", 1)
			for i := 1; i <= 10; i++ { // the 10th finds the shard full
				_, _ = s.Take(ctx, "new"+strconv.Itoa(i), p, 10)
			}
			if n := s.Len(); n != 91 {
				t.Fatalf("Len = %d after the second eviction, want 91", n)
			}
			check("two evictions", 2)
			for i := 0; i <= 10; i++ {
				if got := consumed(t, s, "new"+strconv.Itoa(i), p); got != 10 {
					t.Fatalf("new%d (at its limit) holds %d, want 10", i, got)
				}
			}
		})
	}
}

// TestEvictionAtLimitOnlyWhenNeeded: when the expired counters and those
// below their limit make up less than a tenth, the rest of the tenth comes
// from the counters at their limit, and no more.
func TestEvictionAtLimitOnlyWhenNeeded(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := store.NewManualClock(t0)
			s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(100))
			p := pol("p", a, "5/hour")
			for i := range 96 {
				_, _ = s.Take(ctx, "full"+strconv.Itoa(i), p, 5)
			}
			for i := range 4 {
				_, _ = s.Take(ctx, "part"+strconv.Itoa(i), p, 4)
			}
			_, _ = s.Take(ctx, "new", p, 1)
			if n := s.Len(); n != 91 {
				t.Fatalf("Len = %d, want 91", n)
			}
			kept := 0
			for i := range 96 {
				switch consumed(t, s, "full"+strconv.Itoa(i), p) {
				case 5:
					kept++
				case 0:
				default:
					t.Fatalf("full%d changed", i)
				}
			}
			if kept != 90 {
				t.Fatalf("%d of 96 counters at their limit kept, want 90 (6 go after the 4 below it)", kept)
			}
			for i := range 4 {
				if got := consumed(t, s, "part"+strconv.Itoa(i), p); got != 0 {
					t.Fatalf("part%d (4 of 5) kept while counters at their limit went", i)
				}
			}
		})
	}
}

// TestEvictionExpiredFirst: expired counters go first, all of them, though
// they were at their limit and the live ones consumed little.
func TestEvictionExpiredFirst(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := store.NewManualClock(t0)
			s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(100))
			short, long := pol("short", a, "1/second"), pol("long", a, "10/hour")
			for i := range 30 {
				if r, _ := s.Take(ctx, "s"+strconv.Itoa(i), short, 1); !r.Allowed || r.Remaining != 0 {
					t.Fatalf("s%d: %+v", i, r)
				}
			}
			for i := range 70 {
				_, _ = s.Take(ctx, "l"+strconv.Itoa(i), long, 1)
			}
			clock.Advance(3 * time.Second) // every 1/second counter has expired (the sliding window's after 2 windows)
			_, _ = s.Take(ctx, "new", long, 1)
			if got := s.Len(); got != 71 {
				t.Fatalf("Len after eviction = %d, want 71 (30 expired dropped, no live one)", got)
			}
			for i := range 70 {
				if got := consumed(t, s, "l"+strconv.Itoa(i), long); got != 1 {
					t.Fatalf("live counter l%d holds %d, want 1: evicted while expired ones were available", i, got)
				}
			}
		})
	}
}

// TestEvictionMultiLimit: the counters of a two-limit policy carry a level
// each; the users' hour counters, at their limit, survive a flood.
func TestEvictionMultiLimit(t *testing.T) {
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := store.NewManualClock(t0)
			s := memstore.New(memstore.WithClock(clock), memstore.WithShards(1), memstore.WithMaxKeys(200))
			p := pol("two", a, "5/hour", "100/day")
			for i := range 10 {
				if n := drain(t, s, "user"+strconv.Itoa(i), p); n != 5 {
					t.Fatalf("user%d: %d admitted, want 5", i, n)
				}
			}
			for i := range 2000 {
				_, _ = s.Take(ctx, "flood"+strconv.Itoa(i), p, 1)
			}
			for i := range 10 {
				if r, _ := s.Take(ctx, "user"+strconv.Itoa(i), p, 1); r.Allowed {
					t.Fatalf("user%d admitted after the flood", i)
				}
			}
		})
	}
}
