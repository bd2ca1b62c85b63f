package core

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// costResponse is the value of RuleSpec.Cost that charges a request's
// cost once the handler has answered it.
const costResponse = "response"

// cost compiles the cost field of the rule r at key (RuleSpec.Cost),
// whose count mode, weights and policy are compiled: a rule charged by
// response counts in mode countResponse.
func (cc *compiler) cost(key, label string, rs RuleSpec, r *Rule) {
	switch rs.Cost {
	case "":
		return
	case costResponse:
	default:
		cc.fail(key+".cost", label, "cost", rs.Cost, "want response (or no cost field: the cost is known before the handler, from the weights)")
		return
	}
	n := len(cc.errs)
	if r.count != countAll {
		cc.fail(key+".cost", label, "cost", costResponse, "a rule charged by response counts every response: it cannot also have count: %s", countModeNames[r.count])
	}
	if len(rs.Weights) > 0 {
		paths := make([]string, len(rs.Weights))
		for i, w := range rs.Weights {
			paths[i] = w.Path
		}
		cc.fail(key+".weights", label, "weights", strings.Join(paths, ", "), "a rule charged by response takes each request's cost from its handler (core.SetCost): it has no weights")
	}
	if r.Policy != nil && len(r.Policy.Limits) > 0 && r.Policy.Algorithm == algo.FixedWindow {
		cc.fail(key+".cost", label, "cost", costResponse, "the rule counts in a fixed_window, which forgets its count, and what a caller owes, when the window ends: charge by response under sliding_window, token_bucket or gcra")
	}
	if len(cc.errs) == n {
		r.count = countResponse
	}
}

// ChargesResponse reports whether a rule of the request charges its cost
// once the handler has answered it (RuleSpec.Cost "response"): the
// Decision is then Deferred, and the adapter puts it in the request's
// context (NewContext) whether or not its limiter has
// WithDecisionContext(true), so that the handler can report the cost with
// SetCost.
func (d *Decision) ChargesResponse() bool { return d.bill != nil }

// SetCost reports the cost of the request that ctx belongs to, as its
// handler knows it once it has served it (the tokens a model's answer
// took, the bytes sent), to the rules that charge by response
// (RuleSpec.Cost "response"): the limiter charges it once the handler has
// returned. ctx is the one the adapter hands the handler (net/http's
// r.Context(), Gin's c.Request.Context(), Echo's c.Request().Context(),
// Fiber's c.UserContext(), the gRPC handler's ctx). A later call replaces
// an earlier one; a cost below 0 counts as 0, one above 2^31 − 1 as
// 2^31 − 1 (and the store charges at most one period's count past the
// limit: see store.Charger). A request whose handler reports nothing is
// charged the cost known before it (1, or the adapter's WithCost). It is
// safe for concurrent use, and reports whether a rule takes the cost:
// false when no rule of the request charges by response (nor ctx is the
// request's), and the call then does nothing.
func SetCost(ctx context.Context, cost int64) bool {
	d, ok := FromContext(ctx)
	if !ok || d.bill == nil {
		return false
	}
	d.bill.Store(min(max(cost, 0), algo.MaxCount) + 1)
	return true
}

// billed is the cost the handler reported (SetCost), or def when it
// reported none. (The bill holds the cost plus one; 0 is none.)
func (d *Decision) billed(def int64) int64 {
	if d.bill != nil {
		if v := d.bill.Load(); v > 0 {
			return v - 1
		}
	}
	return def
}

// openBill gives d a bill for the handler's cost, shared by the copies of
// d (the one in the request's context among them), when rule charges by
// response.
func (d *Decision) openBill(rule *Rule) {
	if rule.count == countResponse && d.bill == nil {
		d.bill = new(atomic.Int64)
	}
}

// peekCost is the cost a peek of rule asks before the handler: 1 under a
// rule charged by response, which admits a request while a unit is left;
// else the request's cost.
func (r *Rule) peekCost(cost int64) int64 {
	if r.count == countResponse {
		return 1
	}
	return cost
}

// charge charges a's cost after the response (store.Charger), into *res
// and *err, and tells the outcome: allowed (charged, in debt or not) or
// store error.
func (l *Limiter) charge(ctx context.Context, a ask, res *store.Result, err *error) (o Outcome, latency time.Duration) {
	if l.charger == nil { // refused when the configuration was set; kept safe
		*err = fmt.Errorf("rlkit: rule %q charges by response, and the store %T is not a store.Charger", a.rule.Name, l.store)
		return OutcomeStoreError, 0
	}
	var start int64
	timed := l.observer != nil && !l.local
	if timed {
		start = l.clock.Now()
	}
	*res, *err = l.charger.Charge(ctx, a.key, a.rule.Policy, a.cost)
	if timed {
		latency = time.Duration(l.clock.Now() - start)
	}
	if *err != nil {
		return OutcomeStoreError, latency
	}
	return OutcomeAllowed, latency
}

// chargedRule returns the first rule of cfg (its plans' included) that
// charges by response, or nil; nil for a configuration with limiting off,
// which charges nothing.
func chargedRule(cfg *Config) *Rule {
	if !cfg.Enabled() {
		return nil
	}
	for _, r := range cfg.rules {
		if r.count == countResponse {
			return r
		}
	}
	return nil
}

// chargeError is the error of a configuration whose rule charges by
// response over a store that cannot charge; nil when there is none.
func (l *Limiter) chargeError(cfg *Config) error {
	if l.charger != nil {
		return nil
	}
	if r := chargedRule(cfg); r != nil {
		return fmt.Errorf("rlkit: rule %q charges by response (cost: response), and the store %T is not a store.Charger: use the memory or Redis store, or one that implements store.Charger", r.Name, l.store)
	}
	return nil
}

// costOf is the cost known before the handler from the request
// (Flow.Cost's answer) put in m and h (the stacked rules), in place of the weights, when above 0;
// bounded by 2^31 − 1, which is above every rule's capacity.
func costOf(c int64, m *match, h *stackHits) {
	if c <= 0 {
		return
	}
	c = min(c, algo.MaxCount)
	m.cost, m.shadowCost = c, c
	if h != nil {
		for i := range h.costs[:h.n] {
			h.costs[i] = c
		}
	}
}
