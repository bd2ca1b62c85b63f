// Package memstore is rlkit's in-process store: the default when no Redis
// is configured.
//
// # Model
//
// Counters live in shards chosen by a seeded 64-bit hash (hash/maphash) of
// the key, combined with the policy's fingerprint (name, algorithm, limits); each shard is an open-addressing table of
// 32-byte slots behind its own mutex. A slot holds the 64-bit hash, the
// two-word algorithm state and the instant the state expires — never the key
// itself, so memory per key is fixed whatever the keys look like (about
// 40–80 bytes, depending on how full the tables are), and a decision on an
// existing key allocates nothing.
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
// over it drops the expired counters and, if that frees less than a tenth
// of it, the live ones closest to expiry, until about a tenth is free (for
// counters of one rule that is the least recently used; across rules with
// different periods, short-period counters go first); the cost is spread over the next tenth of
// inserts. There is no background work unless WithSweepInterval asks for a
// sweeper, which Close stops.
//
// # Time
//
// Take reads the store's clock (core.SystemClock unless WithClock says
// otherwise) once per decision; TakeAt takes the instant from the caller.
package memstore
