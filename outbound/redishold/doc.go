// Package redishold keeps the holds of an outbound.Limiter in Redis, so
// that every process pacing the same upstream keys honours them: when one
// replica is told to wait (a Retry-After, a remaining count of 0 until
// the reset), none of them sends under that key until the hold ends.
//
//	holds := redishold.New(rdb)
//	defer holds.Close()
//	lim, err := outbound.New(cfg, store, outbound.WithHoldStore(holds))
//
// # Model
//
// A hold is one Redis key whose time to live is what is left of the hold,
// on the Redis server's clock (SET PX, PTTL), so processes with skewed
// clocks agree. Hold keeps the later of the hold in place and the new one
// in one Lua script (EVALSHA, EVAL when the server lacks it); Held is one
// PTTL. The rate-limit key is never written to Redis: the Redis key is the
// prefix (WithPrefix; "rl:hold:" by default) and the SHA-256 of the key,
// so a key that holds a secret (a token, an API key) cannot be read back
// from Redis. A hold that has ended leaves nothing behind: its key has
// expired.
//
// # Failures
//
// Every call is bounded by a timeout (WithTimeout; 100ms by default),
// whether or not the client has ContextTimeoutEnabled: without it
// (go-redis's default) the call runs on its own goroutine, which the
// caller stops waiting for at the timeout, and which ends when go-redis
// returns, by the client's own ReadTimeout at the latest. Close waits for
// such calls, and leaves the client, which is the caller's, open.
//
// After repeated failures a circuit breaker (WithBreaker; by default 5
// failures in a row, for 1s) fails calls at once for a cool-down, so that
// a Redis that is down costs no time. What a failed call means for a request is
// the outbound.Limiter's failure policy (see outbound.WithHoldStore): open,
// the request starts; closed, its Wait returns the error.
package redishold
