package redisstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
)

func ExampleNew() {
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("myapp:rl:"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer store.Close()

	cfg, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "login", Paths: []string{"/login"}, Limit: []string{"5/minute"}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	limiter := core.NewLimiter(cfg, core.WithStore(store)) // fails open while Redis is down
	d := limiter.Decide(context.Background(), "POST", "/login", "user:42", false)
	_ = d.Allowed
}

// The Redis keys of a caller's counters under a rule, for redis-cli.
func ExampleKeyNames() {
	cfg, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2/second", "100/hour"}}},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	now := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC) // the Redis server's time
	for _, k := range redisstore.KeyNames(redisstore.DefaultPrefix, "sub:alice", cfg.Rule("search").Policy, now) {
		fmt.Println(k)
	}
	// The slots of its concurrency limit, were it given one (concurrent:).
	fmt.Println(redisstore.SlotsKeyName(redisstore.DefaultPrefix, "sub:alice", "search"))
	// Output:
	// rl:{sub%3Aalice}:search@f9219a193ee46028:1767268830
	// rl:{sub%3Aalice}:search@0808d55ae0a2ceda:490908
	// rl:{sub%3Aalice}:search:inflight
}
