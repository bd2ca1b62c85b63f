// Package redislimiter is a jwtissuer.RateLimitProvider in Redis: replicas
// of a service that issue tokens share one count per key.
//
//	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
//	store, err := redisstore.New(client)
//	if err != nil { ... }
//	limiter, err := redislimiter.New(store, 100, time.Minute)
//	if err != nil { ... }
//	cfg := jwtissuer.DefaultConfig()
//	cfg.SecretKey = secret
//	cfg.EnableRateLimit = true
//	cfg.RateLimiter = limiter
//
// # Model
//
// Each key is a token bucket of capacity rate, refilled in proportion to
// time at rate per window: the token bucket of package core/algo (and of
// jwtissuer.RateLimiter), counted by core/redisstore. A decision is one Lua
// script, one round trip, atomic, reading the time with TIME on the Redis
// server, so replicas with skewed clocks agree. A denied request takes
// nothing, and the script says how long until it would be admitted, which
// an Issuer's *jwtissuer.RateLimitError carries as RetryAfter (see
// AllowRetryAfter). The store's key for a user is prefix + "{" + key + "}:" + name
// + "@" + the counter's identity, a digest of the name, the algorithm and
// the window (see redisstore), not of the rate: a limiter restarted with
// another rate finds what each user spent. The name is "jwt" unless
// WithName says otherwise.
//
// # Failures
//
// The limiter fails closed: when Redis fails (or the store's circuit is
// open, or its timeout passes), issuance is refused, and the Issuer returns
// an error that wraps jwtissuer.ErrRateLimitUnavailable and the store's
// error (RateLimiter implements jwtissuer.FallibleRateLimitProvider).
// WithFailOpen(true) lets issuance through instead. Either way, the error
// hook (WithErrorHook) sees every error.
//
// The store's options bound each call (redisstore.WithTimeout) and open a
// circuit after repeated failures (redisstore.WithBreaker); one Store can
// serve this limiter and the HTTP limiters of the same service.
package redislimiter
