package worksclient

import (
	"context"
	"sync"

	"github.com/redis/go-redis/v9"
)

// boundedClient reports whether c bounds its socket reads and writes by
// the context's deadline (go-redis's ContextTimeoutEnabled, off by
// default). A client of another type is taken to be unbounded.
func boundedClient(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case *redis.Client:
		return c != nil && c.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return c != nil && c.Options().ContextTimeoutEnabled
	case *redis.Ring:
		return c != nil && c.Options().ContextTimeoutEnabled
	}
	return false
}

// redisCalls counts the calls still running on their own goroutine after
// redisCall stopped waiting for them (tests wait for them).
var redisCalls sync.WaitGroup

// redisCall runs f(ctx), and returns by the time ctx is done even when
// the client is not bounded: f then runs on its own goroutine, and when
// ctx is done first redisCall returns ctx.Err() (context.DeadlineExceeded
// for a timeout) while f goes on until go-redis returns, by the client's
// own ReadTimeout/WriteTimeout at the latest.
func redisCall[T any](ctx context.Context, bounded bool, f func(context.Context) (T, error)) (T, error) {
	if bounded {
		return f(ctx)
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	redisCalls.Add(1)
	go func() {
		defer redisCalls.Done()
		v, err := f(ctx)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}
