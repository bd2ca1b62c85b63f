// Package redisstore is a store.Store in Redis, for services with several
// replicas: every replica counts in the same place, and each decision is
// one atomic round trip.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(client)
//
// # One round trip, the server's clock
//
// A decision is one Lua script per algorithm (fixed window, sliding window,
// token bucket, GCRA), sent with EVALSHA (EVAL once, when the server lacks
// it). The script reads the time with TIME on the server, never the
// caller's, so replicas with skewed clocks agree; it evaluates every limit
// of the policy and writes only when all admit (a denial consumes nothing);
// every key it writes has a TTL from the same script. Setting an expiry
// costs the server more than a write, so a key's TTL is set only when its
// state needs longer than the TTL it has, and then to one period more than
// it needs; a fixed window's counter gets its TTL when the window's first
// request creates it. Keys therefore live up to one period past the
// moment their state is back to full. The scripts compute
// exactly what package algo computes: the tests run both on random traffic
// and require the same decisions, counts and durations. Peek (what a rule
// counted by outcome asks before the handler) is the same script in a dry
// run, -c - 1 in ARGV[1] for cost c: it evaluates and writes nothing, at
// any cost. (A take of cost 0, which consumes nothing, may still write: a
// state kept under other terms of the counter, another count, burst or
// time unit, is rewritten under the policy's, and a TTL the policy's
// terms need longer is extended; a dry run of cost 0 leaves both.)
//
// # Batches under load
//
// A decision that finds fewer than two calls of decisions in flight to its
// node goes out at once, alone, as above: an idle store adds no delay (no
// timer, no linger). Decisions that arrive while two are in flight wait in
// the node's queue, and each call that returns takes up to 128 of them
// (WithBatch) and sends them as one call of a batch script, which reads
// TIME once and runs each decision's own logic in turn: one round trip for
// all of them, each decision still evaluated as it is alone (all of a
// policy's limits or none, the same keys and replies), so replicas stay
// exact. What batching saves is the server's per-call cost, which bounds a
// single-threaded Redis under many goroutines. For a Cluster, a batch
// holds the decisions of one master; their keys may lie in several hash
// slots, which the batch script allows with its shebang flag
// allow-cross-slot-keys (Redis 7.0 or newer). A batch the cluster
// redirects (MOVED, ASK, TRYAGAIN, CROSSSLOT, while slots move) is sent
// again decision by decision, as is each decision of a batch whose key the
// node does not serve (the batch script runs each decision under pcall,
// and answers the others), and a batch the server refuses before it runs
// because it may write (OOM, READONLY, MISCONF, NOREPLICAS; alone, a
// decision that writes nothing, a peek or a denial, is answered); a
// server that refuses the batch script (one older than 7.0, or miniredis)
// turns batching off at the first batch, whose decisions are then sent
// one by one. A queued decision waits until its caller's context ends or
// the store's timeout passes at most, then returns that error (a
// *NodeError) without being sent; one whose batch was sent may have been
// applied, as a call that timed out may have been. Each node's queue holds
// at most 16 batches (past that, a decision goes out alone), and a slow
// node delays only its own decisions. A batch is one call to its node for
// the breaker (which it does not count against the node once every one of
// its callers' contexts has ended, as for a call alone), and its failure
// is every one of its decisions' error. Reset and TakeAll are never
// batched.
//
// # Stacked limits
//
// TakeAll (store.MultiTaker) counts one request under several policies,
// each for a key of its own (the rules stacked on a request's
// first-matching rule), all or nothing. The takes of one node go in one
// call of a stack script, atomic: on a Client (standalone, Sentinel),
// every take; on a ClusterClient, the takes whose keys one master serves,
// in one hash slot or several (the variant for several declares
// allow-cross-slot-keys, Redis 7.0; a server that refuses it, or a call
// whose keys the node does not all serve while slots move, consumes
// nothing and is sent again one call per hash slot, as across masters
// below, and a refused shebang turns batching off too). The script runs
// the takes in order, each as Take runs it alone (takes of one counter
// count one after the other), on one reading of TIME; from the first
// denial on, the takes left are evaluated in a dry run and what the
// takes before it took is given back in the same script, so nothing is
// consumed, and each take that admitted answers its state as it stands (a
// decision of cost 0). WithIncrExpireKeys applies as to Take: a take
// counts where a Take of its key and policy counts.
//
// Takes on several masters (or Ring shards) go in one call per node, one
// node after another in the order of the takes (the rule that applies, often
// the tightest, first), each node's part atomic, until a node denies or
// fails: a round trip per node for an admitted request, and the nodes
// after the one that refused are only read, at cost 0, for their state as
// it stands. (Calls in parallel would take one round trip, but then every
// request refused on one node would hold takes on the others, and a burst
// of one caller's requests could refuse all of them.) When a node denies
// (or fails), each node before it, which admitted, is sent a give-back, a
// script per algorithm that undoes its take: a fixed window's (or a
// calendar period's) count of the window the take went into goes down by
// its cost, never below 0; a sliding window's count of the window the
// take went into (the previous window's, once the window has moved on),
// never below 0; a token bucket gets the cost back in tokens, up to its
// capacity; a GCRA's theoretical arrival time moves back by the cost
// times the emission interval, never before now. Counts add up, so a
// window's give-back is exact whatever ran between the take and it. A
// bucket or a GCRA gets back exactly what it had without the take when
// nothing wrote its key between; when another request took from it
// meanwhile, a bucket without the take may have been full for a while
// and lost refill that this one kept, and the give-back keeps that much
// back (at most the time the take was held): it never returns more than
// the bucket without the take would have. What remains:
//
//   - A denied request's takes on the nodes before the one that refused
//     it are held for about a round trip per node before they are given
//     back: other requests may be refused meanwhile (over-refusal, never
//     over-admission). On a Cluster (or a Ring) the deny cache keeps a
//     denial TakeAll learns at most 250ms, less than its Retry-After when
//     that is longer, since takes held by another process may have caused
//     it; once the store has given back takes across nodes itself, a
//     Take's denials too; and a give-back drops the given-back keys'
//     denials in this process at once.
//   - A give-back that fails (its node down, its call timed out) leaves
//     its take consumed: at most the request's cost on that node's keys
//     for each request refused while the failure lasts, until their
//     periods refill it.
//   - A node that fails its call fails the request (a *NodeError; the
//     nodes before it give back what they took). A call that timed out may have been applied,
//     as a Take's may: its takes then stay consumed (over-refusal). While
//     a node's circuit is open, a request with a take there fails at
//     once, with no call to the other nodes.
//
// A take that the deny cache denies refuses the request without taking
// anything: the other takes are read at cost 0 for their state as it
// stands (one call per node, which consumes nothing; none when every take
// is denied there). The denials a call learns are cached for each take's
// key, as Take's are (but not a take decided after another take of its
// key and policy in the same request), and Reset drops them as it drops
// Take's.
//
// Lua numbers are doubles, exact for integers below 2^53. The fixed window
// forms no products and counts in microseconds. The other algorithms count
// each limit in a time unit: the smallest power of ten from 1 µs to 1 s
// that keeps (2×capacity + count + 1) × period below 2^52 (1 µs up to about
// 17,000 per day, 417,000 per hour or 25 million per minute; a million per
// day counts in units of 100 µs). Periods must be whole microseconds; a
// limit that cannot be counted exactly is refused with store.ErrBadPolicy.
//
// The scripts need Redis 6.0 or newer (scripts replicated by their effects,
// SET KEEPTTL); batches, Redis 7.0 (on older servers the store does not
// batch).
// They declare the key of a policy's first limit and derive the others
// from it (a limit's counter identity, a fixed window's index from the
// server's clock), always inside the same hash slot: Redis and Redis Cluster allow
// this; servers that insist on declared keys (Dragonfly by default) need
// their option for undeclared keys.
//
// # Keys
//
// A fixed window's counter is prefix + "{" + user + "}:" + rule + ":" +
// window, where window = floor(server time / period); the other algorithms
// keep one key, prefix + "{" + user + "}:" + rule. The prefix is "rl:"
// unless WithPrefix says otherwise. The braces are a Cluster hash tag: all
// of one user's counters live in one slot. rule is the policy name, "@" and
// the limit's counter identity (store.Policy.CounterID: the name, the
// algorithm and the limit's period) in 16 hex digits: each limit of a
// policy has its key, which a new count or burst keeps, so that a reload
// keeps what each user spent, while a new algorithm or period starts
// another. A value holds its state as package algo reads it under
// whatever terms the limit has now (a GCRA's count and time unit, a token
// bucket's time unit, with it), and the scripts convert a state kept
// under other terms once. User and rule names are
// escaped: bytes other than letters, digits and -._@+=/,! become %XX, the
// empty string is "~", and a part longer than 128 bytes once escaped is "#"
// and its SHA-256 in base64url. No input can leave its braces or collide
// with another.
//
// A calendar limit's counter (a policy of limits per calendar day, month
// or year, store.Policy.Location) is prefix + "{" + user + "}:" + rule +
// ":" + start (rule naming the first limit's counter identity, and a limit
// after the first adding "." and its place: a new count keeps the counts,
// limits put in another order start afresh), start being the first
// instant of its period in Unix seconds (rl:{alice}:llm@…:1767222000 for
// the day of 2026-01-01 in Europe/Berlin); it expires when its period
// ends.
//
// # Calendar periods
//
// Calendar limits are counted by a script of their own, a fixed window
// over the boundaries the caller sends: the store finds, on its own clock
// (WithClock) and in the policy's time zone, the period holding its time
// and the periods before and after it (kept until its clock leaves them:
// no time-zone arithmetic per decision), and the script counts in the one
// of the three that holds the server's time. A server clock ahead of the
// process's or behind it by less than a period therefore counts in the
// server's period, as every replica does; one further off is refused with
// an error naming the server's time (the limiter's failure policy
// answers), as the periods sent do not reach it.
//
// WithIncrExpireKeys(true) counts every policy of one fixed-window limit
// where a limiter built on INCR and EXPIRE counts: prefix + "{" + user +
// "}:" + name + ":" + window (rl:{alice}:search:1764604800 for a limit
// per second; the policy's name without a counter identity, an '@' in it
// written %40), the count a plain integer, the TTL one period from the
// window's first request. Such a limiter and this store then share their
// counters (a rolling migration from one to the other); policies with
// several limits or another algorithm keep the default layout (so a rule
// that gains a limit, or a new algorithm, counts afresh in it, and one
// back to a single fixed-window limit finds its plain keys again).
//
// # Requests in flight
//
// The store bounds requests in flight too (store.ConcurrencyStore, for a
// rule's concurrent: limit): the slots of one key under one limit are a
// sorted set, prefix + "{" + user + "}:" + name + ":inflight" (user and
// name escaped as above; the suffix, which no counter's key has, keeps it
// apart from them), in the user's Cluster slot. Each member is a lease,
// 64 random bits, scored with the instant it ends on the server's clock.
// Acquire is one script: it drops the leases that have ended, and adds
// one when fewer than the limit remain; Release is one script that
// removes it. A process that dies holding slots loses them for one lease
// (the rule's lease:, 30s by default) at most: the next Acquire after
// that drops them. The set's TTL is its longest lease, and it goes with
// its last member. Neither call is batched or answered from the deny
// cache.
//
// # Failures
//
// Every call is bounded by a timeout (WithTimeout, 100ms, plus at most one
// grain of 5ms, as calls starting together share a deadline): its deadline
// bounds go-redis's socket operations and dial when the client has
// ContextTimeoutEnabled, and its Done channel ends go-redis's waits for a
// pooled connection and its retry back-offs. With a client that ignores
// context deadlines the store runs the call on a goroutine and stops
// waiting at the timeout. An error is never a denial: core.Limiter applies
// its failure policy (open by default) and reports the error to its
// Observer.
//
// Failures are accounted per node. A node is a Cluster master (the one
// that owns the key's hash slot in the ClusterClient's cached slot map,
// found with MasterForKey: a CRC16 and a lookup, no round trip, no
// allocation), a Ring shard (GetShardClientForKey), or, for a Client
// (standalone, or Sentinel through NewFailoverClient) and any other
// client, the one server. After several consecutive failures of a node
// (WithBreaker, 5) its circuit opens for a cool-down (1s): calls for the
// keys it serves fail at once with ErrCircuitOpen without touching Redis;
// then one call probes it. Other nodes' keys are not affected: they are
// counted as before. Every error of a call is a *NodeError naming the node
// (its address), so the limiter's warning names it too. go-redis dials on
// a goroutine of its own and retries there, so a call to a node that
// refuses connections ends at its deadline with only
// context.DeadlineExceeded; the store records the outcome of every dial
// (a hook on the client) and, when a call times out while the node's
// dials fail, keeps the last dial's error in the NodeError (LastDial;
// errors.Is finds the deadline, errors.As the *net.OpError):
//
//	redisstore: node 10.0.0.7:6379: context deadline exceeded: last dial error: dial tcp 10.0.0.7:6379: connect: connection refused
//
// NodeError, ErrClosed and ErrCircuitOpen classify themselves for metrics
// (store.ErrorKind): circuit_open, closed, timeout, pool_timeout,
// canceled, connection_refused, connection, redis (an error reply) or
// other. Nodes come from
// the client's view of the servers, never from keys: a flood of keys adds
// no breaker, and the store keeps at most 1,024.
//
// What is not isolated:
//
//   - Redis Cluster's own verdict. With cluster-require-full-coverage yes
//     (Redis's default), once the cluster declares a master failed (about
//     cluster-node-timeout after it stopped answering) every master refuses
//     every command with CLUSTERDOWN, so every node's circuit opens and
//     every key fails (open or closed, as the limiter says) until the
//     failure is cleared: for a master that comes back, the others clear
//     it only 2 × cluster-node-timeout after declaring it. With
//     cluster-require-full-coverage no the other masters keep serving
//     their slots and only the failed master's keys fail. New checks the
//     setting on every node of a ClusterClient (CONFIG GET, within a
//     second) and logs one warning (WithLogger) when a node has yes,
//     naming the section "Cluster full coverage" of docs/redis.md; a
//     cluster that refuses CONFIG, as managed services often do, is logged
//     at debug level only.
//   - Before a ClusterClient has loaded its slot map (until the first
//     call that reaches the cluster), the store cannot tell a key's master:
//     failures count against the whole cluster, named "cluster" and the
//     seed addresses, whose open circuit stops the loads as well.
//   - A Ring takes a shard its heartbeat finds down out of its hash and
//     sends the shard's keys to the others, where their counts start
//     again; a Sentinel-managed Client is one node, whatever master it
//     is connected to ("FailoverClient", as go-redis names it).
//   - The local process: until a node's circuit opens, each call to it
//     holds its caller for the timeout; the deny cache keeps denying, at no
//     cost, keys already over their limit, whatever their node's state.
//
// # Reset and Stats
//
// Reset deletes a key's counters under a policy in one script and reports
// whether any was live at the server's time (a fixed window's counter of
// the current window; for the other algorithms, a state not yet back to
// its initial one: their keys outlive that by up to a period, and such a
// key is deleted without being reported). Stats (store.StatsStore) reports
// the deny cache's hits and each node's breaker (closed, open,
// half-open); Keys is -1, as counting keys would cost Redis a scan.
//
// # Reading counters
//
// Inspect reads keys' counters under a policy without counting (per key,
// two dry runs of the decision script in one pipeline: what remains, when
// it resets, the Retry-After of the next request); Scan finds a policy's
// keys with SCAN ... MATCH within a bound on the keys examined, on every
// master of a Cluster, and reads their states (ScanPolicies, those of
// several policies in one pass); InFlight counts a key's requests in
// flight. None writes, at any cost or under any terms, nor reads or
// fills the deny cache. A key longer than 128 bytes once escaped is held
// under its digest, which Scan reports as KeyState.Tag with no Key:
// InspectTags, InFlightTag and ResetTag take such a tag where Inspect,
// InFlight and Reset take a key. rlkit keys (docs/cli.md) runs them.
//
// # Local deny cache
//
// Once Redis denies a key a request of some cost with a known retry-after,
// the store denies requests of at least that cost for that key locally,
// without a round trip, until the retry-after has passed (WithDenyCache,
// on). A hot key over its limit then costs Redis nothing. Reset through the
// same Store clears the entry (and a denial read before it is not cached
// after it); quota freed any other way — a Reset made through another
// process or directly in Redis, or Redis losing its data — is seen here
// only when the entry ends, at most the retry-after later. A request of a
// larger cost than the cached denial's is denied with that denial's
// retry-after, a lower bound of its own.
package redisstore
