package core

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// quotas is a LimitProvider over a map of "key rule" to limits, counting
// its calls; err, when set, is every call's error.
type quotas struct {
	mu    sync.Mutex
	m     map[string][]algo.Limit
	err   error
	calls map[string]int
	total atomic.Int64
	// block, when not nil, is received from before each call returns.
	block chan struct{}
}

func newQuotas(m map[string][]algo.Limit) *quotas { return &quotas{m: m, calls: map[string]int{}} }

func (q *quotas) Limits(ctx context.Context, key, rule string) ([]algo.Limit, bool, error) {
	q.total.Add(1)
	q.mu.Lock()
	q.calls[key+" "+rule]++
	lims, ok := q.m[key+" "+rule]
	err := q.err
	q.mu.Unlock()
	if q.block != nil {
		<-q.block
	}
	return lims, ok, err
}

func (q *quotas) set(key string, lims []algo.Limit, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if lims == nil {
		delete(q.m, key)
	} else {
		q.m[key] = lims
	}
	q.err = err
}

func (q *quotas) count(key string) int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.calls[key]
}

var perMinute = func(n int64) []algo.Limit { return []algo.Limit{{Count: n, Period: time.Minute}} }

func TestLimitProviderPrecedence(t *testing.T) {
	q := newQuotas(map[string][]algo.Limit{"sub:alice search": perMinute(7), "sub:carol default": perMinute(1)})
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	var events []Event
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithClock(clock), WithLimitProvider(q),
		WithObserver(func(e Event) { events = append(events, e) }))
	ctx := context.Background()
	// Decision.Plan is the caller's plan, custom limits or not; the rule
	// they count under says CustomPlan.
	for _, tc := range []struct {
		id, plan, path, policy, wantPlan, rulePlan, header string
	}{
		{"sub:alice", "pro", "/api/search", "search@custom", "pro", CustomPlan, `"search";q=7;w=60`}, // provider > plan
		{"sub:alice", "", "/api/search", "search@custom", "", CustomPlan, `"search";q=7;w=60`},       // provider > rule
		{"sub:alice", "gold", "/api/search", "search@custom", "", CustomPlan, `"search";q=7;w=60`},   // a plan the configuration lacks
		{"sub:alice", "pro", "/api/upload", "upload@pro", "pro", "pro", `"upload";q=30;w=60`},        // no answer for upload: the plan's
		{"sub:bob", "pro", "/api/search", "search@pro", "pro", "pro", `"search-1m";q=10;w=60, "search-1s";q=4;w=1`},
		{"sub:bob", "", "/api/search", "search", "", "", `"search";q=3;w=60`},
		{"sub:carol", "free", "/nowhere", "default@custom", "free", CustomPlan, `"default";q=1;w=60`},
	} {
		d := lim.DecidePlan(ctx, "GET", Path(tc.path), tc.id, tc.plan, false)
		h := http.Header{}
		d.SetHeaders(h)
		if !d.Allowed || d.Rule.Policy.Name != tc.policy || d.Plan != tc.wantPlan || d.Rule.Plan() != tc.rulePlan || h.Get("RateLimit-Policy") != tc.header {
			t.Errorf("%s on %q, %s: allowed %v, policy %q, plan %q, rule's plan %q, RateLimit-Policy %q; want %q, %q, %q, %s",
				tc.id, tc.plan, tc.path, d.Allowed, d.Rule.Policy.Name, d.Plan, d.Rule.Plan(), h.Get("RateLimit-Policy"), tc.policy, tc.wantPlan, tc.rulePlan, tc.header)
		}
	}
	// One call per (key, rule): alice's search answer was cached.
	for key, want := range map[string]int{"sub:alice search": 1, "sub:alice upload": 1, "sub:bob search": 1, "sub:carol default": 1} { // whatever the plan
		if n := q.count(key); n != want {
			t.Errorf("provider asked %d times for %q, want %d", n, key, want)
		}
	}
	if q.total.Load() != 4 {
		t.Errorf("provider asked %d times in all, want 4", q.total.Load())
	}
	if e := events[0]; e.Rule != "search" || e.Plan != "pro" {
		t.Errorf("event of a custom limit on pro: rule %q, plan %q; want search, pro", e.Rule, e.Plan)
	}
	if e := events[1]; e.Rule != "search" || e.Plan != "" {
		t.Errorf("event of a custom limit without a plan: rule %q, plan %q; want search, none", e.Rule, e.Plan)
	}
	// The cached variant is reused: one *Rule, one policy.
	d1 := lim.Decide(ctx, "GET", "/api/search", "sub:alice", false)
	d2 := lim.Decide(ctx, "GET", "/api/search", "sub:alice", false)
	if d1.Rule != d2.Rule {
		t.Error("a cache hit built a new rule")
	}
	// alice has used 5 of her 7, on every plan: the custom counters are
	// her own.
	if d2.Result.Remaining != 2 {
		t.Errorf("alice's custom search: %d left, want 2", d2.Result.Remaining)
	}
}

func TestLimitProviderTTL(t *testing.T) {
	q := newQuotas(map[string][]algo.Limit{"sub:alice search": perMinute(7)})
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st := newFakeStore()
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(st), WithClock(clock), WithLimitProvider(q), WithLimitCache(100, 30*time.Second))
	ctx := context.Background()
	decide := func(id string) Decision { return lim.Decide(ctx, "GET", "/api/search", id, false) }
	decide("sub:alice")
	decide("sub:bob") // a negative answer, cached too
	clock.Advance(30*time.Second - 1)
	decide("sub:alice")
	decide("sub:bob")
	if a, b := q.count("sub:alice search"), q.count("sub:bob search"); a != 1 || b != 1 {
		t.Fatalf("within the TTL: provider asked %d and %d times, want 1 and 1", a, b)
	}
	first := decide("sub:alice").Rule
	clock.Advance(1)
	q.set("sub:alice search", perMinute(9), nil)
	// New terms, a new fingerprint, the same counter (the name, algorithm
	// and period): what alice spent carries over to the new count.
	if d := decide("sub:alice"); d.Rule.Policy.Limits[0].Count != 9 || d.Rule == first || d.Rule.Policy.Fingerprint() == first.Policy.Fingerprint() ||
		d.Rule.Policy.CounterID(0) != first.Policy.CounterID(0) {
		t.Errorf("after the TTL: limit %v; want the new 9/minute under a new fingerprint, on the same counter", d.Rule.Policy.Limits)
	}
	decide("sub:bob")
	if a, b := q.count("sub:alice search"), q.count("sub:bob search"); a != 2 || b != 2 {
		t.Errorf("after the TTL: provider asked %d and %d times, want 2 and 2", a, b)
	}
	// A quota removed in the database: back to the rule's limits after the TTL.
	q.set("sub:alice search", nil, nil)
	clock.Advance(30 * time.Second)
	if d := decide("sub:alice"); d.Rule != lim.Config().Rule("search") || d.Plan != "" {
		t.Errorf("quota removed: policy %q, plan %q; want the rule's", d.Rule.Policy.Name, d.Plan)
	}
}

func TestLimitProviderErrors(t *testing.T) {
	errDB := errors.New("db down")
	q := newQuotas(map[string][]algo.Limit{"sub:alice search": perMinute(7)})
	q.err = errDB
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	var buf bytes.Buffer
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithClock(clock), WithLimitProvider(q),
		WithLogger(slog.New(slog.NewTextHandler(&buf, nil))), WithWarnInterval(10*time.Second))
	ctx := context.Background()
	decide := func(id string) Decision { return lim.DecidePlan(ctx, "GET", "/api/search", id, "pro", false) }
	for i := range 3 {
		if d := decide("sub:alice"); !d.Allowed || d.Plan != "pro" {
			t.Fatalf("request %d with the provider down: allowed %v, plan %q; want the plan's limits", i, d.Allowed, d.Plan)
		}
	}
	if n := q.count("sub:alice search"); n != 1 {
		t.Errorf("the error is cached: provider asked %d times, want 1", n)
	}
	decide("sub:bob") // a second error within the warn interval: not logged
	clock.Advance(limitProviderErrorTTL)
	decide("sub:alice") // asked again: a third error, logged with 1 suppressed? not yet: 5s < 10s
	clock.Advance(10 * time.Second)
	decide("sub:bob")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], `msg="rlkit: limit provider failed; the plan's or rule's limits apply" rule=search key=sub:alice error="db down" suppressed=0`) ||
		!strings.Contains(lines[1], "key=sub:bob error=\"db down\" suppressed=2") {
		t.Errorf("logged:\n%s\nwant two lines, the second with 2 suppressed", buf.String())
	}
	if n := q.count("sub:alice search"); n != 2 {
		t.Errorf("after the error TTL: provider asked %d times, want 2", n)
	}
	// Back up: the next call after the error TTL gives alice her limits.
	q.set("sub:alice search", perMinute(7), nil)
	clock.Advance(limitProviderErrorTTL)
	if d := decide("sub:alice"); d.Plan != "pro" || d.Rule.Plan() != CustomPlan {
		t.Errorf("provider back: plan %q, rule's %q; want pro, custom", d.Plan, d.Rule.Plan())
	}
}

func TestLimitProviderInvalid(t *testing.T) {
	for _, tc := range []struct {
		name string
		path string
		lims []algo.Limit
		msg  string
	}{
		{"no limits", "/api/search", []algo.Limit{}, `error="policy \"search\": 0 limits, want 1 to 4"`},
		{"zero count", "/api/search", []algo.Limit{{Count: 0, Period: time.Second}}, `error="policy \"search\": count 0`},
		{"two per period", "/api/search", []algo.Limit{{Count: 1, Period: time.Second}, {Count: 2, Period: time.Second}}, `two limits per 1s`},
		{"period under a second", "/api/search", []algo.Limit{{Count: 5, Period: 1500 * time.Millisecond}}, `the period must be a whole number of seconds`},
		{"burst on a fixed window", "/api/search", []algo.Limit{{Count: 5, Period: time.Second, Burst: 9}}, `burst 9: fixed_window counts without a burst`},
		{"weight above capacity", "/api/upload/batch", perMinute(5), `weight 10 of \"/api/upload/batch\" exceeds the capacity 5`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rule := "search"
			if strings.HasPrefix(tc.path, "/api/upload") {
				rule = "upload"
			}
			q := newQuotas(map[string][]algo.Limit{"sub:alice " + rule: tc.lims})
			var buf bytes.Buffer
			lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithClock(store.NewManualClock(time.Unix(1_700_000_000, 0))),
				WithLimitProvider(q), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
			for range 2 {
				if d := lim.Decide(context.Background(), "GET", Path(tc.path), "sub:alice", false); d.Rule != lim.Config().Rule(rule) || d.Plan != "" {
					t.Fatalf("invalid limits applied: policy %q", d.Rule.Policy.Name)
				}
			}
			if n := q.count("sub:alice " + rule); n != 1 {
				t.Errorf("provider asked %d times, want 1 (an invalid answer is cached)", n)
			}
			if out := buf.String(); strings.Count(out, "\n") != 1 || !strings.Contains(out, "rlkit: limit provider gave invalid limits") || !strings.Contains(out, tc.msg) {
				t.Errorf("logged %q, want one line with %s", out, tc.msg)
			}
		})
	}
}

func TestLimitProviderCacheBound(t *testing.T) {
	q := newQuotas(map[string][]algo.Limit{})
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(nopStore{}), WithClock(store.NewManualClock(time.Unix(1_700_000_000, 0))),
		WithLimitProvider(q), WithLimitCache(64, time.Hour))
	ctx := context.Background()
	lim.Decide(ctx, "GET", "/api/search", "victim", false)
	for i := range 10_000 {
		lim.Decide(ctx, "GET", "/api/search", "flood-"+strconv.Itoa(i), false)
	}
	if n := lim.provider.cache.len(); n != 64 {
		t.Errorf("after 10,001 callers the cache holds %d answers, want 64", n)
	}
	if n := q.total.Load(); n != 10_001 {
		t.Errorf("provider asked %d times, want 10,001", n)
	}
	// The oldest answer went first: the victim is asked again; the last
	// caller is not.
	lim.Decide(ctx, "GET", "/api/search", "victim", false)
	lim.Decide(ctx, "GET", "/api/search", "flood-9999", false)
	if v, f := q.count("victim search"), q.count("flood-9999 search"); v != 2 || f != 1 {
		t.Errorf("provider asked %d times for the victim and %d for the last caller, want 2 and 1", v, f)
	}
	// The default size.
	lim = NewLimiter(parseTiers(t, tiersYAML), WithStore(nopStore{}), WithLimitProvider(q))
	for i := range 4 * defaultLimitCacheSize { // enough to fill every shard
		lim.Decide(ctx, "GET", "/api/search", "flood-"+strconv.Itoa(i), false)
	}
	if n := lim.provider.cache.len(); n != defaultLimitCacheSize {
		t.Errorf("default cache holds %d answers, want %d", n, defaultLimitCacheSize)
	}
}

// TestLimitProviderCoalesces: requests that miss together for one caller
// wait for one call.
func TestLimitProviderCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQuotas(map[string][]algo.Limit{"sub:alice search": perMinute(100)})
		q.block = make(chan struct{})
		lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithLimitProvider(q))
		var wg sync.WaitGroup
		plans := make([]string, 20)
		for i := range plans {
			wg.Go(func() {
				d := lim.Decide(context.Background(), "GET", "/api/search", "sub:alice", false)
				plans[i] = d.Rule.Plan()
			})
		}
		synctest.Wait() // all 20 are blocked: one in the call, 19 waiting for it
		inFlight := q.total.Load()
		close(q.block)
		wg.Wait()
		if inFlight != 1 {
			t.Fatalf("%d calls in flight for one caller, want 1", inFlight)
		}
		for i, p := range plans {
			if p != CustomPlan {
				t.Fatalf("request %d: plan %q, want custom", i, p)
			}
		}
		if n := q.total.Load(); n != 1 {
			t.Errorf("provider asked %d times, want 1", n)
		}
	})
}

// TestLimitProviderBusy: with every call slot taken, a new caller waits
// for one (it does not count under other limits than its own while the
// provider catches up), and only when none frees within
// limitProviderTimeout counts under the rule's limits, without a call.
func TestLimitProviderBusy(t *testing.T) {
	for _, free := range []bool{true, false} {
		t.Run(map[bool]string{true: "slot frees", false: "stays busy"}[free], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := newQuotas(map[string][]algo.Limit{"new search": perMinute(100)})
				q.block = make(chan struct{})
				lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithLimitProvider(q))
				var wg sync.WaitGroup
				for i := range maxLimitProviderCalls {
					wg.Go(func() { lim.Decide(context.Background(), "GET", "/api/search", "slow-"+strconv.Itoa(i), false) })
				}
				synctest.Wait()
				start := time.Now()
				var plan atomic.Pointer[string]
				var took atomic.Int64
				go func() {
					d := lim.Decide(context.Background(), "GET", "/api/search", "new", false)
					p := d.Rule.Plan()
					took.Store(int64(time.Since(start)))
					plan.Store(&p)
				}()
				synctest.Wait()
				if p := plan.Load(); p != nil {
					t.Fatalf("every call busy: decided at once (plan %q), want a wait for a call slot", *p)
				}
				if free {
					time.Sleep(limitProviderTimeout / 2)
					close(q.block)
					wg.Wait()
					synctest.Wait()
					if p, calls := plan.Load(), q.count("new search"); p == nil || *p != CustomPlan || calls != 1 || time.Duration(took.Load()) != limitProviderTimeout/2 {
						t.Fatalf("slot freed after %v: plan %v after %v, provider asked %d times; want custom, asked once", limitProviderTimeout/2, p, time.Duration(took.Load()), calls)
					}
					return
				}
				time.Sleep(2 * limitProviderTimeout)
				synctest.Wait()
				p, calls := plan.Load(), q.count("new search")
				close(q.block)
				wg.Wait()
				if p == nil || *p != "" || calls != 0 || time.Duration(took.Load()) != limitProviderTimeout {
					t.Fatalf("every call busy for good: plan %v after %v, provider asked %d times; want the rule's limits after %v, no call", p, time.Duration(took.Load()), calls, limitProviderTimeout)
				}
				if d := lim.Decide(context.Background(), "GET", "/api/search", "new", false); d.Rule.Plan() != CustomPlan {
					t.Errorf("calls free again: plan %q, want custom (the busy answer is not cached)", d.Rule.Plan())
				}
			})
		})
	}
}

// TestLimitProviderCancelledWaiter: a request cancelled while it waits
// for the answer another is asking for still waits, and counts under the
// limits the answer gives: a client that half-closes its connection does
// not pick other limits than its own.
func TestLimitProviderCancelledWaiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := newQuotas(map[string][]algo.Limit{"sub:alice search": perMinute(100)})
		q.block = make(chan struct{})
		lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithLimitProvider(q))
		go lim.Decide(context.Background(), "GET", "/api/search", "sub:alice", false)
		synctest.Wait()
		ctx, cancel := context.WithCancel(context.Background())
		var plan atomic.Pointer[string]
		done := make(chan struct{})
		go func() {
			d := lim.Decide(ctx, "GET", "/api/search", "sub:alice", false)
			p := d.Rule.Plan()
			plan.Store(&p)
			close(done)
		}()
		synctest.Wait()
		cancel()
		synctest.Wait()
		if p := plan.Load(); p != nil {
			t.Fatalf("cancelled waiter decided before the answer came: plan %q", *p)
		}
		close(q.block)
		<-done
		if p := *plan.Load(); p != CustomPlan {
			t.Errorf("cancelled waiter: plan %q, want custom", p)
		}
	})
}

func TestLimitProviderReload(t *testing.T) {
	q := newQuotas(map[string][]algo.Limit{"sub:alice upload": perMinute(10)})
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithClock(store.NewManualClock(time.Unix(1_700_000_000, 0))), WithLimitProvider(q))
	ctx := context.Background()
	if d := lim.Decide(ctx, "GET", "/api/upload/batch", "sub:alice", false); d.Rule.Plan() != CustomPlan {
		t.Fatalf("plan %q, want custom", d.Rule.Plan())
	}
	// The batch weight grows past alice's capacity: the cached answer
	// must not apply under the new rule.
	lim.SetConfig(parseTiers(t, strings.Replace(tiersYAML, `"/api/upload/batch": 10`, `"/api/upload/batch": 20`, 1)))
	d := lim.Decide(ctx, "GET", "/api/upload/batch", "sub:alice", false)
	if d.Rule.Plan() != "" || d.Cost != 20 || q.count("sub:alice upload") != 2 {
		t.Errorf("after a reload: plan %q, cost %d, provider asked %d times; want the rule's limits, asked again", d.Plan, d.Cost, q.count("sub:alice upload"))
	}
}

func TestLimitProviderReset(t *testing.T) {
	q := newQuotas(map[string][]algo.Limit{"sub:alice search": perMinute(7)})
	st := newFakeStore()
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(st), WithClock(store.NewManualClock(time.Unix(1_700_000_000, 0))), WithLimitProvider(q))
	ctx := context.Background()
	lim.Decide(ctx, "GET", "/api/search", "sub:alice", false)
	if cleared, err := lim.Reset(ctx, "sub:alice", "search"); !cleared || err != nil {
		t.Fatalf("Reset = %v, %v", cleared, err)
	}
	if last := st.resets[len(st.resets)-1]; last.policy.Name != "search@custom" {
		t.Errorf("last reset %q, want search@custom", last.policy.Name)
	}
	if d := lim.Decide(ctx, "GET", "/api/search", "sub:alice", false); d.Result.Remaining != 6 {
		t.Errorf("after Reset: %d left, want 6", d.Result.Remaining)
	}
}

// TestLimitProviderAllocs: a cached answer costs no allocation.
func TestLimitProviderAllocs(t *testing.T) {
	q := newQuotas(map[string][]algo.Limit{"sub:alice search": perMinute(1_000_000)})
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(nopStore{}), WithLimitProvider(q))
	f := &Flow[string]{Limiter: lim, Key: func(id string) (string, error) { return id, nil }}
	ctx := context.Background()
	for _, id := range []string{"sub:alice", "sub:bob"} { // positive and negative answers
		f.Decide(ctx, id, "GET", "/api/search", "")
		if n := testing.AllocsPerRun(100, func() { _, _ = f.Decide(ctx, id, "GET", "/api/search", "") }); n != 0 {
			t.Errorf("%s: %v allocations per request, want 0", id, n)
		}
	}
}

// stuckProvider is a LimitProvider whose calls ignore their context: they
// return only when release is closed (a database driver without a
// deadline, a call stuck on a dead connection).
type stuckProvider struct {
	release chan struct{}
	calls   atomic.Int64
}

func (p *stuckProvider) Limits(ctx context.Context, key, rule string) ([]algo.Limit, bool, error) {
	p.calls.Add(1)
	<-p.release
	return []algo.Limit{{Count: 100, Period: time.Minute}}, true, nil
}

// TestLimitProviderIgnoresContext: LimitProvider's doc promises that a
// call's context ends after limitProviderTimeout, and provider.rule's
// comment that a waiter's answer "comes within twice
// limitProviderTimeout"; a waiter no longer leaves on its own context's
// cancellation. A provider that does not honour its context must then not
// hold its callers (nor every later request of the same caller, which
// waits on the same entry) for good: they count under the rule's limits
// once the bound has passed.
func TestLimitProviderIgnoresContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &stuckProvider{release: make(chan struct{})}
		defer close(p.release)
		lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithLimitProvider(p))
		var asker, waiter atomic.Pointer[Decision]
		go func() {
			d := lim.Decide(context.Background(), "GET", "/api/search", "sub:alice", false)
			asker.Store(&d)
		}()
		synctest.Wait() // the asker is in the provider's call
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			d := lim.Decide(ctx, "GET", "/api/search", "sub:alice", false)
			waiter.Store(&d)
		}()
		synctest.Wait()
		cancel() // the client of the waiting request goes away
		time.Sleep(3 * limitProviderTimeout)
		synctest.Wait()
		if d := waiter.Load(); d == nil {
			t.Errorf("a request waiting for another's provider call is still waiting after %v (the call ignores its context)", 3*limitProviderTimeout)
		} else if d.Plan != "" || !d.Allowed {
			t.Errorf("waiter: plan %q, allowed %v; want the rule's limits, allowed", d.Plan, d.Allowed)
		}
		if d := asker.Load(); d == nil {
			t.Errorf("the request that asked the provider is still waiting after %v, past limitProviderTimeout (the call ignores its context)", 3*limitProviderTimeout)
		}
	})
}
