package redisstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// TestDifferentialCharge runs the charge scripts and the decision scripts
// (in miniredis, whose clock the test sets) and package algo's Charge and
// Take side by side on random traffic of charges, some far past the
// limit, and requests, and requires the same answers at every step: a
// charge answers as a Take of cost 1 after it would (consuming nothing).
func TestDifferentialCharge(t *testing.T) {
	t.Parallel()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	st, err := New(client, WithDenyCache(false), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rng := rand.New(rand.NewPCG(5, 6))
	periods := []time.Duration{time.Second, 250 * time.Millisecond, 1500 * time.Millisecond, 7 * time.Second, time.Minute, time.Hour, 24 * time.Hour}
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		for n := range 8 {
			l := algo.Limit{Count: 1 + rng.Int64N(20), Period: periods[rng.IntN(len(periods))]}
			switch n % 4 {
			case 1: // coarser time units
				l.Count = 1 + rng.Int64N(1_000_000)
				l.Period = 24 * time.Hour
			case 2:
				if a == algo.TokenBucket || a == algo.GCRA {
					l.Burst = 1 + rng.Int64N(40)
				}
			case 3:
				if a == algo.TokenBucket || a == algo.GCRA {
					l.Burst = l.Count + 1 + rng.Int64N(40)
				}
			}
			t.Run(fmt.Sprintf("%v/%d/%v", a, n, l), func(t *testing.T) {
				differentialCharge(t, m, st, rng, a, l)
			})
		}
	}
}

func differentialCharge(t *testing.T, m *miniredis.Miniredis, st *Store, rng *rand.Rand, a algo.Algorithm, l algo.Limit) {
	p := &store.Policy{Name: t.Name(), Algorithm: a, Limits: []algo.Limit{l}}
	u := int64(1)
	if a != algo.FixedWindow {
		var err error
		if u, err = unitFor(a, l); err != nil {
			t.Fatal(err)
		}
	}
	unit := time.Duration(u) * time.Microsecond
	ref := algo.Limit{Count: l.Count, Period: l.Period / unit, Burst: l.Burst}
	capacity := l.Capacity(a)
	now := time.Unix(1_700_000_000, 0).Add(time.Duration(rng.Int64N(int64(l.Period))))
	var s algo.State
	charges := 0
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
		nowU := now.UnixMicro() / u
		charge := rng.IntN(3) == 0
		var (
			got store.Result
			err error
			o   algo.Outcome
		)
		if charge {
			cost := rng.Int64N(capacity*2 + 2)
			if rng.IntN(10) == 0 {
				cost = 1 << 40
			}
			got, err = st.Charge(context.Background(), "u", p, cost)
			if errors.Is(err, store.ErrBadPolicy) {
				t.Skipf("not exact in Redis: %v", err)
			}
			s, _, _ = algo.Charge(a, s, ref, nowU, cost)
			_, o = algo.Take(a, s, ref, nowU, 1) // the answer: a peek of cost 1
			charges++
		} else {
			cost := 1 + rng.Int64N(max(capacity/3, 1))
			got, err = st.Take(context.Background(), "u", p, cost)
			s, o = algo.Take(a, s, ref, nowU, cost)
		}
		if err != nil {
			t.Fatal(err)
		}
		scale := int64(unit)
		want := store.Result{Allowed: o.Allowed, Limit: l, Remaining: o.Remaining,
			ResetAfter: time.Duration(o.ResetAfter * scale), RetryAfter: time.Duration(o.RetryAfter * scale)}
		want.Limits[0] = store.LimitState{Remaining: o.Remaining, ResetAfter: want.ResetAfter}
		if got != want {
			t.Fatalf("step %d at %v (unit %v), charge %v:\ngot  %+v\nwant %+v", step, now.Format(time.RFC3339Nano), unit, charge, got, want)
		}
	}
	if charges < 50 {
		t.Fatalf("%d charges: the traffic must test them", charges)
	}
}
