package algo

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// chargeStep is one step of a counter: a Take of cost (charge false), or
// a Charge of cost after which want is the units it consumed (charge
// true); then a Take of cost 1, which must answer allowed, remaining and
// retry, and is kept only when it is a probe (probe true).
type chargeStep struct {
	at        int64
	cost      int64
	charge    bool
	want      int64 // units a Charge consumed
	allowed   bool  // of the Take of cost 1 that follows
	remaining int64
	retry     int64
	probe     bool // keep the Take of cost 1 (it consumes when allowed)
}

func runCharge(t *testing.T, a Algorithm, l Limit, steps []chargeStep) {
	t.Helper()
	var st State
	for i, s := range steps {
		now := t0 + s.at
		if s.charge {
			var got int64
			st, got, _ = Charge(a, st, l, now, s.cost)
			if got != s.want {
				t.Fatalf("%v step %d: Charge(%d) consumed %d, want %d", a, i, s.cost, got, s.want)
			}
		} else if s.cost > 0 {
			var o Outcome
			if st, o = Take(a, st, l, now, s.cost); !o.Allowed {
				t.Fatalf("%v step %d: Take(%d) refused", a, i, s.cost)
			}
		}
		next, o := Take(a, st, l, now, 1)
		if o.Allowed != s.allowed || o.Remaining != s.remaining || o.RetryAfter != s.retry {
			t.Fatalf("%v step %d (t0+%v): a request of cost 1 got allowed=%v remaining=%d retry=%v, want %v %d %v",
				a, i, time.Duration(s.at), o.Allowed, o.Remaining, time.Duration(o.RetryAfter), s.allowed, s.remaining, time.Duration(s.retry))
		}
		if s.probe {
			st = next
		}
	}
}

func TestChargeTokenBucket(t *testing.T) {
	const minute = 60 * s1
	l := Limit{Count: 100, Period: time.Minute} // a unit every 600ms
	runCharge(t, TokenBucket, l, []chargeStep{
		{at: 0, cost: 99, allowed: true, remaining: 0},
		// One unit left; the request costs 30: 29 owed past the limit.
		{at: 0, cost: 30, charge: true, want: 30, retry: 30 * 600 * ms},
		{at: 18*s1 - 1, retry: 1},
		{at: 18 * s1, allowed: true, remaining: 0, probe: true},
		{at: 18 * s1, retry: 600 * ms},
		// A full bucket, then a cost far past the bound: at most one
		// period's count (100) is owed past the capacity.
		{at: 10 * minute, cost: 1_000_000, charge: true, want: 200, retry: 101 * 600 * ms},
		{at: 10 * minute, cost: 5, charge: true, want: 0, retry: 101 * 600 * ms},
		{at: 10*minute + 101*600*ms, allowed: true, remaining: 0},
		// Cost 0 and negative costs consume nothing.
		{at: 20 * minute, cost: 0, charge: true, want: 0, allowed: true, remaining: 99},
		{at: 20 * minute, cost: -7, charge: true, want: 0, allowed: true, remaining: 99},
	})
	// Half a period after the bucket emptied, 5 units have come back: the
	// bound (capacity + Count consumed) lets 15 be charged, and the state
	// then owes 25 at its anchor, which Take keeps whole.
	runCharge(t, TokenBucket, Limit{Count: 10, Period: time.Second}, []chargeStep{
		{at: 0, cost: 10, retry: 100 * ms},
		{at: 500 * ms, cost: 100, charge: true, want: 15, retry: 1100 * ms},
		{at: 1600*ms - 1, retry: 1},
		{at: 1600 * ms, allowed: true, remaining: 0},
	})
	// A burst below the rate: the debt's bound is still the rate's count.
	runCharge(t, TokenBucket, Limit{Count: 10, Burst: 2, Period: time.Second}, []chargeStep{
		{at: 0, cost: 50, charge: true, want: 12, retry: 1100 * ms},
		{at: 1100 * ms, allowed: true, remaining: 0},
	})
}

func TestChargeGCRA(t *testing.T) {
	l := Limit{Count: 100, Period: time.Minute}
	runCharge(t, GCRA, l, []chargeStep{
		{at: 0, cost: 99, allowed: true, remaining: 0},
		{at: 0, cost: 30, charge: true, want: 30, retry: 30 * 600 * ms},
		{at: 18*s1 - 1, retry: 1},
		{at: 18 * s1, allowed: true, remaining: 0},
		{at: 3600 * s1, cost: math.MaxInt64, charge: true, want: 200, retry: 101 * 600 * ms},
	})
	// 7 per minute: a fractional emission interval stays exact in debt.
	runCharge(t, GCRA, Limit{Count: 7, Period: time.Minute}, []chargeStep{
		{at: 0, cost: 10, charge: true, want: 10, retry: 4*60*s1/7 + 1},
		{at: 4*60*s1/7 + 1, allowed: true, remaining: 0},
	})
}

func TestChargeSlidingWindow(t *testing.T) {
	l := Limit{Count: 10, Period: time.Second}
	runCharge(t, SlidingWindow, l, []chargeStep{
		{at: 0, cost: 9, allowed: true, remaining: 0},
		// 14 in this window: the next admits a request once 14 weighted
		// by what is left of it is at most 9: 357142858ns into it.
		{at: 0, cost: 5, charge: true, want: 5, retry: s1 + 357142858},
		{at: s1 + 357142857, retry: 1},
		{at: s1 + 357142858, allowed: true, remaining: 0},
		// At most 20 in a window: one period's count past the limit.
		{at: 10 * s1, cost: 1 << 40, charge: true, want: 20, retry: s1 + 550*ms},
		{at: 11*s1 + 550*ms, allowed: true, remaining: 0},
	})
}

func TestChargeFixedWindow(t *testing.T) {
	l := Limit{Count: 10, Period: time.Second}
	runCharge(t, FixedWindow, l, []chargeStep{
		{at: 0, cost: 9, allowed: true, remaining: 0},
		{at: 0, cost: 50, charge: true, want: 11, retry: s1},
		// The debt ends with the window.
		{at: s1, allowed: true, remaining: 9},
	})
}

// TestChargeNeverOwesMoreThanCount charges and takes at random, for
// every algorithm, and checks what Charge promises: a counter never owes
// more than Count past its capacity (a Take of cost 0 under the limit
// widened by Count finds room), a request is refused while one is owed,
// and nothing overflows: the durations stay within a few periods.
func TestChargeNeverOwesMoreThanCount(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	limits := []Limit{
		{Count: 100, Period: time.Minute},
		{Count: 7, Period: time.Minute, Burst: 30},
		{Count: 50, Period: time.Second, Burst: 3},
		{Count: MaxCount, Period: time.Hour},
		{Count: 1, Period: 365 * 24 * time.Hour},
	}
	for _, a := range []Algorithm{SlidingWindow, TokenBucket, GCRA} {
		for _, l := range limits {
			var st State
			now := t0
			for i := 0; i < 2000; i++ {
				now += rng.Int64N(min(int64(l.Period)/l.Count*3, int64(48*time.Hour)) + 1)
				var cost int64
				switch rng.IntN(4) {
				case 0:
					cost = rng.Int64()
				case 1:
					cost = rng.Int64N(l.Count*3 + 1)
				default:
					cost = rng.Int64N(4)
				}
				if rng.IntN(2) == 0 {
					st, _, _ = Charge(a, st, l, now, cost)
				} else {
					st, _ = Take(a, st, l, now, cost)
				}
				w := DebtLimit(a, l)
				_, o := Take(a, st, w, now, 0)
				if !o.Allowed {
					t.Fatalf("%v %v step %d: owes more than Count past the capacity (state %+v)", a, l, i, st)
				}
				_, o = Take(a, st, l, now, 1)
				if o.RetryAfter < 0 || o.ResetAfter < 0 || o.RetryAfter > 3*int64(l.Period) {
					t.Fatalf("%v %v step %d: retry %d reset %d out of range", a, l, i, o.RetryAfter, o.ResetAfter)
				}
			}
		}
	}
}
