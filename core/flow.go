package core

import (
	"context"
	"errors"
	"net/netip"
	"strings"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/rlkit/rlkit/core/store"
)

// Flow is the request flow every adapter shares, over the framework's own
// request type R (*http.Request, *gin.Context, echo.Context, *fiber.Ctx).
// It is for adapter authors, who build it with package adapter
// (adapter.Settings.Flow); applications use an adapter, or
// Limiter.Decide. The flow:
//
//  0. with limiting off every request passes untouched; a client IP in a
//     banned network (BanSpec) is refused with 403;
//  1. an exempt path passes uncounted;
//  2. a request the bypass predicate accepts (a super-admin), or from an
//     allowed network (AllowSpec), passes uncounted;
//  3. the key function names the caller; an error rejects the request
//     (the adapter answers with its error handler), and an empty identity
//     falls back to the client IP;
//  4. the limiter counts the request under the rule that applies, per the
//     rule's key (RuleSpec.Key: the identity, or the client IP, a header,
//     a path parameter), unless the identity is allowed (AllowSpec) or
//     the key is under the rule's penalty (PenaltySpec).
//
// The adapter then writes the Decision: Decision.WriteDenied (or
// Header, Status and Body) when it is not Allowed, or, when the
// application gives its own denied handler, Decision.SetLimitHeaders (or
// LimitHeader) before calling it; else Decision.SetHeaders (or Header)
// before calling the handler, and, when asked, NewContext; and, when the
// Decision is Deferred (a rule counts by outcome), Limiter.Complete with
// the status the client gets once the handler has answered. A Flow
// is safe for concurrent use.
type Flow[R any] struct {
	Limiter *Limiter
	// Key returns the caller's identity; nil means none (the client IP).
	Key func(R) (string, error)
	// Bypass reports callers never limited; nil means none.
	Bypass func(R) bool
	// ClientIP returns the request's client IP, as the limiter's
	// clientip.Config derives it (Limiter.ClientIP).
	ClientIP func(R) string
	// ClientAddr returns the request's client IP without the grouping
	// of IPv6 clients (clientip.Config.ClientAddr): the address the allow
	// and ban networks are matched against. nil means ClientIP.
	ClientAddr func(R) string
	// Cost returns the cost of a request known before the handler, from
	// the request itself (the size of a batch it sends): above 0, it
	// replaces the weight of its path (RuleSpec.Weights), under the
	// enforced rule and the rule in shadow mode alike; 0 or less keeps
	// the weight. A cost above a rule's capacity is refused as any
	// request with no room is (429), and one above 2^31 − 1 counts as
	// 2^31 − 1. Under a rule charged by response it is the cost charged
	// when the handler reports none (see RuleSpec.Cost). It is asked only
	// for a request that counts under some rule, after Key. nil means
	// none: the weights alone.
	Cost func(R) int64
	// Plan returns the caller's plan (see TierSpec), asked only when the
	// configuration has plans, after Key; nil means none: every caller
	// counts under the rules' own limits, as does one whose plan is "" or
	// unknown. The plan picks the caller's limits: take it from what the
	// client cannot forge (a verified token's claim, a customer record),
	// never from a plain request header. It is asked for every request,
	// unless the limiter caches plans (WithLimitCache): then once per
	// caller's store key per TTL, which assumes that the plan depends on
	// the caller's identity alone. Without the cache its string is looked
	// up, never kept; with it, it is kept with the key.
	Plan func(R) string
	// Header returns the value of the request's header of the canonical
	// name (gRPC: its metadata entry), "" when it has none; the
	// framework's memory it points into need not outlive the call. It is
	// asked only for rules that count per a header (RuleSpec.Key). nil
	// means none: such a rule counts every request under the header's
	// fallback, the client IP.
	Header func(r R, name string) string
	// FoldCase says that the router matches paths without regard to ASCII
	// case (Fiber's default): every spelling of a path is then also taken
	// in lower case (see Path), so that "/API/search", which such a router
	// serves by the handler of "/api/search", counts under its rule; and
	// a path parameter a rule counts per (RuleSpec.Key) is taken in lower
	// case, so that "/kb/A" and "/kb/a", one handler's, count as one.
	FoldCase bool

	given bool // Plan reads a plan given with the request (DecidePlan): never cached
}

// Decide runs the flow for request r. path is the request path as the
// framework's router reads it (URLPath for a *url.URL; see Path); route is
// the framework's route template ("/api/kb/:id/reindex" or
// "/api/kb/{id}/reindex": segments where ":name" or "{name}" stands for
// one segment; "" when unknown), which lets the rule be found once per route
// instead of once per request. The error is the key function's; the
// Decision is then zero.
//
// What outlives the call: route (for the standard methods) stays in the
// configuration's route cache, and the identity the key function or
// ClientIP returns goes to the store, which may keep it (the Redis store's
// deny cache does). Adapters over reused memory (fasthttp) pass copies of
// those; method and path are not kept (the configuration keeps a copy of
// its own of a path it is asked for again).
func (f *Flow[R]) Decide(ctx context.Context, r R, method string, path Path, route string) (d Decision, err error) {
	err = f.DecideTo(ctx, &d, r, method, path, route)
	return d, err
}

// DecideTo is Decide writing the Decision into *d, which it overwrites
// whole, instead of returning it: a Decision is over 200 bytes, and an
// adapter that keeps it in a variable of its own saves copying it. The
// error is the key function's; *d is then zero.
func (f *Flow[R]) DecideTo(ctx context.Context, d *Decision, r R, method string, path Path, route string) error {
	*d = Decision{}
	l := f.Limiter
	cfg := l.cfg.Load() // the one configuration this request is decided under
	if !cfg.Enabled() {
		d.Allowed = true
		return nil
	}
	// 0. A banned network is refused.
	var ip netip.Addr // the client IP when the lists have networks
	if addr := f.ClientAddr; cfg.extras && cfg.hasNets() && (addr != nil || f.ClientIP != nil) {
		if addr == nil {
			addr = f.ClientIP
		}
		if ip = listIP(addr(r)); cfg.banned(ip) {
			l.banned(d)
			return nil
		}
	}
	// 1. An exempt path passes uncounted.
	m, exempt := cfg.decide(method, path, route, f.FoldCase)
	if exempt {
		l.observe(Event{Outcome: OutcomeExempt, Allowed: true})
		d.Allowed = true
		return nil
	}
	// 2. So does a bypassed caller, and an allowed network.
	if f.Bypass != nil && f.Bypass(r) || cfg.allowsIP(ip) {
		l.bypassed(&m, nil)
		d.Allowed = true
		return nil
	}
	// 3. The key function names the caller, else the client IP.
	id, err := f.Identity(r)
	if err != nil {
		return err
	}
	// 4. The request counts under its rules (its plan's, if any), each
	// per its key. (The plan is kept out of m: a match returned in
	// registers is not copied.)
	var plan string
	if f.Plan != nil && cfg.tiers != nil {
		plan = f.plan(l, cfg, id, r)
	}
	// The stacked rules it counts under too (see stack.go), kept apart
	// from m.
	var h *stackHits // nil unless the request counts under a stacked rule
	if cfg.stacks != nil {
		h = newStackHits()
		if cfg.matchStacks(method, path, f.FoldCase, h); h.n == 0 {
			h.free()
			h = nil
		}
	}
	if f.Cost != nil && (m.rule != nil || m.shadow != nil || h != nil) {
		costOf(f.Cost(r), &m, h)
	}
	if cfg.keyed && (m.keyed() || h.keyed()) {
		// The rules' own keys go to count in d (see count).
		k := keyReq{l: l, id: id, ip: id, path: path, fold: f.FoldCase}
		if f.Key != nil {
			if f.ClientIP != nil {
				k.ip = f.ClientIP(r)
			}
			// An identity that is the client IP is the client IP's,
			// whether the key function fell back to it or named it
			// (Limiter.Decide's identity is its client IP: one that is
			// an IP address is that).
			k.named = id != k.ip || !listIP(id).IsValid()
		}
		d.Key = f.ruleKey(r, m.rule, &k)
		if key := f.ruleKey(r, m.shadow, &k); key != "" {
			d.shadow.more = &pendingMore{key: key}
		}
		if h != nil {
			for i, rule := range h.rules[:h.n] {
				h.keys[i] = f.ruleKey(r, rule, &k)
			}
		}
	}
	l.count(ctx, cfg, &m, caller{identity: id, plan: plan}, h, d)
	return nil
}

// plan returns the plan of r's caller, of identity id: Plan's answer,
// kept per store key (Limiter.Key(id), worked out only then) for the TTL
// of the limiter's cache when it has one (WithLimitCache), concurrent
// misses of one key waiting for one lookup.
// The plan a Flow is given per request (Limiter.DecidePlan) is not
// cached: it costs nothing.
func (f *Flow[R]) plan(l *Limiter, cfg *Config, id string, r R) string {
	if l.plans == nil || f.given {
		return f.Plan(r)
	}
	return l.plans.get(l.clock, cacheKey{key: l.Key(id)}, func(string) (string, int64) {
		return keptPlan(cfg, f.Plan(r)), l.plans.ttl
	})
}

// keptPlan is plan as the plan cache keeps it: never the memory of a
// request (Fiber reuses its buffers), so the name of cfg's tier when it
// is one, else a copy of at most 65 bytes, which no tier name matches
// either (they are at most 64).
func keptPlan(cfg *Config, plan string) string {
	if t := cfg.tiers[plan]; t != nil {
		return t.name
	}
	return strings.Clone(plan[:min(len(plan), 65)])
}

// Identity returns the identity a request counts under: the key
// function's answer, else (when it gives "") the client IP. The error is
// the key function's. Adapters give it to handlers that reset a caller's
// counters (Limiter.Reset).
func (f *Flow[R]) Identity(r R) (id string, err error) {
	if f.Key != nil {
		if id, err = f.Key(r); err != nil {
			return "", err
		}
	}
	if id == "" && f.ClientIP != nil {
		id = f.ClientIP(r)
	}
	return id, nil
}

// cheaprand is the runtime's per-thread random number generator: a
// nanosecond, no lock, not for security (it picks the store calls that are
// timed).
//
//go:linkname cheaprand runtime.cheaprand
func cheaprand() uint32

// retryTimeout bounds the second call to the store for a request that was
// cancelled while the first one ran (see take).
const retryTimeout = time.Second

// count counts one request of identity under the rules of m (from cfg),
// or their variants for its plan (a tier's name, or "") or its custom
// limits (limitsFor), each under its key, and fills d in place (a
// Decision is large to copy): the enforced rule decides, with the failure
// policy; the rule in shadow mode, if any, is counted too and only
// reported. d comes zero but for the store keys of the rules that count
// per a key of their own (RuleSpec.Key), which the flow puts there: the
// enforced rule's in d.Key, the shadow rule's in d.shadow.more; the
// others count under the caller's key. The allow list, plans and a
// LimitProvider know the caller by its own key (Limiter.Key), whatever
// key its rules count per.
func (l *Limiter) count(ctx context.Context, cfg *Config, m *match, who caller, h *stackHits, d *Decision) {
	identity := who.identity
	key := l.Key(identity)
	if cfg.extras && cfg.allowsKey(key) {
		d.Key, d.shadow.more = "", nil
		l.bypassed(m, h)
		d.Allowed = true
		if h != nil {
			h.free()
		}
		return
	}
	if who.plan != "" || l.provider != nil {
		t := l.limitsFor(ctx, cfg, m, who.plan, key, d)
		if h != nil {
			l.stackRulesFor(ctx, t, h, key, d)
		}
	}
	user := key    // the caller's store key, of the rules keyed by user
	if cfg.keyed { // key becomes the deciding rule's
		key = decidingKey(key, m, d)
	}
	d.Key = key
	d.style = l.headerStyle(cfg)
	d.Allowed = true
	if m.rule != nil && !l.penalized(ctx, cfg, m.rule, m.cost, key, d) {
		d.Rule, d.Cost = m.rule, m.cost
		a := ask{key: key, rule: m.rule, cost: m.cost, plan: d.Plan}
		var s seat // its place in the rule's queue, while its wait holds it (wait.go)
		// A rule with a concurrency limit takes its slot first (and
		// may decide the request there).
		if m.rule.conc == nil || l.bounded(ctx, cfg, a, d, &s) {
			var sc *stackCall // the count under stacked rules too, if any
			if h != nil && h.enforcedStacks() {
				sc = newStackCall(a, m.rule.byOutcome(), h, user)
			}
			var (
				o   Outcome
				lat time.Duration
			)
			if m.rule.wait == 0 {
				o, lat = l.take(ctx, a, sc, m.rule.byOutcome(), &d.Result, &d.Err)
			} else {
				o, lat = l.takeOrWait(ctx, a, sc, d, &s) // may hold the request (wait.go)
			}
			if sc.decided(o) {
				sc.lat = lat
				l.settleStack(ctx, cfg, a, sc, o, d)
			} else {
				d.Allowed = d.Result.Allowed
				switch o {
				case OutcomeStoreError:
					d.Result, d.Allowed = store.Result{}, l.failsOpen(cfg)
					l.warn(m.rule, d.Allowed, d.Err)
				case OutcomeDenied:
					l.penalize(ctx, cfg, m.rule, key, d)
				}
				switch {
				case d.Waited != 0:
					l.reportHeld(a, o, d, lat)
				case !d.wait(a, o, d.Err): // counted by outcome: reported by Complete
					l.report(a, o, d.Allowed, d.Err, lat)
				}
			}
		} else if d.Allowed && !m.rule.rated() && h != nil && h.enforcedStacks() {
			// The rule bounds requests in flight only, and admitted the
			// request (it holds a slot, or the store failed open): the
			// stacked rules decide, and their headers are written.
			d.style = l.headerStyle(cfg)
			l.countStacks(ctx, cfg, h, user, d)
		}
		if d.hold != nil && !d.Allowed {
			l.giveBack(ctx, d) // refused by the limits: the slot goes back
		}
	} else if m.rule == nil && h != nil && h.enforcedStacks() {
		// No rule applies but stacked ones (the default limit is in
		// shadow mode): they decide.
		l.countStacks(ctx, cfg, h, user, d)
	}
	if h != nil {
		l.countShadowStacks(ctx, h, user, d)
		h.free() // the request is counted
	}
	if m.shadow != nil {
		l.countShadow(ctx, cfg, m, identity, d)
	}
	if d.hold != nil {
		l.watch(ctx, d)
	}
}

// countShadow counts the request of d under m.shadow, the rule in shadow
// mode: its answer is the Decision's when no rule is enforced (its
// headers written only WithShadowHeaders), else it is only reported.
func (l *Limiter) countShadow(ctx context.Context, cfg *Config, m *match, identity string, d *Decision) {
	var (
		res  store.Result
		err  error
		into = &res
		errp = &err
	)
	if d.Rule == nil { // nothing enforced counted the request
		d.Rule, d.Cost = m.shadow, m.shadowCost
		into, errp = &d.Result, &d.Err
		if !l.shadowHeaders || !m.shadow.rated() {
			d.style = HeadersNone
		}
	}
	skey := d.Key
	if cfg.keyed {
		skey = l.shadowKey(identity, d)
	}
	busy := false // the rule's concurrency limit would refuse the request
	if m.shadow.conc != nil && d.Allowed {
		busy = l.shadowSlot(ctx, m.shadow, m.shadowCost, skey, d) == OutcomeShadowDenied
	}
	if !m.shadow.rated() {
		return // a concurrency limit only: reported by shadowSlot, or nothing to count
	}
	a := ask{key: skey, rule: m.shadow, cost: m.shadowCost, plan: d.Plan}
	o, lat := l.take(ctx, a, nil, m.shadow.byOutcome(), into, errp)
	switch o {
	case OutcomeStoreError:
		*into = store.Result{}
		l.warn(m.shadow, true, *errp)
	case OutcomeDenied:
		o, d.ShadowDenied = OutcomeShadowDenied, true
		l.shadowDenied(m.shadow, skey, m.shadowCost, into)
	case OutcomeAllowed:
		if busy {
			o = OutcomeShadowDenied // no status to count: enforced, the rule would refuse it
		}
	}
	switch {
	case d.wait(a, o, *errp):
		return // counted by outcome: reported by Complete
	case o == OutcomeAllowed && m.shadow.byOutcome():
		a.cost = 0 // the enforced rule refused the request: no status to count
	}
	l.report(a, o, true, *errp, lat)
}

// ask is one rule's count of a request: key's, under rule, at cost; what
// the limiter asks the store (take) and reports (report), with the
// caller's plan (Decision.Plan) for the report.
type ask struct {
	key  string
	rule *Rule
	cost int64
	plan string
}

// report passes the event of one rule's count a to the observer, if any,
// with its outcome, whether the request was allowed, the store's error
// and the call's latency. (It inlines to one test when there is none.)
func (l *Limiter) report(a ask, o Outcome, allowed bool, err error, latency time.Duration) {
	if l.observer != nil {
		l.emit(a, o, allowed, err, latency)
	}
}

// emit is report with an observer: kept out of line, so that report
// inlines.
//
//go:noinline
func (l *Limiter) emit(a ask, o Outcome, allowed bool, err error, latency time.Duration) {
	l.observer(Event{Rule: a.rule.Name, Plan: a.plan, Key: a.key, Outcome: o, Allowed: allowed, Cost: a.cost, Err: err, Latency: latency})
}

// bypassed reports a bypassed request, under each rule it would count
// under.
func (l *Limiter) bypassed(m *match, h *stackHits) {
	if l.observer == nil {
		return
	}
	if m.rule != nil {
		l.observer(Event{Rule: m.rule.Name, Outcome: OutcomeBypassed, Allowed: true})
	}
	if m.shadow != nil {
		l.observer(Event{Rule: m.shadow.Name, Outcome: OutcomeBypassed, Allowed: true})
	}
	if h != nil {
		for _, r := range h.rules[:h.n] {
			l.observer(Event{Rule: r.Name, Outcome: OutcomeBypassed, Allowed: true})
		}
	}
}

// take asks the store about a, into *res and *err, and tells the
// outcome: allowed, denied or store error. With peek it asks what a count
// would answer (store.Store.Peek), counting nothing. With sc (the count
// of the request under stacked rules too, a's rule among them when set)
// it asks about every rule of sc at once (takeStack), and *res is the
// deciding rule's answer. (sc is not in a, which the register ABI then
// passes in registers.)
func (l *Limiter) take(ctx context.Context, a ask, sc *stackCall, peek bool, res *store.Result, err *error) (o Outcome, latency time.Duration) {
	var start int64
	timed := l.observer != nil && !l.local && cheaprand()&l.sampleMask == 0
	if timed {
		start = l.clock.Now()
	}
	var cancel context.CancelFunc
	for c := ctx; ; {
		if sc != nil {
			l.takeStack(c, sc, res, err)
		} else if peek {
			*res, *err = l.store.Peek(c, a.key, a.rule.Policy, a.rule.peekCost(a.cost))
		} else if a.rule.block > 0 {
			l.takeBlocks(c, a, res, err)
		} else {
			*res, *err = l.store.Take(c, a.key, a.rule.Policy, a.cost)
		}
		if *err == nil || cancel != nil || !errors.Is(ctx.Err(), context.Canceled) {
			break
		}
		// The request was cancelled (net/http cancels it when the client
		// closes its side of the connection, though it may still read
		// the answer): the decision must not depend on that, or a client
		// could make the store fail and pass uncounted. Ask again without
		// the cancellation, for at most retryTimeout. (A store that had
		// counted the request before failing counts it twice: the safe
		// side.)
		c, cancel = context.WithTimeout(context.WithoutCancel(ctx), retryTimeout)
	}
	if cancel != nil {
		cancel()
	}
	if timed {
		latency = time.Duration(l.clock.Now() - start)
	}
	switch {
	case *err != nil:
		return OutcomeStoreError, latency
	case !res.Allowed:
		return OutcomeDenied, latency
	}
	return OutcomeAllowed, latency
}
