package redishold_test

import (
	"log"
	"net/http"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/outbound"
	"github.com/rlkit/rlkit/outbound/redishold"
)

// Replicas that call one upstream share both its pace and its holds: once
// the upstream tells one of them to wait (Retry-After, a remaining count
// of 0), none of them sends under that key until the wait is over.
// (Compile-only: it needs a Redis server.)
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: "localhost:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	counters, err := redisstore.New(rdb) // the counters of the pace, shared
	if err != nil {
		log.Fatal(err)
	}
	defer counters.Close()
	holds := redishold.New(rdb) // the holds, shared
	defer holds.Close()

	cfg, err := outbound.Rate(10, time.Second, 0) // 10 requests a second per key
	if err != nil {
		log.Fatal(err)
	}
	lim, err := outbound.New(cfg, counters, outbound.WithHoldStore(holds))
	if err != nil {
		log.Fatal(err)
	}
	client := &http.Client{Transport: outbound.NewTransport(nil, lim)} // keyed by host
	resp, err := client.Get("https://api.example.com/v1/items")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
}
