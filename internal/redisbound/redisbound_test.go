package redisbound_test

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/internal/redisbound"
	"github.com/rlkit/rlkit/internal/redistest"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

func TestBounded(t *testing.T) {
	on := func(c redis.UniversalClient) redis.UniversalClient {
		t.Cleanup(func() { _ = c.Close() })
		return c
	}
	for _, tc := range []struct {
		name string
		c    redis.UniversalClient
		want bool
	}{
		{"nil", nil, false},
		{"nil *Client", (*redis.Client)(nil), false},
		{"nil *ClusterClient", (*redis.ClusterClient)(nil), false},
		{"nil *Ring", (*redis.Ring)(nil), false},
		{"Client", on(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})), false},
		{"Client bounded", on(redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", ContextTimeoutEnabled: true})), true},
		{"ClusterClient", on(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}})), false},
		{"ClusterClient bounded", on(redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{"127.0.0.1:1"}, ContextTimeoutEnabled: true})), true},
		{"Ring", on(redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}})), false},
		{"Ring bounded", on(redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1"}, ContextTimeoutEnabled: true})), true},
	} {
		if got := redisbound.Bounded(tc.c); got != tc.want {
			t.Errorf("Bounded(%s) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestCallUnbounded: with a client that ignores deadlines and a Redis that
// never answers, Call returns ErrTimeout at ctx's deadline, long before the
// client's read timeout; the call it gave up on is counted in inflight
// until go-redis returns.
func TestCallUnbounded(t *testing.T) {
	const readTimeout = 2 * time.Second
	var inflight sync.WaitGroup
	t.Cleanup(inflight.Wait) // registered first: runs after the black hole closes
	addr, _ := redistest.BlackHole(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	v, err := redisbound.Call(ctx, redisbound.Bounded(c), &inflight, c, func(ctx context.Context, c *redis.Client) (string, error) {
		return c.Ping(ctx).Result()
	})
	d := time.Since(t0)
	if v != "" || err != redisbound.ErrTimeout || err.Error() != "redis call timed out" {
		t.Errorf("Call = %q, %v; want \"\", ErrTimeout", v, err)
	}
	if d >= time.Second {
		t.Errorf("Call returned after %v, want at the deadline (100ms), well before the read timeout (%v)", d, readTimeout)
	}
}

// TestCallResult: Call returns f's value and error, bounded or not, and
// an unbounded call that ends in time leaves nothing in inflight.
func TestCallResult(t *testing.T) {
	errF := errors.New("f failed")
	for _, bounded := range []bool{true, false} {
		var inflight sync.WaitGroup
		v, err := redisbound.Call(t.Context(), bounded, &inflight, 20, func(_ context.Context, n int) (int, error) { return n + 1, errF })
		if v != 21 || err != errF {
			t.Errorf("bounded=%v: Call = %v, %v; want 21, %v", bounded, v, err, errF)
		}
		inflight.Wait()
		v, err = redisbound.Call(t.Context(), bounded, nil, 1, func(_ context.Context, n int) (int, error) { return n, nil })
		if v != 1 || err != nil {
			t.Errorf("bounded=%v, nil inflight: Call = %v, %v; want 1, nil", bounded, v, err)
		}
	}
}

// TestCallBoundedInline: a bounded call runs on the caller's goroutine and
// is not cut short by Call, even with ctx done: the client bounds it.
func TestCallBoundedInline(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	ran := false
	v, err := redisbound.Call(ctx, true, nil, &ran, func(_ context.Context, ran *bool) (int, error) {
		for range 1000 { // a call that takes a while
			runtime.Gosched()
		}
		*ran = true // no race: the same goroutine
		return 7, nil
	})
	if !ran || v != 7 || err != nil {
		t.Errorf("Call with a done ctx, bounded: ran %v, %v, %v; want f's 7, nil", ran, v, err)
	}
}

// TestCallBoundedAllocs: the bounded path allocates nothing of its own.
func TestCallBoundedAllocs(t *testing.T) {
	ctx := context.Background()
	args := []any{"PING"}
	allocs := testing.AllocsPerRun(100, func() {
		_, _ = redisbound.Call(ctx, true, nil, args, func(_ context.Context, a []any) (int, error) { return len(a), nil })
	})
	if allocs != 0 {
		t.Errorf("bounded Call: %v allocations, want 0", allocs)
	}
}
