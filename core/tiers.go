package core

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// Plans (tiers) give the callers of one plan their own limits: a free plan
// and a paid one, each rule's limits per plan. The configuration's tiers
// section maps a plan name to a default limit and per-rule limits:
//
//	tiers:
//	  free:
//	    default: "60/minute"
//	    rules:
//	      search: "10/minute"
//	  pro:
//	    default: "600/minute"
//	    rules:
//	      search: ["100/minute", "5/second"]
//	      upload: {limit: "100/minute", burst: 20}
//
// A request's plan comes from the adapter's plan resolver (WithPlan in
// every adapter; Flow.Plan; Limiter.DecidePlan). Each plan is compiled
// into its own variant of every rule (and of the default limit), made when
// the configuration loads: the variant matches the rule's paths, methods
// and weights, and counts under the plan's limits, or the rule's own when
// the plan does not list it. Its policy is named "<rule>@<plan>", so the
// counters of different plans never mix: a caller whose plan changes
// starts fresh counters under the new plan (and finds its old ones again
// if it moves back before they expire). A reload treats a plan's variant
// as a rule: new counts and bursts keep what its callers spent. Headers, the 429 body, log lines
// and Event.Rule still name the rule ("search"); RateLimit-Policy shows
// the plan's limits. A plan the configuration lacks, or an empty one,
// gets the rules' own limits (counted in Limiter.UnknownPlans).

// CustomPlan is the plan of limits a LimitProvider gave (Rule.Plan of the
// rule they count under, and its policy's name, "<rule>@custom"); no tier
// may be named so.
const CustomPlan = "custom"

// TierSpec is one plan of Spec.Tiers.
type TierSpec struct {
	// Name is the plan's name: 1 to 64 letters, digits, '_', '.' or '-',
	// and not CustomPlan.
	Name string
	// Default is the plan's limit (or limits) for requests no rule
	// matches; empty means the configuration's default limit.
	Default []string
	// Rules give the plan's limits of the rules it lists; a rule it does
	// not list keeps its own limits (under the plan's own counters).
	Rules []TierRuleSpec
}

// TierRuleSpec is a plan's limits of one rule, counted with the rule's
// algorithm.
type TierRuleSpec struct {
	// Rule is the rule's name.
	Rule string
	// Limit holds one or more limits ("100/minute"); all must admit.
	Limit []string
	// Burst is the capacity of a token_bucket or gcra rule (0 = the
	// count); the rule's own burst does not carry over.
	Burst int64
}

// maxPlanVariants bounds the rule variants the tiers of one configuration
// make (plans × (rules + 1)): each is compiled when the file loads and
// held in memory, a few hundred bytes apiece.
const maxPlanVariants = 100_000

// tier is one compiled plan: its variant of every rule.
type tier struct {
	name  string
	rules []*Rule // by Rule.index: the rules in order, then the default
}

// of is t's variant of r (nil for nil).
func (t *tier) of(r *Rule) *Rule {
	if r == nil {
		return nil
	}
	return t.rules[r.index]
}

// Plan returns the plan whose limits the rule counts under: "" for a
// rule of the configuration, a tier's name for its variant, CustomPlan
// for limits a LimitProvider gave (whatever the caller's plan, which
// Decision.Plan names).
func (r *Rule) Plan() string { return r.plan }

// Plans returns the names of the configuration's plans, sorted.
func (c *Config) Plans() []string {
	if c == nil {
		return nil
	}
	out := make([]string, 0, len(c.tiers))
	for name := range c.tiers {
		out = append(out, name)
	}
	slices.Sort(out)
	return out
}

// PlanRule returns plan's variant of the rule named name ("default" for
// the default limit), or nil when there is no such plan or rule.
func (c *Config) PlanRule(plan, name string) *Rule {
	r := c.Rule(name)
	t := c.tier(plan)
	if r == nil || t == nil {
		return nil
	}
	return t.of(r)
}

// tier returns the plan named plan, or nil.
func (c *Config) tier(plan string) *tier {
	if c == nil || c.tiers == nil {
		return nil
	}
	return c.tiers[plan]
}

// variant returns base counting under lims as plan's: a copy with its own
// policy, "<rule>@<plan>", and its own prepared headers.
func variant(base *Rule, plan string, lims []algo.Limit) *Rule {
	v := *base
	v.rateItems, v.limitValue = nil, nil // prepare appends: never into base's
	v.Policy = &store.Policy{Name: base.Name + "@" + plan, Algorithm: base.Policy.Algorithm, Limits: lims, Location: base.Policy.Location}
	v.plan = plan
	v.prepare()
	return &v
}

// heaviest is the largest weight of r's paths whose cost exceeds
// capacity, and whether there is one: such a request could never pass.
func (r *Rule) heaviest(capacity int64) (w weight, over bool) {
	for _, x := range r.weights {
		if x.cost > capacity && (!over || x.cost > w.cost) {
			w, over = x, true
		}
	}
	return w, over
}

// burstAlgorithm reports whether a counts with a burst (a capacity other
// than the count).
func burstAlgorithm(a algo.Algorithm) bool { return a == algo.TokenBucket || a == algo.GCRA }

// tiers compiles specs against the compiled rules of c (its rules and
// default; a rule with a problem is missing, its error already recorded).
func (cc *compiler) tiers(specs []TierSpec, c *Config) {
	if len(specs) == 0 {
		return
	}
	byName := make(map[string]*Rule, len(c.rules)+1)
	for i, r := range c.rules {
		r.index = i
		byName[r.Name] = r
	}
	if c.def != nil {
		c.def.index = len(c.rules)
	}
	if n := len(specs) * (len(c.rules) + 1); n > maxPlanVariants {
		cc.fail("tiers", "", "tiers", strconv.Itoa(len(specs))+" plans", "%d plans of %d rules and the default make %d rule variants, at most %d", len(specs), len(c.rules), n, maxPlanVariants)
		return
	}
	c.tiers = make(map[string]*tier, len(specs))
	for i, ts := range specs {
		key := "tiers." + ts.Name
		if t := cc.tier(i, key, ts, c, byName); t != nil {
			c.tiers[ts.Name] = t
		}
	}
}

// tier compiles the plan specs[i], whose fields are at key; nil when its
// name is bad or taken.
func (cc *compiler) tier(i int, key string, ts TierSpec, c *Config, byName map[string]*Rule) *tier {
	field := "tiers." + ts.Name
	switch {
	case !ruleNameRE.MatchString(ts.Name):
		field = "tiers[" + strconv.Itoa(i) + "]"
		cc.fail(key, "", field, ts.Name, "plan names are 1 to 64 letters, digits, '_', '.' or '-'")
		return nil
	case ts.Name == CustomPlan:
		cc.fail(key, "", field, ts.Name, "%q is the plan of limits a LimitProvider gives: name the plan otherwise", CustomPlan)
		return nil
	case c.tiers[ts.Name] != nil:
		cc.fail(key, "", field, ts.Name, "duplicate plan")
		return nil
	}
	t := &tier{name: ts.Name, rules: make([]*Rule, len(c.rules)+1)}
	listed := map[string]bool{}
	for _, trs := range ts.Rules {
		rkey := key + ".rules." + trs.Rule
		_, exists := cc.seen[trs.Rule]
		switch {
		case listed[trs.Rule]:
			cc.fail(rkey, trs.Rule, field+".rules", trs.Rule, "plan %q lists the rule twice", ts.Name)
			continue
		case trs.Rule == DefaultRuleName:
			cc.fail(rkey, "", field+".rules", trs.Rule, "plan %q: %q is the default limit: give it as the plan's default field", ts.Name, DefaultRuleName)
			continue
		case !exists:
			cc.fail(rkey, "", field+".rules", trs.Rule, "plan %q names no rule of the configuration (rules: %s)", ts.Name, ruleNames(c))
			continue
		}
		listed[trs.Rule] = true
		base := byName[trs.Rule]
		if base == nil {
			continue // the rule has a problem of its own
		}
		if trs.Burst != 0 && !burstAlgorithm(base.Policy.Algorithm) {
			cc.fail(rkey+".burst", trs.Rule, field+".burst", strconv.FormatInt(trs.Burst, 10), "plan %q: burst applies to token_bucket and gcra only, not %v", ts.Name, base.Policy.Algorithm)
			continue
		}
		if lims := cc.planLimits(rkey, field, trs.Rule, trs.Limit, trs.Burst, windowOf(base, "window")); lims != nil {
			v := variant(base, ts.Name, lims)
			if w, over := base.heaviest(v.Policy.Capacity()); over {
				cc.fail(rkey+".limit", trs.Rule, field+".limit", strings.Join(trs.Limit, ", "), "plan %q: weight %d of %q exceeds the plan's capacity %d: such a request could never pass", ts.Name, w.cost, w.pat.raw, v.Policy.Capacity())
				continue
			}
			t.rules[base.index] = v
		}
	}
	if ts.Default != nil && len(ts.Default) == 0 {
		cc.fail(key+".default", DefaultRuleName, field+".default", "", "plan %q: an empty default: give a limit, or leave the field out for the file's default", ts.Name)
	}
	if len(ts.Default) > 0 && c.def != nil {
		if lims := cc.planLimits(key+".default", field, DefaultRuleName, ts.Default, 0, windowOf(c.def, "default_window")); lims != nil {
			t.rules[c.def.index] = variant(c.def, ts.Name, lims)
		}
	}
	// What the plan does not list keeps its own limits, under the plan's
	// counters.
	for i, r := range append(c.rules[:len(c.rules):len(c.rules)], c.def) {
		if r != nil && t.rules[i] == nil {
			t.rules[i] = variant(r, ts.Name, r.Policy.Limits)
		}
	}
	return t
}

// windowOf is how the compiled rule r counts its limits, and so its
// plans' limits: field asks for calendar periods for it.
func windowOf(r *Rule, field string) window {
	if r.Policy.Calendar() {
		return window{loc: r.Policy.Location, field: field}
	}
	return window{field: field}
}

// planLimits compiles a plan's limits of a rule at key (see
// compiler.limits), counted in the rule's window win, its errors' fields
// prefixed with the plan's field.
func (cc *compiler) planLimits(key, field, rule string, vals []string, burst int64, win window) []algo.Limit {
	n := len(cc.errs)
	lims := cc.limits(key+".limit", key+".burst", rule, vals, burst, win)
	for _, e := range cc.errs[n:] {
		if ce, ok := e.(*ConfigError); ok {
			if rule == DefaultRuleName && ce.Field == "limit" {
				ce.Field = "default" // the plan's default field, as written
			}
			ce.Field = field + "." + ce.Field
		}
	}
	return lims
}

// ruleNames lists the names of c's rules for a message, at most ten.
func ruleNames(c *Config) string {
	var names []string
	for _, r := range c.rules {
		if len(names) == 10 {
			names = append(names, "…")
			break
		}
		names = append(names, strconv.Quote(r.Name))
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// UnknownPlans counts the requests whose plan (Flow.Plan,
// Limiter.DecidePlan) the configuration they were decided under had no
// tier for, while it had tiers: they counted under the rules' own limits.
// An empty plan is not counted.
func (l *Limiter) UnknownPlans() uint64 { return l.unknownPlans.Load() }

// DecidePlan is Decide for a caller on plan: the request counts under the
// plan's limits (see TierSpec) when the configuration has that plan, else
// under the rules' own. Decide is DecidePlan with plan "".
func (l *Limiter) DecidePlan(ctx context.Context, method string, path Path, identity, plan string, bypass bool) (d Decision) {
	f := directFlow
	f.Limiter = l
	_ = f.DecideTo(ctx, &d, direct{identity: identity, plan: plan, bypass: bypass}, method, path, "") // written in place: a Decision is large to copy
	return d
}

// direct is a request of Limiter.DecidePlan: what its caller says of it.
type direct struct {
	identity, plan string
	bypass         bool
}

// directFlow is the flow of Limiter.DecidePlan (its Limiter set per
// call), so that a request decided without an adapter goes through the
// very steps of one: the identity is the key function's answer and, read
// as an IP address, the client IP of the network lists.
var directFlow = Flow[direct]{
	Key:      func(r direct) (string, error) { return r.identity, nil },
	Bypass:   func(r direct) bool { return r.bypass },
	ClientIP: func(r direct) string { return r.identity },
	Plan:     func(r direct) string { return r.plan },
	given:    true,
}

// limitsFor replaces the rules of m by what the caller of key on plan
// ("" for none) counts under: the LimitProvider's limits for it, else its
// plan's, else the rules' own; and sets d.Plan to the plan, when the
// configuration has it (custom limits leave it so). It returns that plan
// (nil when none), for the stacked rules (stackRulesFor).
func (l *Limiter) limitsFor(ctx context.Context, cfg *Config, m *match, plan, key string, d *Decision) *tier {
	var t *tier
	if plan != "" {
		if t = cfg.tiers[plan]; t == nil {
			l.unknownPlans.Add(1)
		}
	}
	m.rule = l.ruleFor(ctx, t, m.rule, key)
	m.shadow = l.ruleFor(ctx, t, m.shadow, key)
	if t != nil && (m.rule != nil || m.shadow != nil) {
		d.Plan = t.name
	}
	return t
}

// stackRulesFor makes the stacked rules of h the variants the caller of
// key on the plan t (nil: none) counts under, as limitsFor does the
// rules of a match.
func (l *Limiter) stackRulesFor(ctx context.Context, t *tier, h *stackHits, key string, d *Decision) {
	for i, r := range h.rules[:h.n] {
		h.rules[i] = l.ruleFor(ctx, t, r, key)
	}
	if t != nil {
		d.Plan = t.name
	}
}

// ruleFor is the variant of r the caller of key on the plan t (nil: none)
// counts under.
func (l *Limiter) ruleFor(ctx context.Context, t *tier, r *Rule, key string) *Rule {
	if r == nil {
		return nil
	}
	if l.provider != nil {
		if v := l.provider.rule(ctx, l, r, key); v != nil {
			return v
		}
	}
	if t != nil {
		return t.of(r)
	}
	return r
}

// resetAll forgets key's counters under r and each of its variants (and
// the blocks this limiter holds of key under any rule): every
// plan's, and the LimitProvider's (asked when its answer is not cached),
// but under a rule with a key of its own (RuleSpec.Key): the provider
// knows callers, and key is not one.
func (l *Limiter) resetAll(ctx context.Context, cfg *Config, key string, r *Rule) (cleared bool, err error) {
	// This limiter's blocks of key, and those taken while the store
	// resets: the next request asks the store.
	l.blocks.forget(key)
	defer l.blocks.forget(key)
	rules := []*Rule{r}
	for _, name := range cfg.Plans() {
		rules = append(rules, cfg.tiers[name].of(r))
	}
	if l.provider != nil && r.key == nil {
		if v := l.provider.rule(ctx, l, r, key); v != nil {
			rules = append(rules, v)
		}
	}
	for _, v := range rules {
		if !v.rated() {
			continue // a concurrency limit only: no counter (its slots are requests in flight)
		}
		c, e := l.store.Reset(ctx, key, v.Policy)
		if e != nil && err == nil {
			err = e
		}
		cleared = cleared || c
	}
	return cleared, err
}

// tierAttrs are the log attributes of a reload's plan changes: the plans
// added, removed, and changed (a rule's or the default's limits under the
// plan differ); none when neither configuration has plans.
func tierAttrs(old, new *Config) []any {
	if len(old.Plans()) == 0 && len(new.Plans()) == 0 {
		return nil
	}
	added, changed, removed := []string{}, []string{}, []string{}
	for _, name := range new.Plans() {
		o := old.tier(name)
		switch {
		case o == nil:
			added = append(added, name)
		case !sameTier(o, new.tiers[name]):
			changed = append(changed, name)
		}
	}
	for _, name := range old.Plans() {
		if new.tier(name) == nil {
			removed = append(removed, name)
		}
	}
	return []any{slog.Any("plans_added", added), slog.Any("plans_changed", changed), slog.Any("plans_removed", removed)}
}

// sameTier reports whether two plans count every rule, by name, under the
// same policies.
func sameTier(a, b *tier) bool {
	if len(a.rules) != len(b.rules) {
		return false
	}
	fp := make(map[string]uint64, len(a.rules))
	for _, r := range a.rules {
		fp[r.Name] = r.Policy.Fingerprint()
	}
	for _, r := range b.rules {
		if f, ok := fp[r.Name]; !ok || f != r.Policy.Fingerprint() {
			return false
		}
	}
	return true
}

// checkVariant reports why lims cannot be base's limits under a plan: a
// calendar limit for a rule that counts in windows of its limits' periods,
// or the reverse (counted in the rule's time zone), a policy that does not
// validate, a period that is not whole seconds, a
// burst on an algorithm without one, a weight of base above the capacity.
func checkVariant(base *Rule, lims []algo.Limit) error {
	p := &store.Policy{Name: base.Name, Algorithm: base.Policy.Algorithm, Limits: lims}
	switch cal := len(lims) > 0 && lims[0].Calendar != 0; {
	case cal && !base.Policy.Calendar():
		return fmt.Errorf("limit %v: a calendar limit, and the rule counts in windows of each limit's period (its window is not calendar)", lims[0])
	case !cal && base.Policy.Calendar():
		return fmt.Errorf("limit %v: the rule counts per calendar period (window: calendar), and so must its limits", lims[0])
	case cal:
		p.Location = base.Policy.Location
	}
	if err := p.Validate(); err != nil {
		return err
	}
	for _, x := range lims {
		if x.Period%time.Second != 0 {
			return fmt.Errorf("limit %v: the period must be a whole number of seconds, as in a configuration", x)
		}
		if x.Burst != 0 && !burstAlgorithm(p.Algorithm) {
			return fmt.Errorf("limit %v: burst %d: %v counts without a burst", x, x.Burst, p.Algorithm)
		}
	}
	if w, over := base.heaviest(p.Capacity()); over {
		return fmt.Errorf("weight %d of %q exceeds the capacity %d: such a request could never pass", w.cost, w.pat.raw, p.Capacity())
	}
	return nil
}
