package outbound

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/internal/redistest"
)

// redisLimiter returns a Limiter on a Redis store of srv with a store
// timeout of timeout, failing open or closed.
func redisLimiter(t *testing.T, srv *redistest.Server, timeout time.Duration, open bool) *Limiter {
	t.Helper()
	st, err := redisstore.New(srv.Client(t), redisstore.WithTimeout(timeout), redisstore.WithBreaker(1000, time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	l, err := New(mustRate(t, 10, time.Second, 0), st, WithCoreOptions(core.WithFailOpen(open)))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestFaultRedisDownOutbound: with Redis killed, a Limiter failing closed
// returns an error wrapping the store's, one failing open starts the
// request; neither waits longer than the store's timeout.
func TestFaultRedisDownOutbound(t *testing.T) {
	srv := redistest.StartServer(t)
	closed := redisLimiter(t, srv, 300*time.Millisecond, false)
	open := redisLimiter(t, srv, 300*time.Millisecond, true)
	ctx := context.Background()
	for _, l := range []*Limiter{closed, open} {
		if err := l.Wait(ctx, "GET", "/", "up"); err != nil {
			t.Fatalf("with Redis up: %v", err)
		}
	}
	srv.Kill()
	begin := time.Now()
	err := closed.Wait(ctx, "GET", "/", "k")
	if err == nil || !strings.HasPrefix(err.Error(), "outbound: rate-limit store: ") || errors.Unwrap(err) == nil {
		t.Fatalf("fail-closed Wait with Redis down = %v, want an error wrapping the store's", err)
	}
	if err := open.Wait(ctx, "GET", "/", "k"); err != nil {
		t.Fatalf("fail-open Wait with Redis down = %v, want nil", err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("two Waits took %v with Redis down (store timeout 300ms)", d)
	}
}

// TestFaultRedisPausedCancel: while the head of a queue is stuck in a
// store call on a paused Redis, a request behind it whose context ends
// returns ctx.Err() at once, and the head gets its answer at the store's
// timeout.
func TestFaultRedisPausedCancel(t *testing.T) {
	srv := redistest.StartServer(t)
	l := redisLimiter(t, srv, 2*time.Second, true)
	ctx := context.Background()
	if err := l.Wait(ctx, "GET", "/", "k"); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	head := make(chan error, 1)
	go func() { head <- l.Wait(ctx, "GET", "/", "k") }()
	eventually(t, func() (int, bool) { n := l.queued("k"); return n, n == 1 })
	cctx, cancel := context.WithCancel(ctx)
	behind := make(chan error, 1)
	go func() { behind <- l.Wait(cctx, "GET", "/", "k") }()
	eventually(t, func() (int, bool) { n := l.queued("k"); return n, n == 2 })
	cancel()
	begin := time.Now()
	select {
	case err := <-behind:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled waiter: %v", err)
		}
		if d := time.Since(begin); d > time.Second {
			t.Fatalf("cancelled waiter returned after %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled waiter stayed behind the stuck head")
	}
	select {
	case err := <-head:
		if err != nil {
			t.Fatalf("fail-open head: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the head never got an answer from the paused Redis")
	}
}

// TestFaultRedisPausedHeadCancel: the head of a queue, whose store call
// is stuck on a paused (SIGSTOP) Redis, returns ctx.Err() as soon as its
// context is cancelled, not at the store's 2 s timeout, and never nil
// (fail-open would have let it start at the timeout); the next request
// starts once Redis answers again.
func TestFaultRedisPausedHeadCancel(t *testing.T) {
	srv := redistest.StartServer(t)
	l := redisLimiter(t, srv, 2*time.Second, true)
	if err := l.Wait(context.Background(), "GET", "/", "k"); err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	resumed := false
	defer func() {
		if !resumed {
			srv.Resume()
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	head := make(chan error, 1)
	go func() { head <- l.Wait(ctx, "GET", "/", "k") }()
	eventually(t, func() (int, bool) { n := l.queued("k"); return n, n == 1 })
	time.Sleep(100 * time.Millisecond) // the head is in its store call
	cancel()
	begin := time.Now()
	select {
	case err := <-head:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("cancelled head: %v, want context.Canceled", err)
		}
		if d := time.Since(begin); d > time.Second {
			t.Fatalf("cancelled head returned after %v (the store's timeout is 2 s)", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the cancelled head stayed in its store call")
	}
	srv.Resume()
	resumed = true
	eventually(t, func() (int, bool) { n := l.queued("k"); return n, n == 0 })
	if err := l.Wait(context.Background(), "GET", "/", "k"); err != nil {
		t.Fatalf("after Redis resumed: %v", err)
	}
}
