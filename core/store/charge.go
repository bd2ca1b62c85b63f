package store

import (
	"context"

	"github.com/rlkit/rlkit/core/algo"
)

// Charger is a Store that can charge a cost known only once a request
// has been served (core.RuleSpec.Cost "response": the tokens an answer
// took, the bytes it sent). The limiter finds it by type assertion, and
// refuses a configuration that charges by response over a store without
// it.
type Charger interface {
	Store
	// Charge consumes cost from every limit of p for key, whether or not
	// the limits have room for it (algo.Charge, limit by limit): a
	// limit may go into debt, at most its Count past its capacity, and
	// then refuses every request until time has paid the debt back. A
	// cost ≤ 0 consumes nothing. The Result is what Peek at cost 1
	// answers right after the charge: not Allowed while a limit is in
	// debt or empty, with RetryAfter the time until a request of cost 1
	// is admitted. Errors and contexts are Take's.
	Charge(ctx context.Context, key string, p *Policy, cost int64) (Result, error)
}

// EvaluateCharge runs one charge at instant now over the per-limit states
// of one key, as Evaluate runs a decision: it replaces states[i] with the
// state after algo.Charge and sets expireAt[i] to the instant from which
// it may be dropped, then returns the Result a Take of cost 1 would
// answer, consuming nothing. Stores that keep algo.State values
// themselves use it. A policy with no limits, or more than MaxLimits,
// charges nothing.
func EvaluateCharge(p *Policy, states *[MaxLimits]algo.State, expireAt *[MaxLimits]int64, now, cost int64) Result {
	if len(p.Limits) == 0 || len(p.Limits) > MaxLimits {
		return Result{}
	}
	for i, l := range p.Limits {
		states[i], _, expireAt[i] = algo.Charge(p.Algorithm, states[i], l, now, cost)
	}
	peek := *states
	var exp [MaxLimits]int64
	return Evaluate(p, &peek, &exp, now, 1)
}
