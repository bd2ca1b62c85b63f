package redislimiter_test

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/internal/redistest"
	"github.com/rlkit/rlkit/jwtissuer"
	"github.com/rlkit/rlkit/jwtissuer/redislimiter"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the fault tests cause many.
	redis.SetLogger(quiet{})
	// Every store, client and server is closed by its test's cleanups.
	goleak.VerifyTestMain(m)
}

const secret = "test-secret-0123456789-0123456789-abcdef"

// client returns a client for addr as a service configures it: context
// deadlines honoured, and (for the fault tests) no retries, so a dead
// server fails a call at once.
func client(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true, MaxRetries: -1, DialerRetries: 1})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func newStore(t testing.TB, c redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithTimeout(redistest.StoreTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func newLimiter(t testing.TB, s *redisstore.Store, rate int, window time.Duration, opts ...redislimiter.Option) *redislimiter.RateLimiter {
	t.Helper()
	l, err := redislimiter.New(s, rate, window, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Close)
	return l
}

// standalone returns a store on a fresh redis-server, or miniredis where
// none is installed (unless RLKIT_REQUIRE_REDIS=1).
func standalone(t *testing.T) *redisstore.Store {
	c, kind := redistest.Standalone(t)
	t.Logf("counting in %s", kind)
	return newStore(t, c)
}

func TestNewErrors(t *testing.T) {
	s := standalone(t)
	for _, c := range []struct {
		name   string
		store  *redisstore.Store
		rate   int
		window time.Duration
		opts   []redislimiter.Option
		want   string
	}{
		{"nil store", nil, 1, time.Second, nil, "nil store"},
		{"rate 0", s, 0, time.Second, nil, "rate 0 out of range"},
		{"rate too large", s, 1 << 31, time.Hour, nil, "rate 2147483648 out of range"},
		{"window 0", s, 1, 0, nil, "window 0s must be a positive whole number of microseconds"},
		{"window in ns", s, 1, 1500 * time.Nanosecond, nil, "window 1.5µs must be"},
		{"more than one per ns", s, 2000, time.Microsecond, nil, "more than one per nanosecond"},
		{"empty name", s, 1, time.Second, []redislimiter.Option{redislimiter.WithName("")}, "policy has no name"},
	} {
		if _, err := redislimiter.New(c.store, c.rate, c.window, c.opts...); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want an error containing %q", c.name, err, c.want)
		}
	}
}

// TestAllowNTable checks every row of the AllowN table against Redis.
func TestAllowNTable(t *testing.T) {
	l := newLimiter(t, standalone(t), 100, time.Minute)
	const key = "user:123"
	for _, s := range []struct {
		key  string
		n    int
		want bool
	}{
		{key, -1, false},
		{key, 0, true},
		{key, 101, false},
		{"", 1, false},
		{key, 10, true},  // new key, full: 90 left
		{key, 95, false}, // nothing taken
		{key, 90, true},  // exactly what is left
		{key, 1, false},
		{key, 0, true},
	} {
		if got := l.AllowN(s.key, s.n); got != s.want {
			t.Fatalf("AllowN(%q, %d) = %v, want %v", s.key, s.n, got, s.want)
		}
	}
	if !l.Allow("other") {
		t.Fatal("another key shares the bucket")
	}
}

func TestExactAndReset(t *testing.T) {
	l := newLimiter(t, standalone(t), 5, time.Hour)
	for i := range 8 {
		if got, want := l.Allow("u"), i < 5; got != want {
			t.Fatalf("Allow #%d = %v, want %v", i+1, got, want)
		}
	}
	l.Reset("u")
	if err := l.ResetContext(context.Background(), "u"); err != nil {
		t.Fatal(err)
	}
	if !l.AllowN("u", 5) || l.Allow("u") {
		t.Fatal("after Reset: want exactly 5 again")
	}
}

// TestConcurrentExact: goroutines on one key get exactly the rate.
func TestConcurrentExact(t *testing.T) {
	l := newLimiter(t, standalone(t), 20, time.Hour)
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 15 {
				if l.Allow("hot") {
					mu.Lock()
					admitted++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if admitted != 20 {
		t.Fatalf("%d admitted, want 20", admitted)
	}
}

// serverAddr returns the address of a fresh redis-server, or of a
// miniredis where none is installed (unless RLKIT_REQUIRE_REDIS=1).
func serverAddr(t *testing.T) string {
	if redistest.Available() {
		return redistest.StartServer(t).Addr()
	}
	if os.Getenv("RLKIT_REQUIRE_REDIS") == "1" {
		redistest.Require(t) // fails with the install hint
	}
	return redistest.StartMini(t).Addr()
}

// TestSharedAcrossReplicas: two limiters with their own clients and stores
// (two replicas) on one Redis share each key's count; another name counts
// apart.
func TestSharedAcrossReplicas(t *testing.T) {
	addr := serverAddr(t)
	a := newLimiter(t, newStore(t, client(t, addr)), 5, time.Hour)
	b := newLimiter(t, newStore(t, client(t, addr)), 5, time.Hour)
	other := newLimiter(t, newStore(t, client(t, addr)), 5, time.Hour, redislimiter.WithName("other"))
	if !a.AllowN("u", 3) || !b.AllowN("u", 2) {
		t.Fatal("5 tokens across two replicas refused")
	}
	if a.Allow("u") || b.Allow("u") {
		t.Fatal("a sixth token across two replicas admitted")
	}
	if !other.AllowN("u", 5) {
		t.Fatal("a limiter with another name shares the count")
	}

	// Two Issuers (replicas) on the shared limiter.
	issuers := make([]*jwtissuer.Issuer, 2)
	for i := range issuers {
		cfg := jwtissuer.DefaultConfig()
		cfg.SecretKey = secret
		cfg.EnableRateLimit = true
		cfg.RateLimiter = newLimiter(t, newStore(t, client(t, addr)), 3, time.Hour, redislimiter.WithName("issue"))
		iss, err := jwtissuer.New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		defer iss.Close()
		issuers[i] = iss
	}
	for i, want := range []error{nil, nil, nil, jwtissuer.ErrRateLimitExceeded, jwtissuer.ErrRateLimitExceeded} {
		_, err := issuers[i%2].Create(&jwtissuer.Claims{UserID: "ann"})
		if !errors.Is(err, want) || (want == nil) != (err == nil) {
			t.Fatalf("issuance #%d on replica %d: %v, want %v", i+1, i%2, err, want)
		}
	}
}

// TestFailClosed kills Redis: requests are denied, the hook sees every
// error, and the Issuer's error wraps ErrRateLimitUnavailable and the
// store's error, not ErrRateLimitExceeded.
func TestFailClosed(t *testing.T) {
	srv := redistest.StartServer(t)
	st := newStore(t, client(t, srv.Addr()), redisstore.WithTimeout(time.Second), redisstore.WithBreaker(2, time.Hour))
	var mu sync.Mutex
	var hooked []string
	hook := func(key string, err error) {
		mu.Lock()
		hooked = append(hooked, key+": "+err.Error())
		mu.Unlock()
	}
	l := newLimiter(t, st, 10, time.Hour, redislimiter.WithErrorHook(hook))
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = secret
	cfg.EnableRateLimit = true
	cfg.RateLimiter = l
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer iss.Close()
	if _, err := iss.Create(&jwtissuer.Claims{UserID: "u"}); err != nil {
		t.Fatal(err)
	}

	srv.Kill()
	ok, err := l.AllowErr("u")
	if ok || err == nil || !strings.Contains(err.Error(), "redisstore") {
		t.Fatalf("AllowErr with Redis dead: %v, %v; want false and the store's error", ok, err)
	}
	if l.Allow("u") {
		t.Fatal("Allow with Redis dead admitted")
	}
	for i := range 3 { // after two failures the circuit is open: no call reaches Redis
		_, err := iss.Create(&jwtissuer.Claims{UserID: "u"})
		if !errors.Is(err, jwtissuer.ErrRateLimitUnavailable) || errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
			t.Fatalf("Create #%d with Redis dead: %v; want ErrRateLimitUnavailable, not ErrRateLimitExceeded", i+1, err)
		}
		if !errors.Is(err, redisstore.ErrCircuitOpen) {
			t.Fatalf("Create with the circuit open: %v, want it to wrap redisstore.ErrCircuitOpen", err)
		}
	}
	// Validation does not depend on Redis.
	if _, err := iss.Validate(must(iss.Create(&jwtissuer.Claims{}))); err != nil {
		t.Fatalf("Validate with Redis dead: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(hooked) != 5 || !strings.HasPrefix(hooked[0], "u: redisstore") {
		t.Fatalf("hook saw %q, want 5 errors for key u", hooked)
	}
}

func must(tok string, err error) string {
	if err != nil {
		panic(err)
	}
	return tok
}

// TestFailOpen: with WithFailOpen(true) a dead Redis lets issuance through,
// and the hook still sees the error.
func TestFailOpen(t *testing.T) {
	srv := redistest.StartServer(t)
	var hooked sync.WaitGroup
	hooked.Add(3)
	l := newLimiter(t, newStore(t, client(t, srv.Addr()), redisstore.WithBreaker(0, 0)), 1, time.Hour,
		redislimiter.WithFailOpen(true), redislimiter.WithErrorHook(func(string, error) { hooked.Done() }))
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = secret
	cfg.EnableRateLimit = true
	cfg.RateLimiter = l
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer iss.Close()
	srv.Kill()
	if ok, err := l.AllowErr("u"); !ok || err == nil {
		t.Fatalf("AllowErr: %v, %v; want true and the error", ok, err)
	}
	for range 2 {
		if _, err := iss.Create(&jwtissuer.Claims{UserID: "u"}); err != nil {
			t.Fatalf("Create failing open: %v", err)
		}
	}
	hooked.Wait()
}

// TestContextAndClose: a cancelled context fails closed; Close denies with
// ErrClosed and leaves the store working.
func TestContextAndClose(t *testing.T) {
	st := standalone(t)
	l := newLimiter(t, st, 5, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if ok, err := l.AllowNContext(ctx, "u", 1); ok || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled context: %v, %v", ok, err)
	}
	l.Close()
	if ok, err := l.AllowErr("u"); ok || !errors.Is(err, jwtissuer.ErrClosed) {
		t.Fatalf("after Close: %v, %v; want false, ErrClosed", ok, err)
	}
	if err := l.ResetContext(context.Background(), "u"); !errors.Is(err, jwtissuer.ErrClosed) {
		t.Fatalf("ResetContext after Close: %v", err)
	}
	if !newLimiter(t, st, 5, time.Hour).Allow("u") {
		t.Fatal("the store stopped working with the limiter's Close")
	}
}

// TestRetryAfter: a denial carries the wait the store computed from the
// bucket at the Redis server's time (Redis's clock runs, so the bound is
// the time the test took), in whole microseconds, and an Issuer's
// RateLimitError passes it on; an admitted request and a failed one carry
// none.
func TestRetryAfter(t *testing.T) {
	addr := serverAddr(t)
	const period = 20 * time.Minute // 3 per hour
	start := time.Now()
	l := newLimiter(t, newStore(t, client(t, addr)), 3, time.Hour)
	for i := range 3 {
		if ok, wait, err := l.AllowRetryAfter("u"); !ok || wait != 0 || err != nil {
			t.Fatalf("token %d: %v, %v, %v", i+1, ok, wait, err)
		}
	}
	ok, wait, err := l.AllowRetryAfter("u")
	took := time.Since(start)
	if ok || err != nil || wait > period || wait < period-took-time.Microsecond || wait%time.Microsecond != 0 {
		t.Fatalf("4th token after %v: %v, %v, %v; want false, a wait within (%v, %v] in whole µs", took, ok, wait, err, period-took, period)
	}

	start = time.Now()
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = secret
	cfg.EnableRateLimit = true
	cfg.RateLimiter = newLimiter(t, newStore(t, client(t, addr)), 1, time.Hour, redislimiter.WithName("issue"))
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer iss.Close()
	if _, err := iss.Create(&jwtissuer.Claims{UserID: "ann"}); err != nil {
		t.Fatal(err)
	}
	_, err = iss.Create(&jwtissuer.Claims{UserID: "ann"})
	took = time.Since(start)
	var rle *jwtissuer.RateLimitError
	if !errors.As(err, &rle) || !errors.Is(err, jwtissuer.ErrRateLimitExceeded) || rle.Failures ||
		rle.RetryAfter > time.Hour || rle.RetryAfter < time.Hour-took-time.Microsecond {
		t.Fatalf("Issuer over the Redis limit after %v: %v (%+v), want a wait within (%v, 1h]", took, err, rle, time.Hour-took)
	}

	l.Close()
	if ok, wait, err := l.AllowRetryAfter("u"); ok || wait != 0 || !errors.Is(err, jwtissuer.ErrClosed) {
		t.Fatalf("after Close: %v, %v, %v", ok, wait, err)
	}
}
