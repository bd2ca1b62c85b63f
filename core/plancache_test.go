package core

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"
	"unsafe"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// planReq is a request of planFlow: the caller and the plan its lookup
// finds.
type planReq struct{ id, plan string }

// planFlow is a Flow over planReq whose plan lookup counts its calls.
func planFlow(l *Limiter, lookups *atomic.Int64) *Flow[planReq] {
	return &Flow[planReq]{
		Limiter: l,
		Key:     func(r planReq) (string, error) { return r.id, nil },
		Plan: func(r planReq) string {
			lookups.Add(1)
			return r.plan
		},
	}
}

func (f *Flow[R]) decideT(t *testing.T, r R, path string) Decision {
	t.Helper()
	d, err := f.Decide(context.Background(), r, "GET", Path(path), "")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestPlanCache: with WithLimitCache, a caller's plan is looked up once
// per TTL, and that plan applies meanwhile; each identity has its own;
// without the option, every request looks it up.
func TestPlanCache(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	var lookups atomic.Int64
	f := planFlow(NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithClock(clock), WithLimitCache(0, time.Minute)), &lookups)
	step := func(r planReq, wantPlan string, wantLookups int64) {
		t.Helper()
		d := f.decideT(t, r, "/api/search")
		if d.Plan != wantPlan || d.Rule.Policy.Name != "search@"+wantPlan || lookups.Load() != wantLookups {
			t.Fatalf("%+v: plan %q, policy %q, %d lookups; want %q, %d", r, d.Plan, d.Rule.Policy.Name, lookups.Load(), wantPlan, wantLookups)
		}
	}
	for range 10 {
		step(planReq{"alice", "free"}, "free", 1)
	}
	// Within the TTL the plan is alice's cached one, whatever the lookup
	// would say now.
	clock.Advance(time.Minute - 1)
	step(planReq{"alice", "pro"}, "free", 1)
	// Another identity is looked up for itself.
	step(planReq{"bob", "pro"}, "pro", 2)
	step(planReq{"bob", "free"}, "pro", 2)
	// Past the TTL: looked up again, once.
	clock.Advance(1)
	for range 5 {
		step(planReq{"alice", "pro"}, "pro", 3)
	}

	// Without the option: every request.
	lookups.Store(0)
	g := planFlow(NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithClock(clock)), &lookups)
	for i := range 5 {
		if d := g.decideT(t, planReq{"alice", "free"}, "/api/search"); d.Plan != "free" || lookups.Load() != int64(i+1) {
			t.Fatalf("uncached request %d: plan %q, %d lookups", i, d.Plan, lookups.Load())
		}
	}
	if g.Limiter.plans != nil {
		t.Error("a limiter without WithLimitCache caches plans")
	}
	// Nor is a plan given with the request (DecidePlan) cached.
	l := f.Limiter
	for _, p := range []string{"free", "pro", "", "free"} {
		if d := l.DecidePlan(context.Background(), "GET", "/api/search", "carol", p, false); d.Plan != p {
			t.Errorf("DecidePlan %q: plan %q", p, d.Plan)
		}
	}
}

// TestPlanCacheBounded: a flood of distinct identities holds at most the
// cache's size of plans, and the oldest are dropped for the newest.
func TestPlanCacheBounded(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	var lookups atomic.Int64
	f := planFlow(NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithClock(clock), WithLimitCache(64, time.Hour)), &lookups)
	for i := range 10_000 {
		f.decideT(t, planReq{"user-" + strconv.Itoa(i), "pro"}, "/api/search")
	}
	if n := f.Limiter.plans.len(); n > 64 || n < 48 {
		t.Fatalf("%d plans cached after 10,000 identities, want at most 64 (and most of them)", n)
	}
	if lookups.Load() != 10_000 {
		t.Fatalf("%d lookups, want 10,000", lookups.Load())
	}
	// The last identity is still cached; the first was dropped.
	f.decideT(t, planReq{"user-9999", "pro"}, "/api/search")
	f.decideT(t, planReq{"user-0", "pro"}, "/api/search")
	if lookups.Load() != 10_001 {
		t.Fatalf("%d lookups, want 10,001 (user-0 again, not user-9999)", lookups.Load())
	}
}

// TestPlanCacheKept: what the cache keeps of a plan is never the
// lookup's own memory (Fiber reuses its buffers): a tier's name is the
// configuration's; another plan, a copy, clipped past 65 bytes, still
// unknown (counted in UnknownPlans at each request).
func TestPlanCacheKept(t *testing.T) {
	cfg := parseTiers(t, tiersYAML)
	buf := []byte("pro")
	if p := keptPlan(cfg, string(buf)); p != "pro" || unsafeData(p) != unsafeData(cfg.tiers["pro"].name) {
		t.Errorf("a tier: kept %q, not the configuration's name", p)
	}
	long := strings.Repeat("x", 1000)
	if p := keptPlan(cfg, long); p != long[:65] || unsafeData(p) == unsafeData(long) {
		t.Errorf("an unknown plan: kept %d bytes, shared %v", len(p), unsafeData(p) == unsafeData(long))
	}
	var lookups atomic.Int64
	f := planFlow(NewLimiter(cfg, WithStore(newFakeStore()), WithLimitCache(0, 0)), &lookups)
	for range 3 {
		if d := f.decideT(t, planReq{"alice", long}, "/api/search"); d.Plan != "" || d.Rule.Policy.Name != "search" {
			t.Fatalf("unknown plan: plan %q, policy %q; want the rule's", d.Plan, d.Rule.Policy.Name)
		}
	}
	if lookups.Load() != 1 || f.Limiter.UnknownPlans() != 3 {
		t.Errorf("%d lookups, %d unknown plans; want 1, 3", lookups.Load(), f.Limiter.UnknownPlans())
	}
}

// TestPlanCacheCoalesces: requests of one caller that miss together wait
// for one lookup, and all count under its answer; a lookup that panics
// leaves nothing cached, and the next request looks up again.
func TestPlanCacheCoalesces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		release := make(chan struct{})
		var lookups atomic.Int64
		l := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithLimitCache(0, 0))
		f := &Flow[planReq]{
			Limiter: l,
			Key:     func(r planReq) (string, error) { return r.id, nil },
			Plan: func(r planReq) string {
				lookups.Add(1)
				<-release
				if r.plan == "panic" {
					panic("plan lookup failed")
				}
				return r.plan
			},
		}
		var wg sync.WaitGroup
		plans := make([]string, 20)
		for i := range plans {
			wg.Go(func() { plans[i] = f.decideT(t, planReq{"alice", "pro"}, "/api/search").Plan })
		}
		synctest.Wait() // one in the lookup, 19 waiting for it
		if n := lookups.Load(); n != 1 {
			t.Fatalf("%d lookups in flight for one caller, want 1", n)
		}
		close(release)
		wg.Wait()
		for i, p := range plans {
			if p != "pro" {
				t.Fatalf("request %d: plan %q, want pro", i, p)
			}
		}
		func() {
			defer func() {
				if v := recover(); v != "plan lookup failed" {
					t.Errorf("recovered %v, want the lookup's panic", v)
				}
			}()
			f.decideT(t, planReq{"bob", "panic"}, "/api/search")
		}()
		if d := f.decideT(t, planReq{"bob", "free"}, "/api/search"); d.Plan != "free" || lookups.Load() != 3 {
			t.Errorf("after a lookup that panicked: plan %q, %d lookups; want free, 3", d.Plan, lookups.Load())
		}
	})
}

// TestPlanCacheCustomLimits: with a LimitProvider too, both caches are
// the option's, apart: a caller's custom limits keep its plan's name in
// Decision.Plan and in the Observer's Event.Plan, the rule they count
// under saying CustomPlan.
func TestPlanCacheCustomLimits(t *testing.T) {
	var events []Event
	q := newQuotas(map[string][]algo.Limit{"alice search": perMinute(7)})
	var lookups atomic.Int64
	l := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithLimitProvider(q), WithLimitCache(0, 0),
		WithObserver(func(e Event) { events = append(events, e) }))
	f := planFlow(l, &lookups)
	for range 3 {
		d := f.decideT(t, planReq{"alice", "pro"}, "/api/search")
		if d.Plan != "pro" || d.Rule.Plan() != CustomPlan || d.Rule.Policy.Name != "search@custom" {
			t.Fatalf("alice: plan %q, rule's plan %q, policy %q; want pro, custom, search@custom", d.Plan, d.Rule.Plan(), d.Rule.Policy.Name)
		}
	}
	if lookups.Load() != 1 || q.total.Load() != 1 {
		t.Errorf("%d plan lookups, %d provider calls; want 1, 1", lookups.Load(), q.total.Load())
	}
	if len(events) != 3 || events[0].Plan != "pro" || events[0].Rule != "search" {
		t.Errorf("events %+v, want three of search on pro", events)
	}
}

// unsafeData is the address of s's bytes.
func unsafeData(s string) *byte { return unsafe.StringData(s) }

// TestPlanCacheHitAllocates: a request whose plan the cache holds
// allocates nothing (on the memory store), as one without a resolver.
func TestPlanCacheHitAllocates(t *testing.T) {
	var lookups atomic.Int64
	st := memstore.New()
	defer st.Close()
	f := planFlow(NewLimiter(parseTiers(t, strings.Replace(tiersYAML, `["10/minute", "4/second"]`, `"2000000000/hour"`, 1)), WithStore(st), WithLimitCache(0, 0)), &lookups)
	ctx := context.Background()
	r := planReq{"alice", "pro"}
	var d Decision
	if err := f.DecideTo(ctx, &d, r, "GET", "/api/search", ""); err != nil || d.Plan != "pro" {
		t.Fatalf("plan %q, %v", d.Plan, err)
	}
	if n := testing.AllocsPerRun(100, func() { _ = f.DecideTo(ctx, &d, r, "GET", "/api/search", "") }); n != 0 {
		t.Errorf("a cached plan: %v allocations per request, want 0", n)
	}
	if lookups.Load() != 1 || !d.Allowed {
		t.Errorf("%d lookups, allowed %v; want 1, true", lookups.Load(), d.Allowed)
	}
}
