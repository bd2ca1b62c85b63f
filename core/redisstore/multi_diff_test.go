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

// miniStore returns a store on miniredis, whose clock the test sets
// together with the store's (set), without the deny cache.
func miniStore(t *testing.T) (st *Store, set func(time.Time)) {
	t.Helper()
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	clock := store.NewManualClock(time.Unix(0, 0))
	st, err := New(client, WithDenyCache(false), WithTimeout(5*time.Second), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	return st, func(now time.Time) {
		m.SetTime(now)
		clock.Set(now)
	}
}

// stackPolicies returns policies of every algorithm, of one limit and of
// several, and of calendar limits, with short periods so that windows
// move and buckets refill within a test.
func stackPolicies(t *testing.T) []*store.Policy {
	var ps []*store.Policy
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		ps = append(ps,
			&store.Policy{Name: fmt.Sprintf("%v-one", a), Algorithm: a, Limits: []algo.Limit{{Count: 3, Period: 10 * time.Second}}},
			&store.Policy{Name: fmt.Sprintf("%v-two", a), Algorithm: a, Limits: []algo.Limit{{Count: 3, Period: 2 * time.Second}, {Count: 8, Period: 30 * time.Second}}})
	}
	for _, limits := range [][]string{{"4/day"}, {"3/day", "6/month"}} {
		p := &store.Policy{Name: fmt.Sprint("calendar", limits), Location: time.UTC}
		for _, s := range limits {
			l, err := algo.ParseCalendarLimit(s)
			if err != nil {
				t.Fatal(err)
			}
			p.Limits = append(p.Limits, l)
		}
		ps = append(ps, p)
	}
	return ps
}

// TestTakeAllDifferential runs TakeAll on random stacks of takes (of
// distinct counters, every algorithm) and, on a twin set of keys, what
// the contract says it is: when a Peek of every take admits, each take's
// Take; else a denied take's Peek (Take's denial) and an admitted take's
// Take of cost 0 (its state as it stands), nothing consumed. Every
// answer, count and duration must be the same, at the same instants.
func TestTakeAllDifferential(t *testing.T) {
	t.Parallel()
	st, set := miniStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(7, 8))
	ps := stackPolicies(t)
	now := time.Date(2025, 3, 30, 20, 0, 0, 0, time.UTC)
	var admitted, denied int
	for step := range 3000 {
		now = now.Add(time.Duration(rng.Int64N(int64(1500 * time.Millisecond)))).Truncate(time.Microsecond)
		if rng.IntN(200) == 0 {
			now = now.Add(20 * time.Hour) // into the next calendar day
		}
		set(now)
		n := 1 + rng.IntN(4)
		var takes, twins []store.Take
		seen := map[string]bool{}
		for len(takes) < n {
			p, user := ps[rng.IntN(len(ps))], fmt.Sprint(rng.IntN(3))
			if seen[p.Name+"/"+user] {
				continue
			}
			seen[p.Name+"/"+user] = true
			cost := rng.Int64N(3)
			if rng.IntN(25) == 0 {
				cost = 9 // above every capacity: never admitted
			}
			takes = append(takes, store.Take{Key: "x" + user, Policy: p, Cost: cost})
			twins = append(twins, store.Take{Key: "y" + user, Policy: p, Cost: cost})
		}
		got := make([]store.Result, n)
		allowed, err := st.TakeAll(ctx, takes, got)
		if err != nil {
			t.Fatal(err)
		}
		want := make([]store.Result, n)
		all := true
		for i, tw := range twins {
			if want[i], err = st.Peek(ctx, tw.Key, tw.Policy, tw.Cost); err != nil {
				t.Fatal(err)
			}
			all = all && want[i].Allowed
		}
		for i, tw := range twins {
			cost := tw.Cost
			switch {
			case !all && !want[i].Allowed:
				continue
			case !all:
				cost = 0
			}
			if want[i], err = st.Take(ctx, tw.Key, tw.Policy, cost); err != nil {
				t.Fatal(err)
			}
		}
		if allowed != all {
			t.Fatalf("step %d at %v: allowed %v, want %v", step, now, allowed, all)
		}
		for i := range takes {
			if got[i] != want[i] {
				t.Fatalf("step %d at %v, take %d (%s, %s, cost %d) of %d:\ngot  %+v\nwant %+v", step, now, i, takes[i].Key, takes[i].Policy.Name, takes[i].Cost, n, got[i], want[i])
			}
		}
		if all {
			admitted++
		} else {
			denied++
		}
	}
	if admitted < 300 || denied < 300 {
		t.Fatalf("%d stacks admitted, %d denied: the traffic tests too little of one", admitted, denied)
	}
}

// TestGiveBackExact: a take that the stack script gives back in a later
// call, any time later (within the window, after it moved on, after the
// bucket refilled), leaves a key whose every later answer is that of a
// twin key that never had the take, under every algorithm.
func TestGiveBackExact(t *testing.T) {
	t.Parallel()
	st, set := miniStore(t)
	ctx := context.Background()
	rng := rand.New(rand.NewPCG(9, 10))
	for _, p := range stackPolicies(t) {
		t.Run(p.Name, func(t *testing.T) {
			pl, err := st.plan(p)
			if err != nil {
				t.Fatal(err)
			}
			// Steps span the longest period in 16 on average; a take is
			// given back up to one and a half of the shortest later.
			first, last := p.Limits[0].Period, p.Limits[len(p.Limits)-1].Period
			if p.Calendar() {
				first, last = 24*time.Hour, 30*24*time.Hour
			}
			now := time.Date(2025, 3, 30, 20, 0, 0, 0, time.UTC)
			given, exact := 0, 0
			for step := range 400 {
				now = now.Add(time.Duration(rng.Int64N(int64(last) / 8))).Truncate(time.Microsecond)
				set(now)
				cost := rng.Int64N(3)
				if rng.IntN(4) > 0 {
					a, err1 := st.Take(ctx, "with", p, cost)
					b, err2 := st.Take(ctx, "without", p, cost)
					if err1 != nil || err2 != nil || a != b {
						t.Fatalf("step %d at %v, cost %d: with a take given back %+v (%v), without %+v (%v)", step, now, cost, a, err1, b, err2)
					}
					continue
				}
				// A take on "with" alone, given back later; between them,
				// half the time, a take on both.
				takes := []stackTake{{pl: pl, key: redisKey(st.prefix, "with", pl.rule), tail: pl.tailAt(p, now.UnixNano()), cost: 1 + cost%2}}
				g := &stackGroup{n: st.nodes.single, count: 1}
				st.stackCall(ctx, g, takes, false, true)
				if g.err != nil {
					t.Fatal(g.err)
				}
				if !g.allowed {
					continue
				}
				now = now.Add(time.Duration(rng.Int64N(int64(first) * 3 / 4))).Truncate(time.Microsecond)
				set(now)
				between := rng.IntN(2) == 0
				if between {
					a, err1 := st.Take(ctx, "with", p, 1+cost%2)
					b, err2 := st.Take(ctx, "without", p, 1+cost%2)
					if err1 != nil || err2 != nil || a.Allowed && !b.Allowed {
						t.Fatalf("step %d: a take while another is held: %+v (%v); without it: %+v (%v)", step, a, err1, b, err2)
					}
					if a.Allowed != b.Allowed { // refused while the other was held: the twins part
						resync(t, st, p)
						continue
					}
				}
				now = now.Add(time.Duration(rng.Int64N(int64(first) * 3 / 4))).Truncate(time.Microsecond)
				set(now)
				st.stackCall(ctx, g, takes, true, false)
				if g.backErr != nil {
					t.Fatal(g.backErr)
				}
				given++
				if between && (p.Algorithm == algo.TokenBucket || p.Algorithm == algo.GCRA) && !p.Calendar() {
					// A bucket without the take may have filled up while it
					// was held, and lost refill this one kept: what is given
					// back never exceeds it, and the twins part.
					same := true
					for c := range p.Limits[0].Capacity(p.Algorithm) + 2 {
						a, err1 := st.Peek(ctx, "with", p, c)
						b, err2 := st.Peek(ctx, "without", p, c)
						if err1 != nil || err2 != nil || a.Allowed && !b.Allowed {
							t.Fatalf("step %d: after a give-back with a take between, cost %d: %+v (%v); without the take: %+v (%v)", step, c, a, err1, b, err2)
						}
						for i := range p.Limits {
							if c == 0 && a.Limits[i].Remaining > b.Limits[i].Remaining {
								t.Fatalf("step %d: after a give-back with a take between, limit %d has %d left; without the take, %d", step, i, a.Limits[i].Remaining, b.Limits[i].Remaining)
							}
						}
						same = same && a == b
					}
					if same {
						exact++
					}
					resync(t, st, p)
				}
			}
			if p.Algorithm == algo.TokenBucket || p.Algorithm == algo.GCRA {
				if exact < 5 {
					t.Fatalf("%d give-backs with a take between were exact: too few", exact)
				}
			}
			if given < 30 {
				t.Fatalf("gave back %d takes: too few", given)
			}
		})
	}
}

// resync resets the keys "with" and "without" under p.
func resync(t *testing.T, st *Store, p *store.Policy) {
	t.Helper()
	for _, k := range []string{"with", "without"} {
		if _, err := st.Reset(context.Background(), k, p); err != nil {
			t.Fatal(err)
		}
	}
}
