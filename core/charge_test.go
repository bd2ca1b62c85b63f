package core_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

const chargeYAML = `rate_limit:
  enabled: true
  rules:
    - name: llm
      paths: ["/v1/chat"]
      limit: "100/minute"
      algorithm: token_bucket
      cost: response
    - name: batch
      paths: ["/v1/batch", "/v1/batch/big"]
      limit: "10/minute"
      algorithm: gcra
      weights:
        /v1/batch/big: 4
    - name: audit
      paths: ["/v1/audit"]
      limit: "10/minute"
      algorithm: sliding_window
      mode: shadow
      cost: response
  default: "1000/minute"
`

// chargeEnv is a limiter over a memory store on a manual clock, with an
// observer that keeps every event.
type chargeEnv struct {
	t      *testing.T
	clock  *store.ManualClock
	lim    *core.Limiter
	mu     sync.Mutex
	events []core.Event
}

func newChargeEnv(t *testing.T, yaml string) *chargeEnv {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := &chargeEnv{t: t, clock: store.NewManualClock(time.Unix(1_700_000_040, 0))}
	e.lim = core.NewLimiter(cfg, core.WithClock(e.clock), core.WithObserver(func(ev core.Event) {
		e.mu.Lock()
		e.events = append(e.events, ev)
		e.mu.Unlock()
	}))
	return e
}

// serve decides a request for path as an adapter does, runs a handler
// that reports cost (when cost ≥ 0) with SetCost on the context the
// adapter hands it, and completes the request with status 200. It returns
// the Decision as it was before the handler, with its headers.
func (e *chargeEnv) serve(path string, cost int64) (core.Decision, http.Header) {
	e.t.Helper()
	d := e.lim.Decide(context.Background(), "POST", core.Path(path), "alice", false)
	h := http.Header{}
	if !d.Allowed {
		d.SetLimitHeaders(h)
		return d, h
	}
	d.SetHeaders(h)
	before := d
	ctx := context.Background()
	if d.ChargesResponse() {
		c := d // the copy an adapter puts in the context
		ctx = core.NewContext(ctx, &c)
	}
	if cost >= 0 {
		if got, want := core.SetCost(ctx, cost), d.ChargesResponse(); got != want {
			e.t.Fatalf("SetCost on %s: %v, want %v", path, got, want)
		}
	}
	e.lim.Complete(ctx, &d, http.StatusOK)
	if d.Deferred() {
		e.t.Fatalf("%s: still deferred after Complete", path)
	}
	return before, h
}

// TestChargeByResponseDebt: under 100/minute (token bucket), 99 requests
// that report nothing are charged 1 each; the 100th, admitted with one
// unit left, reports 30: its caller owes 29, and is refused with
// Retry-After 18s (30 units at 600ms), remaining 0 and the reset of its
// debt, until exactly then.
func TestChargeByResponseDebt(t *testing.T) {
	e := newChargeEnv(t, chargeYAML)
	for i := range 99 {
		d, _ := e.serve("/v1/chat", -1)
		if !d.Allowed || d.Result.Remaining != 99-int64(i) {
			t.Fatalf("request %d: allowed=%v remaining=%d, want admitted with %d left (a peek of cost 1)", i, d.Allowed, d.Result.Remaining, 99-i)
		}
	}
	d, h := e.serve("/v1/chat", 30)
	if !d.Allowed || d.Result.Remaining != 0 || d.Cost != 1 {
		t.Fatalf("the 100th: allowed=%v remaining=%d cost=%d, want admitted with 0 left at cost 1", d.Allowed, d.Result.Remaining, d.Cost)
	}
	if got := h.Get("RateLimit"); !strings.Contains(got, "r=0") {
		t.Fatalf("the 100th's RateLimit %q, want r=0", got)
	}
	d, h = e.serve("/v1/chat", 1)
	if d.Allowed || d.Status() != http.StatusTooManyRequests || d.Result.RetryAfter != 18*time.Second {
		t.Fatalf("in debt: allowed=%v status=%d retry=%v, want 429 for 18s", d.Allowed, d.Status(), d.Result.RetryAfter)
	}
	// Full again 129 units from now: 77.4s; the header rounds up.
	if got, want := h.Get("Retry-After"), "18"; got != want {
		t.Fatalf("Retry-After %q, want %q", got, want)
	}
	if got := h.Get("RateLimit"); !strings.Contains(got, "r=0") || !strings.Contains(got, "t=78") {
		t.Fatalf("RateLimit %q in debt, want r=0 and t=78 (the debt's reset)", got)
	}
	e.clock.Advance(18*time.Second - time.Nanosecond)
	if d, _ := e.serve("/v1/chat", -1); d.Allowed {
		t.Fatal("admitted a nanosecond before the debt was paid")
	}
	e.clock.Advance(time.Nanosecond)
	if d, _ := e.serve("/v1/chat", 0); !d.Allowed || d.Result.Remaining != 0 {
		t.Fatalf("when the debt is paid: allowed=%v remaining=%d, want admitted with 0 left", d.Allowed, d.Result.Remaining)
	}
	// That one reported 0: nothing was charged, the unit is still there.
	if d, _ := e.serve("/v1/chat", -1); !d.Allowed {
		t.Fatal("a request that reported cost 0 was charged")
	}
	// The events: Complete reports each charge with what was charged.
	e.mu.Lock()
	defer e.mu.Unlock()
	var costs []int64
	for _, ev := range e.events {
		if ev.Rule == "llm" && ev.Outcome == core.OutcomeAllowed {
			costs = append(costs, ev.Cost)
		}
	}
	if len(costs) != 102 || costs[98] != 1 || costs[99] != 30 || costs[100] != 0 || costs[101] != 1 {
		t.Fatalf("charged events: %d, the last four %v; want 102 ending 1 30 0 1", len(costs), costs[max(len(costs)-4, 0):])
	}
}

// TestChargeByResponseBound: a handler reporting an absurd cost takes its
// caller at most one period's count past the limit.
func TestChargeByResponseBound(t *testing.T) {
	e := newChargeEnv(t, chargeYAML)
	e.serve("/v1/chat", 1<<62)
	d, _ := e.serve("/v1/chat", 1)
	// 100 units past the limit (and the unit the request had): 101 units
	// to wait for, at 600ms each.
	if d.Allowed || d.Result.RetryAfter != 101*600*time.Millisecond {
		t.Fatalf("after an absurd cost: allowed=%v retry=%v, want refused for 60.6s", d.Allowed, d.Result.RetryAfter)
	}
}

// TestChargeDefaultsToTheCostBefore: a handler that reports nothing is
// charged the cost known before it (the Flow's Cost), else 1.
func TestChargeDefaultsToTheCostBefore(t *testing.T) {
	e := newChargeEnv(t, chargeYAML)
	f := &core.Flow[int]{Limiter: e.lim, Key: func(int) (string, error) { return "alice", nil }, Cost: func(n int) int64 { return int64(n) }}
	for _, tc := range []struct {
		cost      int64 // WithCost's answer
		remaining int64 // after the charge
	}{{7, 93}, {0, 92}, {-3, 91}, {500, 0}} { // 500: admitted (a unit is left), charged 191 (the bound)
		var d core.Decision
		if err := f.DecideTo(context.Background(), &d, int(tc.cost), "POST", "/v1/chat", ""); err != nil || !d.Allowed {
			t.Fatalf("cost %d: %v %+v", tc.cost, err, d)
		}
		e.lim.Complete(context.Background(), &d, http.StatusOK)
		r, _ := e.lim.Store().Peek(context.Background(), d.Key, d.Rule.Policy, 0)
		if r.Remaining != tc.remaining {
			t.Fatalf("WithCost %d, no cost reported: %d left, want %d", tc.cost, r.Remaining, tc.remaining)
		}
	}
}

// TestWithCostReplacesWeights: the cost a Flow finds in the request
// replaces the weight of its path when above 0; over the rule's capacity
// the request is refused (429), and nothing is taken.
func TestWithCostReplacesWeights(t *testing.T) {
	e := newChargeEnv(t, chargeYAML)
	f := &core.Flow[int64]{Limiter: e.lim, Key: func(int64) (string, error) { return "bob", nil }, Cost: func(n int64) int64 { return n }}
	for i, tc := range []struct {
		path      string
		cost      int64
		allowed   bool
		remaining int64
	}{
		{"/v1/batch", 3, true, 7},
		{"/v1/batch/big", 0, true, 3}, // 0: the weight, 4
		{"/v1/batch", -1, true, 2},    // below 0: the weight, 1
		{"/v1/batch", 11, false, 2},   // over the capacity: refused, nothing taken
		{"/v1/batch", 1 << 62, false, 2},
		{"/v1/batch", 2, true, 0},
	} {
		var d core.Decision
		if err := f.DecideTo(context.Background(), &d, tc.cost, "POST", core.Path(tc.path), ""); err != nil {
			t.Fatal(err)
		}
		if d.Allowed != tc.allowed || d.Result.Remaining != tc.remaining {
			t.Fatalf("step %d (%s, cost %d): allowed=%v remaining=%d, want %v %d", i, tc.path, tc.cost, d.Allowed, d.Result.Remaining, tc.allowed, tc.remaining)
		}
		if !d.Allowed && d.Status() != http.StatusTooManyRequests {
			t.Fatalf("step %d: status %d, want 429", i, d.Status())
		}
	}
}

// TestChargeByResponseShadow: a rule in shadow mode charges too, and
// refuses nothing: its caller in debt is only reported.
func TestChargeByResponseShadow(t *testing.T) {
	e := newChargeEnv(t, chargeYAML)
	d, _ := e.serve("/v1/audit", 25)
	if !d.Allowed || !d.ChargesResponse() {
		t.Fatalf("first audit: %+v", d)
	}
	d, _ = e.serve("/v1/audit", 1)
	if !d.Allowed || !d.ShadowDenied {
		t.Fatalf("in debt under a shadow rule: allowed=%v shadowDenied=%v, want allowed and shadow-denied", d.Allowed, d.ShadowDenied)
	}
}

// TestSetCostOutsideACharge: SetCost reports false, and does nothing,
// without a Decision charged by response in the context.
func TestSetCostOutsideACharge(t *testing.T) {
	if core.SetCost(context.Background(), 5) {
		t.Fatal("SetCost on a bare context: true")
	}
	e := newChargeEnv(t, chargeYAML)
	d := e.lim.Decide(context.Background(), "POST", "/v1/batch", "carol", false)
	if d.ChargesResponse() || core.SetCost(core.NewContext(context.Background(), &d), 5) {
		t.Fatal("SetCost under a rule that counts before the handler: true")
	}
}

// TestChargeByResponseConfigErrors: what a rule charged by response
// cannot be, each error naming the file, line, rule, field and value.
func TestChargeByResponseConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		rule, want string
	}{
		{"      cost: request\n", `rules.yaml:8: rule "r": field "cost": value "request": want response`},
		{"      cost: response\n      count: failures\n", `rules.yaml:8: rule "r": field "cost": value "response": a rule charged by response counts every response: it cannot also have count: failures`},
		{"      cost: response\n      weights:\n        /a: 2\n", `rules.yaml:10: rule "r": field "weights": value "/a": a rule charged by response takes each request's cost from its handler`},
		{"      cost: response\n      algorithm: fixed_window\n", `rules.yaml:8: rule "r": field "cost": value "response": the rule counts in a fixed_window`},
		{"      cost: response\n      clear_on_success: true\n", `rules.yaml:9: rule "r": field "clear_on_success": value "true": a success clears the failures counted: it needs count: failures (the rule counts all)`},
	} {
		yaml := "rate_limit:\n  enabled: true\n  algorithm: token_bucket\n  rules:\n    - name: r\n      paths: [\"/a\"]\n      limit: \"10/minute\"\n" + tc.rule
		_, err := core.ParseConfig([]byte(yaml), "rules.yaml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n got %v\nwant %s", tc.rule, err, tc.want)
		}
		var ce *core.ConfigError
		if err != nil && !errors.As(err, &ce) {
			t.Errorf("%q: %T is not a *core.ConfigError", tc.rule, err)
		}
	}
	// A fixed window by the file's default algorithm is refused too.
	_, err := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n  rules:\n    - name: r\n      paths: [\"/a\"]\n      limit: \"10/minute\"\n      cost: response\n"), "rules.yaml")
	if err == nil || !strings.Contains(err.Error(), `rules.yaml:7: rule "r": field "cost": value "response": the rule counts in a fixed_window`) {
		t.Errorf("cost: response under the default fixed_window: %v", err)
	}
}

// plainStore is a Store that is not a store.Charger.
type plainStore struct{ store.Store }

// TestChargeNeedsACharger: a configuration charged by response over a
// store that cannot charge makes NewLimiter panic, naming the rule and
// the store; SetConfig and ReloadFile refuse it and keep the running one.
func TestChargeNeedsACharger(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(chargeYAML), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := plainStore{memstore.New()}
	func() {
		defer func() {
			msg, _ := recover().(string)
			if !strings.Contains(msg, `rule "llm" charges by response`) || !strings.Contains(msg, "core_test.plainStore is not a store.Charger") {
				t.Fatalf("NewLimiter panicked with %q", msg)
			}
		}()
		core.NewLimiter(cfg, core.WithStore(st))
		t.Fatal("NewLimiter did not panic")
	}()
	var logs bytes.Buffer
	old, _ := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n"), "old.yaml")
	l := core.NewLimiter(old, core.WithStore(st), core.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	l.SetConfig(cfg)
	if l.Config() != old || l.ReloadStats().Failures != 1 || !strings.Contains(logs.String(), "not a store.Charger") {
		t.Fatalf("SetConfig of a charge over a plain store: config swapped=%v, stats %+v, log %q", l.Config() != old, l.ReloadStats(), logs.String())
	}
	file := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(file, []byte(chargeYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.ReloadFile(file); err == nil || !strings.Contains(err.Error(), `rule "llm" charges by response`) || l.Config() != old {
		t.Fatalf("ReloadFile: %v", err)
	}
	// Limiting off charges nothing: no store is asked to.
	off, _ := core.ParseConfig([]byte(strings.Replace(chargeYAML, "enabled: true", "enabled: false", 1)), "off.yaml")
	core.NewLimiter(off, core.WithStore(st))
}
