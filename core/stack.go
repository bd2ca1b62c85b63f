package core

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rlkit/rlkit/core/store"
)

// Stacked rules (RuleSpec.Stack) count every request they match beside
// the one rule that applies to it: a request counts under that rule and
// each stacked rule its path and method match, all in one store call
// (store.MultiTaker.TakeAll), which consumes from every one of them or,
// when any refuses, from none.

// maxStacks is the most stacked rules of one configuration: with the
// rule that applies, a request counts under at most store.MaxTakes.
const maxStacks = store.MaxTakes - 1

// stacked checks the fields of the stacked rule at key that belong to
// the rule that applies to a request, not to a limit counted beside it.
func (cc *compiler) stacked(key, label string, rs RuleSpec) {
	const why = "a stacked rule (stack: true) is a limit counted beside the rule that applies, which alone has"
	refuse := func(field, value string) {
		cc.fail(key+"."+field, label, field, value, "%s %s", why, field)
	}
	if rs.Count != "" && rs.Count != "all" {
		refuse("count", rs.Count)
	}
	if rs.ClearOnSuccess {
		refuse("clear_on_success", "true")
	}
	if rs.Cost != "" {
		refuse("cost", rs.Cost)
	}
	if rs.Concurrent != 0 || cc.ln[key+".concurrent"] != 0 {
		refuse("concurrent", strconv.FormatInt(rs.Concurrent, 10))
	}
	if rs.Lease != "" {
		refuse("lease", rs.Lease)
	}
	if rs.Wait != "" {
		refuse("wait", rs.Wait)
	}
	if _, given := cc.ln[key+".wait_queue"]; given || rs.WaitQueue != 0 {
		refuse("wait_queue", strconv.FormatInt(rs.WaitQueue, 10))
	}
	if rs.Penalty != nil {
		refuse("penalty", "")
	}
}

// stackNames checks the stacked rules of c, compiled from specs: at most
// maxStacks, and the names of their limits in the draft headers (see
// limitName) unlike those of every other rule's, so that the RateLimit
// items of one request's rules are told apart.
func (cc *compiler) stackNames(specs []RuleSpec, c *Config) {
	if len(c.stacks) == 0 {
		return
	}
	index := make(map[string]int, len(specs)) // rule name → its place in specs
	for i, rs := range specs {
		index[rs.Name] = i
	}
	if len(c.stacks) > maxStacks {
		r := c.stacks[maxStacks]
		cc.fail("rules."+strconv.Itoa(index[r.Name])+".stack", r.Name, "stack", "true", "%d stacked rules, at most %d: a request counts under at most %d rules", len(c.stacks), maxStacks, store.MaxTakes)
	}
	owner := map[string]string{} // the name of a limit → its rule's
	rules := append(c.rules[:len(c.rules):len(c.rules)], c.def)
	for _, r := range rules {
		if r == nil || !r.rated() {
			continue
		}
		for i := range r.Policy.Limits {
			name := limitName(r.Name, r.Policy.Limits, i)
			if o, dup := owner[name]; dup && o != r.Name && (r.stack || c.Rule(o).stack) {
				at := "rules." + strconv.Itoa(index[r.Name]) + ".name"
				if r == c.def {
					at = "default"
				}
				cc.fail(at, r.Name, "name", r.Name, "its limit is named %q in the RateLimit headers, as one of rule %q, which a request may count under with it (stack: true): rename one", name, o)
			}
			owner[name] = r.Name
		}
	}
}

// caller is who a request comes from: its identity (Flow.Identity) and
// its plan ("" when none).
type caller struct{ identity, plan string }

// stackHits are the stacked rules a request counts under, with its cost
// and store key under each (a key "" until the limiter gives the
// caller's).
type stackHits struct {
	n     int
	rules [maxStacks]*Rule
	costs [maxStacks]int64
	keys  [maxStacks]string
	call  *stackCall // that holds them
}

// newStackHits returns empty hits, in a stackCall for reuse (free), so
// that a request counted under no stacked rule, or in a configuration
// without, keeps none on its stack.
func newStackHits() *stackHits {
	sc := stackCalls.Get().(*stackCall)
	sc.hits.n, sc.hits.call = 0, sc
	return &sc.hits
}

// matchStacks finds the stacked rules of c that a request for p counts
// under, into h: each whose methods include method and whose paths match
// a spelling of p (see Path), at the highest cost a matching spelling has
// under it, so that no spelling of a path escapes a stacked rule, as none
// escapes the rule that applies.
func (c *Config) matchStacks(method string, p Path, fold bool, h *stackHits) {
	var buf [maxSpellings]string
	sp := spellings(p, &buf)
	for _, r := range c.stacks {
		if !r.allows(method) {
			continue
		}
		var cost int64
		for _, s := range sp {
			if t := trimSlash(s); r.pathOf(t, fold) >= 0 {
				cost = max(cost, r.cost(t, fold))
			}
		}
		if cost > 0 && h.n < maxStacks {
			h.rules[h.n], h.costs[h.n], h.keys[h.n] = r, cost, ""
			h.n++
		}
	}
}

// keyed reports whether a stacked rule of h (nil: none) counts per a key
// of its own.
func (h *stackHits) keyed() bool {
	if h == nil {
		return false
	}
	for _, r := range h.rules[:h.n] {
		if r.key != nil {
			return true
		}
	}
	return false
}

// stackCall is one request's count under its rules, the rule that
// applies (when it counts there) and the stacked ones: what TakeAll is
// asked and answers. It is reused (stackCalls): its arrays go to the
// store, and would otherwise be allocated with every request.
type stackCall struct {
	hits    stackHits // the stacked rules matched
	takes   [store.MaxTakes]store.Take
	results [store.MaxTakes]store.Result
	rules   [store.MaxTakes]*Rule
	n       int
	// first is 1 when takes[0] is the rule that applies asked with Peek
	// (it counts by outcome, or charges by response): TakeAll takes the
	// others only once it admits the request.
	first int
	// decider is the index of the rule that decided: when refused, the
	// refusing rule with the longest Retry-After; else the one with the
	// fewest units left (the first of equals); -1 before a decision.
	decider int
	asked   bool          // the store was asked for takes[first:]
	lat     time.Duration // the call's latency (see take)
}

var stackCalls = sync.Pool{New: func() any { return new(stackCall) }}

// stackRecord is what a Decision keeps of the rules it counted under
// beside its Rule, one entry per rule, in one allocation of just as many
// (Decision.stack points at the first, which knows how many follow, so
// that a Decision stays as small as without stacked rules): each rule's
// limits, for the draft headers, which list them all, and its key and
// cost, for the count of the rule that applies when it waits for the
// response status (Decision.waits: its Rule may be another).
type stackRecord struct {
	n       int32 // the entries in the record (in the first)
	pending bool  // (the first) the rule that applies waits for the status
	rule    *Rule
	key     string
	cost    int64
	limits  [store.MaxLimits]store.LimitState
}

// newStackRecord records the rules of sc, once asked.
func newStackRecord(sc *stackCall) *stackRecord {
	rec := make([]stackRecord, sc.n)
	for j := range rec {
		e := &rec[j]
		e.rule, e.key, e.cost, e.limits = sc.rules[j], sc.takes[j].Key, sc.takes[j].Cost, sc.results[j].Limits
	}
	rec[0].n = int32(sc.n)
	return &rec[0]
}

// entries returns the entries of the record rec starts.
func (rec *stackRecord) entries() []stackRecord { return unsafe.Slice(rec, rec.n) }

// newStackCall makes the count of a request under the enforced rules of
// h (those in shadow mode are counted apart: countShadowStacks), beside a
// (the rule that applies, when a.rule is set), whose caller's store key
// is key.
func newStackCall(a ask, peek bool, h *stackHits, key string) *stackCall {
	sc := h.call
	sc.n, sc.first, sc.decider, sc.asked = 0, 0, -1, false
	if a.rule != nil {
		sc.add(a.rule, a.key, a.cost)
		if peek {
			sc.first = 1
		}
	}
	for i, r := range h.rules[:h.n] {
		if r.shadow {
			continue
		}
		k := h.keys[i]
		if k == "" {
			k = key
		}
		sc.add(r, k, h.costs[i])
	}
	return sc
}

func (sc *stackCall) add(r *Rule, key string, cost int64) {
	sc.takes[sc.n] = store.Take{Key: key, Policy: r.Policy, Cost: cost}
	sc.rules[sc.n] = r
	sc.n++
}

// decided reports whether sc (nil: none) decided a request whose count
// had outcome o: the store answered about it, or failed. A request the
// rule's wait refused before asking the store (its queue was full, or
// too long) was decided by the rule alone.
func (sc *stackCall) decided(o Outcome) bool {
	return sc != nil && (sc.decider >= 0 || o == OutcomeStoreError)
}

// free puts the call of h back for reuse, holding no key nor rule: the
// request is counted.
func (h *stackHits) free() {
	sc := h.call
	clear(sc.takes[:sc.n])
	clear(sc.rules[:sc.n])
	clear(h.rules[:h.n])
	clear(h.keys[:h.n])
	sc.n, h.n, h.call = 0, 0, nil
	stackCalls.Put(sc)
}

// errNoMultiTaker is the error of a count under stacked rules over a
// store that cannot take several at once (NewLimiter and reloads refuse
// such a configuration; a store swapped in by a wrapper may still lack
// it).
var errNoMultiTaker = errors.New("the store cannot count one request under several rules at once (it is no store.MultiTaker)")

// takeStack asks the store about sc, into *res (the deciding rule's
// answer) and *err: with peek, the rule that applies first (store.Peek),
// and the stacked rules only once it admits the request; then every
// remaining take at once (TakeAll).
func (l *Limiter) takeStack(ctx context.Context, sc *stackCall, res *store.Result, err *error) {
	sc.decider, sc.asked = -1, false
	if sc.first == 1 {
		t := &sc.takes[0]
		sc.results[0], *err = l.store.Peek(ctx, t.Key, t.Policy, sc.rules[0].peekCost(t.Cost))
		if *err != nil || !sc.results[0].Allowed {
			sc.decider, *res = 0, sc.results[0]
			return
		}
	}
	multi, ok := l.store.(store.MultiTaker)
	if !ok {
		*err = errNoMultiTaker
		return
	}
	sc.asked = true
	if _, *err = multi.TakeAll(ctx, sc.takes[sc.first:sc.n], sc.results[sc.first:sc.n]); *err != nil {
		return
	}
	sc.decider = sc.decide()
	*res = sc.results[sc.decider]
}

// decide returns the index of the deciding rule of sc, once asked: the
// refusing rule with the longest Retry-After (the first of equals), else
// the rule with the fewest units left (the first of equals).
func (sc *stackCall) decide() int {
	best := 0
	for i := 1; i < sc.n; i++ {
		r, b := &sc.results[i], &sc.results[best]
		switch {
		case !r.Allowed && b.Allowed, !r.Allowed && r.RetryAfter > b.RetryAfter:
			best = i
		case r.Allowed && b.Allowed && r.Remaining < b.Remaining:
			best = i
		}
	}
	return best
}

// outcome is what rule i of sc answered, the call's outcome being o
// (take's): allowed, denied, or a store error for every rule; a rule the
// store was not asked about (the rule that applies refused first) has
// none (ok false).
func (sc *stackCall) outcome(i int, o Outcome) (_ Outcome, ok bool) {
	switch {
	case o == OutcomeStoreError:
		return o, i < sc.first || sc.asked || i == 0
	case i >= sc.first && !sc.asked:
		return 0, false
	case sc.results[i].Allowed:
		return OutcomeAllowed, true
	}
	return OutcomeDenied, true
}

// settleStack finishes the count of a request under its rule that
// applies (a.rule, when set) and the stacked rules of sc, which take
// answered with outcome o (after sc.lat) into d.Result
// and d.Err: d names the deciding rule (Rule, Key, Cost), keeps every
// rule's limits for the headers, and each rule's event goes to the
// observer.
func (l *Limiter) settleStack(ctx context.Context, cfg *Config, a ask, sc *stackCall, o Outcome, d *Decision) {
	lat := sc.lat
	held := o // the call's own outcome: OutcomeWaited when the rule's wait held it
	if o == OutcomeWaited {
		o = OutcomeAllowed
	}
	if o == OutcomeStoreError {
		if a.rule == nil {
			d.Rule, d.Key, d.Cost = sc.rules[0], sc.takes[0].Key, sc.takes[0].Cost
		}
		d.Result, d.Allowed = store.Result{}, l.failsOpen(cfg)
		l.warn(d.Rule, d.Allowed, d.Err)
	} else {
		d.Allowed = d.Result.Allowed
		i := sc.decider
		d.Rule, d.Key, d.Cost = sc.rules[i], sc.takes[i].Key, sc.takes[i].Cost
		if a.rule != nil && !sc.results[0].Allowed {
			// The rule that applies refused the request itself: a denial
			// toward its penalty.
			l.penalize(ctx, cfg, a.rule, a.key, d)
			if d.Penalty {
				d.Rule, d.Key, d.Cost = a.rule, a.key, a.cost
			}
		}
		if sc.asked {
			d.stack = newStackRecord(sc)
		}
	}
	for i := range sc.n {
		oi, ok := sc.outcome(i, o)
		if !ok {
			continue
		}
		ai := ask{key: sc.takes[i].Key, rule: sc.rules[i], cost: sc.takes[i].Cost, plan: a.plan}
		if i == 0 && a.rule != nil {
			if d.Waited != 0 {
				if held == OutcomeWaited {
					oi = held
				}
				l.reportHeld(ai, oi, d, lat)
				continue
			}
			if l.waitStacked(ai, oi, d) {
				continue // counted by outcome: reported by Complete
			}
		}
		if oi == OutcomeAllowed && !d.Allowed {
			ai.cost = 0 // another rule refused the request: nothing was counted
		}
		l.report(ai, oi, d.Allowed, d.Err, lat)
	}
}

// countStacks counts the request of d under the enforced stacked rules of
// h alone, none of its other rules counting it (no rule applies, or it
// bounds requests in flight only); user is the caller's store key.
func (l *Limiter) countStacks(ctx context.Context, cfg *Config, h *stackHits, user string, d *Decision) {
	a := ask{plan: d.Plan}
	sc := newStackCall(a, false, h, user)
	var o Outcome
	o, sc.lat = l.take(ctx, a, sc, false, &d.Result, &d.Err)
	l.settleStack(ctx, cfg, a, sc, o, d)
}

// waitStacked is Decision.wait for the count a (outcome o) of the rule
// that applies to a request counted under stacked rules too, which may
// have made another rule d's Rule: the count that waits is a's, kept in
// d's stack record when d has one.
func (l *Limiter) waitStacked(a ask, o Outcome, d *Decision) bool {
	if !a.rule.byOutcome() {
		return false
	}
	rule, cost, key := d.Rule, d.Cost, d.Key
	d.Rule, d.Cost, d.Key = a.rule, a.cost, a.key
	waits := d.waitOutcome(a, o, d.Err)
	d.Rule, d.Cost, d.Key = rule, cost, key
	if rec := d.stack; waits && rec != nil {
		rec.pending = true // its entry is the first: a's
	}
	return waits
}

// countShadowStacks counts the request of d under each stacked rule of h
// in shadow mode, apart from the enforced ones: reported, never refusing
// (see countShadow); key is the caller's store key.
func (l *Limiter) countShadowStacks(ctx context.Context, h *stackHits, key string, d *Decision) {
	for i, r := range h.rules[:h.n] {
		if !r.shadow {
			continue
		}
		a := ask{key: h.keys[i], rule: r, cost: h.costs[i], plan: d.Plan}
		if a.key == "" {
			a.key = key
		}
		var (
			res store.Result
			err error
		)
		o, lat := l.take(ctx, a, nil, false, &res, &err)
		switch o {
		case OutcomeStoreError:
			l.warn(r, true, err)
		case OutcomeDenied:
			o, d.ShadowDenied = OutcomeShadowDenied, true
			l.shadowDenied(r, a.key, a.cost, &res)
		}
		l.report(a, o, true, err, lat)
	}
}

// enforcedStacks reports whether h holds a stacked rule that is enforced.
func (h *stackHits) enforcedStacks() bool {
	for _, r := range h.rules[:h.n] {
		if !r.shadow {
			return true
		}
	}
	return false
}

// setStackHeaders is SetHeaders' draft headers for d counted under
// stacked rules: every rule's items, in a buffer of a RateLimit value of
// several rules (apart, so that one of a rule alone clears less).
func (d *Decision) setStackHeaders(h http.Header) {
	var tmp [len(hugeValue{}.b)]byte
	h[hdrPolicy] = d.stack.policyHeader()
	h[hdrRateLimit] = headerValue(d.appendRateLimit(tmp[:0]))
}

// policyHeader returns the RateLimit-Policy value of the rules of rec:
// each one's, in order. The value of each set of rules is kept
// (stackPolicies), so that a route's requests, which count under the same
// rules, share one.
func (rec *stackRecord) policyHeader() []string {
	var (
		k stackPolicyKey
		h uint64
	)
	es := rec.entries()
	for j := range es {
		v := es[j].rule.policyHeader() // a calendar rule's changes with its period
		k[j] = unsafe.Pointer(unsafe.StringData(v[0]))
		h = (h ^ uint64(uintptr(k[j]))) * 0x100000001b3
	}
	slot := &stackPolicies[(h^h>>32)%uint64(len(stackPolicies))]
	if p := slot.Load(); p != nil && p.key == k {
		return p.value
	}
	var b strings.Builder
	for j := range es {
		if j > 0 {
			b.WriteString(", ")
		}
		b.WriteString(es[j].rule.policyHeader()[0])
	}
	p := &stackPolicy{key: k, value: []string{b.String()}[:1:1]}
	slot.Store(p)
	return p.value
}

// stackPolicyKey identifies the RateLimit-Policy value of a set of rules:
// each rule's own value (its memory), in order. The pointers keep what
// they point at alive, so that a key never stands for another's memory.
type stackPolicyKey [store.MaxTakes]unsafe.Pointer

// stackPolicy is the RateLimit-Policy value of the rules of key.
type stackPolicy struct {
	key   stackPolicyKey
	value []string
}

// stackPolicies keeps the RateLimit-Policy values of recent sets of rules,
// by a hash of their key: a slot holds the last set that hashed to it.
var stackPolicies [256]atomic.Pointer[stackPolicy]

// Stacked reports whether the rule is stacked (RuleSpec.Stack): it counts
// the requests it matches beside the rule that applies to them.
func (r *Rule) Stacked() bool { return r.stack }
