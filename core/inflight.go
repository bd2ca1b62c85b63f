package core

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// A rule's concurrency limit (RuleSpec.Concurrent) is a count of slots
// per identity in the store (a store.ConcurrencyStore): the limiter takes
// one before the handler runs and gives it back once the request is over
// (Complete) or its context ends, whichever comes first. With limits too,
// the slot is taken first and given back at once when the limits refuse
// the request, so a request refused by the limits holds no slot, and one
// refused for lack of a slot is not counted against the limits (a count
// cannot be given back; a slot can). Under a rule with a wait too
// (RuleSpec.Wait), a request that finds every slot taken waits for one in
// the rule's queue of its key, the queue of the requests waiting for room
// under its limits (wait.go): one first-come-first-served order per rule
// and key, one deadline (its arrival and the wait) for the slot and the
// limits both. A slot given back in this limiter wakes the head of that
// queue; one given back by another process sharing the store is seen by
// the head's polling (slotPoll).

// defaultLease is a slot's lease when the rule gives none (RuleSpec.Lease).
const defaultLease = 30 * time.Second

// maxLease bounds a rule's lease: a slot a dead process held is lost for
// at most that long.
const maxLease = 24 * time.Hour

// Concurrent returns the rule's concurrency limit: the most requests of
// one identity in flight at once under it (RuleSpec.Concurrent); 0 when
// it has none.
func (r *Rule) Concurrent() int64 {
	if r.conc == nil {
		return 0
	}
	return r.conc.Limit
}

// rated reports whether r has limits (a rule may bound requests in flight
// only).
func (r *Rule) rated() bool { return len(r.Policy.Limits) > 0 }

// concurrency compiles the concurrent and lease fields of the rule named
// name at key; nil when it has none or they have a problem.
func (cc *compiler) concurrency(key, label, name string, rs RuleSpec) *store.Concurrency {
	written := cc.ln[key+".concurrent"] != 0
	switch {
	case rs.Concurrent < 0 || rs.Concurrent == 0 && written:
		cc.fail(key+".concurrent", label, "concurrent", strconv.FormatInt(rs.Concurrent, 10), "want the most requests of one identity in flight at once: at least 1")
		return nil
	case rs.Concurrent == 0:
		if rs.Lease != "" {
			cc.fail(key+".lease", label, "lease", rs.Lease, "a lease is a concurrency limit's: it needs concurrent")
		}
		return nil
	case rs.Concurrent > algo.MaxCount:
		cc.fail(key+".concurrent", label, "concurrent", strconv.FormatInt(rs.Concurrent, 10), "at most %d", algo.MaxCount)
		return nil
	}
	lease := defaultLease
	if rs.Lease != "" {
		d, err := algo.ParsePeriod(rs.Lease)
		switch {
		case err != nil:
			cc.fail(key+".lease", label, "lease", rs.Lease, "%v: a lease is a count and a unit, such as 30s, 2m or 1h", err)
			return nil
		case d < time.Second:
			cc.fail(key+".lease", label, "lease", rs.Lease, "at least a second")
			return nil
		case d > maxLease:
			cc.fail(key+".lease", label, "lease", rs.Lease, "at most a day: a process that dies holding slots loses them for that long")
			return nil
		}
		lease = d
	}
	return &store.Concurrency{Name: name, Limit: rs.Concurrent, Lease: lease}
}

// unlimited checks the rule at key that bounds requests in flight and has
// no limit: the fields that apply to limits only are errors.
func (cc *compiler) unlimited(key, label string, rs RuleSpec) {
	const why = "the rule has no limit (concurrent alone bounds requests in flight, one slot each)"
	if rs.Algorithm != "" {
		cc.fail(key+".algorithm", label, "algorithm", rs.Algorithm, "an algorithm counts a rule's limits, and %s", why)
	}
	if rs.Burst != 0 {
		cc.fail(key+".burst", label, "burst", strconv.FormatInt(rs.Burst, 10), "a burst is a limit's, and %s", why)
	}
	if len(rs.Weights) > 0 {
		cc.fail(key+".weights", label, "weights", rs.Weights[0].Path, "weights are costs against a rule's limits, and %s", why)
	}
	if rs.Count != "" && rs.Count != "all" {
		cc.fail(key+".count", label, "count", rs.Count, "count says which requests a rule's limits count, and %s", why)
	}
	if rs.Penalty != nil {
		cc.fail(key+".penalty", label, "penalty", "", "a penalty follows denials by a rule's limits, and %s", why)
	}
	if rs.Window != "" {
		cc.fail(key+".window", label, "window", rs.Window, "a window counts a rule's limits, and %s", why)
	}
	if rs.Timezone != "" {
		cc.fail(key+".timezone", label, "timezone", rs.Timezone, "a time zone places a calendar rule's periods, and %s", why)
	}
	if rs.Cost != "" {
		cc.fail(key+".cost", label, "cost", rs.Cost, "a cost is charged against a rule's limits, and %s", why)
	}
}

// errNoSlots is the error of a configuration that bounds requests in
// flight on a store that cannot.
var errNoSlots = errors.New("the store bounds no requests in flight (it is no store.ConcurrencyStore)")

// runnable reports why cfg cannot run on the limiter's store: a rule that
// bounds requests in flight (RuleSpec.Concurrent) on a store that is no
// store.ConcurrencyStore, or a stacked rule (RuleSpec.Stack) on one that
// is no store.MultiTaker.
func (l *Limiter) runnable(cfg *Config) error {
	if cfg == nil {
		return nil
	}
	if _, ok := l.store.(store.MultiTaker); !ok && len(cfg.stacks) > 0 {
		return fmt.Errorf("rule %q is stacked (stack: true), and %w: %T", cfg.stacks[0].Name, errNoMultiTaker, l.store)
	}
	if l.slots != nil {
		return nil
	}
	for _, r := range cfg.rules {
		if r.conc != nil {
			return fmt.Errorf("rule %q sets concurrent, and %w: %T", r.Name, errNoSlots, l.store)
		}
	}
	return nil
}

// hold is what a request holds of its rules' concurrency limits: the slot
// of its enforced rule and of its rule in shadow mode, given back once,
// by Complete or when the request's context ends, whichever comes first.
type hold struct {
	l     *Limiter
	slots [2]slot     // the enforced rule's, the shadow rule's
	stop  func() bool // stops the release at the context's end; nil when none waits
	done  atomic.Bool
}

// slot is one slot a request holds, under key (its rule's key: see
// RuleSpec.Key).
type slot struct {
	rule  *Rule // nil: none
	lease uint64
	key   string
}

// acquire asks the store for a slot of a.key under a.rule's concurrency
// limit, and tells the outcome: allowed (a slot taken), denied (every slot
// held: OutcomeConcurrencyDenied) or store error (*err). A request
// cancelled while the store decides is asked again, as take does.
func (l *Limiter) acquire(ctx context.Context, a ask, lease *uint64, err *error) (o Outcome, latency time.Duration) {
	var start int64
	timed := l.observer != nil && !l.local && cheaprand()&l.sampleMask == 0
	if timed {
		start = l.clock.Now()
	}
	var (
		ok     bool
		cancel context.CancelFunc
	)
	for c := ctx; ; {
		if l.slots == nil {
			*err = errNoSlots
		} else {
			*lease, ok, *err = l.slots.Acquire(c, a.key, a.rule.conc)
		}
		if *err == nil || cancel != nil || !errors.Is(ctx.Err(), context.Canceled) {
			break
		}
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
	case !ok:
		return OutcomeConcurrencyDenied, latency
	}
	return OutcomeAllowed, latency
}

// hold records the slot lease of rule, taken under key, as d's (i: 0 the
// enforced rule's, 1 the shadow rule's).
func (l *Limiter) hold(d *Decision, i int, rule *Rule, lease uint64, key string) {
	if d.hold == nil {
		d.hold = &hold{l: l}
	}
	d.hold.slots[i] = slot{rule: rule, lease: lease, key: key}
}

// bounded takes the slot of the request of a under a.rule, the enforced
// rule of d, which bounds requests in flight, and reports whether its
// limits are to be asked next: when it has limits and the request holds
// a slot, or the store failed under the fail-open policy. Otherwise it
// decides d: refused for lack of a slot (429, Decision.ConcurrencyDenied),
// refused because the store failed (fail-closed, 503), or, for a rule
// with no limit, allowed. Under a rule with a wait, a request that finds
// every slot taken, or requests of its key waiting under the rule, waits
// for a slot in the rule's queue (awaitSlot); when its limits are to be
// asked next, it is still there, at the head (s), and asks them within
// the rest of the same wait (takeOrWait).
func (l *Limiter) bounded(ctx context.Context, cfg *Config, a ask, d *Decision, s *seat) bool {
	var (
		lease uint64
		o     Outcome
		lat   time.Duration
	)
	if a.rule.wait != 0 && l.waits.held.Load() != 0 && l.waits.queued(a.rule.queueKey(a.key)) {
		o = l.awaitSlot(ctx, a, s, &lease, &d.Err) // behind the requests waiting: never before them
	} else if o, lat = l.acquire(ctx, a, &lease, &d.Err); o == OutcomeConcurrencyDenied && a.rule.wait != 0 {
		o = l.awaitSlot(ctx, a, s, &lease, &d.Err)
	}
	switch o {
	case OutcomeStoreError:
		d.Allowed = l.failsOpen(cfg)
		l.warn(a.rule, d.Allowed, d.Err)
		if d.Allowed && a.rule.rated() {
			d.Err = nil // the limits decide, and their store call tells
			return true
		}
	case OutcomeConcurrencyDenied:
		d.Allowed, d.ConcurrencyDenied, d.style = false, true, HeadersNone // nothing of the limits was asked
	default:
		l.hold(d, 0, a.rule, lease, a.key)
		if a.rule.rated() {
			return true
		}
	}
	if !a.rule.rated() {
		d.style = HeadersNone
	}
	if s.w != nil { // held for a slot
		l.unseat(s, d)
		if o == OutcomeAllowed {
			o = OutcomeWaited
		}
		l.reportHeld(a, o, d, lat)
		return false
	}
	l.report(a, o, d.Allowed, d.Err, lat)
	return false
}

// shadowSlot takes the slot of the request of d (whose enforced rule, if
// any, let it through) under the rule in shadow mode m.shadow, which
// bounds requests in flight, at cost: reporting a request it would refuse
// (d.ShadowDenied) and refusing none; key is the rule's (RuleSpec.Key).
// It returns the outcome to report for the rule: the slot's when the rule
// has no limit (and it reports it), else OutcomeShadowDenied when it
// would refuse the request, whatever its limits say, and OutcomeAllowed
// otherwise.
func (l *Limiter) shadowSlot(ctx context.Context, rule *Rule, cost int64, key string, d *Decision) Outcome {
	a := ask{key: key, rule: rule, cost: cost}
	var (
		lease uint64
		err   error
	)
	o, lat := l.acquire(ctx, a, &lease, &err)
	switch o {
	case OutcomeStoreError:
		l.warn(rule, true, err)
		if d.Rule == rule {
			d.Err = err
		}
	case OutcomeConcurrencyDenied:
		o, d.ShadowDenied = OutcomeShadowDenied, true
		l.shadowBusy(rule, key)
	default:
		l.hold(d, 1, rule, lease, key)
	}
	if !rule.rated() {
		l.report(a, o, true, err, lat)
		return o
	}
	if o == OutcomeShadowDenied {
		return o
	}
	return OutcomeAllowed
}

// shadowBusy logs a shadow rule's would-be refusal of a request of key
// for lack of a slot, under the gate of its would-be denials (see
// shadowDenied).
func (l *Limiter) shadowBusy(rule *Rule, key string) {
	suppressed, ok := l.shadowGate(rule)
	if !ok {
		return
	}
	l.log.Warn("rlkit: shadow rule would deny",
		slog.String("rule", rule.Name),
		slog.String("key", key),
		slog.Int64("concurrent", rule.conc.Limit),
		slog.Int64("suppressed", suppressed))
}

// watch makes the slots d holds go back when ctx ends, should Complete
// not have given them back before (the client went away, or a caller of
// Decide never completes the request). ctx is the request's.
func (l *Limiter) watch(ctx context.Context, d *Decision) {
	h := d.hold
	if ctx.Done() == nil {
		return
	}
	h.stop = context.AfterFunc(ctx, func() { h.release(ctx) })
}

// giveBack gives back at once the slots d holds, for a request refused
// after they were taken.
func (l *Limiter) giveBack(ctx context.Context, d *Decision) {
	h := d.hold
	d.hold = nil
	h.release(ctx)
}

// end gives back the slots of a request whose handler has answered,
// unless its context's end already did.
func (h *hold) end(ctx context.Context) {
	if h.stop == nil || h.stop() {
		h.release(ctx)
	}
}

// release gives back the slots h holds, once (a copy of the Decision
// completed again, or the context's end after Complete, gives back
// nothing more). ctx is the request's: a store not in this process is
// asked under a context that is not cancelled with it and ends after a
// second (one in this process, a store.LocalStore, reads no context). A
// store failure is logged: the slot comes back with its lease.
func (h *hold) release(ctx context.Context) {
	if h.done.Swap(true) {
		return
	}
	l := h.l
	if !l.local { // a store in this process needs no deadline
		var cancel context.CancelFunc
		ctx, cancel = l.detach(ctx)
		defer cancel()
	} else if ctx.Err() != nil {
		ctx = context.WithoutCancel(ctx)
	}
	for _, s := range h.slots {
		if s.rule == nil {
			continue
		}
		if err := l.slots.Release(ctx, s.key, s.rule.conc, s.lease); err != nil {
			l.warnAs(s.rule, "a slot not given back: it comes back when its lease ends", err)
		} else {
			// The head of its queue may wait for it (under this rule, or
			// the rule of the same name a reload put in its place).
			l.waits.wake(s.rule.queueKey(s.key))
		}
	}
}
