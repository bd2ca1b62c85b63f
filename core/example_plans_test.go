package core_test

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func ExampleLimiter_DecidePlan() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/minute"
  tiers:
    free:
      rules:
        search: "1/minute"
    pro:
      rules:
        search: ["100/minute", "5/second"]
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock))))
	for _, plan := range []string{"free", "free", "pro", ""} {
		d := lim.DecidePlan(context.Background(), "GET", "/api/search", "alice", plan, false)
		h := http.Header{}
		d.SetHeaders(h)
		fmt.Printf("%q: %d plan=%q %s\n", plan, d.Status(), d.Plan, h.Get("RateLimit-Policy"))
	}
	// Output:
	// "free": 200 plan="free" "search";q=1;w=60
	// "free": 429 plan="free" "search";q=1;w=60
	// "pro": 200 plan="pro" "search-1m";q=100;w=60, "search-1s";q=5;w=1
	// "": 200 plan="" "search";q=10;w=60
}

func ExampleWithLimitProvider() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/minute"
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	// Quotas negotiated per customer, by store key (Limiter.Key).
	quotas := core.LimitProviderFunc(func(_ context.Context, key, rule string) ([]algo.Limit, bool, error) {
		if key == "sub:acme" && rule == "search" {
			return []algo.Limit{{Count: 1000, Period: time.Minute}}, true, nil
		}
		return nil, false, nil
	})
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock))),
		core.WithClock(clock), core.WithLimitProvider(quotas), core.WithLimitCache(10_000, time.Minute))
	for _, id := range []string{"sub:acme", "sub:alice"} {
		d := lim.Decide(context.Background(), "GET", "/api/search", id, false)
		h := http.Header{}
		d.SetHeaders(h)
		fmt.Printf("%s: limits=%q policy=%s %s\n", id, d.Rule.Plan(), d.Rule.Policy.Name, h.Get("RateLimit"))
	}
	// Output:
	// sub:acme: limits="custom" policy=search@custom "search";r=999;t=40
	// sub:alice: limits="" policy=search "search";r=9;t=40
}
