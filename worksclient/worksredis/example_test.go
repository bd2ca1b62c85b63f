package worksredis_test

import (
	"context"
	"errors"
	"log"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/worksclient"
	"github.com/rlkit/rlkit/worksclient/worksredis"
)

func ExampleNewPacer() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	// Every replica paces through the same Redis: 250ms per key in total.
	pacer := worksredis.NewPacer(rdb, worksclient.DefaultInterval)
	defer pacer.Close()
	client, err := worksclient.NewClient(worksclient.DefaultBaseURL)
	if err != nil {
		log.Fatal(err)
	}
	relay := client.WithRateLimiter(pacer)
	_ = relay
}

func ExampleLeaderLock_Run() {
	rdb := redis.NewClient(&redis.Options{Addr: "127.0.0.1:6379", ContextTimeoutEnabled: true})
	defer rdb.Close()
	lock := worksredis.NewLeaderLock(rdb, "backend-7d9f-abc12") // nil rdb: no lock, a single instance

	relay := func(ctx context.Context) error {
		// Poll the outbox and send through the paced client until ctx ends:
		// it ends as soon as this replica may no longer be the leader.
		<-ctx.Done()
		return ctx.Err()
	}
	ctx := context.Background() // in a service: cancelled on shutdown
	for ctx.Err() == nil {
		err := lock.Run(ctx, relay)
		switch {
		case errors.Is(err, worksredis.ErrLeadershipLost):
			log.Print(err) // another replica may lead now; contend again
		case err != nil && ctx.Err() == nil:
			log.Print(err)
			return
		}
	}
}
