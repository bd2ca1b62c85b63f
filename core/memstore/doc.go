// Package memstore is rlkit's in-process store: the default when no Redis
// is configured.
//
// # Model
//
// Counters live in 32-byte cells: the 64-bit hash, the two-word algorithm
// state and one word for eviction (when the state expires, and how much of
// its limit the counter has consumed) — never the key itself, so memory
// per key is fixed whatever the keys look like (about 40–60 bytes,
// depending on how full the indexes are), and a decision on an existing
// key allocates nothing. Cells are handed out store-wide in the order
// counters are created, in chunks of 256, so that counters created
// together sit together in memory.
//
// Each counter is found by a seeded 64-bit hash of the key (the runtime's
// string hash, which hash/maphash uses) combined with its limit's counter
// identity (store.Policy.CounterID: the policy's name and algorithm and
// the limit's period, not its count or burst, so that a reload keeps what
// each key spent), and every counter of one key belongs to the shard the
// key's hash chooses. A shard finds its counters through an
// open-addressing index of one 8-byte word per counter. A decision on an
// existing key with a one-limit policy reads the index without any shard
// lock and locks only its own cell (a bit of the cell's eviction word), so
// cores deciding for different keys write no memory in common. Creating,
// removing and evicting counters, and policies with several limits, take
// the shard's mutex, and lock each cell they read or free, so a decision
// in progress is never lost. Calendar limits count over the periods their
// policy keeps (store.Policy.Periods): a decision does time-zone
// arithmetic only when it crosses into another period.
//
// Two different keys whose 64-bit hashes are equal would share a counter.
// With a million live keys the chance that any two collide is about 3 in
// 100 million; the seed is random per Store, so a client cannot aim for a
// collision, and the effect of one would be that two callers share a quota.
//
// # Bounds
//
// The store holds at most MaxKeys counters (WithMaxKeys; the bound is
// enforced per shard, MaxKeys/shards each). When a shard is full, one pass
// over it frees about a tenth of it, dropping first what costs least to
// forget, since a forgotten counter lets its owner through at most what it
// had consumed: the expired counters, then the live ones that have consumed
// least of their limit. Consumption is relative to the limit (the count in
// a fixed or sliding window, the debt of a token bucket or GCRA, over the
// capacity), as the last admitted request left it: a denied request writes
// nothing, so a counter at its limit stays known as such while its owner
// is denied. Counters at their limit go last, only when the expired
// counters and those below their limit make up less than a tenth of the
// shard: a flood of fresh identities cannot free a client that is being
// held back unless its own counters are at their limit too and fill nine
// tenths of a shard. Among counters that consumed alike, those closest to
// expiry go first (as a sample estimates), and ties (the counters of one
// fixed window) are dropped evenly over the index. Should a pass free
// nothing (decisions made meanwhile without the shard's mutex can raise
// every counter it chose), the insert drops the one counter that costs
// least, so a shard never holds more than its share. One insert makes
// the whole pass, under the shard's mutex (up to about 10 ms for a shard
// of a full default store, measured on 2 cores), so passes come once per
// tenth of a shard's inserts; a decision on an existing key does no
// eviction work. There is no background work unless WithSweepInterval
// asks for a sweeper, which Close stops.
//
// Cells freed by eviction, Reset or expiry are kept for the shard's next
// counters, so the cells never number more than MaxKeys. Sweep (and the
// sweeper) gives memory back after a burst: when at least half the chunks
// would be empty, it moves the live counters into the first chunks and
// drops the rest, holding every shard's mutex for that pass (about 0.1 s
// to move 450,000 counters of a million, measured on 2 cores). New keys,
// policies with several limits and the counters being moved wait for it;
// decisions on the other existing counters do not.
//
// # Several takes at once
//
// TakeAll (store.MultiTaker: a request under its first-matching rule and
// the rules stacked on it) decides up to store.MaxTakes takes, each a key
// under a policy, in one atomic step: it locks the shards of the takes'
// keys, each once and in increasing order (as Sweep's compaction does,
// so no two callers wait for each other in a cycle), then the cells of
// their counters, evaluates the takes in order (store.Evaluate, as for a
// policy of several limits; a counter two takes share is counted by both,
// the second on what the first left), and writes back only when every
// take is admitted. A denied call writes nothing, but the state of a
// token bucket or GCRA kept under other terms, as a denied Take does.
// Counters are created, and a full shard evicts, only once every cell is
// unlocked. Decisions on those keys without the mutex (Take on a
// one-limit policy, Acquire, Release) wait for its cells only, and never
// see part of a call. It allocates nothing for existing keys: its working
// set is fixed arrays, store.MaxTakes × store.MaxLimits counters.
//
// # Requests in flight
//
// The store bounds requests in flight too (store.ConcurrencyStore, for a
// rule's concurrent: limit): the slots a key holds under a limit are one
// more counter, in a cell of its own, whose state is their number.
// Acquire and Release on an existing key allocate nothing and take no
// shard lock, as decisions do. Slots need no lease: they go with the
// process. While slots are held the counter never expires and weighs
// as much as they take of the limit (all of it: the last to be evicted);
// once none is, it is the first to go. A counter eviction drops while
// slots are held forgets them: its key may then have up to the limit in
// flight again, and its Releases find nothing to give back.
//
// # Reset and Stats
//
// Reset removes a key's counters under a policy and reports whether any
// had not expired. Stats (store.StatsStore) reports the counters held
// (expired ones not yet dropped included), the bound, and how many live
// counters eviction has dropped; it locks each shard in turn, so its cost
// grows with the shards, not the keys. Neither adds work to a decision.
//
// # Time
//
// Take, Peek and TakeAll read the store's clock (store.SystemClock unless
// WithClock says otherwise) once per decision; TakeAt and PeekAt take the
// instant from the caller.
package memstore
