package redisstore_test

import (
	"context"
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// staleCase is a counter kept under the terms saved and read under the
// terms stale: the same name, algorithm and period (the same counter),
// another count, burst or time unit, as a service's rule file before and
// after a reload, or a tool's stale copy of it.
type staleCase struct {
	name         string
	incrExpire   bool
	saved, stale *store.Policy
	taken        int64
}

func staleCases(t *testing.T) []staleCase {
	pol := func(name string, a algo.Algorithm, limits ...algo.Limit) *store.Policy {
		p := &store.Policy{Name: name, Algorithm: a, Limits: limits}
		if err := p.Validate(); err != nil {
			t.Fatal(err)
		}
		return p
	}
	h, d := time.Hour, 24*time.Hour
	return []staleCase{
		// Another count and burst: GCRA rebases what was spent.
		{"gcra", false, pol("g", algo.GCRA, algo.Limit{Count: 10, Period: h, Burst: 12}), pol("g", algo.GCRA, algo.Limit{Count: 1, Period: h, Burst: 1}), 11},
		// Another time unit (a million per hour counts in 10µs).
		{"bucket-unit", false, pol("b", algo.TokenBucket, algo.Limit{Count: 1_000_000, Period: h}), pol("b", algo.TokenBucket, algo.Limit{Count: 10, Period: h}), 5},
		// A slower refill: the state needs a longer TTL.
		{"bucket-slower", false, pol("s", algo.TokenBucket, algo.Limit{Count: 10, Period: h}), pol("s", algo.TokenBucket, algo.Limit{Count: 1, Period: h, Burst: 10}), 3},
		{"gcra-two", false, pol("g2", algo.GCRA, algo.Limit{Count: 10, Period: h, Burst: 12}, algo.Limit{Count: 100, Period: d}),
			pol("g2", algo.GCRA, algo.Limit{Count: 1, Period: h, Burst: 1}, algo.Limit{Count: 5, Period: d}), 11},
		{"sliding", false, pol("w", algo.SlidingWindow, algo.Limit{Count: 10, Period: h}), pol("w", algo.SlidingWindow, algo.Limit{Count: 2, Period: h}), 5},
		{"fixed", false, pol("f", algo.FixedWindow, algo.Limit{Count: 10, Period: d}), pol("f", algo.FixedWindow, algo.Limit{Count: 2, Period: d}), 5},
		{"fixed-incr-expire", true, pol("f", algo.FixedWindow, algo.Limit{Count: 10, Period: d}), pol("f", algo.FixedWindow, algo.Limit{Count: 2, Period: d}), 5},
		{"calendar", false, calendarPolicy(t, "c", time.UTC, "10/month", "100/year"), calendarPolicy(t, "c", time.UTC, "2/month", "3/year"), 5},
	}
}

// snapshot is every key of rc's server: its value (DUMP) and its expiry
// (PEXPIRETIME, an instant, which time does not change).
func snapshot(t *testing.T, rc *redis.Client) map[string]string {
	t.Helper()
	ctx := context.Background()
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, k := range keys {
		v, err := rc.Dump(ctx, k).Result()
		if err != nil {
			t.Fatal(err)
		}
		at, err := rc.Do(ctx, "PEXPIRETIME", k).Int64()
		if err != nil {
			t.Fatal(err)
		}
		out[k] = fmt.Sprintf("%q expires at %d", v, at)
	}
	return out
}

// TestReadsWriteNothing: Peek (at cost 0 and 1, alone and in batches),
// Inspect and Scan under terms other than those a counter was kept under
// leave every key byte for byte as it was, its expiry included, for
// every algorithm and layout; a Take of cost 0 under those terms still
// rewrites the state under them, as a take does.
func TestReadsWriteNothing(t *testing.T) {
	t.Parallel()
	rc := client(t, redistest.StartServer(t).Addr())
	ctx := context.Background()
	stores := map[bool]*redisstore.Store{
		false: newStore(t, rc, redisstore.WithDenyCache(false)),
		true:  newStore(t, rc, redisstore.WithDenyCache(false), redisstore.WithIncrExpireKeys(true)),
	}
	cases := staleCases(t)
	for _, c := range cases {
		s := stores[c.incrExpire]
		for range c.taken {
			if r, err := s.Take(ctx, c.name, c.saved, 1); err != nil || !r.Allowed {
				t.Fatalf("%s: take: %+v, %v", c.name, r, err)
			}
		}
	}
	before := snapshot(t, rc)
	if len(before) < len(cases) {
		t.Fatalf("%d keys for %d counters: %v", len(before), len(cases), before)
	}
	for _, c := range cases {
		s := stores[c.incrExpire]
		before := snapshot(t, rc)
		for _, p := range []*store.Policy{c.stale, c.saved} {
			for _, cost := range []int64{0, 1} {
				if _, err := s.Peek(ctx, c.name, p, cost); err != nil {
					t.Fatalf("%s: Peek at %d: %v", c.name, cost, err)
				}
			}
		}
		// Many at once: the peeks wait for a lane and go in batches.
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				if _, err := s.Peek(ctx, c.name, c.stale, 0); err != nil {
					t.Errorf("%s: Peek: %v", c.name, err)
				}
			})
		}
		wg.Wait()
		if _, err := s.Inspect(ctx, c.stale, c.name, "never"); err != nil {
			t.Fatalf("%s: Inspect: %v", c.name, err)
		}
		if _, err := s.Scan(ctx, c.stale, 1_000_000, func([]redisstore.KeyState) error { return nil }); err != nil {
			t.Fatalf("%s: Scan: %v", c.name, err)
		}
		after := snapshot(t, rc)
		for k, v := range after {
			if before[k] != v {
				t.Errorf("%s: reading under other terms wrote %s:\nbefore %s\nafter  %s", c.name, k, before[k], v)
			}
		}
		if len(after) != len(before) {
			t.Errorf("%s: reading under other terms made %d keys %d", c.name, len(before), len(after))
		}
	}
	// A take of cost 0 is a take: it keeps the state under its terms.
	before = snapshot(t, rc)
	g := cases[0]
	if _, err := stores[false].Take(ctx, g.name, g.stale, 0); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, rc); maps.Equal(after, before) {
		t.Errorf("a take of cost 0 under other terms left the GCRA state kept under the old ones")
	}
}
