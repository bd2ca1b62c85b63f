package core

import (
	"context"
	"math/bits"
	"strconv"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// PenaltySpec is a rule's penalty as written (rules[i].penalty): after
// After denials of one identity under the rule within Within, the rule
// refuses that identity for Ban without counting its requests, with 429
// and Retry-After the longer of the rest of the ban and the rule's own
// wait, so that a client that waits what it is told is never refused
// again for coming early. Under a rule with a key of its own
// (RuleSpec.Key) the identity is that key: a rule keyed by ip bans the
// client IP.
//
// The penalty is kept in the limiter's store, so the servers of one Redis
// share it: a ban is a GCRA counter of one request per Ban (policy
// "<rule>!ban"), the denials a sliding window of After per Within (policy
// "<rule>!denials"), under the identity's store key; no rule can be named
// so ('!' is not allowed in a name). It costs one more store call per
// request under the rule (the check of the ban, which consumes nothing),
// and one or two more per denial. A banned request costs that check
// alone while the rest of the ban is at least the longest wait the
// rule's limits can ask (a period for a fixed window, two for a sliding
// window, a full capacity's refill for token_bucket and gcra); when the
// rest is shorter (all of a shorter ban, the end of a longer one), one
// more: a Peek of the rule, which counts nothing (the Redis store's deny
// cache often answers it without a round trip).
// A request refused by the ban is not a denial again: the ban ends when
// Ban has passed since it was set.
// Limiter.Reset of the rule lifts it. A rule in shadow mode denies
// nothing, so its penalty does nothing (no store call) until the rule is
// enforced.
type PenaltySpec struct {
	// After is the number of denials, 1 to 2^31-1, that sets the ban.
	After int64
	// Within is how recent those denials must be, and Ban how long the
	// ban lasts: a period as in a limit ("30s", "1m", "15min", "1h",
	// "1d"), at least a second.
	Within, Ban string
}

// penalty is a rule's compiled penalty.
type penalty struct {
	// ban and denials are rules of their own so that the limiter's store
	// calls, retries and warnings serve them as any rule: "<rule>!ban"
	// (gcra, 1 per ban, burst 1) and "<rule>!denials" (sliding_window,
	// after per within).
	ban, denials *Rule
}

// penaltyBan and penaltyDenials end the policy names of a rule's penalty.
const (
	penaltyBan     = "!ban"
	penaltyDenials = "!denials"
)

// penalty compiles the penalty of the rule named name at key; nil when
// there is none or it has a problem.
func (cc *compiler) penalty(key, label, name string, ps *PenaltySpec) *penalty {
	if ps == nil {
		return nil
	}
	n := len(cc.errs)
	if ps.After < 1 || ps.After > algo.MaxCount {
		cc.fail(key+".after", label, "penalty.after", strconv.FormatInt(ps.After, 10), "want a number of denials from 1 to %d", algo.MaxCount)
	}
	within := cc.duration(key+".within", label, "penalty.within", ps.Within)
	ban := cc.duration(key+".ban", label, "penalty.ban", ps.Ban)
	if len(cc.errs) > n {
		return nil
	}
	banLimit, denialLimit := algo.Limit{Count: 1, Period: ban, Burst: 1}, algo.Limit{Count: ps.After, Period: within}
	if banLimit.Validate() != nil {
		cc.fail(key+".ban", label, "penalty.ban", ps.Ban, "longer than a counter can keep (%v)", time.Duration(algo.MaxDrain).Round(time.Hour))
	}
	if denialLimit.Validate() != nil {
		cc.fail(key+".within", label, "penalty.within", ps.Within, "longer than a counter can keep (%v)", time.Duration(algo.MaxDrain).Round(time.Hour))
	}
	if len(cc.errs) > n {
		return nil
	}
	return &penalty{
		ban:     &Rule{Name: name + penaltyBan, Policy: &store.Policy{Name: name + penaltyBan, Algorithm: algo.GCRA, Limits: []algo.Limit{banLimit}}},
		denials: &Rule{Name: name + penaltyDenials, Policy: &store.Policy{Name: name + penaltyDenials, Algorithm: algo.SlidingWindow, Limits: []algo.Limit{denialLimit}}},
	}
}

// duration compiles a penalty's duration: a limit's period, at least a
// second (Retry-After counts whole seconds).
func (cc *compiler) duration(key, label, field, v string) time.Duration {
	if v == "" {
		cc.fail(key, label, field, "", "missing: want a duration such as 30s, 1m, 15min, 1h or 1d")
		return 0
	}
	d, err := algo.ParsePeriod(v)
	switch {
	case err != nil:
		cc.fail(key, label, field, v, "%v: a penalty's duration is a count and a unit, such as 30s, 15min, 1h or 1d", err)
	case d < time.Second:
		cc.fail(key, label, field, v, "at least a second")
	}
	return d
}

// penalized checks the ban of rule's penalty (if any) for key before the
// rule counts a request of cost, and reports whether it decided the
// request: refused under the ban (429, Decision.Penalty), or refused
// because the store failed with the policy fail-closed (503). When the
// store fails and the policy is fail-open, the rule counts the request
// as if there were no ban. (It inlines to one test for a rule without
// a penalty.)
func (l *Limiter) penalized(ctx context.Context, cfg *Config, rule *Rule, cost int64, key string, d *Decision) bool {
	return rule.penalty != nil && l.underBan(ctx, cfg, rule, cost, key, d)
}

// underBan is penalized for a rule that has a penalty.
func (l *Limiter) underBan(ctx context.Context, cfg *Config, rule *Rule, cost int64, key string, d *Decision) bool {
	p := rule.penalty
	var (
		res store.Result
		err error
	)
	o, lat := l.take(ctx, ask{key: key, rule: p.ban}, nil, false, &res, &err)
	switch {
	case o == OutcomeStoreError:
		open := l.failsOpen(cfg)
		l.warn(p.ban, open, err)
		if open {
			return false
		}
		d.Rule, d.Cost, d.Err, d.Allowed = rule, cost, err, false
		l.report(ask{key: key, rule: rule, cost: cost, plan: d.Plan}, OutcomeStoreError, false, err, lat)
		return true
	case res.Allowed && res.Remaining > 0:
		return false // not banned
	}
	d.Rule, d.Cost = rule, cost
	rest := max(res.ResetAfter, res.RetryAfter)
	if rest < longestWait(rule.Policy) {
		// The ban may end before the rule would admit the request: the
		// answer is the longer wait, never one the client would find
		// early.
		rest = l.ruleWait(ctx, rule, cost, key, rest)
	}
	d.setPenalty(rule, rest)
	l.report(ask{key: key, rule: rule, plan: d.Plan}, OutcomePenalized, false, nil, lat)
	return true
}

// ruleWait is the wait of a request of key at cost under rule's ban,
// whose rest is rest, when the rule's own could be longer: the longer of
// rest and what the rule would answer now (a Peek, which counts
// nothing). When the store fails, it is the longest wait the rule can
// ever answer, and the failure is logged.
func (l *Limiter) ruleWait(ctx context.Context, rule *Rule, cost int64, key string, rest time.Duration) time.Duration {
	var (
		res store.Result
		err error
	)
	if o, _ := l.take(ctx, ask{key: key, rule: rule, cost: cost}, nil, true, &res, &err); o == OutcomeStoreError {
		l.warnAs(rule, "refused under its penalty's ban, Retry-After the rule's longest", err)
		return max(rest, longestWait(rule.Policy))
	}
	return max(rest, res.RetryAfter)
}

// longestWait bounds the Retry-After a count under p can answer (see
// algo.Outcome) for a cost within the capacity, as every rule's are (the
// configuration refuses a weight above it): a period for a fixed window,
// two for a sliding window (a full window, then the previous count
// sliding out), and the time a full capacity takes to come back for
// token_bucket and gcra; the longest over p's limits.
func longestWait(p *store.Policy) time.Duration {
	var w time.Duration
	for _, lim := range p.Limits {
		d := lim.Period // a fixed window
		switch p.Algorithm {
		case algo.SlidingWindow:
			d = 2 * lim.Period // at most 2×MaxDrain: no overflow
		case algo.TokenBucket, algo.GCRA:
			hi, lo := bits.Mul64(uint64(lim.Capacity(p.Algorithm)), uint64(lim.Period))
			q, r := bits.Div64(hi, lo, uint64(lim.Count)) // ≤ MaxDrain (Limit.Validate)
			if r != 0 {
				q++
			}
			d = time.Duration(q) + 1 // and a nanosecond of rounding
		}
		w = max(w, d)
	}
	return w
}

// penalize counts a denial of key under rule, whose Decision d it is,
// and sets the ban when it is the penalty's After-th within Within: d
// then says so (Decision.Penalty), its Retry-After the ban's (or the
// rule's own, when longer). A store failure here leaves the denial as
// it is.
func (l *Limiter) penalize(ctx context.Context, cfg *Config, rule *Rule, key string, d *Decision) {
	p := rule.penalty
	if p == nil {
		return
	}
	var (
		res store.Result
		err error
	)
	if o, _ := l.take(ctx, ask{key: key, rule: p.denials, cost: 1}, nil, false, &res, &err); o == OutcomeStoreError {
		l.warn(p.denials, l.failsOpen(cfg), err)
		return
	}
	if res.Allowed && res.Remaining > 0 {
		return
	}
	if o, _ := l.take(ctx, ask{key: key, rule: p.ban, cost: 1}, nil, false, &res, &err); o == OutcomeStoreError {
		l.warn(p.ban, l.failsOpen(cfg), err)
		return
	}
	// Allowed: the ban starts now. Denied: another server set it first.
	d.setPenalty(rule, max(res.ResetAfter, d.Result.RetryAfter))
}

// setPenalty makes d the refusal of a request under rule's ban, rest
// being the time left: every limit shows nothing remaining until then.
func (d *Decision) setPenalty(rule *Rule, rest time.Duration) {
	d.Allowed, d.Penalty, d.Err = false, true, nil
	d.Result = store.Result{Limit: rule.Policy.Limits[0], ResetAfter: rest, RetryAfter: rest}
	for i := range rule.Policy.Limits {
		d.Result.Limits[i] = store.LimitState{ResetAfter: rest}
	}
}

// resetPenalty lifts key's ban and forgets its denials under rule, and
// reports whether either was live.
func (l *Limiter) resetPenalty(ctx context.Context, key string, rule *Rule) (cleared bool, err error) {
	p := rule.penalty
	if p == nil {
		return false, nil
	}
	for _, r := range [...]*Rule{p.ban, p.denials} {
		c, err := l.store.Reset(ctx, key, r.Policy)
		if err != nil {
			return cleared, err
		}
		cleared = cleared || c
	}
	return cleared, nil
}

// penalty reads a rule's penalty at fkey.
func (w *walker) penalty(n *yaml.Node, fkey, label string) *PenaltySpec {
	if !w.check(n, yaml.MappingNode, label, "penalty", "a mapping of after, within and ban") {
		return nil
	}
	ps := &PenaltySpec{}
	w.mapping(n, label, "penalty", func(key string, k, v *yaml.Node) {
		w.ln[fkey+"."+key] = v.Line
		switch key {
		case "after":
			ps.After = w.int(v, label, "penalty.after")
		case "within":
			ps.Within = w.str(v, label, "penalty.within")
		case "ban":
			ps.Ban = w.str(v, label, "penalty.ban")
		default:
			w.fail(k, label, "penalty."+key, "", "unknown field (want after, within and ban)")
		}
	})
	return ps
}
