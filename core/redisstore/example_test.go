package redisstore_test

import (
	"context"
	"fmt"

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
