package core_test

import (
	"context"
	"testing"
)

// TestCountByOutcomeBothRules: an enforced rule and a rule in shadow
// mode beside it, both counted by failures: both Peek before the handler,
// and Complete takes for each, the enforced rule first, then counts
// nothing more for the same Decision.
func TestCountByOutcomeBothRules(t *testing.T) {
	const yaml = `rate_limit:
  enabled: true
  rules:
    - name: guard
      paths: ["/login"]
      limit: "2/minute"
      count: failures
      mode: shadow
    - name: login
      paths: ["/login"]
      limit: "100/minute"
      count: failures
  default: "100/minute"
`
	e := newOutcomeEnv(t, yaml)
	d := e.request("/login", 401, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=99;t=60`,
		decideCalls:   list("peek alice login 1", "peek alice guard 1"),
		completeCalls: list("take alice login 1", "take alice guard 1"), completeEvents: list("login allowed true 1", "guard allowed true 1")})
	if d.Deferred() {
		t.Error("Deferred after Complete")
	}
	e.lim.Complete(context.Background(), &d, 401) // counted once
	e.check("completed twice", nil, nil)
	e.request("/login", 200, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=98;t=60`,
		decideCalls:    list("peek alice login 1", "peek alice guard 1"),
		completeEvents: list("login allowed true 0", "guard allowed true 0")})
}
