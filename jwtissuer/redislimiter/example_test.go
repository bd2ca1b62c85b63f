package redislimiter_test

import (
	"errors"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/jwtissuer"
	"github.com/rlkit/rlkit/jwtissuer/redislimiter"
)

// An Issuer whose limit is shared by every replica through Redis, failing
// closed. (Compile-only: it needs a Redis server.)
func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(client) // 100ms per call, circuit breaker on
	if err != nil {
		log.Fatal(err)
	}
	defer store.Close()

	limiter, err := redislimiter.New(store, 100, time.Minute,
		redislimiter.WithErrorHook(func(key string, err error) { log.Printf("token rate limit: %v", err) }))
	if err != nil {
		log.Fatal(err)
	}
	defer limiter.Close()

	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	cfg.EnableRateLimit = true
	cfg.RateLimiter = limiter
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		log.Fatal(err)
	}
	defer iss.Close()

	_, err = iss.Create(&jwtissuer.Claims{UserID: "u-123"})
	switch {
	case errors.Is(err, jwtissuer.ErrRateLimitExceeded):
		// 429 Too Many Requests
	case errors.Is(err, jwtissuer.ErrRateLimitUnavailable):
		// 503 Service Unavailable: Redis failed, issuance refused
	case err != nil:
		// 500
	}
}
