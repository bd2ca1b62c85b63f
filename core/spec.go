package core

// Spec is a rate-limit configuration as written: the rate_limit section of
// the YAML file, or a literal in code. NewConfig checks and compiles it.
type Spec struct {
	// Enabled turns limiting on. When false every request passes untouched.
	Enabled bool
	// Algorithm is the default for rules that name none, and for the
	// default limit: fixed_window (when empty), sliding_window,
	// token_bucket or gcra.
	Algorithm string
	// Rules are tried in order; the first whose paths match applies.
	Rules []RuleSpec
	// Default is the limit (or limits) of requests no rule matches;
	// empty means "120/minute".
	Default []string
	// ExemptPaths never touch a counter. nil means DefaultExemptPaths; an
	// empty non-nil slice exempts nothing.
	ExemptPaths []string
	// Headers is draft (when empty), legacy or none.
	Headers string
	// Failure is what a request gets when the store fails: open (when
	// empty: it passes) or closed (503).
	Failure string
	// Mode is enforce (when empty) or shadow: the mode of every rule that
	// names none, and of the default limit. A rule in shadow mode counts
	// requests and reports each one it would deny (to the Observer as
	// OutcomeShadowDenied, and in a log line per rule at most every warn
	// interval) but denies none, and by default writes no rate-limit
	// header: roll a limit out, watch whom it would stop, then enforce it.
	Mode string
	// DefaultKey is what the default limit counts per, as RuleSpec.Key
	// (but param, which needs a rule's paths): empty means user.
	DefaultKey string
	// Tiers are the plans: each a name, and limits per rule and a
	// default that callers on that plan count under (see TierSpec).
	Tiers []TierSpec
	// Allow lists callers never limited nor counted; Ban networks refused
	// with 403 (see AllowSpec, BanSpec).
	Allow AllowSpec
	Ban   BanSpec
}

// RuleSpec is one rule as written.
type RuleSpec struct {
	Name string
	// Paths are patterns; '*' matches exactly one path segment, and so
	// does a whole segment ":name" or "{name}" (router syntax). ':' after
	// a segment's first byte is a literal ("/v1/items:batchGet").
	// Catch-alls ("*path", "{path...}", "+"), optional parameters
	// (":id?"), "{$}", constraints and parameters in part of a segment
	// are errors.
	Paths []string
	// Methods, when set, restrict the rule to these HTTP methods. GET
	// covers HEAD too: routers (net/http's ServeMux, Fiber) serve a HEAD
	// request with the GET handler, so a GET rule must count it.
	Methods []string
	// Limit holds one or more limits ("10/second"); all must admit.
	Limit []string
	// Algorithm overrides the configuration's default.
	Algorithm string
	// Burst is the capacity of token_bucket and gcra rules (0 = the count).
	Burst int64
	// Weights give the cost of one request on a path (default 1), first
	// match in order.
	Weights []WeightSpec
	// Mode is enforce or shadow (see Spec.Mode); empty means the
	// configuration's.
	Mode string
	// Penalty, when not nil, refuses an identity for a while after
	// repeated denials (see PenaltySpec).
	Penalty *PenaltySpec
	// Count says which requests the rule counts, by their response
	// status: all (when empty: every request, before the handler runs),
	// failures (status 400 and above: a brute-force guard on a login,
	// which honest users, who mostly succeed, never reach) or successes
	// (below 400: a quota of what was done, not of what was tried).
	//
	// A rule that counts by outcome still refuses a request before the
	// handler runs when its counter has no room for it: the limiter asks
	// the store what a count would answer (store.Store.Peek), consuming
	// nothing, and lets the request through when it would be admitted,
	// with the rate-limit headers that count would give. Once the handler
	// has answered, the adapter hands the status to Limiter.Complete,
	// which counts the request (store.Store.Take) when the rule counts
	// that status. A request that fails is therefore counted only after
	// its answer: requests of one identity in flight together all pass
	// the check while the counter has room, and those still in the
	// handler when it fills are served and not counted (their Take is
	// denied, and a denial consumes nothing). Each time the counter
	// fills, at most C − 1 such requests pass beyond the limit, C being
	// the most requests of that identity under the rule in flight at
	// once; under a fixed window, which fills at most once per window, at
	// most limit + C − 1 requests whose outcome counts are answered in
	// one window (counting each at its cost: limit + (C − 1) × the
	// largest cost, in units). The counter itself never goes past the
	// limit.
	Count string
	// Key is what the rule counts per: empty or "user" (the caller, as
	// the key function names it, else its client IP), "ip" (the client
	// IP, as the limiter's clientip.Config derives it: IPv6 grouped per
	// prefix), "header:<Name>" (the value of a request header, kept only
	// as a keyed hash), "param:<name>" (the path segment the rule's
	// ":name" or "{name}" matched, decoded), or up to four of those
	// joined by '+' ("user+param:kb", "ip+header:X-Api-Key"): one counter
	// per combination. A part the request lacks (no such header, an
	// empty one; a caller the key function does not name) counts in its
	// place under the client IP. Every path of the rule must name a
	// param part's parameter. The allow list, plans and a LimitProvider
	// still know the caller by its identity; penalties, Decision.Key,
	// Event.Key and Limiter.Reset go by the rule's key. Values a client
	// chooses (a header, a parameter) give it a counter per value it
	// sends: combine them with ip or user unless something before the
	// limiter checks them.
	Key string
}

// WeightSpec is the cost of one request on paths matching Path.
type WeightSpec struct {
	Path string
	Cost int64
}
