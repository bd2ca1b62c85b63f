package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// TestDifferential runs the Lua scripts (in miniredis, whose clock the test
// sets) and package algo side by side on random traffic, and requires the
// same decision, remaining count and durations at every step. algo runs in
// the script's time unit, so the comparison is exact.
func TestDifferential(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, WithDenyCache(false), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rng := rand.New(rand.NewPCG(1, 2))
	periods := []time.Duration{time.Second, 250 * time.Millisecond, 1500 * time.Millisecond, 7 * time.Second, time.Minute, time.Hour, 24 * time.Hour}
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		for n := range 8 {
			l := algo.Limit{Count: 1 + rng.Int64N(20), Period: periods[rng.IntN(len(periods))]}
			switch n % 4 {
			case 1: // coarser time units
				l.Count = 1 + rng.Int64N(5_000_000)
				l.Period = 24 * time.Hour
			case 3: // several units of the count per time unit
				l.Count = 2_000_000 + rng.Int64N(100_000_000)
				l.Period = []time.Duration{time.Second, time.Hour}[rng.IntN(2)]
			case 2:
				if a == algo.TokenBucket || a == algo.GCRA {
					l.Burst = 1 + rng.Int64N(40)
				}
			}
			t.Run(fmt.Sprintf("%v/%d/%v", a, n, l), func(t *testing.T) {
				differential(t, m, st, rng, a, l)
			})
		}
	}
}

func differential(t *testing.T, m *miniredis.Miniredis, st *Store, rng *rand.Rand, a algo.Algorithm, l algo.Limit) {
	p := &store.Policy{Name: t.Name(), Algorithm: a, Limits: []algo.Limit{l}}
	u := int64(1) // a fixed window always counts in microseconds
	if a != algo.FixedWindow {
		var err error
		if u, err = unitFor(a, l); err != nil {
			t.Fatal(err)
		}
	}
	unit := time.Duration(u) * time.Microsecond
	// The reference: the same limit with time counted in units.
	// It may hold more than one unit of the count per time unit, which
	// Limit.Validate refuses for nanoseconds but the algorithms handle.
	ref := algo.Limit{Count: l.Count, Period: l.Period / unit, Burst: l.Burst}
	capacity := l.Capacity(a)
	now := time.Unix(1_700_000_000, 0).Add(time.Duration(rng.Int64N(int64(l.Period))))
	var s algo.State
	for step := range 300 {
		switch rng.IntN(10) {
		case 0:
			now = now.Add(time.Duration(rng.Int64N(int64(3 * l.Period))))
		case 1, 2, 3:
			now = now.Add(time.Duration(rng.Int64N(int64(l.Period / 4))))
		default:
			now = now.Add(time.Duration(rng.Int64N(int64(l.Period)/l.Count + 1)))
		}
		now = now.Truncate(time.Microsecond)
		m.SetTime(now)
		cost := 1 + rng.Int64N(max(capacity/3, 1))
		switch rng.IntN(20) {
		case 0:
			cost = capacity + 1 + rng.Int64N(3) // never admitted
		case 1:
			cost = 0 // a peek
		}
		got, err := st.Take(context.Background(), "u", p, cost)
		if err != nil {
			t.Fatal(err)
		}
		var o algo.Outcome
		nowU := now.UnixMicro() / u
		s, o = algo.Take(a, s, ref, nowU, cost)
		scale := int64(unit)
		want := store.Result{Allowed: o.Allowed, Limit: l, Remaining: o.Remaining,
			ResetAfter: time.Duration(o.ResetAfter * scale), RetryAfter: time.Duration(o.RetryAfter * scale)}
		want.Limits[0] = store.LimitState{Remaining: o.Remaining, ResetAfter: want.ResetAfter}
		if got != want {
			t.Fatalf("step %d at %v (unit %v), cost %d:\ngot  %+v\nwant %+v", step, now.Format(time.RFC3339Nano), unit, cost, got, want)
		}
	}
}

// TestDifferentialSeveralLimits checks the all-or-nothing combination of
// several limits against store.Evaluate.
func TestDifferentialSeveralLimits(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, WithDenyCache(false), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rng := rand.New(rand.NewPCG(3, 4))
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			p := &store.Policy{Name: t.Name(), Algorithm: a, Limits: []algo.Limit{
				{Count: 3, Period: time.Second}, {Count: 10, Period: 10 * time.Second}, {Count: 25, Period: time.Minute},
			}}
			var ref store.Policy
			ref.Algorithm = a
			for _, l := range p.Limits {
				ref.Limits = append(ref.Limits, algo.Limit{Count: l.Count, Period: l.Period / time.Microsecond})
			}
			var states [store.MaxLimits]algo.State
			var exp [store.MaxLimits]int64
			now := time.Unix(1_700_000_000, 0)
			for step := range 600 {
				now = now.Add(time.Duration(rng.Int64N(int64(400 * time.Millisecond)))).Truncate(time.Microsecond)
				m.SetTime(now)
				cost := rng.Int64N(5) // 0 (a peek) to 4 (above the first limit's capacity)
				got, err := st.Take(context.Background(), "u", p, cost)
				if err != nil {
					t.Fatal(err)
				}
				w := store.Evaluate(&ref, &states, &exp, now.UnixMicro(), cost)
				want := store.Result{Allowed: w.Allowed, Remaining: w.Remaining,
					ResetAfter: w.ResetAfter * 1000, RetryAfter: w.RetryAfter * 1000}
				for i, l := range ref.Limits {
					if l == w.Limit {
						want.Limit = p.Limits[i]
					}
					want.Limits[i] = store.LimitState{Remaining: w.Limits[i].Remaining, ResetAfter: w.Limits[i].ResetAfter * 1000}
				}
				if got != want {
					t.Fatalf("step %d at %v, cost %d:\ngot  %+v\nwant %+v", step, now.Format(time.RFC3339Nano), cost, got, want)
				}
			}
		})
	}
}

// TestDifferentialNewTerms runs the scripts and package algo side by side
// on random traffic whose limit changes count and burst as it goes (the
// same period: the same counter), and requires the same answers: the
// scripts read a state kept under other terms as algo does.
func TestDifferentialNewTerms(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, WithDenyCache(false), WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rng := rand.New(rand.NewPCG(5, 6))
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		for _, period := range []time.Duration{time.Second, 7 * time.Second, time.Hour} {
			t.Run(fmt.Sprintf("%v/%v", a, period), func(t *testing.T) {
				var s algo.State
				now := time.Unix(1_700_000_000, 0)
				l := algo.Limit{Period: period}
				for step := range 250 {
					if step%10 == 0 { // new terms
						l.Count = 1 + rng.Int64N(20)
						if l.Burst = 0; a == algo.TokenBucket || a == algo.GCRA {
							l.Burst = rng.Int64N(40)
						}
					}
					now = now.Add(time.Duration(rng.Int64N(int64(period) / 4))).Truncate(time.Microsecond)
					m.SetTime(now)
					capacity := l.Capacity(a)
					cost := 1 + rng.Int64N(max(capacity/2, 1))
					if rng.IntN(10) == 0 {
						cost = 0
					}
					p := &store.Policy{Name: t.Name(), Algorithm: a, Limits: []algo.Limit{l}}
					got, err := st.Take(context.Background(), "u", p, cost)
					if err != nil {
						t.Fatal(err)
					}
					ref := algo.Limit{Count: l.Count, Period: l.Period / time.Microsecond, Burst: l.Burst}
					var o algo.Outcome
					s, o = algo.Take(a, s, ref, now.UnixMicro(), cost)
					want := store.Result{Allowed: o.Allowed, Limit: l, Remaining: o.Remaining,
						ResetAfter: time.Duration(o.ResetAfter * 1000), RetryAfter: time.Duration(o.RetryAfter * 1000)}
					want.Limits[0] = store.LimitState{Remaining: o.Remaining, ResetAfter: want.ResetAfter}
					if got != want {
						t.Fatalf("step %d under %v, cost %d:\ngot  %+v\nwant %+v", step, l, cost, got, want)
					}
				}
			})
		}
	}
}

// TestDifferentialNewTermsSeveralLimits is TestDifferentialNewTerms for
// a policy of two limits, against store.Evaluate: a decision denied by one
// limit rewrites the other's state kept under other terms as Evaluate
// does.
func TestDifferentialNewTermsSeveralLimits(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, WithDenyCache(false), WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rng := rand.New(rand.NewPCG(7, 8))
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		t.Run(a.String(), func(t *testing.T) {
			var states [store.MaxLimits]algo.State
			var exp [store.MaxLimits]int64
			now := time.Unix(1_700_000_000, 0)
			limits := []algo.Limit{{Period: time.Second}, {Period: 10 * time.Second}}
			for step := range 300 {
				if step%10 == 0 { // new terms
					for i := range limits {
						limits[i].Count = 1 + rng.Int64N(12)
						if limits[i].Burst = 0; a == algo.TokenBucket || a == algo.GCRA {
							limits[i].Burst = rng.Int64N(20)
						}
					}
				}
				now = now.Add(time.Duration(rng.Int64N(int64(400 * time.Millisecond)))).Truncate(time.Microsecond)
				m.SetTime(now)
				p := &store.Policy{Name: t.Name(), Algorithm: a, Limits: append([]algo.Limit(nil), limits...)}
				ref := &store.Policy{Algorithm: a}
				for _, l := range limits {
					ref.Limits = append(ref.Limits, algo.Limit{Count: l.Count, Period: l.Period / time.Microsecond, Burst: l.Burst})
				}
				cost := rng.Int64N(5)
				got, err := st.Take(context.Background(), "u", p, cost)
				if err != nil {
					t.Fatal(err)
				}
				w := store.Evaluate(ref, &states, &exp, now.UnixMicro(), cost)
				want := store.Result{Allowed: w.Allowed, Remaining: w.Remaining, ResetAfter: w.ResetAfter * 1000, RetryAfter: w.RetryAfter * 1000}
				for i, l := range ref.Limits {
					if l == w.Limit {
						want.Limit = p.Limits[i]
					}
					want.Limits[i] = store.LimitState{Remaining: w.Limits[i].Remaining, ResetAfter: w.Limits[i].ResetAfter * 1000}
				}
				if got != want {
					t.Fatalf("step %d at %v under %v, cost %d:\ngot  %+v\nwant %+v", step, now.Format(time.RFC3339Nano), p.Limits, cost, got, want)
				}
			}
		})
	}
}

// TestNewTermsOtherUnit: a limit whose new count or burst needs a
// coarser time unit in the scripts (30,000 a day counts in 10µs) reads
// the state kept in the finer one (1,000 a day, in µs), and back: what was
// spent carries over every way.
func TestNewTermsOtherUnit(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, WithDenyCache(false), WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	m.SetTime(time.Unix(1_700_000_000, 0).Truncate(24 * time.Hour).Add(time.Hour))
	const day = 24 * time.Hour
	fine, coarse, burst := algo.Limit{Count: 1000, Period: day}, algo.Limit{Count: 30_000, Period: day}, algo.Limit{Count: 1000, Period: day, Burst: 30_000}
	for _, a := range []algo.Algorithm{algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		steps := []struct {
			l          algo.Limit
			cost, left int64
		}{{fine, 500, 500}, {coarse, 1, 29_499}, {fine, 1, 498}, {burst, 1, 29_497}, {fine, 1, 496}, {coarse, 29_496, 0}}
		if a == algo.SlidingWindow {
			steps = append(steps[:3], steps[5])
			steps[3].cost, steps[3].left = 29_498, 0
		}
		for _, step := range steps {
			if u, _ := unitFor(a, step.l); (u == 10) != (step.l != fine) {
				t.Fatalf("%v, %v: unit %dµs", a, step.l, u)
			}
			p := &store.Policy{Name: "unit-" + a.String(), Algorithm: a, Limits: []algo.Limit{step.l}}
			r, err := st.Take(context.Background(), "u", p, step.cost)
			if err != nil || !r.Allowed || r.Remaining != step.left {
				t.Fatalf("%v, %v, cost %d: %+v, %v; want admitted, %d left", a, step.l, step.cost, r, err, step.left)
			}
		}
	}
}
