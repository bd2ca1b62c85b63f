package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// takeAllChecks are the checks of a store.MultiTaker, run for each
// algorithm when the store implements it and skipped otherwise.
var takeAllChecks = []struct {
	name string
	fn   func(e *env, mt store.MultiTaker, a algo.Algorithm)
}{
	{"TakeAll/Admitted", takeAllAdmitted},
	{"TakeAll/Denied", takeAllDenied},
	{"TakeAll/SameCounterTwice", takeAllSameCounter},
	{"TakeAll/SeveralLimits", takeAllSeveralLimits},
	{"TakeAll/Calendar", takeAllCalendar},
	{"TakeAll/Concurrency", takeAllConcurrency},
	{"TakeAll/BadTakes", takeAllBad},
}

// multiTaker returns the store as a store.MultiTaker, and skips the test
// when it is not one.
func (e *env) multiTaker() store.MultiTaker {
	mt, ok := e.st.(store.MultiTaker)
	if !ok {
		e.Skipf("%T is no store.MultiTaker: it takes no stacked limits", e.st)
	}
	return mt
}

// takeAll calls TakeAll, failing the test on an error or an answer
// other than want, and returns the results, one per take.
func (e *env) takeAll(mt store.MultiTaker, want bool, takes ...store.Take) []store.Result {
	e.Helper()
	rs := make([]store.Result, len(takes))
	allowed, err := mt.TakeAll(context.Background(), takes, rs)
	if err != nil || allowed != want {
		e.Fatalf("TakeAll(%s): got %v, %v; want %v", describe(takes), allowed, err, want)
	}
	return rs
}

// describe names takes for a failure message.
func describe(takes []store.Take) string {
	s := ""
	for i, t := range takes {
		if i > 0 {
			s += ", "
		}
		if t.Policy == nil {
			s += fmt.Sprintf("%q under no policy at cost %d", t.Key, t.Cost)
			continue
		}
		s += fmt.Sprintf("%q under %s %v at cost %d", t.Key, t.Policy.Name, t.Policy.Limits, t.Cost)
	}
	return s
}

// result checks one take's answer: admitted or not, the units left of its
// deciding limit, and a RetryAfter of 0 exactly when admitted.
func (e *env) result(what string, r store.Result, allowed bool, remaining int64) {
	e.Helper()
	if r.Allowed != allowed || r.Remaining != remaining || allowed != (r.RetryAfter == 0) {
		e.Fatalf("%s: got allowed=%v remaining=%d RetryAfter %v; want %v, %d and a RetryAfter only when denied",
			what, r.Allowed, r.Remaining, r.RetryAfter, allowed, remaining)
	}
}

// takeAllAdmitted: takes of one key under two policies and of another key
// under one of them, all admitted, each consume their cost exactly from
// their own counter, and answer what a Take would; a take of cost 0
// consumes and creates nothing.
func takeAllAdmitted(e *env, mt store.MultiTaker, a algo.Algorithm) {
	global := e.policy("global", a, "10/hour")
	route := e.policy("route", a, "3/hour")
	e.align(time.Hour)
	u, v, idle := e.key("u"), e.key("v"), e.key("idle")
	for i := range int64(3) {
		rs := e.takeAll(mt, true,
			store.Take{Key: u, Policy: global, Cost: 2},
			store.Take{Key: u, Policy: route, Cost: 1},
			store.Take{Key: v, Policy: route, Cost: 1},
			store.Take{Key: idle, Policy: global, Cost: 0})
		e.result("the global take", rs[0], true, 8-2*i)
		e.result("u's route take", rs[1], true, 2-i)
		e.result("v's route take", rs[2], true, 2-i)
		e.result("the take of cost 0", rs[3], true, 10)
		if rs[0].Limit != global.Limits[0] || rs[1].Limits[0].Remaining != 2-i {
			e.Fatalf("results %+v / %+v: want the global limit deciding, and Limits[0] holding the route's count", rs[0], rs[1])
		}
	}
	e.expect(u, global, 4, true, 0) // 6 taken, exactly
	e.expect(u, route, 1, false, 0)
	e.expect(v, route, 1, false, 0)
	e.expect(v, global, 10, true, 0) // v's global counter is its own
	e.reset(idle, global, false)     // the take of cost 0 created nothing
}

// takeAllDenied: a call with one take denied consumes from no counter,
// whichever place the denied take has; the denied take answers what a
// Take alone does (its RetryAfter the time until it alone would be
// admitted), the others their state as it stands, what a Take of cost 0
// answers.
func takeAllDenied(e *env, mt store.MultiTaker, a algo.Algorithm) {
	global := e.policy("global", a, "10/hour")
	route := e.policy("route", a, "3/hour")
	e.align(time.Hour)
	u, v := e.key("u"), e.key("v")
	e.expect(u, global, 2, true, 8)
	e.expect(v, route, 3, true, 0) // v's route is spent
	for _, first := range []bool{true, false} {
		takes := []store.Take{{Key: u, Policy: global, Cost: 1}, {Key: v, Policy: route, Cost: 1}, {Key: u, Policy: route, Cost: 2}}
		g, r, ur := 0, 1, 2
		if !first {
			takes[0], takes[1] = takes[1], takes[0]
			g, r = 1, 0
		}
		rs := e.takeAll(mt, false, takes...)
		e.result("the global take", rs[g], true, 8)
		e.result("u's route take", rs[ur], true, 3)
		e.result("v's spent route take", rs[r], false, 0)
		if alone := e.take(v, route, 1); !e.sameResult(rs[r], alone) {
			e.Fatalf("the denied take answered %+v, a Take alone %+v; want the same answer", rs[r], alone)
		}
		if peek := e.peekAt(u, global, 0); !e.sameResult(rs[g], peek) {
			e.Fatalf("an admitted take of a denied call answered %+v, a Peek of cost 0 %+v; want the same answer", rs[g], peek)
		}
		if peek := e.peekAt(u, route, 0); !e.sameResult(rs[ur], peek) {
			e.Fatalf("an admitted take of a denied call answered %+v, a Peek of cost 0 %+v; want the same answer", rs[ur], peek)
		}
	}
	e.expect(u, global, 8, true, 0) // nothing taken by the denied calls
	e.expect(u, route, 3, true, 0)
	// A take that creates a counter creates none when another is denied.
	e.takeAll(mt, false, store.Take{Key: e.key("w"), Policy: route, Cost: 1}, store.Take{Key: v, Policy: route, Cost: 1})
	e.reset(e.key("w"), route, false)
}

// takeAllSameCounter: two takes of one key under one policy count twice
// against its one counter, the second on what the first left; when the
// second does not fit, neither is taken, and the first reports the
// counter as it stands.
func takeAllSameCounter(e *env, mt store.MultiTaker, a algo.Algorithm) {
	p := e.policy("twice", a, "5/hour")
	e.align(time.Hour)
	k := e.key("u")
	t := store.Take{Key: k, Policy: p, Cost: 2}
	rs := e.takeAll(mt, true, t, t)
	e.result("the first take", rs[0], true, 3)
	e.result("the second take", rs[1], true, 1)
	rs = e.takeAll(mt, false, t, t) // 1 left: the first would fit alone, not the second
	e.result("the first take", rs[0], false, 1)
	if rs[1].Allowed {
		e.Fatalf("the second take of 2 with 1 left: admitted")
	}
	t.Cost = 1
	rs = e.takeAll(mt, false, t, t) // the first fits, the second does not
	e.result("the first take of a denied call", rs[0], true, 1)
	if rs[1].Allowed || rs[1].RetryAfter <= 0 {
		e.Fatalf("the second take of 1 after the first took the last unit: %+v, want denied with a RetryAfter", rs[1])
	}
	e.expect(k, p, 1, true, 0) // the one unit is still there
}

// takeAllSeveralLimits: a policy of several limits inside a call: every
// limit's state shows, a denial by one of its limits consumes from none of
// them nor from the other take.
func takeAllSeveralLimits(e *env, mt store.MultiTaker, a algo.Algorithm) {
	p := e.policy("multi", a, "2/hour", "5/day")
	global := e.policy("global", a, "10/hour")
	e.align(time.Hour)
	k := e.key("u")
	e.twoThenDenied(mt, store.Take{Key: k, Policy: global, Cost: 1}, store.Take{Key: k, Policy: p, Cost: 1}, 1)
	e.expect(k, global, 1, true, 7)
	if r := e.peekAt(k, p, 0); r.Limits[0].Remaining != 0 || r.Limits[1].Remaining != 3 {
		e.Fatalf("the multi-limit policy afterwards: %+v, want 0 and 3 left", r.Limits[:2])
	}
}

// twoThenDenied calls TakeAll with takes three times. takes[d] is under
// a policy of two limits, 2 and 5 per period, the other take under one
// of 10 per period, for keys they have not counted yet: the first two
// calls are admitted, with the states each limit shows; the third is
// denied by the first limit of takes[d]'s policy, its second at 3, and
// the other take reports its counter as it stands, 8 left. It returns
// the third call's results.
func (e *env) twoThenDenied(mt store.MultiTaker, t0, t1 store.Take, d int) []store.Result {
	e.Helper()
	takes := []store.Take{t0, t1}
	o, p := 1-d, takes[d].Policy
	rs := e.takeAll(mt, true, takes...)
	e.result("the other take", rs[o], true, 9)
	e.result("the take of two limits", rs[d], true, 1)
	if rs[d].Limits[0].Remaining != 1 || rs[d].Limits[1].Remaining != 4 {
		e.Fatalf("per-limit remaining %+v, want 1 and 4", rs[d].Limits[:2])
	}
	e.takeAll(mt, true, takes...)
	rs = e.takeAll(mt, false, takes...)
	e.result("the other take", rs[o], true, 8)
	e.result("the take of two limits", rs[d], false, 0)
	if rs[d].Limit != p.Limits[0] || rs[d].Limits[1].Remaining != 3 {
		e.Fatalf("denied by %v with %v at %d, want %v and 3", rs[d].Limit, p.Limits[1], rs[d].Limits[1].Remaining, p.Limits[0])
	}
	return rs
}

// takeAllCalendar: a policy of calendar limits (2 a day, 5 a month, in
// America/New_York) inside a call: it counts, and its denial (until the
// day ends: exactly an hour in virtual time, from the last hour of a
// day) takes nothing from the other take.
func takeAllCalendar(e *env, mt store.MultiTaker, a algo.Algorithm) {
	cal := e.calendarPolicy("calendar", "2/day", "5/month")
	ny := cal.Location
	global := e.policy("global", a, "10/hour")
	if e.virtual() {
		// The last hour of a day in New York, after the clock's reading.
		now := e.clock.Time().In(ny)
		at := time.Date(now.Year(), now.Month(), now.Day()+1, 0, 0, 0, 0, ny).Add(-time.Hour)
		if !at.After(now) {
			at = time.Date(now.Year(), now.Month(), now.Day()+2, 0, 0, 0, 0, ny).Add(-time.Hour)
		}
		e.clock.Set(at)
	} else {
		e.align(time.Hour)
		ps := algo.CalendarDay.Periods(time.Now().UnixNano(), ny)
		if left := time.Until(time.Unix(0, ps.End)); left < 10*time.Second {
			time.Sleep(left + 20*time.Millisecond)
		}
	}
	k := e.key("u")
	c, g := store.Take{Key: k, Policy: cal, Cost: 1}, store.Take{Key: k, Policy: global, Cost: 1}
	rs := e.twoThenDenied(mt, c, g, 0)
	if alone := e.take(k, cal, 1); !e.sameResult(rs[0], alone) {
		e.Fatalf("the denied calendar take answered %+v, a Take alone %+v; want the same answer", rs[0], alone)
	}
	if e.virtual() {
		e.duration("RetryAfter", rs[0].RetryAfter, time.Hour) // to midnight
		e.sleep(time.Hour)
		rs = e.takeAll(mt, true, c, g)
		e.result("the calendar take on a new day", rs[0], true, 1)
	}
}

// takeAllConcurrency: GOMAXPROCS×8 goroutines send TakeAll calls for one
// key under a global policy of 50 per hour and a route's policy of 20 per
// hour, at least three times the route's limit: exactly 20 are admitted,
// and the global counter shows exactly 20 taken. Then they send calls
// under the global policy and two other routes' (20 each), at least
// three times what the global policy has left: exactly its 30 are
// admitted, each route's counter shows exactly what it admitted, and
// nothing else is taken.
func takeAllConcurrency(e *env, mt store.MultiTaker, a algo.Algorithm) {
	global := e.policy("global", a, "50/hour")
	routes := []*store.Policy{e.policy("route-a", a, "20/hour"), e.policy("route-b", a, "20/hour"), e.policy("route-c", a, "20/hour")}
	e.align(time.Hour)
	k := e.key("hot")
	workers := runtime.GOMAXPROCS(0) * 8
	// send sends at least n calls, the i-th under routes[i%len(routes)],
	// and returns how many each route admitted.
	send := func(n int, routes ...*store.Policy) []int64 {
		each := max(1, (n+workers-1)/workers)
		admitted := make([]atomic.Int64, len(routes))
		var failed atomic.Int64
		var wg sync.WaitGroup
		start := make(chan struct{})
		for w := range workers {
			wg.Go(func() {
				<-start
				var rs [2]store.Result
				for i := range each {
					r := (w + i) % len(routes)
					ok, err := mt.TakeAll(context.Background(),
						[]store.Take{{Key: k, Policy: global, Cost: 1}, {Key: k, Policy: routes[r], Cost: 1}}, rs[:])
					switch {
					case err != nil || ok != (rs[0].Allowed && rs[1].Allowed):
						failed.Add(1)
					case ok:
						admitted[r].Add(1)
					}
				}
			})
		}
		close(start)
		wg.Wait()
		if failed.Load() != 0 {
			e.Fatalf("%d calls failed or answered against their results", failed.Load())
		}
		out := make([]int64, len(routes))
		for i := range out {
			out[i] = admitted[i].Load()
		}
		return out
	}
	if got := send(3*20, routes[0]); got[0] != 20 {
		e.Fatalf("%d goroutines under global 50 and route 20: %d admitted, want exactly 20", workers, got[0])
	}
	if r := e.peekAt(k, global, 0); r.Remaining != 30 {
		e.Fatalf("the global counter after 20 admitted: %d left, want 30", r.Remaining)
	}
	got := send(3*30, routes[1:]...)
	if got[0]+got[1] != 30 {
		e.Fatalf("under the 30 the global policy had left: %d + %d admitted, want 30 in all", got[0], got[1])
	}
	if r := e.peekAt(k, global, 0); r.Remaining != 0 {
		e.Fatalf("the global counter after 50 admitted: %d left, want 0", r.Remaining)
	}
	for i, p := range routes {
		want := int64(0)
		if i > 0 {
			want = 20 - got[i-1]
		}
		if r := e.peekAt(k, p, 0); r.Remaining != want {
			e.Fatalf("%s: %d left, want %d (20 less what it admitted)", p.Name, r.Remaining, want)
		}
	}
}

// takeAllBad: no takes, more than store.MaxTakes, fewer results than
// takes, a take with no policy, or a policy with no limits or more than
// store.MaxLimits: an error wrapping store.ErrBadPolicy, and nothing
// taken by the call's other takes.
func takeAllBad(e *env, mt store.MultiTaker, a algo.Algorithm) {
	p := e.policy("ok", a, "3/hour")
	e.align(time.Hour)
	k := e.key("u")
	good := store.Take{Key: k, Policy: p, Cost: 1}
	five := &store.Policy{Name: e.prefix + "five", Algorithm: a}
	for i := range 5 {
		five.Limits = append(five.Limits, algo.Limit{Count: 10, Period: time.Duration(i+1) * time.Hour})
	}
	many := make([]store.Take, store.MaxTakes+1)
	for i := range many {
		many[i] = good
	}
	for _, c := range []struct {
		name    string
		takes   []store.Take
		results int
	}{
		{"no takes", nil, 1},
		{"too many takes", many, len(many)},
		{"too few results", []store.Take{good, good}, 1},
		{"no policy", []store.Take{good, {Key: k, Cost: 1}}, 2},
		{"no limits", []store.Take{good, {Key: k, Policy: &store.Policy{Name: e.prefix + "none", Algorithm: a}, Cost: 1}}, 2},
		{"five limits", []store.Take{good, {Key: k, Policy: five, Cost: 1}}, 2},
	} {
		rs := make([]store.Result, c.results)
		if ok, err := mt.TakeAll(context.Background(), c.takes, rs); ok || !errors.Is(err, store.ErrBadPolicy) {
			e.Fatalf("%s: got %v, %v; want false and an error wrapping store.ErrBadPolicy", c.name, ok, err)
		}
	}
	e.expect(k, p, 3, true, 0) // nothing was taken
}
