package core_test

import (
	"context"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// variantEnv is a limiter on a memory store and a manual clock, both
// starting at the top of an hour, that reloads YAML.
type variantEnv struct {
	t     *testing.T
	clock *store.ManualClock
	lim   *core.Limiter
}

func newVariantEnv(t *testing.T, opts ...core.Option) *variantEnv {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0).Truncate(time.Hour).Add(time.Hour))
	opts = append([]core.Option{core.WithStore(memstore.New(memstore.WithClock(clock))), core.WithClock(clock),
		core.WithLogger(slog.New(slog.DiscardHandler))}, opts...)
	return &variantEnv{t: t, clock: clock, lim: core.NewLimiter(nil, opts...)}
}

func (e *variantEnv) load(y string) {
	e.t.Helper()
	cfg, err := core.ParseConfig([]byte(y), "rl.yaml")
	if err != nil {
		e.t.Fatal(err)
	}
	e.lim.SetConfig(cfg)
}

// expect decides alice's request on path under plan and checks it.
func (e *variantEnv) expect(path, plan string, allowed bool, remaining int64) core.Decision {
	e.t.Helper()
	d := e.lim.DecidePlan(context.Background(), "GET", core.Path(path), "alice", plan, false)
	if d.Err != nil || d.Allowed != allowed || d.Result.Remaining != remaining {
		e.t.Fatalf("%s on plan %q: allowed %v, %d left, error %v; want %v, %d", path, plan, d.Allowed, d.Result.Remaining, d.Err, allowed, remaining)
	}
	return d
}

// TestReloadKeepsPlanCounts: a plan's variant of a rule counts under its
// own policy ("search@pro"), apart from the rule's: a reload that raises
// the plan's limit keeps what the plan's callers spent, and so does one
// that raises the limit of a rule the plan does not list (its variant
// counts under the rule's limits). The rule's own counters stay apart.
func TestReloadKeepsPlanCounts(t *testing.T) {
	const y = `rate_limit:
  enabled: true
  rules:
    - {name: search, paths: ["/search"], limit: "%SEARCH%"}
    - {name: upload, paths: ["/upload"], limit: "%UPLOAD%"}
  tiers:
    pro:
      rules:
        search: "%PRO%"
`
	e := newVariantEnv(t)
	e.load(replace(y, "%SEARCH%", "10/hour", "%UPLOAD%", "2/hour", "%PRO%", "2/hour"))
	e.expect("/search", "pro", true, 1)
	e.expect("/search", "pro", true, 0)
	e.expect("/search", "pro", false, 0)
	e.expect("/search", "", true, 9) // the rule's own counter
	e.expect("/upload", "pro", true, 1)
	e.load(replace(y, "%SEARCH%", "10/hour", "%UPLOAD%", "4/hour", "%PRO%", "5/hour"))
	e.expect("/search", "pro", true, 2)
	e.expect("/upload", "pro", true, 2)
	e.expect("/search", "", true, 8)
}

// TestReloadKeepsCustomCounts: a LimitProvider's limits count under
// "<rule>@custom"; a caller whose limit the provider raises keeps what
// it spent (the new limit applies when the cached answer expires).
func TestReloadKeepsCustomCounts(t *testing.T) {
	var count atomic.Int64
	count.Store(2)
	p := core.LimitProviderFunc(func(context.Context, string, string) ([]algo.Limit, bool, error) {
		return []algo.Limit{{Count: count.Load(), Period: time.Hour}}, true, nil
	})
	e := newVariantEnv(t, core.WithLimitProvider(p), core.WithLimitCache(100, 30*time.Second))
	e.load("rate_limit:\n  enabled: true\n  rules:\n    - {name: search, paths: [\"/search\"], limit: \"10/hour\"}\n")
	e.expect("/search", "", true, 1)
	e.expect("/search", "", true, 0)
	e.expect("/search", "", false, 0)
	count.Store(5)
	e.clock.Advance(30 * time.Second)
	e.expect("/search", "", true, 2)
	e.expect("/search", "", true, 1)
	if d := e.expect("/search", "", true, 0); d.Rule.Plan() != core.CustomPlan {
		t.Fatalf("rule plan %q, want %q", d.Rule.Plan(), core.CustomPlan)
	}
	e.expect("/search", "", false, 0)
}

// TestReloadKeepsPenaltyCounts: a penalty's denials ("<rule>!denials")
// carry over a new after, and its bans ("<rule>!ban") a rule whose ban
// stays; a new ban duration is a new period, which lifts every ban.
func TestReloadKeepsPenaltyCounts(t *testing.T) {
	const y = `rate_limit:
  enabled: true
  rules:
    - {name: api, paths: ["/api"], limit: "1/hour", penalty: {after: %AFTER%, within: 1h, ban: %BAN%}}
`
	e := newVariantEnv(t)
	e.load(replace(y, "%AFTER%", "3", "%BAN%", "1h"))
	e.expect("/api", "", true, 0)
	e.expect("/api", "", false, 0) // denial 1
	e.expect("/api", "", false, 0) // denial 2
	e.load(replace(y, "%AFTER%", "4", "%BAN%", "1h"))
	if d := e.expect("/api", "", false, 0); d.Penalty { // denial 3 of 4
		t.Fatal("banned at the third denial: after 4 applies")
	}
	if d := e.expect("/api", "", false, 0); !d.Penalty { // denial 4 of 4: the ban
		t.Fatal("not banned at the fourth denial: the denials before the reload were lost")
	}
	e.clock.Advance(time.Minute)
	e.load(replace(y, "%AFTER%", "100", "%BAN%", "1h"))
	if d := e.expect("/api", "", false, 0); !d.Penalty || d.Result.RetryAfter != 59*time.Minute {
		t.Fatalf("penalty %v, Retry-After %v: want the ban kept, 59m left", d.Penalty, d.Result.RetryAfter)
	}
	e.load(replace(y, "%AFTER%", "100", "%BAN%", "2h"))
	if d := e.expect("/api", "", false, 0); d.Penalty {
		t.Fatal("still banned after the ban's duration changed: a new period is a new counter")
	}
}

// replace replaces each old, new pair of kv in s.
func replace(s string, kv ...string) string { return strings.NewReplacer(kv...).Replace(s) }
