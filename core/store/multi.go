package store

import "context"

// MaxTakes is the most takes one MultiTaker.TakeAll call holds: a
// request's first-matching rule and up to eight rules stacked on it
// (core.RuleSpec.Stack).
const MaxTakes = 9

// Take is one count of a request for a MultiTaker: cost under policy
// Policy for Key, as Store.Take takes it alone.
type Take struct {
	Key    string
	Policy *Policy
	Cost   int64
}

// MultiTaker is a Store that counts one request under several policies,
// each for a key of its own, all or nothing: the rules stacked on a
// request's first-matching rule (core.RuleSpec.Stack). The limiter finds
// it by type assertion, and refuses a configuration with stacked rules
// over a store without it.
type MultiTaker interface {
	Store
	// TakeAll evaluates every take at one instant, as Take evaluates it
	// alone, and when every one is admitted consumes each take's cost;
	// when any is denied it consumes nothing. results[i] (len(results) ≥
	// len(takes)) is takes[i]'s answer: Take's when all are admitted; when
	// some are denied, Take's denial for each denied take (its
	// RetryAfter the time until that take alone would be admitted), and
	// for each take that would have been admitted its limits' state as it
	// stands (Allowed, RetryAfter 0: a Take of cost 0). allowed reports
	// whether all were admitted.
	//
	// The takes may name the same key under different policies, each
	// counted on its own counters. Takes that share a counter (the same
	// key under the same policy, or under policies whose limits share a
	// CounterID) count against it one after the other, in the order
	// given: each is evaluated on what the admitted takes before it left,
	// so two takes of cost 2 need 4 units, and a denied take's answer is
	// on that state too.
	//
	// A store whose takes cannot all be decided in one atomic step (keys
	// on different Redis Cluster nodes) decides them in steps and gives
	// back what a denied request took; its documentation states the bound
	// that leaves. With an error, the request consumed nothing (but what
	// a failed give-back left taken) and results are undefined. Contexts
	// are Take's. A call with no takes, or more than MaxTakes, or a take
	// whose policy is bad, fails with ErrBadPolicy.
	TakeAll(ctx context.Context, takes []Take, results []Result) (allowed bool, err error)
}
