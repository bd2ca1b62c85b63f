// Package worksredis holds the parts of package worksclient that need
// Redis, so that a program using the Works client without Redis compiles
// no Redis client: a pacer shared by every replica, and the relay's leader
// lock.
//
// # Pacer
//
// Pacer is a worksclient.RateLimiter (and worksclient.Delayer) whose
// spacing is shared by every process that paces the same keys in the same
// Redis: for each key, requests start at least the interval apart on the
// Redis server's clock, whichever process sends them. It is the same
// pacing as worksclient.Pacer (an outbound.Limiter under outbound.Rate(1,
// interval, 0)), on core/redisstore, with its holds in outbound/redishold.
// Give it to a worksclient.Transport, or to Client.WithRateLimiter, and
// Close it when done:
//
//	pacer := worksredis.NewPacer(rdb, worksclient.DefaultInterval)
//	defer pacer.Close()
//	relayAPI := api.WithRateLimiter(pacer)
//
// # Leader lock
//
// LeaderLock lets one replica at a time run the relay: the holder of the
// Redis key LeaderKey ("baron:worksmobile:relay:leader", TTL 30 s, both
// constants; WithKey and WithTTL give others). Run takes it with SET NX
// PX, renews it, cancels the relay's context as soon as it cannot be sure
// it still holds it (well before another replica could take it over), and
// releases it only if it still holds it. Without Redis (a nil client) Run
// just runs the relay, as a single instance does. Redis must not lose the
// key while it is held (a restart without persistence, a failover to a
// lagging replica): use AOF with appendfsync always, or keep a restarted
// Redis out for a TTL; and the lock is a lease with no fencing token (see
// LeaderLock).
//
// # Calls to Redis
//
// Every call is bounded by a timeout (WithTimeout for the Pacer,
// WithLockTimeout for the lock), whether or not the client has
// ContextTimeoutEnabled: without it (go-redis's default, under which
// socket reads ignore context deadlines) the call runs on its own
// goroutine, which the caller stops waiting for at the timeout; that
// goroutine ends when go-redis returns, by the client's own ReadTimeout at
// the latest.
package worksredis

import "sync"

// inflight counts the calls still running on their own goroutine after
// their caller stopped waiting for them (tests wait for them).
var inflight sync.WaitGroup
