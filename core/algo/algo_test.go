package algo

import (
	"math/big"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

const (
	ms = int64(time.Millisecond)
	s1 = int64(time.Second)
	t0 = 1_700_000_000 * s1 // aligned on every period used below
)

type step struct {
	at        int64 // offset from t0
	cost      int64
	allowed   bool
	remaining int64
	retry     int64
	reset     int64
}

func runSteps(t *testing.T, a Algorithm, l Limit, steps []step) {
	t.Helper()
	var st State
	for i, s := range steps {
		next, o := Take(a, st, l, t0+s.at, s.cost)
		if o.Allowed != s.allowed || o.Remaining != s.remaining || o.RetryAfter != s.retry || o.ResetAfter != s.reset {
			t.Fatalf("%v step %d (t0+%v, cost %d): got allowed=%v remaining=%d retry=%v reset=%v, want %v %d %v %v",
				a, i, time.Duration(s.at), s.cost, o.Allowed, o.Remaining, time.Duration(o.RetryAfter), time.Duration(o.ResetAfter),
				s.allowed, s.remaining, time.Duration(s.retry), time.Duration(s.reset))
		}
		if !o.Allowed && next != st {
			t.Fatalf("%v step %d: a denial changed the state from %+v to %+v", a, i, st, next)
		}
		st = next
	}
}

func TestFixedWindowSteps(t *testing.T) {
	l := Limit{Count: 3, Period: time.Duration(s1)}
	runSteps(t, FixedWindow, l, []step{
		{0, 1, true, 2, 0, s1},
		{100 * ms, 1, true, 1, 0, 900 * ms},
		{200 * ms, 1, true, 0, 0, 800 * ms},
		{300 * ms, 1, false, 0, 700 * ms, 700 * ms},
		{999 * ms, 1, false, 0, ms, ms},
		{s1, 2, true, 1, 0, s1},               // new window
		{s1 + 1, 2, false, 1, s1 - 1, s1 - 1}, // cost 2 does not fit in 1
		{s1 + 2, 1, true, 0, 0, s1 - 2},
		{3 * s1, 4, false, 3, s1, s1}, // above capacity: never
		{3 * s1, 3, true, 0, 0, s1},
		{3*s1 + 5, 0, true, 0, 0, s1 - 5}, // cost 0 peeks
	})
}

func TestSlidingWindowSteps(t *testing.T) {
	l := Limit{Count: 10, Period: time.Duration(s1)}
	runSteps(t, SlidingWindow, l, []step{
		{0, 10, true, 0, 0, 2 * s1},
		{500 * ms, 1, false, 0, 500*ms + 100*ms, 1500 * ms}, // next window, prev weight must fall to 9/10
		// t0+1.25s: prev=10 weighted 0.75 holds 8 of 10.
		{1250 * ms, 2, true, 0, 0, 1750 * ms},
		// cur=2, need prev×w ≤ 7×P: w ≤ 700ms, i.e. 50ms later.
		{1250 * ms, 1, false, 0, 50 * ms, 1750 * ms},
		{1299 * ms, 1, false, 0, ms, 1701 * ms},
		{1300 * ms, 1, true, 0, 0, 1700 * ms},
		{3 * s1, 1, true, 9, 0, 2 * s1}, // two windows later everything is gone
	})
}

func TestTokenBucketSteps(t *testing.T) {
	l := Limit{Count: 10, Period: time.Duration(s1)}
	runSteps(t, TokenBucket, l, []step{
		{0, 10, true, 0, 0, s1},
		{0, 1, false, 0, 100 * ms, s1},
		{150 * ms, 1, true, 0, 0, 950 * ms}, // 1.5 tokens refilled, 1 used
		// The half token is not lost: the next one is due at t0+200ms, not t0+250ms.
		{150 * ms, 1, false, 0, 50 * ms, 950 * ms},
		{200 * ms, 1, true, 0, 0, s1},
		{2*s1 + 50*ms, 3, true, 7, 0, 300 * ms}, // full again: a new schedule starts now
	})
	// Burst above the rate: capacity 5, refill 1 per second.
	runSteps(t, TokenBucket, Limit{Count: 1, Burst: 5, Period: time.Duration(s1)}, []step{
		{0, 5, true, 0, 0, 5 * s1},
		{0, 1, false, 0, s1, 5 * s1},
		{2500 * ms, 2, true, 0, 0, 4500 * ms}, // 2 refilled; anchor still at t0
		{2500 * ms, 1, false, 0, 500 * ms, 4500 * ms},
	})
}

func TestGCRASteps(t *testing.T) {
	l := Limit{Count: 10, Period: time.Duration(s1)}
	runSteps(t, GCRA, l, []step{
		{0, 10, true, 0, 0, s1},
		{0, 1, false, 0, 100 * ms, s1},
		{150 * ms, 1, true, 0, 0, 950 * ms},
		{150 * ms, 1, false, 0, 50 * ms, 950 * ms},
		{200 * ms, 1, true, 0, 0, s1},
		{5 * s1, 3, true, 7, 0, 300 * ms},
	})
	// 7 per minute: the emission interval is not a whole number of nanoseconds,
	// yet a minute after a full burst the whole burst is available again.
	l7 := Limit{Count: 7, Period: time.Duration(60 * s1)}
	runSteps(t, GCRA, l7, []step{
		{0, 7, true, 0, 0, 60 * s1},
		{60*s1 - 1, 7, false, 6, 1, 1},
		{60 * s1, 7, true, 0, 0, 60 * s1},
	})
}

func TestZeroStateIsFresh(t *testing.T) {
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		for _, now := range []int64{0, 1, t0, t0 + 123456789} {
			_, o := Take(a, State{}, Limit{Count: 5, Period: time.Duration(s1)}, now, 5)
			if !o.Allowed || o.Remaining != 0 {
				t.Errorf("%v at %d: got allowed=%v remaining=%d, want a fresh counter admitting 5", a, now, o.Allowed, o.Remaining)
			}
		}
	}
}

func TestClockBackwardsNeverResets(t *testing.T) {
	l := Limit{Count: 2, Period: time.Duration(s1)}
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		st, _ := Take(a, State{}, l, t0+5*s1+100*ms, 2)
		if _, o := Take(a, st, l, t0+4*s1+900*ms, 1); o.Allowed {
			t.Errorf("%v: a clock stepped back into the previous window admitted a request over the limit", a)
		}
	}
}

func TestNegativeCostIsAPeek(t *testing.T) {
	st, _ := Take(FixedWindow, State{}, Limit{Count: 2, Period: time.Duration(s1)}, t0, 1)
	next, o := Take(FixedWindow, st, Limit{Count: 2, Period: time.Duration(s1)}, t0, -5)
	if next != st || !o.Allowed || o.Remaining != 1 {
		t.Fatalf("got state %+v allowed=%v remaining=%d, want unchanged, true, 1", next, o.Allowed, o.Remaining)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []struct {
		l    Limit
		want string
	}{
		{Limit{Count: 1, Period: time.Duration(1)}, ""},
		{Limit{Count: MaxCount, Burst: MaxCount, Period: time.Duration(24 * 3600 * s1)}, ""},
		{Limit{Count: 0, Period: time.Duration(s1)}, "count 0 out of range"},
		{Limit{Count: -1, Period: time.Duration(s1)}, "count -1 out of range"},
		{Limit{Count: MaxCount + 1, Period: time.Duration(10 * s1)}, "count 2147483648 out of range"},
		{Limit{Count: 1, Burst: -1, Period: time.Duration(s1)}, "burst -1 out of range"},
		{Limit{Count: 1, Period: time.Duration(0)}, "period 0s must be positive"},
		{Limit{Count: 10, Period: time.Duration(5)}, "more than one per nanosecond"},
		{Limit{Count: 1, Burst: MaxCount, Period: time.Duration(1 << 40)}, "takes longer than"},
		{Limit{Count: 1, Burst: 1 << 20, Period: time.Duration(1 << 40)}, ""},
	} {
		err := c.l.Validate()
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("Validate(%+v) = %v, want %q", c.l, err, c.want)
		}
	}
}

// ref is an exact model of each algorithm in rational arithmetic.
type ref struct {
	a      Algorithm
	l      Limit
	idx    int64
	prev   int64
	cur    int64
	tokens *big.Rat
	last   int64
}

func newRef(a Algorithm, l Limit) *ref {
	return &ref{a: a, l: l, idx: -1 << 62, tokens: big.NewRat(l.Capacity(a), 1), last: t0 - 1000*24*3600*s1}
}

// admits reports whether the model admits cost at now, and the remaining quota
// afterwards (or now, when denied). It changes the model only when commit is set.
func (r *ref) admits(now, cost int64, commit bool) (bool, int64) {
	l := r.l
	switch r.a {
	case FixedWindow, SlidingWindow:
		period := int64(l.Period)
		idx := now / period
		prev, cur := r.prev, r.cur
		switch idx {
		case r.idx:
		case r.idx + 1:
			prev, cur = cur, 0
		default:
			prev, cur = 0, 0
		}
		if r.a == FixedWindow {
			prev = 0
		}
		// estimate = prev×(P−elapsed)/P + cur
		w := period - (now - idx*period)
		held := new(big.Rat).SetFrac(big.NewInt(prev), big.NewInt(1))
		held.Mul(held, big.NewRat(w, period))
		est := new(big.Rat).Add(held, big.NewRat(cur+cost, 1))
		ok := est.Cmp(big.NewRat(l.Count, 1)) <= 0
		if ok {
			cur += cost
		}
		rem := new(big.Rat).Sub(big.NewRat(l.Count-cur, 1), held)
		remaining := max(floor(rem), 0)
		if ok && commit {
			r.idx, r.prev, r.cur = idx, prev, cur
		}
		return ok, remaining
	default:
		c := l.Capacity(r.a)
		refill := new(big.Int).Mul(big.NewInt(l.Count), big.NewInt(now-r.last))
		tok := new(big.Rat).Add(r.tokens, new(big.Rat).SetFrac(refill, big.NewInt(int64(l.Period))))
		if tok.Cmp(big.NewRat(c, 1)) > 0 {
			tok.SetInt64(c)
		}
		ok := tok.Cmp(big.NewRat(cost, 1)) >= 0
		if ok {
			tok.Sub(tok, big.NewRat(cost, 1))
		}
		if ok && commit {
			r.tokens, r.last = tok, now
		}
		return ok, floor(tok)
	}
}

func floor(r *big.Rat) int64 {
	q := new(big.Int).Div(r.Num(), r.Denom()) // Euclidean: floor for a positive denominator
	return q.Int64()
}

// TestDifferential drives every algorithm and its exact model with the same
// random traffic and checks each decision, each Remaining, and that
// RetryAfter is exactly the first instant the model admits the request.
func TestDifferential(t *testing.T) {
	limits := []Limit{
		{Count: 10, Period: time.Duration(s1)},
		{Count: 7, Period: time.Duration(60 * s1)},
		{Count: 3, Burst: 8, Period: time.Duration(1000 * ms)},
		{Count: 100, Period: time.Duration(3600 * s1)},
		{Count: 1, Period: time.Duration(333 * ms)},
	}
	for _, a := range []Algorithm{FixedWindow, SlidingWindow, TokenBucket, GCRA} {
		for li, l := range limits {
			rng := rand.New(rand.NewPCG(uint64(a), uint64(li)))
			m := newRef(a, l)
			var st State
			now := t0
			capacity := l.Capacity(a)
			for i := range 3000 {
				now += rng.Int64N(int64(l.Period) / max(l.Count, 1) * 3)
				cost := 1 + rng.Int64N(min(capacity, 3))
				next, o := Take(a, st, l, now, cost)
				want, wantRem := m.admits(now, cost, true)
				if o.Allowed != want || o.Remaining != wantRem {
					t.Fatalf("%v %+v step %d at t0+%d cost %d: got allowed=%v remaining=%d, model %v %d",
						a, l, i, now-t0, cost, o.Allowed, o.Remaining, want, wantRem)
				}
				if !o.Allowed {
					if o.RetryAfter <= 0 {
						t.Fatalf("%v step %d: denied with RetryAfter %d", a, i, o.RetryAfter)
					}
					if ok, _ := m.admits(now+o.RetryAfter-1, cost, false); ok {
						t.Fatalf("%v %+v step %d: model admits 1ns before RetryAfter %d", a, l, i, o.RetryAfter)
					}
					if ok, _ := m.admits(now+o.RetryAfter, cost, false); !ok {
						t.Fatalf("%v %+v step %d: model denies at RetryAfter %d", a, l, i, o.RetryAfter)
					}
					if _, o2 := Take(a, st, l, now+o.RetryAfter, cost); !o2.Allowed {
						t.Fatalf("%v step %d: algorithm denies at its own RetryAfter", a, i)
					}
				} else if o.RetryAfter != 0 {
					t.Fatalf("%v step %d: allowed with RetryAfter %d", a, i, o.RetryAfter)
				}
				// After ExpireAt the state must be as good as new.
				if _, fresh := Take(a, next, l, o.ExpireAt, capacity); o.ExpireAt >= now && !fresh.Allowed {
					t.Fatalf("%v step %d: state not fresh at ExpireAt (+%d)", a, i, o.ExpireAt-now)
				}
				if o.ResetAfter != max(o.ExpireAt-now, 0) {
					t.Fatalf("%v step %d: ResetAfter %d, ExpireAt-now %d", a, i, o.ResetAfter, o.ExpireAt-now)
				}
				st = next
			}
		}
	}
}

// TestLongOverloadAdmitsTheRate checks, with no rounding drift over a long
// run, that a saturated token bucket and GCRA admit exactly burst + rate×time.
func TestLongOverloadAdmitsTheRate(t *testing.T) {
	l := Limit{Count: 7, Period: time.Duration(60 * s1)} // 8.571428571…s per token
	for _, a := range []Algorithm{TokenBucket, GCRA} {
		var st State
		admitted := int64(0)
		for now := t0; now <= t0+7*24*3600*s1; now += 997 * ms {
			var o Outcome
			if st, o = Take(a, st, l, now, 1); o.Allowed {
				admitted++
			}
		}
		// Requests come every 997ms, so each token is taken within 997ms of
		// its refill: admitted = 7 + floor(7×elapsed/60s) for the last instant.
		last := (7 * 24 * 3600 * s1 / (997 * ms)) * 997 * ms
		if want := 7 + 7*last/(60*s1); admitted != want {
			t.Errorf("%v: admitted %d in a week of overload, want %d", a, admitted, want)
		}
	}
}

func FuzzTake(f *testing.F) {
	f.Add(uint8(0), int64(10), int64(0), int64(s1), int64(t0), int64(5), int64(3), int64(1))
	f.Add(uint8(3), int64(7), int64(9), int64(60*s1), int64(1), int64(-4), int64(1<<40), int64(7))
	f.Add(uint8(3), int64(2), int64(0), int64(60*s1), int64(t0), int64(t0+100*s1), int64(10<<32|3), int64(1)) // kept under 10 per minute
	f.Add(uint8(2), int64(2), int64(0), int64(60*s1), int64(t0), int64(t0), int64(50), int64(1))              // 50 owed, capacity 2
	f.Fuzz(func(t *testing.T, a uint8, count, burst, period, now, stA, stB, cost int64) {
		l := Limit{Count: count, Burst: burst, Period: time.Duration(period)}
		if l.Validate() != nil || now < 0 || now >= 1<<62 {
			return
		}
		alg := Algorithm(a % 4)
		next, o := Take(alg, State{A: stA, B: stB}, l, now, cost)
		if o.Remaining < 0 || o.RetryAfter < 0 || o.ResetAfter < 0 {
			t.Fatalf("negative outcome %+v", o)
		}
		if cost <= 0 && (!o.Allowed || o.RetryAfter != 0) {
			t.Fatalf("cost %d: %+v, want admitted: it consumes nothing", cost, o)
		}
		// A denial consumes nothing: it leaves the state, or rewrites a
		// GCRA state kept under other terms once (the same request then
		// leaves it and decides the same).
		if !o.Allowed && next != (State{A: stA, B: stB}) {
			if again, o2 := Take(alg, next, l, now, cost); alg != GCRA || again != next || o2 != o {
				t.Fatalf("denial changed the state from %+v to %+v (then %+v)", State{A: stA, B: stB}, next, again)
			}
		}
	})
}
