package core

import (
	"strconv"
	"time"
)

// Outcome is what became of one request the limiter saw.
type Outcome uint8

const (
	// OutcomeAllowed: counted and admitted. Under stacked rules
	// (RuleSpec.Stack), a rule that would have admitted a request another
	// of its rules refused reports it with Allowed false and Cost 0:
	// nothing was counted.
	OutcomeAllowed Outcome = iota
	// OutcomeDenied: counted and denied (429).
	OutcomeDenied
	// OutcomeShadowDenied: a rule in shadow mode would have denied the
	// request; it was let through (see RuleSpec.Mode).
	OutcomeShadowDenied
	// OutcomeBypassed: the bypass predicate (a super-admin) or the allow
	// list (AllowSpec) let the request through uncounted.
	OutcomeBypassed
	// OutcomeExempt: the path is exempt; nothing was counted.
	OutcomeExempt
	// OutcomeStoreError: the store failed; Event.Allowed tells what the
	// failure policy did with the request.
	OutcomeStoreError
	// OutcomeBanned: the client IP is in a banned network (BanSpec); the
	// request was refused with 403 before anything else (Event.Rule "").
	OutcomeBanned
	// OutcomePenalized: the identity is under the rule's penalty
	// (PenaltySpec); the request was refused with 429 without counting.
	OutcomePenalized
	// OutcomeOvershoot: a request served under a rule that counts by
	// outcome (RuleSpec.Count) whose outcome could not be counted: requests in
	// flight with it filled the counter first (the overshoot RuleSpec.Count
	// bounds). Event.Allowed is true: it was served.
	OutcomeOvershoot
	// OutcomeWaited: held by its rule's wait (RuleSpec.Wait) until the
	// store admitted it (gave it a slot of the rule's concurrency limit,
	// had room under its limits), then counted and admitted; Event.Waited
	// is how long. A held request that is refused in the end is
	// OutcomeDenied, or OutcomeConcurrencyDenied when no slot came, with
	// its Waited.
	OutcomeWaited
	// OutcomeConcurrencyDenied: the rule's concurrency limit refused the
	// request (429, Decision.ConcurrencyDenied): as many requests of its
	// identity under the rule as RuleSpec.Concurrent allows were in
	// flight (and, under a rule with a wait, none came back within it:
	// Event.Waited). Nothing was counted against the rule's limits.
	OutcomeConcurrencyDenied

	numOutcomes
)

// NumOutcomes is the number of outcomes: Outcome values are 0 to
// NumOutcomes-1, for observers that keep one counter per outcome in an
// array.
const NumOutcomes = int(numOutcomes)

var outcomeNames = [...]string{"allowed", "denied", "shadow_denied", "bypassed", "exempt", "store_error", "banned", "penalized", "overshoot", "waited", "concurrency_denied"}

// String returns the outcome's metric label: allowed, denied,
// shadow_denied, bypassed, exempt, store_error, banned, penalized,
// overshoot, waited or concurrency_denied.
func (o Outcome) String() string {
	if int(o) < len(outcomeNames) {
		return outcomeNames[o]
	}
	return "outcome(" + strconv.Itoa(int(o)) + ")"
}

// Event describes one request the limiter saw while limiting is enabled,
// for metrics: every outcome, counted or not.
type Event struct {
	// Rule is the name of the rule the request fell under ("default" for
	// the default limit); "" for an exempt path and a banned network.
	Rule string
	// Plan is the caller's plan, as Decision.Plan: a tier's name, or ""
	// (also when its custom limits applied). Plans are named by the
	// configuration, so it suits a metric label.
	Plan string
	// Key is the store key of a counted request under Rule (the identity,
	// bounded by store.BoundKey; a secret identity as its keyed hash: see
	// SecretIdentity; under a rule with a key of its own, RuleSpec.Key,
	// that key); "" when nothing was counted. Never use it as a
	// metric label: clients choose it.
	Key     string
	Outcome Outcome
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Cost is what the request weighed under Rule (0 when not counted).
	Cost int64
	// Err is the store's error, if it failed.
	Err error
	// Latency is the time the store took, for one call in 16 taken at
	// random (WithLatencySampling); 0 for the others, when the store was
	// not asked, or when it keeps its counters in this process (see
	// store.LocalStore).
	Latency time.Duration
	// Waited is how long the rule's wait (RuleSpec.Wait) held the request
	// before it was decided; 0 when it was not held.
	Waited time.Duration
}

// Observer receives an Event for every request the limiter decides while
// limiting is enabled (under a rule counted by outcome, for a request
// that reaches the handler, when Limiter.Complete counts it or not). It is called synchronously on the request path: it
// must be fast and safe for concurrent use.
type Observer func(Event)
