package redisbound

import (
	"context"
	"errors"
	"sync"

	"github.com/redis/go-redis/v9"
)

// ErrTimeout is returned by Call when the context was done before a call
// on its own goroutine ended. Its text is "redis call timed out".
var ErrTimeout = errors.New("redis call timed out")

// Bounded reports whether c bounds its socket reads and writes by the
// context's deadline (go-redis's ContextTimeoutEnabled) in a *redis.Client,
// *redis.ClusterClient or *redis.Ring. A nil client, a nil pointer and a
// client of another type are taken to be unbounded.
func Bounded(c redis.UniversalClient) bool {
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

// Call returns f(ctx, arg), and returns by the time ctx is done even when
// the client f calls is not bounded.
//
// When bounded is true, f runs on the calling goroutine and Call returns
// what it returns: the client itself ends the call at ctx's deadline.
// Otherwise f runs on a goroutine of its own, counted in inflight (when
// not nil) until f returns; when ctx is done first, Call returns the zero
// T and ErrTimeout at once, while f goes on until go-redis returns, by the
// client's ReadTimeout and WriteTimeout at the latest. A caller that must
// not leave such calls behind (a Close) waits on inflight.
//
// f receives arg rather than capturing it, so that a caller whose f is a
// function literal with no captured variables allocates nothing on the
// bounded path.
func Call[A, T any](ctx context.Context, bounded bool, inflight *sync.WaitGroup, arg A, f func(context.Context, A) (T, error)) (T, error) {
	if bounded {
		return f(ctx, arg)
	}
	return spawn(ctx, inflight, arg, f)
}

// spawn is the unbounded half of Call, apart so that Call's own frame
// stays small.
func spawn[A, T any](ctx context.Context, inflight *sync.WaitGroup, arg A, f func(context.Context, A) (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	if inflight != nil {
		inflight.Add(1)
	}
	go func() {
		if inflight != nil {
			defer inflight.Done()
		}
		v, err := f(ctx, arg)
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ErrTimeout
	}
}
