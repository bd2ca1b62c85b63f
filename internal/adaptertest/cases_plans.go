package adaptertest

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/algo"
)

// PlanHeader is the header the plan cases carry the caller's plan in
// (Setup.PlanHeader).
const PlanHeader = "X-Plan"

// plansConfig is ExampleConfig with two plans: free lowers search and the
// default limit, pro gives search two limits and keeps the default's.
const plansConfig = ExampleConfig + `  tiers:
    free:
      default: "5/minute"
      rules:
        search: "2/second"
    pro:
      rules:
        search: ["100/minute", "5/second"]
`

// proSearch is the draft headers of pro's search, with r1m and r1s left.
func proSearch(r1m, r1s string) []string {
	return []string{
		hPolicy, `"search-1m";q=100;w=60, "search-1s";q=5;w=1`,
		hRateLimit, `"search-1m";r=` + r1m + `;t=60, "search-1s";r=` + r1s + `;t=1`,
	}
}

// planCases check plans (the tiers section, WithPlan) through every
// adapter: each plan's limits in the headers and the 429, each plan's own
// counters (policy "<rule>@<plan>", the rule named as before in headers,
// body and events), and the rules' own limits for no plan or an unknown
// one.
func planCases() []testCase {
	plan := func(p string) []string { return []string{PlanHeader, p} }
	planHeader := func(s *Setup) { s.PlanHeader = PlanHeader }
	// custom is a step counted under custom limits by a caller on plan p.
	custom := func(p string, s step) step { s.eventPlan = p; return s }
	// looked is a step after which n plan lookups have been made in all.
	lookups := new(atomic.Int64)
	looked := func(n int64, s step) step {
		s.after = func() string {
			if got := lookups.Load(); got != n {
				return fmt.Sprintf("%d plan lookups in all, want %d", got, n)
			}
			return ""
		}
		return s
	}
	// alice has a quota of her own for search, 3/minute, kept under her
	// store key (her X-User identity's keyed hash).
	aliceKey := keyer.Key(adapter.HeaderIdentity(UserHeader, "alice"))
	quotas := core.LimitProviderFunc(func(_ context.Context, key, rule string) ([]algo.Limit, bool, error) {
		if key == aliceKey && rule == "search" {
			return []algo.Limit{{Count: 3, Period: time.Minute}}, true, nil
		}
		return nil, false, nil
	})
	return []testCase{
		{
			name:   "PlansFreeAndPro",
			config: plansConfig,
			setup:  planHeader,
			steps: seq(
				hit(get("/api/search", with(alice, plan("free"))...), ok(draft("search", 2, 1, 1, 1)...), "X-User:alice search@free 1"),
				hit(get("/api/search", with(alice, plan("free"))...), ok(draft("search", 2, 1, 0, 1)...), "X-User:alice search@free 1"),
				hit(get("/api/search", with(alice, plan("free"))...), limited("search", "1", draft("search", 2, 1, 0, 1)...), "X-User:alice search@free 1"),
				// The same caller on pro: pro's limits, pro's own counters.
				hit(get("/api/search", with(alice, plan("pro"))...), ok(proSearch("99", "4")...), "X-User:alice search@pro 1"),
				hit(get("/api/search", with(alice, plan("pro"))...), ok(proSearch("98", "3")...), "X-User:alice search@pro 1"),
				// Back on free: free's counter, still spent.
				hit(get("/api/search", with(alice, plan("free"))...), limited("search", "1", draft("search", 2, 1, 0, 1)...), "X-User:alice search@free 1"),
				// No plan, or one the configuration lacks: the rule's own
				// limits, under the rule's own counters.
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9, 1)...), "X-User:alice search 1"),
				hit(get("/api/search", with(alice, plan("gold"))...), ok(draft("search", 10, 1, 8, 1)...), "X-User:alice search 1"),
				hit(get("/api/search", with(alice, plan(""))...), ok(draft("search", 10, 1, 7, 1)...), "X-User:alice search 1"),
				// Another caller on free counts apart.
				hit(get("/api/search", with(bob, plan("free"))...), ok(draft("search", 2, 1, 1, 1)...), "X-User:bob search@free 1"),
				// The plan's default limit; pro, which gives none, has the
				// file's, under its own counter; a rule free does not list
				// keeps its limits, under free's counter.
				hit(get("/api/other", with(alice, plan("free"))...), ok(draft("default", 5, 60, 4, 60)...), "X-User:alice default@free 1"),
				hit(get("/api/other", with(alice, plan("pro"))...), ok(draft("default", 120, 60, 119, 60)...), "X-User:alice default@pro 1"),
				hit(get("/api/other", alice...), ok(draft("default", 120, 60, 119, 60)...), "X-User:alice default 1"),
				hit(get("/api/kb/k1/docs/upload/batch", with(alice, plan("free"))...), ok(draft("upload", 30, 60, 20, 60)...), "X-User:alice upload@free 10"),
				// A second later free's window has passed.
				advance(time.Second),
				hit(get("/api/search", with(alice, plan("free"))...), ok(draft("search", 2, 1, 1, 1)...), "X-User:alice search@free 1"),
				// Exempt paths and super-admins are not counted, whatever
				// the plan.
				hit(get("/health", with(alice, plan("free"))...), ok(), ""),
				hit(get("/api/search", with(alice, plan("free"), superAdmin)...), ok(), ""),
			),
		},
		{
			// A LimitProvider's limits (a core option) come before the
			// plan's: headers and the 429 show them, under counters of
			// their own ("search@custom"); a caller it has no answer for
			// keeps its plan's limits.
			name:   "PlansCustomLimits",
			config: plansConfig,
			setup: func(s *Setup) {
				s.PlanHeader = PlanHeader
				s.LimiterOptions = append(s.LimiterOptions, core.WithLimitProvider(quotas))
			},
			// The events name the caller's plan, as Decision.Plan does.
			steps: seq(
				custom("pro", hit(get("/api/search", with(alice, plan("pro"))...), ok(draft("search", 3, 60, 2, 60)...), "X-User:alice search@custom 1")),
				custom("free", hit(get("/api/search", with(alice, plan("free"))...), ok(draft("search", 3, 60, 1, 60)...), "X-User:alice search@custom 1")),
				custom("", hit(get("/api/search", alice...), ok(draft("search", 3, 60, 0, 60)...), "X-User:alice search@custom 1")),
				custom("", hit(get("/api/search", with(alice, plan("gold"))...), limited("search", "60", draft("search", 3, 60, 0, 60)...), "X-User:alice search@custom 1")),
				custom("pro", hit(get("/api/search", with(alice, plan("pro"))...), limited("search", "60", draft("search", 3, 60, 0, 60)...), "X-User:alice search@custom 1")),
				// No answer for alice's other rules, nor for bob.
				hit(get("/api/other", with(alice, plan("free"))...), ok(draft("default", 5, 60, 4, 60)...), "X-User:alice default@free 1"),
				hit(get("/api/search", with(bob, plan("pro"))...), ok(proSearch("99", "4")...), "X-User:bob search@pro 1"),
			),
		},
		{
			// core.WithLimitCache caches each caller's plan lookup: one per
			// identity per TTL, through every adapter; meanwhile the plan
			// is the one looked up, whatever the request says.
			name:   "PlansCached",
			config: plansConfig,
			setup: func(s *Setup) {
				s.PlanHeader = PlanHeader
				s.LimiterOptions = append(s.LimiterOptions, core.WithLimitCache(0, time.Minute))
				lookups.Store(0)
				s.PlanLookup = func(v string) string {
					lookups.Add(1)
					return v
				}
			},
			steps: seq(
				looked(1, hit(get("/api/search", with(alice, plan("free"))...), ok(draft("search", 2, 1, 1, 1)...), "X-User:alice search@free 1")),
				looked(1, hit(get("/api/search", with(alice, plan("free"))...), ok(draft("search", 2, 1, 0, 1)...), "X-User:alice search@free 1")),
				looked(1, hit(get("/api/search", with(alice, plan("pro"))...), limited("search", "1", draft("search", 2, 1, 0, 1)...), "X-User:alice search@free 1")),
				looked(2, hit(get("/api/search", with(bob, plan("pro"))...), ok(proSearch("99", "4")...), "X-User:bob search@pro 1")),
				looked(2, hit(get("/api/other", with(bob, plan("free"))...), ok(draft("default", 120, 60, 119, 60)...), "X-User:bob default@pro 1")),
				// Exempt paths and super-admins look nothing up.
				looked(2, hit(get("/health", with(alice, plan("free"))...), ok(), "")),
				looked(2, hit(get("/api/search", with(alice, plan("free"), superAdmin)...), ok(), "")),
				advance(time.Minute),
				looked(3, hit(get("/api/search", with(alice, plan("pro"))...), ok(proSearch("99", "4")...), "X-User:alice search@pro 1")),
				looked(3, hit(get("/api/search", with(alice, plan("free"))...), ok(proSearch("98", "3")...), "X-User:alice search@pro 1")),
			),
		},
		{
			// The application's own limiter, given to New, swaps in a file whose
			// pro plan changed: pro's search keeps what alice spent under its
			// minute (48 of 50 left after one more), its second dropped;
			// free's, the same, keeps counting.
			name:    "PlansReload",
			config:  plansConfig,
			setup:   planHeader,
			limiter: true,
			logs:    []string{swapped},
			steps: seq(
				hit(get("/api/search", with(alice, plan("free"))...), ok(draft("search", 2, 1, 1, 1)...), "X-User:alice search@free 1"),
				hit(get("/api/search", with(alice, plan("pro"))...), ok(proSearch("99", "4")...), "X-User:alice search@pro 1"),
				swap(strings.Replace(plansConfig, `["100/minute", "5/second"]`, `"50/minute"`, 1)),
				hit(get("/api/search", with(alice, plan("pro"))...), ok(draft("search", 50, 60, 48, 60)...), "X-User:alice search@pro 1"),
				hit(get("/api/search", with(alice, plan("free"))...), ok(draft("search", 2, 1, 0, 1)...), "X-User:alice search@free 1"),
			),
		},
	}
}
