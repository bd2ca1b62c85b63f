package core

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

const tiersYAML = `rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "3/minute"
    - name: upload
      paths: ["/api/upload", "/api/upload/batch"]
      limit: "30/minute"
      weights:
        "/api/upload/batch": 10
    - name: probe
      paths: ["/api/probe"]
      limit: "100/minute"
      mode: shadow
  default: "50/minute"
  tiers:
    free:
      default: "5/minute"
      rules:
        search: "2/minute"
        probe: "1/minute"
    pro:
      rules:
        search: ["10/minute", "4/second"]
`

func parseTiers(t *testing.T, yaml string) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(yaml), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestTiersCompile(t *testing.T) {
	c := parseTiers(t, tiersYAML)
	if got := c.Plans(); !slices.Equal(got, []string{"free", "pro"}) {
		t.Fatalf("Plans() = %q, want [free pro]", got)
	}
	for _, tc := range []struct {
		plan, rule, policy, header string
		shadow                     bool
	}{
		{"free", "search", "search@free", `"search";q=2;w=60`, false},
		{"free", "upload", "upload@free", `"upload";q=30;w=60`, false}, // not listed: the rule's own limits
		{"free", "probe", "probe@free", `"probe";q=1;w=60`, true},
		{"free", "default", "default@free", `"default";q=5;w=60`, false},
		{"pro", "search", "search@pro", `"search-1m";q=10;w=60, "search-1s";q=4;w=1`, false},
		{"pro", "default", "default@pro", `"default";q=50;w=60`, false}, // no default: the file's
	} {
		r := c.PlanRule(tc.plan, tc.rule)
		if r == nil {
			t.Fatalf("PlanRule(%q, %q) = nil", tc.plan, tc.rule)
		}
		if r.Name != tc.rule || r.Plan() != tc.plan || r.Policy.Name != tc.policy || r.policyValue[0] != tc.header || r.Shadow() != tc.shadow {
			t.Errorf("PlanRule(%q, %q): name %q, plan %q, policy %q, RateLimit-Policy %s, shadow %v; want %q, %q, %q, %s, %v",
				tc.plan, tc.rule, r.Name, r.Plan(), r.Policy.Name, r.policyValue[0], r.Shadow(), tc.rule, tc.plan, tc.policy, tc.header, tc.shadow)
		}
		if want := `{"detail": "Rate limit exceeded for '` + tc.rule + `' requests"}`; string(r.body) != want {
			t.Errorf("PlanRule(%q, %q) body %s, want %s", tc.plan, tc.rule, r.body, want)
		}
		if base := c.Rule(tc.rule); base.Policy.Name != tc.rule || r.Policy.CounterID(0) == base.Policy.CounterID(0) || r.Plan() == base.Plan() {
			t.Errorf("rule %q: the base rule's policy %q (plan %q) must stay apart from the plan's", tc.rule, base.Policy.Name, base.Plan())
		}
	}
	// A plan's variant keeps the rule's weights.
	if r, cost := c.Match("GET", "/api/upload/batch"); c.PlanRule("free", "upload").cost("/api/upload/batch", false) != cost || r.Name != "upload" {
		t.Errorf("the plan's upload does not weigh the batch path as the rule does")
	}
	if c.PlanRule("gold", "search") != nil || c.PlanRule("free", "nosuch") != nil {
		t.Error("PlanRule of an unknown plan or rule is not nil")
	}
	// Burst on a token bucket rule, as a mapping.
	c = parseTiers(t, strings.Replace(tiersYAML, `limit: "30/minute"`, "limit: \"30/minute\"\n      algorithm: token_bucket", 1)+
		"        upload: {limit: \"60/minute\", burst: 20}\n")
	if r := c.PlanRule("pro", "upload"); r.Policy.Limits[0].Burst != 20 || r.Policy.Limits[0].Count != 60 || r.Policy.Algorithm != algo.TokenBucket {
		t.Errorf("pro upload: %+v, want 60/minute with burst 20, token bucket", r.Policy)
	}
	// In code.
	c, err := NewConfig(Spec{Enabled: true,
		Rules: []RuleSpec{{Name: "search", Paths: []string{"/s"}, Limit: []string{"1/s"}}},
		Tiers: []TierSpec{{Name: "pro", Default: []string{"9/s"}, Rules: []TierRuleSpec{{Rule: "search", Limit: []string{"5/s"}}}}}})
	if err != nil || c.PlanRule("pro", "search").Policy.Limits[0].Count != 5 || c.PlanRule("pro", "default").Policy.Limits[0].Count != 9 {
		t.Fatalf("NewConfig with tiers: %v", err)
	}
}

func TestTiersErrors(t *testing.T) {
	head := `rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/minute"
    - name: upload
      paths: ["/api/upload", "/api/upload/batch"]
      limit: "30/minute"
      weights:
        "/api/upload/batch": 10
  tiers:
`
	for _, tc := range []struct{ name, tiers, want string }{
		{"unknown rule", "    pro:\n      rules:\n        serch: 5/minute\n",
			`rate-limit config t.yaml:15: field "tiers.pro.rules": value "serch": plan "pro" names no rule of the configuration (rules: "search", "upload")`},
		{"bad limit", "    pro:\n      rules:\n        search: 5/fortnight\n",
			`rate-limit config t.yaml:15: rule "search": field "tiers.pro.limit": value "5/fortnight": limit "5/fortnight": unknown unit "fortnight" (want second, minute, hour or day)`},
		{"bad default", "    pro:\n      default: [1/s, 2/s]\n",
			`rate-limit config t.yaml:14: rule "default": field "tiers.pro.default": value "2/s": a second limit per 1s (first: 1/second)`},
		{"burst on a fixed window", "    pro:\n      rules:\n        search: {limit: 5/minute, burst: 9}\n",
			`rate-limit config t.yaml:15: rule "search": field "tiers.pro.burst": value "9": plan "pro": burst applies to token_bucket and gcra only, not fixed_window`},
		{"weight above capacity", "    free:\n      rules:\n        upload: 5/minute\n",
			`rate-limit config t.yaml:15: rule "upload": field "tiers.free.limit": value "5/minute": plan "free": weight 10 of "/api/upload/batch" exceeds the plan's capacity 5: such a request could never pass`},
		{"duplicate plan", "    pro: {}\n    pro: {}\n",
			`rate-limit config t.yaml:14: field "pro": field given twice`},
		{"bad plan name", "    \"p r o\": {}\n",
			`rate-limit config t.yaml:13: field "tiers[0]": value "p r o": plan names are 1 to 64 letters, digits, '_', '.' or '-'`},
		{"reserved plan name", "    custom: {}\n",
			`rate-limit config t.yaml:13: field "tiers.custom": value "custom": "custom" is the plan of limits a LimitProvider gives: name the plan otherwise`},
		{"default as a rule", "    pro:\n      rules:\n        default: 5/minute\n",
			`rate-limit config t.yaml:15: field "tiers.pro.rules": value "default": plan "pro": "default" is the default limit: give it as the plan's default field`},
		{"unknown field", "    pro:\n      limit: 5/minute\n",
			`rate-limit config t.yaml:14: field "tiers.pro.limit": unknown field (want default or rules)`},
		{"unknown rule field", "    pro:\n      rules:\n        search: {limit: 5/minute, cost: 2}\n",
			`rate-limit config t.yaml:15: rule "search": field "tiers.pro.cost": unknown field (want limit or burst)`},
		{"null limits", "    pro:\n      rules:\n        search:\n",
			`rate-limit config t.yaml:15: rule "search": field "tiers.pro.limit": want a limit, a list of limits or {limit: ..., burst: N}`},
		{"not a mapping", "    - pro\n",
			`rate-limit config t.yaml:13: field "tiers": want a mapping`},
	} {
		_, err := ParseConfig([]byte(head+tc.tiers), "t.yaml")
		if err == nil || err.Error() != tc.want {
			t.Errorf("%s: got\n%v\nwant\n%s", tc.name, err, tc.want)
		}
	}
	// In code: a duplicate plan, a rule listed twice.
	_, err := NewConfig(Spec{Enabled: true, Tiers: []TierSpec{{Name: "pro"}, {Name: "pro"}}})
	if want := `rate-limit config: field "tiers.pro": value "pro": duplicate plan`; err == nil || err.Error() != want {
		t.Errorf("duplicate plan in code: got %v, want %s", err, want)
	}
	rules := []RuleSpec{{Name: "s", Paths: []string{"/s"}, Limit: []string{"1/s"}}}
	twice := []TierRuleSpec{{Rule: "s", Limit: []string{"2/s"}}, {Rule: "s", Limit: []string{"3/s"}}}
	_, err = NewConfig(Spec{Enabled: true, Rules: rules, Tiers: []TierSpec{{Name: "pro", Rules: twice}}})
	if want := `rate-limit config: rule "s": field "tiers.pro.rules": value "s": plan "pro" lists the rule twice`; err == nil || err.Error() != want {
		t.Errorf("a rule listed twice: got %v, want %s", err, want)
	}
	// Too many variants: plans × (rules + 1).
	many := make([]TierSpec, maxPlanVariants/2+1)
	for i := range many {
		many[i].Name = "p" + strconv.Itoa(i)
	}
	_, err = NewConfig(Spec{Enabled: true, Rules: rules, Tiers: many})
	if want := `rate-limit config: field "tiers": value "50001 plans": 50001 plans of 1 rules and the default make 100002 rule variants, at most 100000`; err == nil || err.Error() != want {
		t.Errorf("too many variants: got %v, want %s", err, want)
	}
}

// decidePlan runs one request of alice on plan through a Flow and returns
// its Decision and headers.
func decidePlan(t *testing.T, f *Flow[string], plan, path string) (Decision, http.Header) {
	t.Helper()
	d, err := f.Decide(context.Background(), plan, "GET", Path(path), "")
	if err != nil {
		t.Fatal(err)
	}
	h := http.Header{}
	d.SetHeaders(h)
	return d, h
}

func TestTiersDecide(t *testing.T) {
	store := newFakeStore()
	var events []Event
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(store), WithObserver(func(e Event) { events = append(events, e) }))
	f := &Flow[string]{Limiter: lim, Key: func(string) (string, error) { return "alice", nil }, Plan: func(p string) string { return p }}
	// free: 2 searches, then 429 under the free plan's limit and header.
	for i, want := range []string{`"search";r=1;t=60`, `"search";r=0;t=60`} {
		d, h := decidePlan(t, f, "free", "/api/search")
		if !d.Allowed || d.Plan != "free" || h.Get("RateLimit") != want || h.Get("RateLimit-Policy") != `"search";q=2;w=60` {
			t.Fatalf("free search %d: allowed %v, plan %q, headers %v", i, d.Allowed, d.Plan, h)
		}
	}
	d, _ := decidePlan(t, f, "free", "/api/search")
	if d.Allowed || d.Status() != 429 || string(d.Body()) != `{"detail": "Rate limit exceeded for 'search' requests"}` || d.Plan != "free" {
		t.Fatalf("third free search: allowed %v, status %d, body %s, plan %q", d.Allowed, d.Status(), d.Body(), d.Plan)
	}
	// The same caller on pro counts apart: its own 10.
	d, h := decidePlan(t, f, "pro", "/api/search")
	if !d.Allowed || d.Plan != "pro" || h.Get("RateLimit") != `"search-1m";r=9;t=60, "search-1s";r=3;t=1` {
		t.Fatalf("pro search: allowed %v, plan %q, RateLimit %q", d.Allowed, d.Plan, h.Get("RateLimit"))
	}
	// Unknown and empty plans: the rule's own 3, its own counters.
	for i, plan := range []string{"gold", "", "gold"} {
		d, h := decidePlan(t, f, plan, "/api/search")
		if !d.Allowed || d.Plan != "" || h.Get("RateLimit-Policy") != `"search";q=3;w=60` || d.Rule != lim.Config().Rule("search") {
			t.Fatalf("plan %q: allowed %v, plan %q, RateLimit-Policy %q", plan, d.Allowed, d.Plan, h.Get("RateLimit-Policy"))
		}
		if i == 2 && h.Get("RateLimit") != `"search";r=0;t=60` {
			t.Fatalf("plan %q: RateLimit %q, want r=0: unknown plans share the rule's counters", plan, h.Get("RateLimit"))
		}
	}
	if n := lim.UnknownPlans(); n != 2 {
		t.Errorf("UnknownPlans() = %d, want 2 (an empty plan is not unknown)", n)
	}
	// The shadow rule and the default get the plan too.
	decidePlan(t, f, "free", "/api/probe")
	decidePlan(t, f, "free", "/api/other")
	var policies []string
	for _, c := range store.calls {
		policies = append(policies, c.policy.Name)
	}
	want := []string{"search@free", "search@free", "search@free", "search@pro", "search", "search", "search", "default@free", "probe@free", "default@free"}
	if !slices.Equal(policies, want) {
		t.Errorf("policies counted: got %q, want %q", policies, want)
	}
	var plans []string
	for _, e := range events {
		plans = append(plans, e.Rule+"/"+e.Plan)
	}
	if want := []string{"search/free", "search/free", "search/free", "search/pro", "search/", "search/", "search/", "default/free", "probe/free", "default/free"}; !slices.Equal(plans, want) {
		t.Errorf("events: got %q, want %q", plans, want)
	}
	// Limiter.DecidePlan takes the plan; Decide has none.
	if d := lim.DecidePlan(context.Background(), "GET", "/api/search", "bob", "pro", false); d.Plan != "pro" || d.Rule.Policy.Name != "search@pro" {
		t.Errorf("DecidePlan(pro): plan %q, policy %q", d.Plan, d.Rule.Policy.Name)
	}
	if d := lim.Decide(context.Background(), "GET", "/api/search", "bob", false); d.Plan != "" || d.Rule.Policy.Name != "search" {
		t.Errorf("Decide: plan %q, policy %q", d.Plan, d.Rule.Policy.Name)
	}
}

func TestTiersResolverCalledOnlyWithTiers(t *testing.T) {
	calls := 0
	cfg := parseTiers(t, "rate_limit:\n  enabled: true\n")
	f := &Flow[string]{Limiter: NewLimiter(cfg, WithStore(newFakeStore())), Plan: func(string) string { calls++; return "pro" }}
	if d, _ := decidePlan(t, f, "", "/x"); !d.Allowed || d.Plan != "" || calls != 0 {
		t.Errorf("without tiers: plan %q, resolver called %d times, want 0", d.Plan, calls)
	}
	if f.Limiter.UnknownPlans() != 0 {
		t.Error("a plan counted as unknown without tiers")
	}
}

func TestTiersReset(t *testing.T) {
	store := newFakeStore()
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(store))
	ctx := context.Background()
	lim.DecidePlan(ctx, "GET", "/api/search", "alice", "free", false)
	lim.DecidePlan(ctx, "GET", "/api/search", "alice", "pro", false)
	cleared, err := lim.Reset(ctx, "alice", "search")
	if !cleared || err != nil {
		t.Fatalf("Reset = %v, %v; want true, nil", cleared, err)
	}
	var reset []string
	for _, c := range store.resets {
		reset = append(reset, c.policy.Name)
	}
	if want := []string{"search", "search@free", "search@pro"}; !slices.Equal(reset, want) {
		t.Errorf("Reset reset %q, want %q", reset, want)
	}
	if d := lim.DecidePlan(ctx, "GET", "/api/search", "alice", "free", false); d.Result.Remaining != 1 {
		t.Errorf("after Reset, free search has %d left, want 1", d.Result.Remaining)
	}
}

func TestTiersReloadLog(t *testing.T) {
	var buf bytes.Buffer
	lim := NewLimiter(parseTiers(t, tiersYAML), WithStore(newFakeStore()), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))))
	next := strings.Replace(tiersYAML, `search: "2/minute"`, `search: "20/minute"`, 1)
	next = strings.Replace(next, "    pro:\n", "    gold: {}\n    pro:\n", 1)
	lim.SetConfig(parseTiers(t, next))
	if out := buf.String(); !strings.Contains(out, "plans_added=[gold] plans_changed=[free] plans_removed=[]") {
		t.Errorf("reload log %q does not name the plans' changes", out)
	}
	buf.Reset()
	lim.SetConfig(parseTiers(t, "rate_limit:\n  enabled: true\n"))
	if out := buf.String(); !strings.Contains(out, "plans_added=[] plans_changed=[] plans_removed=\"[free gold pro]\"") {
		t.Errorf("reload log %q does not name the plans removed", out)
	}
	buf.Reset()
	lim.SetConfig(parseTiers(t, "rate_limit:\n  enabled: true\n"))
	if out := buf.String(); strings.Contains(out, "plans_") {
		t.Errorf("reload log %q names plans, with none on either side", out)
	}
}

// TestTiersAllocs pins the cost of a plan: none for a request whose plan
// the configuration has, none for one it lacks.
func TestTiersAllocs(t *testing.T) {
	cfg := parseTiers(t, strings.Replace(tiersYAML, `search: ["10/minute", "4/second"]`, `search: "2000000000/hour"`, 1))
	lim := NewLimiter(cfg, WithStore(nopStore{}))
	f := &Flow[string]{Limiter: lim, Key: func(string) (string, error) { return "alice", nil }, Plan: func(p string) string { return p }}
	ctx := context.Background()
	for _, plan := range []string{"pro", "gold"} {
		if n := testing.AllocsPerRun(100, func() { _, _ = f.Decide(ctx, plan, "GET", "/api/search", "") }); n != 0 {
			t.Errorf("plan %q: %v allocations per request, want 0", plan, n)
		}
	}
}

// nopStore admits everything, allocating nothing.
type nopStore struct{}

func (nopStore) Take(context.Context, string, *store.Policy, int64) (store.Result, error) {
	return store.Result{Allowed: true}, nil
}
func (nopStore) Peek(context.Context, string, *store.Policy, int64) (store.Result, error) {
	return store.Result{Allowed: true}, nil
}
func (nopStore) Reset(context.Context, string, *store.Policy) (bool, error) { return false, nil }

// TestTierEmptyDefault: a plan's default given as an empty list is an
// error naming the plan, not a silent fallback to the file's default.
func TestTierEmptyDefault(t *testing.T) {
	_, err := ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/minute"
  tiers:
    pro:
      default: []
`), "t.yaml")
	const want = `rate-limit config t.yaml:10: rule "default": field "tiers.pro.default": plan "pro": an empty default: give a limit, or leave the field out for the file's default`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
}
