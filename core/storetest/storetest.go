package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// Option configures Run.
type Option func(*suite)

// WithClock tells the suite that the stores read time from clock, so it can
// move time itself instead of waiting.
func WithClock(clock *store.ManualClock) Option { return func(s *suite) { s.clock = clock } }

type suite struct {
	clock *store.ManualClock
}

var algorithms = []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA}

// Run runs the suite. newStore is called once per subtest; stores it returns
// that implement io.Closer are closed at the end of their subtest. Keys are
// unique per run, so a store that persists (a Redis server) may be reused.
func Run(t *testing.T, newStore func() store.Store, opts ...Option) {
	s := &suite{}
	for _, o := range opts {
		o(s)
	}
	nonce := fmt.Sprintf("%08x", rand.Uint32())
	test := func(name string, fn func(e *env)) {
		t.Run(name, func(t *testing.T) {
			st := newStore()
			if c, ok := st.(interface{ Close() error }); ok {
				t.Cleanup(func() { _ = c.Close() })
			}
			fn(&env{T: t, st: st, clock: s.clock, prefix: "st-" + nonce + "-" + t.Name() + "-"})
		})
	}
	for _, a := range algorithms {
		test("ExactCount/"+a.String(), func(e *env) { exactCount(e, a) })
		test("Cost/"+a.String(), func(e *env) { cost(e, a) })
		test("Rollover/"+a.String(), func(e *env) { rollover(e, a) })
		test("SeveralLimits/"+a.String(), func(e *env) { severalLimits(e, a) })
		test("Reset/"+a.String(), func(e *env) { reset(e, a) })
		test("Peek/"+a.String(), func(e *env) { peek(e, a) })
		test("ResetExpired/"+a.String(), func(e *env) { resetExpired(e, a) })
		test("Isolation/"+a.String(), func(e *env) { isolation(e, a) })
		test("Concurrency/"+a.String(), func(e *env) { concurrency(e, a, "100/hour") })
		test("ConcurrencyTwoLimits/"+a.String(), func(e *env) { concurrency(e, a, "100/hour", "1000/day") })
		test("NewTerms/"+a.String(), func(e *env) { newTerms(e, a) })
		test("NewTermsSeveralLimits/"+a.String(), func(e *env) { newTermsSeveral(e, a) })
		for _, c := range chargeTests {
			test(c.name+"/"+a.String(), func(e *env) { c.fn(e, e.charger(), a) })
		}
		for _, c := range takeAllChecks {
			test(c.name+"/"+a.String(), func(e *env) { c.fn(e, e.multiTaker(), a) })
		}
	}
	test("PenaltyBan", penaltyBan)
	test("Calendar", calendar)
	for _, c := range inFlightChecks {
		test(c.name, func(e *env) {
			cs, ok := e.st.(store.ConcurrencyStore)
			if !ok {
				e.Skipf("%T is no store.ConcurrencyStore: it bounds no requests in flight", e.st)
			}
			c.fn(e, cs)
		})
	}
}

type env struct {
	*testing.T
	st     store.Store
	clock  *store.ManualClock
	prefix string
}

func (e *env) virtual() bool { return e.clock != nil }

func (e *env) key(k string) string { return e.prefix + k }

func (e *env) policy(name string, a algo.Algorithm, limits ...string) *store.Policy {
	e.Helper()
	return e.parsed(&store.Policy{Name: e.prefix + name, Algorithm: a}, algo.ParseLimit, limits)
}

// parsed adds to p the limits parse makes of limits, and checks that p
// is valid.
func (e *env) parsed(p *store.Policy, parse func(string) (algo.Limit, error), limits []string) *store.Policy {
	e.Helper()
	for _, s := range limits {
		l, err := parse(s)
		if err != nil {
			e.Fatal(err)
		}
		p.Limits = append(p.Limits, l)
	}
	if err := p.Validate(); err != nil {
		e.Fatal(err)
	}
	return p
}

func (e *env) take(key string, p *store.Policy, cost int64) store.Result {
	e.Helper()
	r, err := e.st.Take(context.Background(), key, p, cost)
	if err != nil {
		e.Fatalf("Take(%q, %s, %d): %v", key, p.Name, cost, err)
	}
	return r
}

// expect takes and checks the decision and the remaining count.
func (e *env) expect(key string, p *store.Policy, cost int64, allowed bool, remaining int64) store.Result {
	e.Helper()
	r := e.take(key, p, cost)
	if r.Allowed != allowed || r.Remaining != remaining {
		e.Fatalf("Take(%q, cost %d) under %v %v: got allowed=%v remaining=%d, want %v %d",
			key, cost, p.Algorithm, p.Limits, r.Allowed, r.Remaining, allowed, remaining)
	}
	if allowed && r.RetryAfter != 0 || !allowed && r.RetryAfter <= 0 {
		e.Fatalf("Take(%q): allowed=%v with RetryAfter %v", key, r.Allowed, r.RetryAfter)
	}
	return r
}

// duration checks d: exactly want in virtual time, within (0, want] in real
// time, where the suite cannot know how far into a long window it is.
func (e *env) duration(what string, d, want time.Duration) {
	e.Helper()
	if e.virtual() && d != want || !e.virtual() && (d > want || d <= 0) {
		e.Fatalf("%s: got %v, want %v", what, d, want)
	}
}

// sleep lets d pass.
func (e *env) sleep(d time.Duration) {
	if e.virtual() {
		e.clock.Advance(d)
		return
	}
	time.Sleep(d)
}

// align moves to just after the start of a window of the given period, so
// that what follows happens well inside one window. In real time it waits
// only for short periods, or when a long window is about to end.
func (e *env) align(period time.Duration) {
	const margin = 20 * time.Millisecond
	if e.virtual() {
		now := e.clock.Time()
		e.clock.Set(now.Truncate(period).Add(period))
		return
	}
	now := time.Now()
	next := now.Truncate(period).Add(period)
	if period <= 2*time.Second || next.Sub(now) < 10*time.Second {
		time.Sleep(next.Add(margin).Sub(now))
	}
}

func exactCount(e *env, a algo.Algorithm) {
	p := e.policy("exact", a, "5/hour")
	e.align(time.Hour)
	k := e.key("u")
	for i := int64(4); i >= 0; i-- {
		r := e.expect(k, p, 1, true, i)
		if r.Limit != p.Limits[0] || r.Limits[0].Remaining != i {
			e.Fatalf("Result.Limit %v / Limits[0] %+v, want %v / remaining %d", r.Limit, r.Limits[0], p.Limits[0], i)
		}
	}
	for range 3 {
		r := e.expect(k, p, 1, false, 0)
		want := map[algo.Algorithm]time.Duration{
			algo.FixedWindow: time.Hour, algo.SlidingWindow: time.Hour + 12*time.Minute,
			algo.TokenBucket: 12 * time.Minute, algo.GCRA: 12 * time.Minute,
		}[a]
		e.duration("RetryAfter", r.RetryAfter, want)
	}
}

func cost(e *env, a algo.Algorithm) {
	p := e.policy("cost", a, "10/hour")
	e.align(time.Hour)
	k := e.key("u")
	e.expect(k, p, 4, true, 6)
	e.expect(k, p, 4, true, 2)
	e.expect(k, p, 3, false, 2) // does not fit: consumes nothing
	e.expect(k, p, 2, true, 0)
	e.expect(k, p, 1, false, 0)
	k2 := e.key("fresh")
	e.expect(k2, p, 11, false, 10) // above the capacity: never, and nothing taken
	e.expect(k2, p, 10, true, 0)
}

func rollover(e *env, a algo.Algorithm) {
	p := e.policy("roll", a, "3/second")
	k := e.key("u")
	e.align(time.Second)
	for i := int64(2); i >= 0; i-- {
		e.expect(k, p, 1, true, i)
	}
	r := e.expect(k, p, 1, false, 0)
	// Waiting RetryAfter is always enough. A fixed window is then a new
	// window; the other algorithms have just made room for one.
	e.sleep(r.RetryAfter)
	if a == algo.FixedWindow {
		e.expect(k, p, 1, true, 2)
	} else {
		e.expect(k, p, 1, true, 0)
	}
	// After two whole periods every algorithm is back to a full quota.
	e.align(time.Second)
	e.sleep(time.Second)
	for i := int64(2); i >= 0; i-- {
		e.expect(k, p, 1, true, i)
	}
	e.expect(k, p, 1, false, 0)
}

func severalLimits(e *env, a algo.Algorithm) {
	p := e.policy("multi", a, "2/minute", "5/hour")
	e.align(time.Hour)
	k := e.key("u")
	r := e.expect(k, p, 1, true, 1)
	if r.Limits[0].Remaining != 1 || r.Limits[1].Remaining != 4 {
		e.Fatalf("per-limit remaining %+v, want 1 and 4", r.Limits[:2])
	}
	e.expect(k, p, 1, true, 0)
	r = e.expect(k, p, 1, false, 0)
	if r.Limit != p.Limits[0] || r.Limits[1].Remaining != 3 {
		e.Fatalf("denied by %v with hour remaining %d, want the minute limit and 3 (a denial consumes from no limit)", r.Limit, r.Limits[1].Remaining)
	}
	if !e.virtual() {
		return // real time: the rest waits minutes
	}
	// Two more minutes: the minute limit is full again, the hour limit holds 3.
	e.sleep(2 * time.Minute)
	r = e.expect(k, p, 2, true, 0)
	if r.Limit != p.Limits[0] || r.Limits[1].Remaining != 1 {
		e.Fatalf("deciding limit %v, hour remaining %d; want the minute limit (0 left) and 1", r.Limit, r.Limits[1].Remaining)
	}
	e.sleep(2 * time.Minute)
	r = e.expect(k, p, 2, false, 1)
	if r.Limit != p.Limits[1] || r.Limits[0].Remaining != 2 {
		e.Fatalf("denied by %v with minute remaining %d, want the hour limit and 2", r.Limit, r.Limits[0].Remaining)
	}
}

// reset: Reset of a counted key reports true and the key counts afresh
// under every limit of the policy, while another policy's counters of the
// same key stay; a second Reset finds nothing to clear. A key never
// counted, one asked only at cost 0 and one only denied hold nothing:
// Reset reports false.
func reset(e *env, a algo.Algorithm) {
	p := e.policy("reset", a, "2/hour", "3/day")
	other := e.policy("reset-other", a, "2/hour")
	e.align(time.Hour)
	k := e.key("u")
	e.expect(k, p, 2, true, 0)
	e.expect(k, other, 2, true, 0)
	e.expect(k, p, 1, false, 0)
	e.reset(k, p, true)
	if r := e.expect(k, p, 2, true, 0); r.Limits[1].Remaining != 1 {
		e.Fatalf("after Reset, 2 taken: the day limit has %d left, want 1 (its counter was not reset)", r.Limits[1].Remaining)
	}
	e.expect(k, other, 1, false, 0) // another policy's counters are untouched
	e.reset(k, p, true)
	e.reset(k, p, false) // already reset
	e.expect(k, p, 1, true, 1)
	e.reset(e.key("never-seen"), p, false)
	peek := e.key("peek")
	e.expect(peek, p, 0, true, 2) // cost 0 only reads
	e.reset(peek, p, false)
	over := e.key("over")
	e.expect(over, p, 3, false, 2) // above the hour's capacity: denied, nothing taken
	e.reset(over, p, false)
}

// resetExpired: once time has given back everything a key consumed (its
// ResetAfter has passed), Reset reports false; just before, true. The
// period is short (200ms), for stores on a real clock.
func resetExpired(e *env, a algo.Algorithm) {
	p := &store.Policy{Name: e.prefix + "expiry", Algorithm: a, Limits: []algo.Limit{{Count: 2, Period: 200 * time.Millisecond}}}
	e.align(p.Limits[0].Period)
	early, late := e.key("early"), e.key("late")
	r := e.expect(early, p, 1, true, 1)
	e.expect(late, p, 1, true, 1)
	if e.virtual() {
		e.sleep(r.ResetAfter - time.Microsecond)
		e.reset(early, p, true)
		e.sleep(2 * time.Microsecond)
	} else {
		// The store's clock (a server's) and its key expiry (whole
		// milliseconds) may lag the suite's.
		e.sleep(r.ResetAfter + 20*time.Millisecond)
		e.reset(early, p, false)
	}
	e.reset(late, p, false)
	e.expect(late, p, 2, true, 0)
}

// peek: for one limit and two, over a sequence of costs that admits,
// denies, and asks for more than a limit holds, Peek answers what the
// Take right after it does, and a second Peek the same; a key only peeked
// at holds nothing (Reset reports false). In virtual time the Results are
// equal; in real time (the store's server clock runs between the calls)
// the decisions, limits and counts are, and durations within 2s.
func peek(e *env, a algo.Algorithm) {
	for _, p := range []*store.Policy{e.policy("peek", a, "3/hour"), e.policy("peek2", a, "2/minute", "5/hour")} {
		e.align(time.Hour)
		k := e.key("u")
		e.peekAt(k, p, 1)
		e.reset(k, p, false) // the peek created nothing
		admitted, denied := 0, 0
		for _, cost := range []int64{1, 2, 1, 1, 3, 1, 0} {
			pr := e.peekAt(k, p, cost)
			if again := e.peekAt(k, p, cost); !e.sameResult(pr, again) {
				e.Fatalf("%s, cost %d: Peek %+v, then Peek %+v: the first one changed the counters", p.Name, cost, pr, again)
			}
			if tr := e.take(k, p, cost); !e.sameResult(pr, tr) {
				e.Fatalf("%s, cost %d: Peek %+v, then Take %+v; want the same answer", p.Name, cost, pr, tr)
			}
			if pr.Allowed {
				admitted++
			} else {
				denied++
			}
		}
		if admitted < 2 || denied < 2 {
			e.Fatalf("%s: %d admitted, %d denied: the sequence must test both", p.Name, admitted, denied)
		}
	}
}

func (e *env) peekAt(key string, p *store.Policy, cost int64) store.Result {
	e.Helper()
	r, err := e.st.Peek(context.Background(), key, p, cost)
	if err != nil {
		e.Fatalf("Peek(%q, %s, %d): %v", key, p.Name, cost, err)
	}
	return r
}

// sameResult reports whether a and b are the same answer: equal in
// virtual time; in real time, equal but for durations, which must be
// within 2s of each other (and zero together): a loaded machine may
// pause between the calls.
func (e *env) sameResult(a, b store.Result) bool {
	if e.virtual() {
		return a == b
	}
	near := func(x, y time.Duration) bool { return (x == 0) == (y == 0) && (x-y).Abs() <= 2*time.Second }
	if a.Allowed != b.Allowed || a.Limit != b.Limit || a.Remaining != b.Remaining ||
		!near(a.ResetAfter, b.ResetAfter) || !near(a.RetryAfter, b.RetryAfter) {
		return false
	}
	for i := range a.Limits {
		if a.Limits[i].Remaining != b.Limits[i].Remaining || !near(a.Limits[i].ResetAfter, b.Limits[i].ResetAfter) {
			return false
		}
	}
	return true
}

// reset calls Reset and checks what it reports.
func (e *env) reset(key string, p *store.Policy, want bool) {
	e.Helper()
	got, err := e.st.Reset(context.Background(), key, p)
	if err != nil || got != want {
		e.Fatalf("Reset(%q, %s) = %v, %v; want %v", key, p.Name, got, err, want)
	}
}

func isolation(e *env, a algo.Algorithm) {
	p := e.policy("iso", a, "2/hour")
	q := e.policy("iso2", a, "2/hour")
	e.align(time.Hour)
	keys := []string{
		e.key("a"), e.key("b"), e.key("a:b"), e.key("a}{b"), e.key("{a}"), e.key("a\x00b"),
		e.key("ユーザー"), e.key(strings.Repeat("x", 10_000)), e.key(strings.Repeat("x", 9_999) + "y"), "",
	}
	for _, k := range keys {
		e.expect(k, p, 2, true, 0)
	}
	for _, k := range keys {
		e.expect(k, p, 1, false, 0)
		e.expect(k, q, 1, true, 1) // same key, other rule: its own counter
	}
	e.reset("", p, true)
	e.reset("", q, true)
	e.expect("", p, 2, true, 0)
	e.expect(e.key("a"), p, 1, false, 0) // only "" was reset
}

// concurrency hammers one key from GOMAXPROCS×8 goroutines; the first
// limit (100) must admit exactly 100 of three times as many requests.
func concurrency(e *env, a algo.Algorithm, limits ...string) {
	const limit = 100
	p := e.policy("conc", a, limits...)
	e.align(time.Hour)
	k := e.key("hot")
	workers := runtime.GOMAXPROCS(0) * 8
	each := max(1, (3*limit+workers-1)/workers)
	var admitted, denied, failed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-start
			for range each {
				r, err := e.st.Take(context.Background(), k, p, 1)
				switch {
				case err != nil:
					failed.Add(1)
				case r.Allowed:
					admitted.Add(1)
				default:
					denied.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	total := int64(workers * each)
	if failed.Load() != 0 || admitted.Load() != limit || denied.Load() != total-limit {
		e.Fatalf("%d goroutines, %d requests: admitted %d, denied %d, failed %d; want exactly %d admitted",
			workers, total, admitted.Load(), denied.Load(), failed.Load(), limit)
	}
}
