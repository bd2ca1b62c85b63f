package redishold_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/internal/redistest"
	"github.com/rlkit/rlkit/outbound"
	"github.com/rlkit/rlkit/outbound/redishold"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}

// newHolds returns a Store on c with redistest.StoreTimeout: the tests that
// use it are about holds, not time-outs.
func newHolds(c redis.UniversalClient, opts ...redishold.Option) *redishold.Store {
	return redishold.New(c, append([]redishold.Option{redishold.WithTimeout(redistest.StoreTimeout)}, opts...)...)
}

// TestHoldKeepsTheLater: a hold is the key's time left on the server's
// clock; a shorter hold leaves it, a longer one extends it; another key
// and a key never held have none.
func TestHoldKeepsTheLater(t *testing.T) {
	s := redistest.StartServer(t)
	a, b := newHolds(s.Client(t)), newHolds(s.Client(t)) // two processes
	ctx := t.Context()
	held := func(h *redishold.Store, key string) time.Duration {
		t.Helper()
		d, err := h.Held(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := held(b, "api.example.com"); d != 0 {
		t.Fatalf("Held of a key never held = %v, want 0", d)
	}
	steps := []struct {
		hold     time.Duration
		min, max time.Duration // Held after it, through the other Store
	}{
		{10 * time.Second, 9 * time.Second, 10 * time.Second},
		{2 * time.Second, 9 * time.Second, 10 * time.Second}, // shorter: no change
		{-time.Second, 9 * time.Second, 10 * time.Second},    // none: no change
		{30 * time.Second, 29 * time.Second, 30 * time.Second},
	}
	for i, st := range steps {
		if err := a.Hold(ctx, "api.example.com", st.hold); err != nil {
			t.Fatal(err)
		}
		if d := held(b, "api.example.com"); d < st.min || d > st.max {
			t.Errorf("step %d: after Hold(%v), Held = %v, want in [%v, %v]", i, st.hold, d, st.min, st.max)
		}
	}
	if d := held(b, "other.example.com"); d != 0 {
		t.Errorf("Held of another key = %v, want 0", d)
	}
	// A hold ends on the server's clock: a 1 ns hold is 1 ms long (never
	// shorter than asked), and then gone.
	if err := a.Hold(ctx, "short", time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for held(b, "short") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("a 1ns hold still held after 5s")
		}
	}
}

// TestHoldKeysHashed: the rate-limit key (a token, say) never reaches
// Redis: the one Redis key is the prefix and the key's SHA-256.
func TestHoldKeysHashed(t *testing.T) {
	s := redistest.StartServer(t)
	c := s.Client(t)
	const token = "Bearer sk_live_51HxQvSECRETtoken"
	for _, tc := range []struct {
		opts   []redishold.Option
		prefix string
	}{{nil, redishold.DefaultPrefix}, {[]redishold.Option{redishold.WithPrefix("{h}:")}, "{h}:"}} {
		if err := c.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		if err := newHolds(c, tc.opts...).Hold(t.Context(), token, time.Minute); err != nil {
			t.Fatal(err)
		}
		keys, err := c.Keys(t.Context(), "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256([]byte(token))
		want := tc.prefix + base64.RawURLEncoding.EncodeToString(sum[:])
		if len(keys) != 1 || keys[0] != want {
			t.Fatalf("Redis keys %q, want [%q]", keys, want)
		}
		if v := c.Get(t.Context(), want).Val(); strings.Contains(v, "secret") || strings.Contains(v, "sk_") {
			t.Errorf("the hold's value %q holds the key", v)
		}
	}
	if redishold.DefaultPrefix != "rl:hold:" || redishold.DefaultTimeout != 100*time.Millisecond {
		t.Errorf("defaults %q, %v", redishold.DefaultPrefix, redishold.DefaultTimeout)
	}
}

// TestHoldBounded: with a client that ignores context deadlines and a
// Redis that never answers, Hold and Held fail at the timeout (an error
// that is context.DeadlineExceeded), long before the client's read
// timeout; with the caller's context done first, they return its error.
func TestHoldBounded(t *testing.T) {
	const readTimeout = 2 * time.Second
	var h *redishold.Store
	// Registered first, so it runs last: the calls given up on end once
	// the black hole has closed their connections.
	t.Cleanup(func() {
		if err := h.Close(); err != nil {
			t.Error(err)
		}
		if _, err := h.Held(context.Background(), "k"); err != redishold.ErrClosed {
			t.Errorf("Held after Close = %v, want ErrClosed", err)
		}
	})
	addr, _ := redistest.BlackHole(t)
	c := redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: readTimeout, MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	h = redishold.New(c, redishold.WithTimeout(100*time.Millisecond))
	t0 := time.Now()
	err := h.Hold(t.Context(), "k", time.Second)
	if d := time.Since(t0); !errors.Is(err, context.DeadlineExceeded) || !strings.HasPrefix(err.Error(), "redishold: ") || d >= time.Second {
		t.Errorf("Hold = %v after %v, want a redishold error, DeadlineExceeded, at 100ms", err, d)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	t0 = time.Now()
	left, err := h.Held(ctx, "k")
	if d := time.Since(t0); left != 0 || err != ctx.Err() || d >= time.Second {
		t.Errorf("Held = %v, %v after %v, want 0, ctx.Err() (%v) at 30ms", left, err, d, ctx.Err())
	}
	if _, err := redishold.New(nil).Held(t.Context(), "k"); err == nil {
		t.Error("Held with a nil client succeeded")
	}
}

// TestFaultHoldRedisDown: while Redis is down, Hold and Held fail at
// once with Redis's error (not a context's), and work again once it is
// back; a hold set before a restart without persistence is gone.
func TestFaultHoldRedisDown(t *testing.T) {
	s := redistest.StartServer(t)
	h := redishold.New(s.Client(t), redishold.WithTimeout(time.Second))
	if err := h.Hold(t.Context(), "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	s.Kill()
	t0 := time.Now()
	_, errHeld := h.Held(t.Context(), "k")
	errHold := h.Hold(t.Context(), "k", time.Minute)
	if d := time.Since(t0); d >= time.Second {
		t.Errorf("Held and Hold failed after %v, want at once", d)
	}
	for _, err := range []error{errHeld, errHold} {
		if err == nil || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "redishold: ") {
			t.Errorf("with Redis down: %v, want Redis's error", err)
		}
	}
	s.Restart(t)
	if d, err := h.Held(t.Context(), "k"); err != nil || d != 0 {
		t.Errorf("after a restart: Held = %v, %v; want 0, nil", d, err)
	}
}

// TestHoldSharedByLimiters: a hold one Limiter puts in Redis (a
// Retry-After it was told) holds back another Limiter, as another replica
// would be, on the same key only.
func TestHoldSharedByLimiters(t *testing.T) {
	s := redistest.StartServer(t)
	newLimiter := func() *outbound.Limiter {
		l, err := outbound.New(nil, nil, outbound.WithHoldStore(newHolds(s.Client(t))))
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	a, b := newLimiter(), newLimiter()
	// The hold is long enough that "at once" (under half of it) leaves
	// room for two first calls (dials, a script load) on a loaded machine.
	const hold = time.Second
	t0 := time.Now()
	if err := a.Delay(t.Context(), "api.example.com", hold); err != nil {
		t.Fatal(err)
	}
	if err := b.Wait(t.Context(), "GET", "/v1/other", "other.example.com"); err != nil || time.Since(t0) > hold/2 {
		t.Fatalf("another key: %v after %v, want at once", err, time.Since(t0))
	}
	if err := b.Wait(t.Context(), "GET", "/v1/items", "api.example.com"); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(t0); d < hold-time.Millisecond || d > hold+time.Second {
		t.Errorf("the held key started %v after the hold, want after %v", d, hold)
	}
}

// TestFaultHoldBreaker: with Redis stopped (SIGSTOP), three calls in a row
// time out and open the circuit: the next calls fail at once with
// ErrCircuitOpen, also once Redis is back, until the cool-down has passed;
// then one probe closes it. With the breaker off, every call waits its
// timeout.
func TestFaultHoldBreaker(t *testing.T) {
	s := redistest.StartServer(t)
	const timeout, cooldown = 200 * time.Millisecond, 3 * time.Second
	c := s.Client(t)
	h := redishold.New(c, redishold.WithTimeout(timeout), redishold.WithBreaker(3, cooldown))
	off := redishold.New(c, redishold.WithTimeout(timeout), redishold.WithBreaker(0, 0))
	// The first call dials and loads the script: it is made with a generous
	// timeout, so that only what is under test is held to the short one.
	if err := newHolds(c).Hold(t.Context(), "warm", time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := h.Hold(t.Context(), "k", time.Minute); err != nil {
		t.Fatal(err)
	}
	s.Pause()
	resumed := false
	defer func() {
		if !resumed {
			s.Resume()
		}
	}()
	for i := range 3 {
		if _, err := h.Held(t.Context(), "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("call %d with Redis stopped: %v, want the timeout", i+1, err)
		}
	}
	t0 := time.Now()
	for range 100 {
		if _, err := h.Held(t.Context(), "k"); err != redishold.ErrCircuitOpen {
			t.Fatalf("with the circuit open: %v, want ErrCircuitOpen", err)
		}
	}
	if d := time.Since(t0); d >= timeout {
		t.Errorf("100 calls with the circuit open took %v, want at once", d)
	}
	for i := range 5 {
		if _, err := off.Held(t.Context(), "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("breaker off, call %d: %v, want the timeout", i+1, err)
		}
	}
	s.Resume()
	resumed = true
	if _, err := h.Held(t.Context(), "k"); err != redishold.ErrCircuitOpen {
		t.Fatalf("Redis back, within the cool-down: %v, want ErrCircuitOpen", err)
	}
	time.Sleep(cooldown)
	if d, err := h.Held(t.Context(), "k"); err != nil || d <= 0 {
		t.Fatalf("after the cool-down: Held = %v, %v; want the hold", d, err)
	}
	if err := h.Hold(t.Context(), "k", time.Minute); err != nil {
		t.Fatalf("circuit closed: %v", err)
	}
}

// TestHoldForever: a hold of the longest Duration ("forever") is written,
// not lost to an overflow of its milliseconds.
func TestHoldForever(t *testing.T) {
	s := redistest.StartServer(t)
	h := newHolds(s.Client(t))
	if err := h.Hold(t.Context(), "k", time.Duration(math.MaxInt64)); err != nil {
		t.Fatal(err)
	}
	if d, err := h.Held(t.Context(), "k"); err != nil || d < 100*365*24*time.Hour {
		t.Fatalf("Held = %v, %v; want about 292 years", d, err)
	}
}
