package prom_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// TestDeniedCountsRefusals: rlkit_decisions_total{outcome="denied"} is
// documented (and used by the Grafana dashboard's "Denials per second by
// rule: requests answered 429") as the requests refused. Under a rule
// counted by outcome, a request served while the counter filled gets,
// from Limiter.Complete, an event OutcomeDenied with Allowed true: it
// was served, not refused, and must not count as a denial.
func TestDeniedCountsRefusals(t *testing.T) {
	m, reg := newMetrics(t)
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "1/minute"
      count: failures
`), "r.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0))
	store := memstore.New(memstore.WithClock(clock))
	t.Cleanup(func() { _ = store.Close() })
	lim := core.NewLimiter(cfg, core.WithStore(store), core.WithObserver(m.Observe), core.WithClock(clock))
	ctx := context.Background()
	// Two requests in flight together: both pass the check, both fail.
	a := lim.Decide(ctx, "POST", "/login", "alice", false)
	b := lim.Decide(ctx, "POST", "/login", "alice", false)
	if !a.Allowed || !b.Allowed {
		t.Fatal("a request in flight was refused")
	}
	lim.Complete(ctx, &a, 401)
	lim.Complete(ctx, &b, 401) // its count is denied: the counter is full
	// The third is refused before its handler: the one 429.
	if d := lim.Decide(ctx, "POST", "/login", "alice", false); d.Allowed || d.Status() != 429 {
		t.Fatalf("third request: allowed %v, status %d", d.Allowed, d.Status())
	}
	if v, _ := value(t, reg, "rlkit_decisions_total", map[string]string{"rule": "login", "outcome": "denied"}); v != 1 {
		t.Errorf(`rlkit_decisions_total{outcome="denied"} = %v after one 429; want 1 (a request served is not a denial)`, v)
	}
}
