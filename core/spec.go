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
	// DefaultWindow and DefaultTimezone are the default limit's Window
	// and Timezone (see RuleSpec): "calendar" counts it per calendar day,
	// month or year ("10000/day") in the time zone. They apply to the
	// default limit alone, as its limit does; a rule counts per calendar
	// period only when it says so itself.
	DefaultWindow   string
	DefaultTimezone string
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
	// Consistency is exact (when empty) or lease: the consistency of
	// every rule that names none, and of the default limit (see
	// RuleSpec.Consistency). A rule that cannot take blocks (it counts
	// by outcome, is charged by response, is stacked or bounds only
	// requests in flight) stays exact under a lease file.
	Consistency string
	// LeaseBlock is the lease_block of every lease rule that names none
	// (see RuleSpec.LeaseBlock); 0 means 1000. An error when no rule, nor
	// the file, is in lease mode.
	LeaseBlock int64
}

// RuleSpec is one rule as written.
type RuleSpec struct {
	Name string
	// Paths are patterns; '*' matches exactly one path segment, and so
	// does a whole segment ":name" or "{name}" (router syntax). ':' after
	// a segment's first byte is a literal ("/v1/items:batchGet"). A last
	// segment "**" matches the path before it and every path below
	// ("/api/admin/**"; "/**" matches every path). "**" elsewhere, router
	// catch-alls ("*path", "{path...}", "+"), optional parameters
	// (":id?"), "{$}", constraints and parameters in part of a segment
	// are errors.
	Paths []string
	// Methods, when set, restrict the rule to these HTTP methods. GET
	// covers HEAD too: routers (net/http's ServeMux, Fiber) serve a HEAD
	// request with the GET handler, so a GET rule must count it.
	Methods []string
	// Limit holds one or more limits ("10/second"); all must admit. It
	// may be left out of a rule with Concurrent, which then bounds
	// requests in flight only.
	Limit []string
	// Algorithm overrides the configuration's default.
	Algorithm string
	// Window is empty (windows of each limit's own period) or calendar:
	// each limit counts per calendar day, month or year ("1000/day",
	// "20000/month", "1/year"; every limit of the rule is one) of
	// Timezone, from one local midnight to the next whatever the day's
	// length (23 or 25 hours when the clocks change), with fixed_window
	// only. Retry-After and the reset of the rate-limit headers count to
	// the next period's start; RateLimit-Policy's w is the length of the
	// period now counted, in seconds.
	Window string
	// Timezone is the IANA time zone of a calendar window ("Europe/Berlin";
	// empty means UTC). A name the time zone database does not hold is a
	// configuration error; a program on a system without one embeds Go's
	// with import _ "time/tzdata".
	Timezone string
	// Burst is the capacity of token_bucket and gcra rules (0 = the count).
	Burst int64
	// Weights give the cost of one request on a path (default 1), first
	// match in order. An adapter's WithCost may give it per request
	// instead (see adapter.Settings.Cost).
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
	// ClearOnSuccess, on a rule that counts failures, makes a request the
	// handler answers with a success (status below 400) clear the
	// failures counted under the rule for the key that request counted
	// under (store.Store.Reset of that key alone, under the policy it
	// counted with, its plan's or custom limits' included), so that a
	// user who logs in after two typos starts again at zero. Nothing else
	// is cleared: not another key's failures, whatever the request says,
	// and not the rule's penalty (its denials, an active ban), which
	// Limiter.Reset lifts. It is one more store call per success. Keyed
	// by something the caller does not prove, such as the client IP,
	// it lets a client that holds one valid account clear its failures by
	// logging into it between guesses: clear by the account the request
	// proves (see the login guard in the configuration reference). A
	// rule whose count is not failures refuses it.
	ClearOnSuccess bool
	// Wait, when set, holds a request the rule would refuse while the
	// store says it would be admitted within Wait, and serves it then,
	// instead of refusing it: a duration ("500ms", "2s", "1m"; also a
	// period as in a limit, "2sec"), positive and at most a minute.
	// Under Concurrent, a request that finds every slot of its identity
	// taken is held until one comes back, within Wait, then asks the
	// limits, if any, within the rest of the same Wait; refused for lack
	// of a slot when none comes. A slot given back in this process wakes
	// it at once; one given back by another process sharing the store
	// (package redisstore) is seen within 50ms (an eighth of Wait when
	// that is shorter, at least 5ms). Held
	// requests of one key are served first come, first served; one whose
	// wait would pass Wait (the store's Retry-After, or the requests
	// queued ahead of it) is refused at once, as without Wait; one whose
	// client goes away (its context ends) leaves the queue and consumes
	// nothing. Nothing is consumed while waiting: the store is asked
	// again when the wait is over, and another server may take the room
	// first (the request then waits again, within Wait, or is refused).
	// The queue is the limiter's, in this process: across the replicas
	// of a service requests are first come, first served within each.
	// A held request refused in the end by the limits is a denial (toward
	// the rule's penalty too); one admitted is not. The queue of a key is
	// one for the slots and the limits: the requests held for either are
	// served in the order they came.
	// Not with Count failures or successes, nor in shadow mode (the rule
	// refuses nothing).
	Wait string
	// WaitQueue is how many requests of one key (the identity the
	// request counts under) may wait under the rule at once, 1 to 1,000;
	// past it a request is refused at once. 0 means 100. Only with Wait.
	// Whatever the rules say, a limiter holds at most 10,000 requests at
	// once, and refuses at once the requests that would wait beyond.
	WaitQueue int64
	// Cost is when the cost of a request is known: before the handler
	// (when empty: 1, or the weight of its path, or what the adapter's
	// WithCost says) or, with "response", once the handler has answered
	// it: the tokens a model's answer took, the bytes a download sent,
	// the rows a query read. Under cost: response a request is admitted
	// while its caller has at least one unit left (the limiter asks the
	// store what a request of cost 1 would get, consuming nothing), and
	// once the handler has answered, the cost it reported with SetCost
	// (else the cost known before the handler, else 1) is charged
	// whatever is left (store.Charger): the caller may go into debt, and
	// every request of its is then refused (429, Retry-After the time
	// until enough has come back for a request of cost 1) until time has
	// paid the debt back. A caller owes at most one period's count past
	// the limit: the rest of a larger cost is not charged. It needs a
	// store that is a store.Charger (the memory and Redis stores are),
	// and sliding_window, token_bucket or gcra (a fixed window forgets
	// its count, and so the debt, when it ends); the rule counts every
	// response (count: all) and has no weights. Requests of one caller in
	// flight together all pass while it has a unit left, and each is
	// charged its own cost after: at most one period's count past the
	// limit in all.
	Cost string
	// Concurrent, when above 0, bounds the requests of one identity in
	// flight at once under the rule (a concurrency limit, beside or
	// instead of Limit): a request that finds Concurrent of its
	// identity's requests under the rule still running is refused with
	// 429, Retry-After: 1 and the rule's body, and no rate-limit header
	// (Decision.ConcurrencyDenied), or, with Wait, held until a slot comes
	// back within it. A slot is taken before the handler runs and given
	// back when the request is over (Limiter.Complete, which every
	// adapter calls when the handler returns or panics), or when its
	// context ends (the client went away), whichever comes first; a
	// request costs one slot whatever its weight. With Limit too, both
	// must admit: a request refused by the limit takes no slot, and one
	// refused for lack of a slot consumes nothing of the limit. A rule in
	// shadow mode takes slots and reports the requests it would refuse
	// (OutcomeShadowDenied), refusing none. The store must bound
	// requests in flight (a store.ConcurrencyStore: package memstore and
	// package redisstore do). 0 (the default) means no bound; a negative
	// value, or 0 written in a file, is an error.
	Concurrent int64
	// Lease is how long a slot stays taken in a store shared by
	// processes (package redisstore) when the process that took it dies
	// before giving it back: a period as in a limit ("30s", "2m"), at
	// least a second. Empty means 30s. It needs Concurrent.
	Lease string
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
	// Stack makes the rule a stacked limit: it is matched apart from the
	// other rules, and counts every request its paths (and methods)
	// match in addition to the one rule that applies to it (the first
	// matching rule that is not stacked, else the default limit), as
	// nginx counts every limit_req of a location. A per-user limit of
	// 1000 an hour over "/api/**" stacked on each route's own limit is
	// the common case. A request is refused when any rule it counts
	// under refuses it, and a refused request consumes from none of them:
	// the store takes all of them at once or nothing (a
	// store.MultiTaker). The rate-limit headers report the most
	// restrictive of the rules (Decision.Rule: when refused, the refusing
	// rule with the longest wait; else the one with the fewest units
	// left), and the draft RateLimit and RateLimit-Policy headers list
	// every rule counted, each under its own names. A stacked rule has
	// its own key, algorithm, weights, window, mode and plan limits; it
	// does not take the paths of the rules after it (a path may be
	// matched by a stacked rule and an ordinary one), and it has none of
	// count, clear_on_success, cost: response, concurrent, lease, wait,
	// wait_queue or penalty, which belong to the rule that applies. At
	// most 8 rules of a file are stacked.
	Stack bool
	// Consistency is how the rule's count is kept in a store shared by
	// processes: exact (the default: every decision is one store call,
	// exact on the store's clock) or lease: each process (each Limiter)
	// takes quota from the store in blocks and decides requests of a key
	// from its block, with no store call, until it is spent or ends. A
	// key's first request is decided alone, and so is one that comes once
	// the window of the last decided alone has ended (for token_bucket
	// and gcra, a minute); a second in the same window asks for its cost
	// and a block of 1; a block spent in full doubles the next, one that
	// ended unspent makes the next what was spent of it; a block is at
	// most LeaseBlock
	// and an eighth of what the store said was left, so a key near its
	// limit is decided exactly, one store call per request. A block ends
	// with the window its units were counted in (fixed_window, calendar
	// windows: the window; sliding_window: the window its count is in; of
	// the shortest limit), and at the latest a minute after it was taken,
	// measured on the monotonic clock.
	//
	// Bounds, per key, with P processes sharing the store and B the
	// largest block (LeaseBlock, and an eighth of the capacity): under
	// fixed_window, sliding_window and calendar windows lease mode
	// admits no more than exact mode, since every unit is counted in the
	// store, in the window it is spent in, before it is spent; a key may
	// be refused while blocks of it sit unspent in other processes, at
	// most P × B units per window of the shortest limit, which count
	// against the rule's longer limits too. Under token_bucket and gcra,
	// in any span of time at most P × B units more than the algorithm
	// admits pass (units taken before the span and spent in it). A
	// process that stops loses its unspent blocks (never more admitted);
	// with the store down a process spends the blocks it holds, then the
	// failure policy applies. A Reset clears the blocks of the process
	// that calls it, not those other processes hold. A block is the
	// rule's (its name and algorithm) and the key's, under the rule's
	// terms: requests of its counters under other terms (after a reload that changed a count,
	// or a LimitProvider's limits) are decided alone while it lasts, and
	// so is a request that counts under a stacked rule too (all its rules
	// are taken in one store call). Only rules that count every request
	// before the handler take blocks: not with count failures or
	// successes, cost: response, stack, nor without limit.
	Consistency string
	// LeaseBlock is the most units one block of a lease rule holds (one
	// process, one key): at least 1; 0 means the file's lease_block, else
	// 1000. Only on a rule in lease mode.
	LeaseBlock int64
}

// WeightSpec is the cost of one request on paths matching Path.
type WeightSpec struct {
	Path string
	Cost int64
}
