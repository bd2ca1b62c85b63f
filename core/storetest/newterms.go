package storetest

import (
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// terms makes the policy named name with algorithm a and the given
// limits, for the checks of new terms: a new *store.Policy each time, as
// a reloaded configuration compiles.
func (e *env) terms(name string, a algo.Algorithm, limits ...algo.Limit) *store.Policy {
	e.Helper()
	p := &store.Policy{Name: e.prefix + name, Algorithm: a, Limits: limits}
	if err := p.Validate(); err != nil {
		e.Fatal(err)
	}
	return p
}

func per(count int64, period time.Duration, burst int64) algo.Limit {
	return algo.Limit{Count: count, Period: period, Burst: burst}
}

// newTerms: a limit's counter belongs to the policy's name and algorithm
// and the limit's period. New counts and bursts count what was spent
// against them: 3 of 5 per hour spent, 10 per hour leaves 6 after one
// more; 3 per hour denies (4 spent); 10 per hour admits again, though a
// denial under 3 per hour came just before; a burst of 20 leaves 14. A
// new period, algorithm or name counts afresh, and a Reset under new
// terms forgets what was spent under the old.
func newTerms(e *env, a algo.Algorithm) {
	const hour = time.Hour
	e.align(hour)
	k := e.key("u")
	e.expect(k, e.terms("terms", a, per(5, hour, 0)), 3, true, 2)
	e.expect(k, e.terms("terms", a, per(10, hour, 0)), 1, true, 6)
	e.expect(k, e.terms("terms", a, per(3, hour, 0)), 1, false, 0)
	e.expect(k, e.terms("terms", a, per(3, hour, 0)), 1, false, 0)
	e.expect(k, e.terms("terms", a, per(10, hour, 0)), 1, true, 5)
	// The window algorithms have no burst: their capacity is the count.
	left := map[algo.Algorithm]int64{algo.FixedWindow: 4, algo.SlidingWindow: 4, algo.TokenBucket: 14, algo.GCRA: 14}[a]
	e.expect(k, e.terms("terms", a, per(10, hour, 20)), 1, true, left)
	other := algorithms[(int(a)+1)%len(algorithms)]
	e.expect(k, e.terms("terms", a, per(10, 2*hour, 0)), 1, true, 9) // another period
	e.expect(k, e.terms("terms", other, per(10, hour, 0)), 1, true, 9)
	e.expect(k, e.terms("terms2", a, per(10, hour, 0)), 1, true, 9)
	e.reset(k, e.terms("terms", a, per(7, hour, 0)), true)
	e.expect(k, e.terms("terms", a, per(10, hour, 0)), 1, true, 9)
}

// newTermsSeveral: in a policy of several limits each limit's counter
// is its own, whatever the other limits and their order: a limit that
// stays keeps its counter when the others change, a new period starts
// afresh, and one that comes back before its window ends finds what it
// kept. A limit lowered below what was spent denies until it drains at
// the new rate.
func newTermsSeveral(e *env, a algo.Algorithm) {
	const (
		hour = time.Hour
		day  = 24 * hour
		week = 7 * day
	)
	e.align(hour)
	k := e.key("u")
	check := func(p *store.Policy, allowed bool, want ...int64) {
		e.Helper()
		r := e.take(k, p, 1)
		for i, w := range want {
			if r.Allowed != allowed || r.Limits[i].Remaining != w {
				e.Fatalf("Take under %v: allowed %v, remaining %+v; want %v and %v", p.Limits, r.Allowed, r.Limits[:len(want)], allowed, want)
			}
		}
	}
	check(e.terms("multi", a, per(5, hour, 0), per(100, day, 0)), true, 4, 99)
	check(e.terms("multi", a, per(100, day, 0), per(5, hour, 0)), true, 98, 3)                        // swapped
	check(e.terms("multi", a, per(50, day, 0), per(10, hour, 0)), true, 47, 7)                        // new counts
	check(e.terms("multi", a, per(10, hour, 0), per(20, week, 0)), true, 6, 19)                       // the day out, a week in
	check(e.terms("multi", a, per(2, hour, 0), per(20, week, 0)), false, 0, 19)                       // the hour lowered: 4 spent
	check(e.terms("multi", a, per(20, week, 0), per(10, hour, 0), per(100, day, 0)), true, 18, 5, 96) // the day back
	// The hour lowered below the 5 spent denies, and half an hour on
	// still does: a GCRA's units were converted when first read, and have
	// drained at 3 an hour since, not at 10.
	lowered := e.terms("multi", a, per(3, hour, 0), per(20, week, 0))
	check(lowered, false, 0, 18)
	if !e.virtual() {
		return
	}
	e.sleep(30 * time.Minute)
	check(lowered, false, 0, 18)
}
