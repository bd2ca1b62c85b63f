package core

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

const stackYAML = `
rate_limit:
  enabled: true
  default: "100/minute"
  rules:
    - name: global
      stack: true
      paths: ["/api/**"]
      limit: "5/minute"
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
    - name: heavy
      paths: ["/api/heavy"]
      limit: "10/minute"
      weights:
        /api/heavy: 3
`

// stackDecide decides a GET of path by user under e and checks the
// deciding rule and remaining count (-1: refused).
func (e *keyEnv) stackExpect(user string, path Path, rule string, remaining int64) Decision {
	e.t.Helper()
	d := e.decide(&keyReqT{user: user, ip: "192.0.2.1"}, path)
	got := d.Result.Remaining
	if !d.Allowed {
		got = -1
	}
	name := "<nil>"
	if d.Rule != nil {
		name = d.Rule.Name
	}
	if name != rule || got != remaining {
		e.t.Fatalf("%s by %s: rule %s, remaining %d; want %s, %d", path, user, name, got, rule, remaining)
	}
	return d
}

func TestStackCountsBoth(t *testing.T) {
	e := newKeyEnv(t, stackYAML)
	// search: 2/minute; global: 5/minute over /api/**. The most
	// restrictive decides: search (1 left) then search (0 left).
	e.stackExpect("alice", "/api/search", "search", 1)
	e.stackExpect("alice", "/api/search", "search", 0)
	// Refused by search: global consumes nothing.
	e.stackExpect("alice", "/api/search", "search", -1)
	e.stackExpect("alice", "/api/search", "search", -1)
	// global has 3 left: /api/other (default + global) decides by global.
	e.stackExpect("alice", "/api/other", "global", 2)
	e.stackExpect("alice", "/api/other", "global", 1)
	e.stackExpect("alice", "/api/other", "global", 0)
	// Refused by global: the default consumes nothing either.
	d := e.stackExpect("alice", "/api/other", "global", -1)
	if !strings.Contains(string(d.Body()), "'global'") || d.Status() != http.StatusTooManyRequests {
		t.Errorf("refusal: %d %s, want 429 naming global", d.Status(), d.Body())
	}
	// Another user is counted apart; a path outside /api is not stacked.
	e.stackExpect("bob", "/api/search", "search", 1)
	// The default counted alice's three admitted /api/other requests.
	e.stackExpect("alice", "/other", "default", 96)
	e.stackExpect("alice", "/other", "default", 95)
}

// peek asks the limiter's store what a request of user would get under
// the rule named rule (keyed by user), consuming nothing.
func (e *keyEnv) peek(user, rule string) store.Result {
	e.t.Helper()
	l := e.flow.Limiter
	res, err := l.Store().Peek(context.Background(), l.Key(user), l.Config().Rule(rule).Policy, 1)
	if err != nil {
		e.t.Fatal(err)
	}
	return res
}

func TestStackWeights(t *testing.T) {
	e := newKeyEnv(t, stackYAML)
	// heavy weighs 3 under its own rule and 1 under global (whose weights
	// are its own: none).
	e.stackExpect("alice", "/api/heavy", "global", 4) // heavy 7, global 4
	e.stackExpect("alice", "/api/heavy", "global", 3) // heavy 4
	e.stackExpect("alice", "/api/heavy", "heavy", 1)  // global 2
	e.stackExpect("alice", "/api/heavy", "heavy", -1) // 1 < 3: nothing taken
	if res := e.peek("alice", "global"); res.Remaining != 1 {
		t.Errorf("global remaining %d after a peek of 1, want 1 (5 − 3 − 1)", res.Remaining)
	}
}

func TestStackHeaders(t *testing.T) {
	e := newKeyEnv(t, stackYAML)
	d := e.stackExpect("alice", "/api/search", "search", 1)
	h := http.Header{}
	d.SetHeaders(h)
	if got, want := h.Get("RateLimit"), `"search";r=1;t=60, "global";r=4;t=60`; got != want {
		t.Errorf("RateLimit %q, want %q", got, want)
	}
	if got, want := h.Get("RateLimit-Policy"), `"search";q=2;w=60, "global";q=5;w=60`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	// Header (Fiber's path) gives the same values.
	var buf [128]byte
	for i, want := range []string{`"search";q=2;w=60, "global";q=5;w=60`, `"search";r=1;t=60, "global";r=4;t=60`} {
		if _, v, ok := d.Header(i, buf[:0]); !ok || string(v) != want {
			t.Errorf("Header(%d) %q, want %q", i, v, want)
		}
	}
	for want := int64(3); want >= 0; want-- {
		e.stackExpect("alice", "/api/other", "global", want)
	}
	// Refused by global: its Retry-After, and every rule's state as it
	// stands (the default's 96 left: nothing was taken).
	e.clock.Advance(15 * time.Second)
	d = e.stackExpect("alice", "/api/other", "global", -1)
	h = http.Header{}
	d.SetLimitHeaders(h)
	if got, want := h.Get("RateLimit"), `"default";r=96;t=45, "global";r=0;t=45`; got != want {
		t.Errorf("refused RateLimit %q, want %q", got, want)
	}
	if got := h.Get("Retry-After"); got != "45" {
		t.Errorf("Retry-After %q, want 45", got)
	}
}

func TestStackLegacyHeaders(t *testing.T) {
	e := newKeyEnv(t, strings.Replace(stackYAML, "enabled: true", "enabled: true\n  headers: legacy", 1))
	e.stackExpect("alice", "/api/other", "global", 4)
	d := e.stackExpect("alice", "/api/search", "search", 1) // search 1, global 3
	h := http.Header{}
	d.SetHeaders(h)
	if h.Get("X-RateLimit-Limit") != "2" || h.Get("X-RateLimit-Remaining") != "1" {
		t.Errorf("legacy headers %v, want search's: limit 2, remaining 1", h)
	}
	d = e.stackExpect("alice", "/api/other", "global", 2)
	h = http.Header{}
	d.SetHeaders(h)
	if h.Get("X-RateLimit-Limit") != "5" || h.Get("X-RateLimit-Remaining") != "2" {
		t.Errorf("legacy headers %v, want global's: limit 5, remaining 2", h)
	}
}

func TestStackEvents(t *testing.T) {
	e := newKeyEnv(t, stackYAML)
	e.stackExpect("alice", "/api/search", "search", 1)
	e.stackExpect("alice", "/api/search", "search", 0)
	e.events = nil
	e.stackExpect("alice", "/api/search", "search", -1)
	want := []Event{
		{Rule: "search", Key: "alice", Outcome: OutcomeDenied, Cost: 1},
		{Rule: "global", Key: "alice", Outcome: OutcomeAllowed, Cost: 0}, // admitted, not counted
	}
	if len(e.events) != len(want) {
		t.Fatalf("events %+v, want %+v", e.events, want)
	}
	for i, w := range want {
		g := e.events[i]
		if g.Rule != w.Rule || g.Key != w.Key || g.Outcome != w.Outcome || g.Cost != w.Cost || g.Allowed {
			t.Errorf("event %d: %+v, want %+v, not allowed", i, g, w)
		}
	}
}

func TestStackOwnKey(t *testing.T) {
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: per-ip
      stack: true
      key: ip
      paths: ["/**"]
      limit: "3/minute"
    - name: search
      paths: ["/search"]
      limit: "10/minute"
`)
	// Three users behind one IP share per-ip's 3; each has its own search.
	for i, u := range []string{"a", "b", "c"} {
		d := e.decide(&keyReqT{user: u, ip: "192.0.2.7"}, "/search")
		if !d.Allowed || d.Rule.Name != "per-ip" || d.Key != "ip:192.0.2.7" || d.Result.Remaining != int64(2-i) {
			t.Fatalf("%s: allowed %v, rule %v, key %q, remaining %d", u, d.Allowed, d.Rule.Name, d.Key, d.Result.Remaining)
		}
	}
	d := e.decide(&keyReqT{user: "d", ip: "192.0.2.7"}, "/search")
	if d.Allowed || d.Rule.Name != "per-ip" || d.Key != "ip:192.0.2.7" {
		t.Fatalf("fourth user: allowed %v, rule %s, key %q; want refused by per-ip", d.Allowed, d.Rule.Name, d.Key)
	}
	// d's search counter was not taken: it has its full 10.
	if res := e.peek("d", "search"); res.Remaining != 9 {
		t.Errorf("d's search remaining %d at a peek of 1, want 9", res.Remaining)
	}
	// Another IP is counted apart.
	if d := e.decide(&keyReqT{user: "d", ip: "192.0.2.8"}, "/search"); !d.Allowed {
		t.Errorf("another IP refused")
	}
}

func TestStackShadow(t *testing.T) {
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: global
      stack: true
      mode: shadow
      paths: ["/api/**"]
      limit: "2/minute"
    - name: search
      paths: ["/api/search"]
      limit: "10/minute"
`)
	for i := range 4 {
		d := e.decide(&keyReqT{user: "alice"}, "/api/search")
		if !d.Allowed || d.Rule.Name != "search" || d.Result.Remaining != int64(9-i) || d.ShadowDenied != (i >= 2) || d.stack != nil {
			t.Fatalf("request %d: allowed %v, rule %s, remaining %d, shadow denied %v", i, d.Allowed, d.Rule.Name, d.Result.Remaining, d.ShadowDenied)
		}
	}
	var shadow int
	for _, ev := range e.events {
		if ev.Rule == "global" && ev.Outcome == OutcomeShadowDenied {
			shadow++
		}
	}
	if shadow != 2 {
		t.Errorf("%d shadow denials of global, want 2: %+v", shadow, e.events)
	}
}

func TestStackDefaultInShadow(t *testing.T) {
	// No enforced rule applies (the default is in shadow mode): the
	// stacked rule decides alone.
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  mode: shadow
  default: "1/minute"
  rules:
    - name: global
      stack: true
      mode: enforce
      paths: ["/**"]
      limit: "2/minute"
`)
	for i, want := range []int64{1, 0, -1} {
		d := e.decide(&keyReqT{user: "alice"}, "/x")
		got := d.Result.Remaining
		if !d.Allowed {
			got = -1
		}
		if d.Rule == nil || d.Rule.Name != "global" || got != want || d.ShadowDenied != (i >= 1) {
			t.Fatalf("request %d: rule %v, remaining %d, shadow denied %v; want global, %d", i, d.Rule, got, d.ShadowDenied, want)
		}
	}
}

func TestStackByOutcome(t *testing.T) {
	// The rule that applies counts failures after the handler; the
	// stacked rule counts every request before it.
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: global
      stack: true
      paths: ["/**"]
      limit: "3/minute"
    - name: login
      paths: ["/login"]
      limit: "5/minute"
      count: failures
`)
	l := e.flow.Limiter
	ctx := context.Background()
	for i := range 3 {
		d := e.decide(&keyReqT{user: "alice"}, "/login")
		// global decides (fewer left), but the failure is login's to count.
		if !d.Allowed || !d.Deferred() || d.Rule.Name != "global" {
			t.Fatalf("request %d: allowed %v, deferred %v, rule %s", i, d.Allowed, d.Deferred(), d.Rule.Name)
		}
		l.Complete(ctx, &d, http.StatusUnauthorized)
	}
	if res := e.peek("alice", "login"); res.Remaining != 1 {
		t.Errorf("login remaining %d at a peek of 1 after 3 failures, want 1", res.Remaining)
	}
	// global is spent: refused before the handler, nothing deferred.
	d := e.decide(&keyReqT{user: "alice"}, "/login")
	if d.Allowed || d.Deferred() || d.Rule.Name != "global" {
		t.Fatalf("fourth: allowed %v, deferred %v, rule %s; want refused by global", d.Allowed, d.Deferred(), d.Rule.Name)
	}
	if res := e.peek("alice", "login"); res.Remaining != 1 {
		t.Errorf("login remaining %d after a refused request, want 1", res.Remaining)
	}
}

func TestStackByOutcomeRefusedFirst(t *testing.T) {
	// A rule that applies and counts by outcome refuses before the
	// stacked rules are asked: they consume nothing.
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: global
      stack: true
      paths: ["/**"]
      limit: "10/minute"
    - name: login
      paths: ["/login"]
      limit: "1/minute"
      count: failures
`)
	l := e.flow.Limiter
	d := e.decide(&keyReqT{user: "alice"}, "/login")
	l.Complete(context.Background(), &d, http.StatusUnauthorized)
	d = e.decide(&keyReqT{user: "alice"}, "/login")
	if d.Allowed || d.Rule.Name != "login" || d.stack != nil {
		t.Fatalf("allowed %v, rule %s; want refused by login", d.Allowed, d.Rule.Name)
	}
	if res := e.peek("alice", "global"); res.Remaining != 8 {
		t.Errorf("global remaining %d at a peek of 1, want 8 (one counted)", res.Remaining)
	}
}

func TestStackPlans(t *testing.T) {
	e := newKeyEnv(t, stackYAML+`
  tiers:
    pro:
      rules:
        global: "7/minute"
`)
	e.flow.Plan = func(r *keyReqT) string { return r.header["plan"] }
	for want := int64(6); want >= 0; want-- {
		d := e.decide(&keyReqT{user: "alice", header: map[string]string{"plan": "pro"}}, "/api/x")
		if !d.Allowed || d.Rule.Name != "global" || d.Rule.Plan() != "pro" || d.Plan != "pro" || d.Result.Remaining != want {
			t.Fatalf("allowed %v, rule %s@%s, plan %q, remaining %d; want global@pro, %d", d.Allowed, d.Rule.Name, d.Rule.Plan(), d.Plan, d.Result.Remaining, want)
		}
	}
	if d := e.decide(&keyReqT{user: "alice", header: map[string]string{"plan": "pro"}}, "/api/x"); d.Allowed {
		t.Fatal("eighth request admitted under global's 7/minute for pro")
	}
	// Without the plan: the rule's own 5.
	e.stackExpect("bob", "/api/x", "global", 4)
}

func TestStackPenaltyOwnDenials(t *testing.T) {
	// The penalty of the rule that applies counts its own denials, not
	// those of a stacked rule.
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: global
      stack: true
      paths: ["/**"]
      limit: "1/minute"
    - name: login
      paths: ["/login"]
      limit: "5/minute"
      penalty: {after: 2, within: 1m, ban: 10m}
`)
	for range 4 {
		e.decide(&keyReqT{user: "alice"}, "/login")
	}
	for _, ev := range e.events {
		if ev.Outcome == OutcomePenalized {
			t.Fatalf("penalized by global's denials: %+v", e.events)
		}
	}
	d := e.decide(&keyReqT{user: "alice"}, "/login")
	if d.Penalty || d.Rule.Name != "global" {
		t.Errorf("penalty %v, rule %s; want global's refusal, no penalty", d.Penalty, d.Rule.Name)
	}
}

func TestStackWait(t *testing.T) {
	// The rule that applies waits for room: the wait covers the stacked
	// rules too, and the request is taken from all at once.
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: global
      stack: true
      paths: ["/**"]
      limit: "1/second"
    - name: api
      paths: ["/api"]
      limit: "10/second"
      wait: 2s
      wait_queue: 1
`)
	if d := e.decide(&keyReqT{user: "alice"}, "/api"); !d.Allowed {
		t.Fatal("first refused")
	}
	done := make(chan Decision)
	go func() { done <- e.decide(&keyReqT{user: "alice"}, "/api") }()
	for e.clock.Timers() == 0 {
		time.Sleep(time.Millisecond)
	}
	// The queue is full: refused at once, by the rule's wait, before the
	// store is asked about the stacked rule.
	if d := e.decide(&keyReqT{user: "alice"}, "/api"); d.Allowed || d.Rule.Name != "api" || d.stack != nil {
		t.Fatalf("third: allowed %v, rule %s; want refused by api's full queue", d.Allowed, d.Rule.Name)
	}
	e.clock.Advance(time.Second)
	d := <-done
	if !d.Allowed || d.Waited != time.Second {
		t.Fatalf("held request: allowed %v, waited %v; want admitted after 1s", d.Allowed, d.Waited)
	}
	if res := e.peek("alice", "api"); res.Remaining != 8 {
		t.Errorf("api remaining %d at a peek of 1, want 8", res.Remaining)
	}
}

func TestStackNeedsMultiTaker(t *testing.T) {
	cfg, err := ParseConfig([]byte(stackYAML), "stack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), `rule "global" is stacked`) || !strings.Contains(r.(string), "store.MultiTaker") {
			t.Errorf("panic %v, want one naming the rule and store.MultiTaker", r)
		}
	}()
	NewLimiter(cfg, WithStore(newFakeStore()))
}

func TestStackSpellings(t *testing.T) {
	// No spelling of a path escapes a stacked rule: one that decodes or
	// cleans into its paths counts under it.
	e := newKeyEnv(t, stackYAML)
	for i, p := range []Path{"/api/x", "/x/../api/y", "/%61pi/z", "/api/%2e%2e/api/w", "/api//v"} {
		d := e.decide(&keyReqT{user: "alice"}, p)
		if !d.Allowed || d.Rule.Name != "global" || d.Result.Remaining != int64(4-i) {
			t.Fatalf("%s: allowed %v, rule %s, remaining %d; want global, %d", p, d.Allowed, d.Rule.Name, d.Result.Remaining, 4-i)
		}
	}
	if d := e.decide(&keyReqT{user: "alice"}, "/API/x"); d.Allowed && d.Rule.Name == "global" {
		t.Fatalf("/API/x counted under global by a case-sensitive router")
	}
	e.flow.FoldCase = true
	if d := e.decide(&keyReqT{user: "alice"}, "/API/x"); d.Allowed || d.Rule.Name != "global" {
		t.Fatalf("/API/x behind a case-folding router: allowed %v, rule %s; want refused by global", d.Allowed, d.Rule.Name)
	}
}

func TestStackWithCost(t *testing.T) {
	// A cost known from the request replaces the weights under every rule.
	e := newKeyEnv(t, stackYAML)
	e.flow.Cost = func(*keyReqT) int64 { return 2 }
	e.stackExpect("alice", "/api/search", "search", 0) // search 2 − 2, global 5 − 2
	e.stackExpect("alice", "/api/x", "global", 1)
	e.stackExpect("alice", "/api/x", "global", -1)
}

func TestStackShadowBesideEnforced(t *testing.T) {
	// A stacked rule in shadow mode beside an enforced one is counted
	// apart, once: it refuses nothing and is in no header.
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: global
      stack: true
      paths: ["/api/**"]
      limit: "3/minute"
    - name: probe
      stack: true
      mode: shadow
      paths: ["/api/**"]
      limit: "1/minute"
    - name: search
      paths: ["/api/search"]
      limit: "6/minute"
`)
	for i, want := range []int64{2, 1, 0, -1} {
		d := e.stackExpect("alice", "/api/search", "global", want)
		if d.ShadowDenied != (i >= 1) {
			t.Errorf("request %d: shadow denied %v", i, d.ShadowDenied)
		}
		h := http.Header{}
		d.SetLimitHeaders(h)
		if got := h.Get("RateLimit-Policy"); got != `"search";q=6;w=60, "global";q=3;w=60` {
			t.Errorf("request %d: RateLimit-Policy %q, want search's and global's", i, got)
		}
	}
	var probe []Outcome
	for _, ev := range e.events {
		if ev.Rule == "probe" {
			probe = append(probe, ev.Outcome)
		}
	}
	if want := []Outcome{OutcomeAllowed, OutcomeShadowDenied, OutcomeShadowDenied, OutcomeShadowDenied}; !slices.Equal(probe, want) {
		t.Errorf("probe's events %v, want %v", probe, want)
	}
}

func TestStackLimitProvider(t *testing.T) {
	// Custom limits of a caller apply to a stacked rule as to any.
	custom := LimitProviderFunc(func(_ context.Context, key, rule string) ([]algo.Limit, bool, error) {
		if key == "alice" && rule == "global" {
			return []algo.Limit{{Count: 3, Period: time.Minute}}, true, nil
		}
		return nil, false, nil
	})
	e := newKeyEnv(t, stackYAML, WithLimitProvider(custom))
	for want := int64(2); want >= 0; want-- {
		d := e.decide(&keyReqT{user: "alice"}, "/api/x")
		if !d.Allowed || d.Rule.Name != "global" || d.Rule.Plan() != CustomPlan || d.Result.Remaining != want {
			t.Fatalf("allowed %v, rule %s@%s, remaining %d; want global@custom, %d", d.Allowed, d.Rule.Name, d.Rule.Plan(), d.Result.Remaining, want)
		}
	}
	if d := e.decide(&keyReqT{user: "alice"}, "/api/x"); d.Allowed {
		t.Fatal("fourth request admitted under alice's custom 3/minute")
	}
	e.stackExpect("bob", "/api/x", "global", 4) // the rule's own 5
}

func TestStackOverConcurrentOnly(t *testing.T) {
	// A rule that bounds requests in flight only takes its slot; the
	// stacked rules count the request then, and a refusal by them gives
	// the slot back.
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: hourly
      stack: true
      paths: ["/api/**"]
      limit: "2/hour"
    - name: export
      paths: ["/api/export"]
      concurrent: 1
`)
	l := e.flow.Limiter
	for i, want := range []int64{1, 0} {
		d := e.decide(&keyReqT{user: "alice"}, "/api/export")
		if !d.Allowed || d.Rule.Name != "hourly" || d.Result.Remaining != want || !d.Deferred() {
			t.Fatalf("request %d: allowed %v, rule %s, remaining %d, deferred %v; want hourly, %d, a slot held", i, d.Allowed, d.Rule.Name, d.Result.Remaining, d.Deferred(), want)
		}
		h := http.Header{}
		d.SetHeaders(h)
		if got := h.Get("RateLimit"); got == "" || !strings.Contains(got, `"hourly";r=`) {
			t.Errorf("request %d: RateLimit %q, want hourly's", i, got)
		}
		l.Complete(context.Background(), &d, http.StatusOK)
	}
	d := e.decide(&keyReqT{user: "alice"}, "/api/export")
	if d.Allowed || d.Rule.Name != "hourly" || d.ConcurrencyDenied || d.Deferred() {
		t.Fatalf("third: allowed %v, rule %s, concurrency denied %v, deferred %v; want refused by hourly, the slot given back", d.Allowed, d.Rule.Name, d.ConcurrencyDenied, d.Deferred())
	}
	// The slot went back: alice holds none, so a request of hers that no
	// stacked rule counts would take one (export's own limit is slots).
	if n := l.Store().(*memstore.Store).InFlight(l.Key("alice"), l.Config().Rule("export").conc); n != 0 {
		t.Fatalf("alice holds %d slots after the refusal, want 0", n)
	}
}
