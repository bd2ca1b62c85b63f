package core

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// TestLongestWait checks that longestWait bounds every RetryAfter each
// algorithm answers, on random traffic (costs up to the capacity, time
// moving by fractions of a period), and that it is the bound of the
// slowest of several limits.
func TestLongestWait(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	limits := []algo.Limit{
		{Count: 2, Period: time.Minute},
		{Count: 1, Period: 10 * time.Second, Burst: 1},
		{Count: 7, Period: 3 * time.Second, Burst: 20},
		{Count: 10, Period: time.Second, Burst: 3},
		{Count: 1000, Period: time.Hour},
	}
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		for _, l := range limits {
			if a != algo.TokenBucket && a != algo.GCRA {
				l.Burst = 0
			}
			bound := longestWait(&store.Policy{Algorithm: a, Limits: []algo.Limit{l}})
			var s algo.State
			now := int64(1_700_000_000_000_000_000) + rng.Int64N(int64(l.Period))
			longest := int64(0)
			for range 5000 {
				now += rng.Int64N(int64(l.Period)/4 + 1)
				cost := 1 + rng.Int64N(l.Capacity(a))
				var o algo.Outcome
				s, o = algo.Take(a, s, l, now, cost)
				if time.Duration(o.RetryAfter) > bound {
					t.Fatalf("%v %v: RetryAfter %v at cost %d above longestWait %v", a, l, time.Duration(o.RetryAfter), cost, bound)
				}
				longest = max(longest, o.RetryAfter)
			}
			// The bound is not loose by more than a period: traffic meets
			// at least what is left of it then.
			if time.Duration(longest) < bound-2*l.Period {
				t.Errorf("%v %v: longest RetryAfter seen %v, longestWait %v", a, l, time.Duration(longest), bound)
			}
		}
	}
	two := &store.Policy{Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 5, Period: time.Second}, {Count: 100, Period: time.Hour, Burst: 10}}}
	if got, want := longestWait(two), 6*time.Minute+time.Nanosecond; got != want {
		t.Errorf("two limits: got %v, want %v", got, want)
	}
}
