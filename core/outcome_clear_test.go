package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
)

// clearYAML: /login counts failures, 3 per minute, and a success clears
// them.
const clearYAML = `rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "3/minute"
      count: failures
      clear_on_success: true
  default: "100/minute"
`

// TestClearOnSuccessConfig: clear_on_success loads on a rule that counts
// failures, and is refused, naming file, line, rule, field and value, on
// any other rule, and when it is not a boolean.
func TestClearOnSuccessConfig(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(clearYAML), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Rule("login").Count() != "failures" {
		t.Fatalf("login counts %s", cfg.Rule("login").Count())
	}
	for _, c := range []struct {
		from, to, want string
		line           int
		field, value   string
	}{
		{"count: failures", "count: successes", `rate-limit config c.yaml:8: rule "login": field "clear_on_success": value "true": a success clears the failures counted: it needs count: failures (the rule counts successes)`, 8, "clear_on_success", "true"},
		{"count: failures", "count: all", `rate-limit config c.yaml:8: rule "login": field "clear_on_success": value "true": a success clears the failures counted: it needs count: failures (the rule counts all)`, 8, "clear_on_success", "true"},
		{"      count: failures\n", "", `rate-limit config c.yaml:7: rule "login": field "clear_on_success": value "true": a success clears the failures counted: it needs count: failures (the rule counts all)`, 7, "clear_on_success", "true"},
		{"clear_on_success: true", "clear_on_success: yes", `rate-limit config c.yaml:8: rule "login": field "clear_on_success": value "yes": want true or false`, 8, "clear_on_success", "yes"},
		{"clear_on_success: true", "clear_on_success: [true]", `rate-limit config c.yaml:8: rule "login": field "clear_on_success": want true or false`, 8, "clear_on_success", ""},
	} {
		_, err := core.ParseConfig([]byte(strings.Replace(clearYAML, c.from, c.to, 1)), "c.yaml")
		var ce *core.ConfigError
		if err == nil || err.Error() != c.want || !errors.As(err, &ce) || ce.Line != c.line || ce.Rule != "login" || ce.Field != c.field || ce.Value != c.value {
			t.Errorf("%s: got %v, want %s", c.to, err, c.want)
		}
	}
	// false is allowed anywhere: it is the default.
	if _, err := core.ParseConfig([]byte(strings.Replace(strings.Replace(clearYAML, "clear_on_success: true", "clear_on_success: false", 1), "count: failures", "count: all", 1)), "c.yaml"); err != nil {
		t.Errorf("clear_on_success: false on count: all: %v", err)
	}
	_, err = core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{{Name: "a", Paths: []string{"/a"}, Limit: []string{"1/second"}, Count: "successes", ClearOnSuccess: true}}})
	if want := `rate-limit config: rule "a": field "clear_on_success": value "true": a success clears the failures counted: it needs count: failures (the rule counts successes)`; err == nil || err.Error() != want {
		t.Errorf("in a Spec: got %v, want %s", err, want)
	}
}

// TestClearOnSuccess: two failures, then a success, which clears them:
// the limit's three failures are admitted again, and the next request is
// refused. Only the key the request counted under is cleared: bob's
// failures stay.
func TestClearOnSuccess(t *testing.T) {
	e := newOutcomeEnv(t, clearYAML)
	const peek, take = "peek alice login 1", "take alice login 1"
	reset := 60 // the window's rest, in seconds
	fail := func(remaining int) {
		t.Helper()
		e.request("/login", 401, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: fmt.Sprintf(`"login";r=%d;t=%d`, remaining, reset),
			decideCalls: list(peek), completeCalls: list(take), completeEvents: list("login allowed true 1")})
	}
	// bob fails twice.
	for range 2 {
		d := e.lim.Decide(t.Context(), "POST", "/login", "bob", false)
		e.lim.Complete(t.Context(), &d, 401)
	}
	e.check("bob", list("peek bob login 1", "take bob login 1", "peek bob login 1", "take bob login 1"), list("login allowed true 1", "login allowed true 1"))
	fail(2)
	fail(1)
	e.clock.Advance(10 * time.Second)
	reset = 50
	// The success clears alice's two failures, with one call: the headers
	// are those the Peek gave.
	e.request("/login", 200, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=0;t=50`,
		decideCalls: list(peek), completeCalls: list("reset alice login"), completeEvents: list("login allowed true 0")})
	fail(2)
	fail(1)
	fail(0)
	e.request("/login", 401, outcomeWant{status: 429, rateLimit: `"login";r=0;t=50`,
		decideCalls: list(peek), decideEvents: list("login denied false 1")})
	// A refused request, success or not, clears nothing: it never reached
	// the handler.
	e.request("/login", 200, outcomeWant{status: 429, rateLimit: `"login";r=0;t=50`,
		decideCalls: list(peek), decideEvents: list("login denied false 1")})
	// bob's two failures are still counted: one more is his last.
	d := e.lim.Decide(t.Context(), "POST", "/login", "bob", false)
	if h := d.Result.Remaining; !d.Allowed || h != 0 {
		t.Errorf("bob: allowed %v, remaining %d; want allowed, 0 (two failures kept)", d.Allowed, h)
	}
}

// TestClearOnSuccessVariants: a caller on a plan clears its plan's
// failures only (the policy it counted under), and a rule in shadow mode
// that clears on success clears its own counts, beside an enforced rule
// that does not clear.
func TestClearOnSuccessVariants(t *testing.T) {
	e := newOutcomeEnv(t, clearYAML+`  tiers:
    pro:
      rules:
        login: "5/minute"
`)
	pro := func(status int) core.Decision {
		d := e.lim.DecidePlan(t.Context(), "POST", "/login", "alice", "pro", false)
		e.lim.Complete(t.Context(), &d, status)
		return d
	}
	pro(401)
	e.lim.Complete(t.Context(), ptr(e.lim.Decide(t.Context(), "POST", "/login", "alice", false)), 401)
	e.store.drain()
	e.evs.drain()
	pro(200)
	e.check("pro's success", list("peek alice login@pro 1", "reset alice login@pro"), list("login allowed true 0"))
	if d := pro(401); d.Result.Remaining != 4 {
		t.Errorf("pro after its success: remaining %d, want 4", d.Result.Remaining)
	}
	if d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false); d.Result.Remaining != 1 {
		t.Errorf("no plan, after pro's success: remaining %d, want 1 (its failure kept)", d.Result.Remaining)
	}

	s := newOutcomeEnv(t, `rate_limit:
  enabled: true
  rules:
    - name: guard
      paths: ["/login"]
      limit: "2/minute"
      count: failures
      clear_on_success: true
      mode: shadow
    - name: login
      paths: ["/login"]
      limit: "100/minute"
      count: failures
  default: "100/minute"
`)
	for range 2 {
		d := s.lim.Decide(t.Context(), "POST", "/login", "alice", false)
		s.lim.Complete(t.Context(), &d, 401)
	}
	s.store.drain()
	s.evs.drain()
	s.request("/login", 200, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=97;t=60`,
		decideCalls: list("peek alice login 1", "peek alice guard 1"), decideEvents: list("guard shadow_denied true 1"),
		completeEvents: list("login allowed true 0")})
	// The guard's Peek denied (it would deny): nothing of it waited, so
	// nothing cleared. Below its limit, a success clears its count.
	s.clock.Advance(time.Minute)
	d := s.lim.Decide(t.Context(), "POST", "/login", "alice", false)
	s.lim.Complete(t.Context(), &d, 401)
	s.store.drain()
	s.evs.drain()
	s.request("/login", 204, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=98;t=60`,
		decideCalls:   list("peek alice login 1", "peek alice guard 1"),
		completeCalls: list("reset alice guard"), completeEvents: list("login allowed true 0", "guard allowed true 0")})
	// The guard admits its two failures again, then would deny.
	s.request("/login", 401, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=98;t=60`,
		decideCalls:   list("peek alice login 1", "peek alice guard 1"),
		completeCalls: list("take alice login 1", "take alice guard 1"), completeEvents: list("login allowed true 1", "guard allowed true 1")})
	s.request("/login", 401, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=97;t=60`,
		decideCalls:   list("peek alice login 1", "peek alice guard 1"),
		completeCalls: list("take alice login 1", "take alice guard 1"), completeEvents: list("login allowed true 1", "guard allowed true 1")})
	s.request("/login", 401, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=96;t=60`,
		decideCalls: list("peek alice login 1", "peek alice guard 1"), decideEvents: list("guard shadow_denied true 1"),
		completeCalls: list("take alice login 1"), completeEvents: list("login allowed true 1")})
}

func ptr[T any](v T) *T { return &v }

// TestClearOnSuccessStoreDown: a success whose Reset fails is served as
// answered; its event is a store error with the Reset's error, and the
// failure is logged.
func TestClearOnSuccessStoreDown(t *testing.T) {
	down := errors.New("store down")
	e := newOutcomeEnv(t, clearYAML)
	d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false)
	e.store.drain()
	e.store.fail = down
	e.lim.Complete(context.Background(), &d, 200)
	if d.Deferred() {
		t.Error("still deferred after Complete")
	}
	got := e.evs.last
	if got.Outcome != core.OutcomeStoreError || !got.Allowed || got.Cost != 0 || !errors.Is(got.Err, down) || got.Rule != "login" || got.Key != "alice" {
		t.Errorf("event %+v, want store_error, allowed, cost 0, the Reset's error", got)
	}
	if logs := e.logs.String(); !strings.Contains(logs, "rate-limit store failed") || !strings.Contains(logs, `failure_policy="served: its failures are not cleared"`) {
		t.Errorf("logged %q, want the Reset's failure", logs)
	}
	e.check("completed", list("reset alice login"), list("login store_error true 0"))
}

// TestClearOnSuccessKeepsPenalty: a success clears the failures, not the
// rule's penalty: a request that passed the check before the ban was set
// and succeeds while it holds lifts neither the ban nor its denials.
func TestClearOnSuccessKeepsPenalty(t *testing.T) {
	e := newOutcomeEnv(t, strings.Replace(clearYAML, "clear_on_success: true", "clear_on_success: true\n      penalty: {after: 1, within: 1m, ban: 5m}", 1))
	inFlight := e.lim.Decide(t.Context(), "POST", "/login", "alice", false) // in the handler meanwhile
	for range 3 {
		d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false)
		e.lim.Complete(t.Context(), &d, 401)
	}
	if d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false); !d.Penalty {
		t.Fatalf("the fourth request: penalty %v, want the ban set", d.Penalty)
	}
	e.store.drain()
	e.evs.drain()
	e.lim.Complete(t.Context(), &inFlight, 200)
	e.check("the success in flight", list("reset alice login"), list("login allowed true 0"))
	d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false)
	if d.Allowed || !d.Penalty || d.RetryAfterSeconds() != 300 {
		t.Errorf("after the success: allowed %v, penalty %v, Retry-After %d; want still banned, 300", d.Allowed, d.Penalty, d.RetryAfterSeconds())
	}
}
