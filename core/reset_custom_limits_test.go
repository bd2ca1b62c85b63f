package core_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// TestResetCustomLimitsAfterCacheExpiry: Limiter.Reset must lift a
// caller's custom limits (a LimitProvider's) whatever the state of the
// provider's cache. A customer with a quota of 2 a day spends it, makes
// no request for longer than the cache's TTL, and an operator resets it:
// its next request must pass: a Reset that forgot custom counters only
// while the answer is cached would silently leave the customer refused
// until the day ends.
func TestResetCustomLimitsAfterCacheExpiry(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "100/minute"
`), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.New(memstore.WithClock(clock))
	t.Cleanup(func() { _ = store.Close() })
	quota := core.LimitProviderFunc(func(_ context.Context, key, rule string) ([]algo.Limit, bool, error) {
		if key == "sub:acme" && rule == "search" {
			return []algo.Limit{{Count: 2, Period: 24 * time.Hour}}, true, nil
		}
		return nil, false, nil
	})
	lim := core.NewLimiter(cfg, core.WithStore(store), core.WithClock(clock), core.WithLimitProvider(quota), core.WithLimitCache(0, time.Minute))
	ctx := context.Background()
	for i, want := range []bool{true, true, false} {
		if d := lim.Decide(ctx, "GET", "/api/search", "sub:acme", false); d.Allowed != want || d.Rule.Plan() != core.CustomPlan {
			t.Fatalf("request %d: allowed %v, plan %q; want %v, custom", i, d.Allowed, d.Rule.Plan(), want)
		}
	}
	clock.Advance(2 * time.Minute) // the provider's answer is no longer cached
	cleared, err := lim.Reset(ctx, "sub:acme", "search")
	if err != nil {
		t.Fatal(err)
	}
	if !cleared {
		t.Errorf("Reset = false: the custom counter, spent, was live")
	}
	if d := lim.Decide(ctx, "GET", "/api/search", "sub:acme", false); !d.Allowed {
		t.Errorf("after Reset: refused (%d left, retry after %v): the custom counter was not reset", d.Result.Remaining, d.Result.RetryAfter)
	}
}

// TestResetCustomLimitsAfterReload: the same after a reload of the same
// file: the provider's answers are cached by rule, the reloaded rules are
// new, so Reset finds no cached answer and leaves the custom counter,
// which the next request (same limits, same policy) finds again.
func TestResetCustomLimitsAfterReload(t *testing.T) {
	const yaml = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "100/minute"
`
	cfg, err := core.ParseConfig([]byte(yaml), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	store := memstore.New(memstore.WithClock(clock))
	t.Cleanup(func() { _ = store.Close() })
	quota := core.LimitProviderFunc(func(_ context.Context, key, rule string) ([]algo.Limit, bool, error) {
		return []algo.Limit{{Count: 1, Period: time.Hour}}, true, nil
	})
	lim := core.NewLimiter(cfg, core.WithStore(store), core.WithClock(clock), core.WithLimitProvider(quota), core.WithLogger(slog.New(slog.DiscardHandler)))
	ctx := context.Background()
	lim.Decide(ctx, "GET", "/api/search", "sub:acme", false)
	if d := lim.Decide(ctx, "GET", "/api/search", "sub:acme", false); d.Allowed {
		t.Fatal("second request allowed under a custom 1/hour")
	}
	again, err := core.ParseConfig([]byte(yaml), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lim.SetConfig(again)
	if cleared, err := lim.Reset(ctx, "sub:acme", "search"); err != nil || !cleared {
		t.Errorf("Reset after a reload = %v, %v; want true, nil", cleared, err)
	}
	if d := lim.Decide(ctx, "GET", "/api/search", "sub:acme", false); !d.Allowed {
		t.Errorf("after Reset: refused: the custom counter was not reset")
	}
}
