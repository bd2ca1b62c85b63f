package algo

import (
	"testing"
	"time"
)

// termStep is one request under the limit l, which may differ from the
// step before's in Count and Burst (same Period: the same counter).
type termStep struct {
	at        int64 // offset from the first hour after t0
	l         Limit
	cost      int64
	allowed   bool
	remaining int64
	retry     int64
}

// runTermSteps takes each step from the state the one before left, and
// checks the outcome. A denial may rewrite only a GCRA state (once: the
// same request again leaves it as it is).
func runTermSteps(t *testing.T, a Algorithm, steps []termStep) {
	t.Helper()
	var st State
	h0 := t0 - t0%int64(time.Hour) + int64(time.Hour)
	for i, s := range steps {
		next, o := Take(a, st, s.l, h0+s.at, s.cost)
		if o.Allowed != s.allowed || o.Remaining != s.remaining || o.RetryAfter != s.retry {
			t.Fatalf("%v step %d (+%v, %v, cost %d): got allowed=%v remaining=%d retry=%v, want %v %d %v",
				a, i, time.Duration(s.at), s.l, s.cost, o.Allowed, o.Remaining, time.Duration(o.RetryAfter),
				s.allowed, s.remaining, time.Duration(s.retry))
		}
		if !o.Allowed && next != st {
			if a != GCRA {
				t.Fatalf("%v step %d: a denial changed the state from %+v to %+v", a, i, st, next)
			}
			if again, o2 := Take(a, next, s.l, h0+s.at, s.cost); again != next || o2 != o {
				t.Fatalf("%v step %d: the rewritten state %+v is rewritten again (%+v), or decides otherwise (%+v, %+v)", a, i, next, again, o, o2)
			}
		}
		st = next
	}
}

func perMinute(count, burst int64) Limit {
	return Limit{Count: count, Period: time.Minute, Burst: burst}
}

// TestNewTermsWindows: a window's count carries over to a new Count: 2 of
// 2/minute spent (and refused once), 5/minute admits 3 more; 50 of
// 100/hour spent, 10/hour refuses until the window ends, cost 0 included
// as admitted with nothing left.
func TestNewTermsWindows(t *testing.T) {
	hour := func(n int64) Limit { return Limit{Count: n, Period: time.Hour} }
	for _, a := range []Algorithm{FixedWindow, SlidingWindow} {
		runTermSteps(t, a, []termStep{
			{0, perMinute(2, 0), 1, true, 1, 0},
			{s1, perMinute(2, 0), 1, true, 0, 0},
			{2 * s1, perMinute(2, 0), 1, false, 0, map[Algorithm]int64{FixedWindow: 58 * s1, SlidingWindow: 60*s1 + 30*s1 - 2*s1}[a]},
			{3 * s1, perMinute(5, 0), 1, true, 2, 0},
			{3 * s1, perMinute(5, 0), 2, true, 0, 0},
			{3 * s1, perMinute(5, 0), 1, false, 0, map[Algorithm]int64{FixedWindow: 57 * s1, SlidingWindow: 57*s1 + 12*s1}[a]},
		})
		runTermSteps(t, a, []termStep{
			{0, hour(100), 50, true, 50, 0},
			{60 * s1, hour(10), 1, false, 0, map[Algorithm]int64{FixedWindow: 3540 * s1, SlidingWindow: 3540*s1 + 3600*s1 - 3600*s1*9/50}[a]},
			{60 * s1, hour(10), 0, true, 0, 0},
			{3599 * s1, hour(10), 1, false, 0, map[Algorithm]int64{FixedWindow: s1, SlidingWindow: s1 + 3600*s1 - 3600*s1*9/50}[a]},
			{3600 * s1, hour(10), 1, a == FixedWindow, map[Algorithm]int64{FixedWindow: 9, SlidingWindow: 0}[a], map[Algorithm]int64{FixedWindow: 0, SlidingWindow: 3600*s1 - 3600*s1*9/50}[a]},
		})
	}
}

// TestNewTermsTokenBucket: a bucket of 10 with 4 tokens left has spent 6;
// with a burst of 20 it has 14 left, and refills at the new rate (20 per
// minute: one token per 3s). Spent beyond a lowered capacity carries over
// up to the capacity plus two periods' refill (the most a bucket charged
// into debt keeps: see Charge).
func TestNewTermsTokenBucket(t *testing.T) {
	runTermSteps(t, TokenBucket, []termStep{
		{0, perMinute(10, 0), 6, true, 4, 0},
		{0, perMinute(10, 20), 0, true, 14, 0},
		{0, perMinute(20, 20), 14, true, 0, 0},
		{0, perMinute(20, 20), 1, false, 0, 3 * s1},
		{3 * s1, perMinute(20, 20), 1, true, 0, 0},
		// 10 per minute, a burst of 5, 21 owed: all of it carries over
		// (under 5 + 2×10), refilled at 10 per minute from the anchor: a
		// token is 17 refills, 102s, from it.
		{3 * s1, perMinute(10, 5), 1, false, 0, 99 * s1},
		{101 * s1, perMinute(10, 5), 1, false, 0, s1},
		{102 * s1, perMinute(10, 5), 1, true, 0, 0},
	})
	// 50 of a burst of 100 spent, the burst lowered to 10 at 10/minute:
	// 30 owed carry over (10 + 2×10), so a token is 126s away, not 246s.
	runTermSteps(t, TokenBucket, []termStep{
		{0, perMinute(10, 100), 50, true, 50, 0},
		{0, perMinute(10, 10), 1, false, 0, 126 * s1},
		{0, perMinute(10, 10), 0, true, 0, 0},
		{126 * s1, perMinute(10, 10), 1, true, 0, 0},
	})
}

// TestNewTermsGCRA: GCRA's units carry over whatever the new count: 6 of
// 10 per minute spent are 6 of 20 per minute (14 left, one more every 3s),
// not the 36s they stood for; a lowered count converts them once, on the
// first request, even a denied one, so they drain at the new rate.
func TestNewTermsGCRA(t *testing.T) {
	runTermSteps(t, GCRA, []termStep{
		{0, perMinute(10, 0), 6, true, 4, 0},
		{0, perMinute(20, 20), 0, true, 14, 0},
		{3 * s1, perMinute(20, 20), 14, true, 1, 0},
		{3 * s1, perMinute(20, 20), 2, false, 1, 3 * s1},
		{6 * s1, perMinute(20, 20), 2, true, 0, 0},
		// 20 units owed; 1 per minute with a burst of 10: 10 + 1 carry over
		// (the capacity and one period's), so a unit is 2 minutes away.
		{6 * s1, perMinute(1, 10), 1, false, 0, 120 * s1},
		// 30s later the converted state drains at 1 per minute, not 20.
		{36 * s1, perMinute(1, 10), 1, false, 0, 90 * s1},
		{126 * s1, perMinute(1, 10), 1, true, 0, 0},
	})
	// 10 of 10 per minute spent, then 1 per minute with the same burst:
	// the 10 units take 10 minutes now; one is free after a minute.
	runTermSteps(t, GCRA, []termStep{
		{0, perMinute(10, 0), 10, true, 0, 0},
		{0, perMinute(1, 10), 1, false, 0, 60 * s1},
		{30 * s1, perMinute(1, 10), 1, false, 0, 30 * s1},
		{60 * s1, perMinute(1, 10), 1, true, 0, 0},
	})
	// A fraction of 1/7 ns units, due, read under 2 per minute: nothing
	// is owed, whatever the fraction says in 1/2 ns units.
	runTermSteps(t, GCRA, []termStep{
		{0, perMinute(7, 0), 1, true, 6, 0},
		{60 * s1, perMinute(2, 0), 2, true, 0, 0},
	})
	// 50 of a burst of 100 spent, the burst lowered to 10 at 10/minute:
	// as the token bucket, 20 units carry over.
	runTermSteps(t, GCRA, []termStep{
		{0, perMinute(10, 100), 50, true, 50, 0},
		{0, perMinute(10, 10), 1, false, 0, 66 * s1},
		{0, perMinute(10, 10), 0, true, 0, 0},
		{66 * s1, perMinute(10, 10), 1, true, 0, 0},
	})
}
