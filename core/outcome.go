package core

import (
	"context"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

// countMode is which requests a rule counts, by the status of their
// response (RuleSpec.Count, which states what counting by outcome
// implies).
type countMode uint8

const (
	countAll       countMode = iota // every request, before the handler: the default
	countFailures                   // status 400 and above
	countSuccesses                  // status below 400
	countResponse                   // every request, charged its cost once answered (RuleSpec.Cost)
)

// countModeNames are the modes as the count field writes them: a rule
// charged by response counts all.
var countModeNames = [...]string{"all", "failures", "successes", "all"}

// Count returns which requests the rule counts, as the configuration
// writes it (RuleSpec.Count): all, failures or successes.
func (r *Rule) Count() string { return countModeNames[r.count] }

// Counts reports whether the rule counts a request answered with status:
// every status under count: all, 400 and above under failures, below 400
// under successes.
func (r *Rule) Counts(status int) bool {
	switch r.count {
	case countFailures:
		return status >= 400
	case countSuccesses:
		return status < 400
	}
	return true
}

// byOutcome reports whether r counts by outcome: a Peek before the
// handler, a Take after it.
func (r *Rule) byOutcome() bool { return r.count != countAll }

// countMode compiles the count field of a rule at key ("" is all).
func (cc *compiler) countMode(key, rule, mode string) countMode {
	for m, name := range countModeNames {
		if mode == name {
			return countMode(m)
		}
	}
	if mode != "" {
		cc.fail(key, rule, "count", mode, "want all, failures or successes")
	}
	return countAll
}

// pending is the count of one rule that waits for the response status.
// It is kept small (a Decision holds one, and adapters copy Decisions):
// the Peek's error, rare, is held behind a pointer.
type pending struct {
	rule *Rule // nil: nothing waits
	cost int64
	// more is what few counts have (a Decision, which adapters copy,
	// stays small): nil without a Peek error, under the Decision's Key.
	more *pendingMore
}

// pendingMore is a pending count's Peek error (the request passed on the
// failure policy) and store key, when it has an error or a key other than
// its Decision's (a rule in shadow mode with a key of its own: see
// RuleSpec.Key).
type pendingMore struct {
	err error
	key string
}

// Deferred reports that the request was let through with something left
// for Limiter.Complete to do once it is answered: a rule that applies
// counts by outcome (see RuleSpec.Count), and its count waits for the
// response status; or the request holds a slot of a rule's concurrency
// limit (see RuleSpec.Concurrent), which goes back then. An adapter that
// gets an allowed, deferred Decision runs the handler, finds the status
// the client gets, and calls Limiter.Complete with it, once, also when
// the handler panics (in a defer); for every other Decision it calls
// nothing. (The rate-limit headers, written before the handler, are those
// the count would give.)
func (d *Decision) Deferred() bool { return d.waits || d.shadow.rule != nil || d.hold != nil }

// wait makes the count a under d wait for the response status, when its
// rule counts by outcome, its Peek (outcome o) admitted the request or
// failed (error err), and the request goes to the handler (d.Allowed,
// after the failure policy: a fail-closed 503 counts nothing, and neither
// does a rule in shadow mode beside an enforced rule that refused the
// request). When a's rule is d.Rule, its cost, key and err are d.Cost,
// d.Key and d.Err, and the count waits as d.waits; else it is the rule in
// shadow mode beside the enforced d.Rule, kept in d.shadow. It reports
// whether the count waits; the caller reports the event when it does not.
// (It inlines to one test for a rule that counts every request.)
func (d *Decision) wait(a ask, o Outcome, err error) bool {
	return a.rule.byOutcome() && d.waitOutcome(a, o, err)
}

// waitOutcome is wait for a rule that counts by outcome: kept out of
// line, so that wait inlines small.
//
//go:noinline
func (d *Decision) waitOutcome(a ask, o Outcome, err error) bool {
	if !d.Allowed || o != OutcomeAllowed && o != OutcomeStoreError {
		return false
	}
	if a.rule == d.Rule {
		d.waits = true
	} else {
		d.shadow = pending{rule: a.rule, cost: a.cost}
		if err != nil || a.key != d.Key {
			d.shadow.more = &pendingMore{err: err, key: a.key}
		}
	}
	d.openBill(a.rule)
	return true
}

// detach returns a context for the count of a request answered under
// ctx: not cancelled with ctx, and ended after retryTimeout, unless the
// store is in this process (a store.LocalStore), whose calls take nanoseconds
// and need no deadline (a timer costs four allocations).
func (l *Limiter) detach(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.local {
		return context.WithoutCancel(ctx), func() {}
	}
	return context.WithTimeout(context.WithoutCancel(ctx), retryTimeout)
}

// Complete finishes a request whose Decision was deferred (see
// Decision.Deferred), once the handler has answered it with status: each
// rule of d that counts by outcome takes the request's cost when its mode
// counts status (see Rule.Counts), and takes nothing otherwise; and the
// slots the request holds of its rules' concurrency limits (see
// RuleSpec.Concurrent) go back, unless the end of the request's context
// gave them back first. It does nothing for a Decision that is not
// deferred, and finishes a Decision once: it clears what d deferred (a
// slot goes back once, even when a copy of d is completed too).
//
// A success under a rule that clears on one (RuleSpec.ClearOnSuccess)
// resets the failures counted under that rule for d.Key, and nothing
// else; when the store fails, the request is still served as answered,
// the failure is logged and its event says so.
//
// Each rule's event goes to the Observer now (none went when the request
// was decided): OutcomeAllowed with the cost when counted, with Cost 0
// when the status does not count; OutcomeOvershoot (Allowed true) when
// the count found the limit reached by requests in flight meanwhile (the
// request was served: see RuleSpec.Count on the bound; it counts as a denial
// toward the rule's penalty); OutcomeStoreError when the store failed
// (the Take's error, the Reset's of a success that clears, or the Peek's
// when neither followed). A store failure is logged as any other, at
// most once per warn interval. ctx is the request's: the store is asked under a context
// that is not cancelled with it (the client may have gone) and, for a
// store not in this process, ends after a second.
func (l *Limiter) Complete(ctx context.Context, d *Decision, status int) {
	if !d.Deferred() {
		return
	}
	if h := d.hold; h != nil {
		d.hold = nil
		defer h.end(ctx) // once counted (and should counting panic)
	}
	var cancel context.CancelFunc
	type count struct {
		rule *Rule
		cost int64
		err  error
		key  string
	}
	waiting := [2]count{1: {rule: d.shadow.rule, cost: d.shadow.cost, key: d.Key}} // the enforced rule's, the shadow rule's
	if more := d.shadow.more; more != nil {
		waiting[1].err, waiting[1].key = more.err, more.key
	}
	if d.waits {
		waiting[0] = count{rule: d.Rule, cost: d.Cost, err: d.Err, key: d.Key}
		if s := d.stack; s != nil && s.pending {
			// Counted under stacked rules too: Rule may be another, and
			// the rule that applies is the record's first.
			waiting[0] = count{rule: s.rule, cost: s.cost, err: d.Err, key: s.key}
		}
	}
	for i := range waiting {
		p := &waiting[i]
		if p.rule == nil {
			continue
		}
		if cancel == nil && (p.rule.clear || p.rule.Counts(status)) {
			ctx, cancel = l.detach(ctx)
			defer cancel()
		}
		if !p.rule.Counts(status) {
			o, cost, err := OutcomeAllowed, int64(0), p.err // not counted
			if err != nil {
				o, cost = OutcomeStoreError, p.cost
			}
			// A success, under a rule that clears the failures on one:
			// those of the key the request counted under, and only
			// under the policy it counted with.
			if p.rule.clear {
				if _, e := l.store.Reset(ctx, p.key, p.rule.Policy); e != nil {
					l.warnAs(p.rule, "served: its failures are not cleared", e)
					o, err = OutcomeStoreError, e
				}
			}
			l.report(ask{key: p.key, rule: p.rule, cost: cost, plan: d.Plan}, o, true, err, 0)
			continue
		}
		var (
			res store.Result
			err error
			o   Outcome
			lat time.Duration
		)
		a := ask{key: p.key, rule: p.rule, cost: p.cost, plan: d.Plan}
		if p.rule.count == countResponse {
			// Charged what the handler reported, into debt if need be.
			a.cost = d.billed(p.cost)
			if i == 0 && d.Rule == p.rule {
				d.Cost = a.cost
			}
			o, lat = l.charge(ctx, a, &res, &err)
		} else {
			o, lat = l.take(ctx, a, nil, false, &res, &err)
		}
		switch o {
		case OutcomeStoreError:
			l.warnAs(p.rule, "served: its outcome is not counted", err)
		case OutcomeDenied:
			// Requests in flight filled the counter first: this one was
			// served over the limit. It counts as a denial toward the
			// rule's penalty, so that waves of concurrent guesses, each
			// passing the check together, still end in a ban.
			o = OutcomeOvershoot
			if i == 0 && !p.rule.shadow { // a shadow rule's penalty does nothing
				l.penalize(ctx, l.cfg.Load(), p.rule, p.key, &Decision{})
			}
		}
		l.report(a, o, true, err, lat)
	}
	d.waits, d.shadow, d.bill = false, pending{}, nil
}
