package worksredis

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redisbound"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestRedisCallsBoundedWithoutContextTimeout: with a client that ignores
// context deadlines (no ContextTimeoutEnabled) and a Redis that never
// answers, Pacer.Wait and LeaderLock.Run still return by their
// context's deadline, well before the client's own ReadTimeout.
func TestRedisCallsBoundedWithoutContextTimeout(t *testing.T) {
	const readTimeout = 2 * time.Second
	newClient := func(t *testing.T, closers ...func() error) *redis.Client {
		// Registered first, so they run last: the calls given up on end
		// once the black hole has closed their connections.
		t.Cleanup(inflight.Wait)
		for _, c := range closers {
			t.Cleanup(func() { _ = c() })
		}
		addr, _ := redistest.BlackHole(t)
		c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: readTimeout, MaxRetries: -1})
		t.Cleanup(func() { _ = c.Close() })
		if redisbound.Bounded(c) {
			t.Fatal("client taken as bounded")
		}
		return c
	}
	t.Run("Pacer.Wait", func(t *testing.T) {
		var p *Pacer
		p = NewPacer(newClient(t, func() error { return p.Close() }), 0)
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		err := p.Wait(ctx, "GET /v1.0/users")
		d := time.Since(t0)
		t.Logf("Wait = %v after %v", err, d)
		if err != ctx.Err() || !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Wait = %v, want %v", err, context.DeadlineExceeded)
		}
		if d >= time.Second {
			t.Errorf("Wait returned after %v, want well before the read timeout (%v)", d, readTimeout)
		}
	})
	t.Run("LeaderLock.Run", func(t *testing.T) {
		// The release after an uncertain acquire is bounded by the lock
		// timeout, not by ctx.
		lock := NewLeaderLock(newClient(t), "a", WithLockTimeout(300*time.Millisecond), WithPollInterval(10*time.Millisecond))
		ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
		defer cancel()
		t0 := time.Now()
		err := lock.Run(ctx, func(context.Context) error {
			t.Error("fn ran without the lock")
			return nil
		})
		d := time.Since(t0)
		t.Logf("Run = %v after %v", err, d)
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Run = %v, want %v", err, context.DeadlineExceeded)
		}
		if d >= 1500*time.Millisecond {
			t.Errorf("Run returned after %v, want well before the read timeout (%v)", d, readTimeout)
		}
	})
}
