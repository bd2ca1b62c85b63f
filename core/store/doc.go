// Package store is the contract between rlkit's limiter and the place its
// counters live: the Store interface, the Policy a store counts against,
// the Result it answers with, and what every store shares (Evaluate and
// Combine, the bound on keys, the clocks). Package memstore (in this
// process) and package redisstore (Redis, shared by replicas) implement
// it; any other store that passes the conformance suite of package
// storetest can take their place (core.WithStore).
//
// # Model
//
// The limiter asks a Store about one key (the caller's identity, at most
// MaxKeyLen bytes once BoundKey has bounded it) under one Policy (a
// rule's algorithm and one to MaxLimits limits) at one cost (the
// request's weight):
//
//   - Take admits the request when every limit of the policy does, and
//     then consumes the cost from each. A denial is a Result with Allowed
//     false, never an error, and consumes from no limit.
//   - Peek answers what Take would at this instant, consuming nothing and
//     creating nothing: the limiter asks it before the handler for a rule
//     that counts only some responses, and takes once the status is known.
//   - Reset forgets the key's counters under the policy and reports
//     whether one of them still held the cost of an admitted request.
//
// An error means the store failed, and the limiter then lets the request
// pass or refuses it with 503, as its failure policy says. A Store is safe
// for concurrent use, and concurrent Takes on one key admit exactly what
// the limits allow.
//
// Each limit of a policy has a counter per key, which belongs to the
// policy's Name and Algorithm and the limit's Period, not to its Count or
// Burst: Policy.CounterID(i) is that identity as one number. A store keys
// each limit's counter by the key and CounterID, never by the *Policy
// pointer, which a reload replaces, nor by the terms: a reloaded
// configuration that changes a count or a burst then finds what each
// caller spent, which the algorithms count against the new terms (see
// Evaluate and algo.Apply), and a new name, algorithm or period starts
// afresh. Policy.Fingerprint digests the terms, for what must not outlive
// them (a cached denial).
//
// The algorithms are package algo's pure functions over an algo.State of
// two words per limit. A store that keeps those states itself evaluates a
// request with Evaluate (package memstore does); one that evaluates
// elsewhere (package redisstore, in a Lua script on the server) builds its
// Result from each limit's algo.Outcome with Combine. Either way every
// store picks the deciding limit, and fills Remaining, ResetAfter and
// RetryAfter, the same way.
//
// # Optional interfaces
//
// A StatsStore reports Stats (keys held, the bound, evictions, deny-cache
// hits, each server node's circuit breaker) for metrics, which read it
// when scraped, never on the request path. A LocalStore keeps its
// counters in this process: the limiter does not time its calls, which
// take less than reading the clock twice would. A ConcurrencyStore bounds
// requests in flight (a rule's concurrent: limit): Acquire takes one of a
// Concurrency's slots of a key when fewer than its Limit are held,
// Release gives it back; a store shared by processes lets a slot nobody
// released come back after the Concurrency's Lease. A configuration with
// such a limit cannot run on a store without it. A MultiTaker counts one
// request under several policies, each for a key of its own, all or
// nothing (rules stacked on a request's first-matching rule): TakeAll
// consumes every take's cost when all are admitted, and none when any is
// denied; a configuration with stacked rules cannot run on a store
// without it. An error whose chain
// holds a method StoreErrorKind() string names its own kind for the
// metrics' error label; ErrorKind classifies the others.
//
// # Time
//
// A Clock tells the time as Unix nanoseconds. SystemClock is the wall
// clock that decisions and counters read unless given another; a
// ManualClock moves only when told to, so that a test or an example
// controls every decision, and its timers fire as it moves. A store that keeps its counters in this process
// reads a Clock; one whose server keeps time (Redis's TIME) reads the
// server's.
//
// # Conformance
//
// storetest.Run checks a Store against this contract: exact counts for
// every algorithm with one limit and several, costs, rollover, denials
// that consume nothing, isolation of keys and policies, exact admissions
// under concurrency, what Reset reports, a Peek that answers what the
// Take after it does, and counters that carry over new terms.
package store
