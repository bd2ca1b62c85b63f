package redisstore_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// leaks checks, at the end of a test, that no goroutine outlives the store
// and the client (the redis-server processes' waiters belong to redistest).
func leaks(t *testing.T) func() {
	opts := []goleak.Option{goleak.IgnoreCurrent(), goleak.IgnoreAnyFunction("github.com/rlkit/rlkit/internal/redistest.(*Server).start.func1")}
	return func() { goleak.VerifyNone(t, opts...) }
}

func hotConfig(t *testing.T, limit string) *core.Config {
	cfg, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "api", Paths: []string{"/api"}, Limit: []string{limit}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestRedisKilled kills Redis while requests flow through a fail-open
// limiter: every request passes, none waits longer than the timeout and a
// margin, and the observer sees the errors. Then Redis comes back: limiting
// resumes after the breaker's cool-down, exactly. Nothing leaks after Close.
func TestRedisKilled(t *testing.T) {
	srv := redistest.StartServer(t)
	check := leaks(t)
	const timeout = 100 * time.Millisecond
	// A decision must not hang on a dead Redis; how far past the timeout it
	// ends is the scheduler's business on a loaded machine under
	// -race (280ms was seen there), so the bound only rules out hanging.
	const margin = 900 * time.Millisecond
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	st, err := redisstore.New(rc, redisstore.WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	var observed atomic.Int64
	lim := core.NewLimiter(hotConfig(t, "1000000/hour"), core.WithStore(st), core.WithObserver(func(e core.Event) {
		if e.Err != nil {
			observed.Add(1)
		}
	}))
	ctx := context.Background()

	var (
		stop                      atomic.Bool
		requests, failed, slowest atomic.Int64
		denied                    atomic.Int64
		wg                        sync.WaitGroup
	)
	for g := range 4 {
		wg.Go(func() {
			for !stop.Load() {
				start := time.Now()
				d := lim.Decide(ctx, "GET", "/api", "flow", false)
				took := time.Since(start)
				requests.Add(1)
				if d.Err != nil {
					failed.Add(1)
				}
				if !d.Allowed {
					denied.Add(1)
				}
				for cur := slowest.Load(); int64(took) > cur && !slowest.CompareAndSwap(cur, int64(took)); cur = slowest.Load() {
				}
				if g == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	time.Sleep(200 * time.Millisecond)
	srv.Kill()
	time.Sleep(1500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	if denied.Load() != 0 || failed.Load() == 0 || observed.Load() != failed.Load() {
		t.Fatalf("%d requests while Redis died: %d denied, %d failed, %d errors observed; want none denied (fail-open), some failed, all observed",
			requests.Load(), denied.Load(), failed.Load(), observed.Load())
	}
	if d := time.Duration(slowest.Load()); d > timeout+margin {
		t.Fatalf("slowest decision took %v, want ≤ %v", d, timeout+margin)
	}
	t.Logf("%d requests, %d failed open, slowest %v", requests.Load(), failed.Load(), time.Duration(slowest.Load()))

	srv.Restart(t)
	restarted := time.Now()
	for {
		d := lim.Decide(ctx, "GET", "/api", "flow", false)
		if d.Err == nil {
			break
		}
		// The breaker's cool-down is 1s; the rest is slack for a loaded
		// machine.
		if time.Since(restarted) > 5*time.Second {
			t.Fatalf("limiting has not resumed 5s after Redis came back: %v", d.Err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Logf("limiting resumed %v after the restart", time.Since(restarted).Round(time.Millisecond))
	exact := core.NewLimiter(hotConfig(t, "7/hour"), core.WithStore(st), core.WithFailOpen(false))
	for i := range 10 {
		if d := exact.Decide(ctx, "GET", "/api", "after", false); d.Err != nil || d.Allowed != (i < 7) {
			t.Fatalf("request %d after the restart: allowed %v, err %v", i, d.Allowed, d.Err)
		}
	}
	if err := st.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rc.Close(); err != nil {
		t.Fatal(err)
	}
	check()
}

// TestHungRedis: a server that never answers costs each call the timeout
// (for a client that honours context deadlines and for one that does not),
// then the circuit opens and calls fail at once without touching Redis,
// until the cool-down ends and one probe goes out.
func TestHungRedis(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		t.Run(map[bool]string{true: "ContextTimeoutEnabled", false: "goroutine"}[bounded], func(t *testing.T) {
			addr, _ := redistest.BlackHole(t)
			check := leaks(t)
			const timeout = 80 * time.Millisecond
			// The client's own read timeout is far longer than the store's,
			// so a call that ends well before it was ended by the store; the
			// bound below leaves room for a loaded machine under -race.
			const readTimeout, bound = 2 * time.Second, time.Second
			rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: bounded, ReadTimeout: readTimeout, MaxRetries: -1})
			cmds := countCommands(rc)
			clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
			st, err := redisstore.New(rc, redisstore.WithTimeout(timeout), redisstore.WithBreaker(3, time.Second), redisstore.WithClock(clock))
			if err != nil {
				t.Fatal(err)
			}
			p := policy("hung", algo.TokenBucket, "10/second")
			ctx := context.Background()
			take := func() (time.Duration, error) {
				start := time.Now()
				_, err := st.Take(ctx, "u", p, 1)
				return time.Since(start), err
			}
			for i := range 3 {
				took, err := take()
				if err == nil || errors.Is(err, redisstore.ErrCircuitOpen) || took < timeout || took > bound {
					t.Fatalf("call %d to a hung Redis: %v after %v; want the store's timeout after %v (and well before the client's %v)", i, err, took, timeout, readTimeout)
				}
			}
			cmds.take()
			for range 100 {
				// At once: no command (checked below), and no wait for the
				// timeout.
				if took, err := take(); !errors.Is(err, redisstore.ErrCircuitOpen) || took >= timeout {
					t.Fatalf("with the circuit open: %v after %v; want ErrCircuitOpen at once", err, took)
				}
			}
			if got := cmds.take(); len(got) != 0 {
				t.Fatalf("with the circuit open the store sent %v", got)
			}
			clock.Advance(time.Second)
			if _, err := take(); err == nil || errors.Is(err, redisstore.ErrCircuitOpen) {
				t.Fatalf("after the cool-down the probe returned %v; want the timeout", err)
			}
			if got := cmds.take(); got["evalsha"] != 1 {
				t.Fatalf("the probe sent %v, want one evalsha", got)
			}
			if _, err := take(); !errors.Is(err, redisstore.ErrCircuitOpen) {
				t.Fatalf("after a failed probe: %v, want ErrCircuitOpen", err)
			}
			if err := st.Close(); err != nil {
				t.Fatal(err)
			}
			if err := rc.Close(); err != nil {
				t.Fatal(err)
			}
			check()
		})
	}
}

// TestBreakerRecovers: Redis down opens the circuit; once it is back, the
// probe after the cool-down closes it.
func TestBreakerRecovers(t *testing.T) {
	srv := redistest.StartServer(t)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st := newStore(t, rc, redisstore.WithBreaker(2, 500*time.Millisecond), redisstore.WithClock(clock))
	p := policy("recover", algo.FixedWindow, "5/hour")
	ctx := context.Background()
	if _, err := st.Take(ctx, "u", p, 1); err != nil {
		t.Fatal(err)
	}
	srv.Kill()
	for range 2 {
		if _, err := st.Take(ctx, "u", p, 1); err == nil || errors.Is(err, redisstore.ErrCircuitOpen) {
			t.Fatalf("Redis down: %v, want a Redis error", err)
		}
	}
	if _, err := st.Take(ctx, "u", p, 1); !errors.Is(err, redisstore.ErrCircuitOpen) {
		t.Fatalf("after 2 failures: %v, want ErrCircuitOpen", err)
	}
	srv.Restart(t)
	if _, err := st.Take(ctx, "u", p, 1); !errors.Is(err, redisstore.ErrCircuitOpen) {
		t.Fatalf("before the cool-down ends: %v, want ErrCircuitOpen", err)
	}
	clock.Advance(500 * time.Millisecond)
	for i := range 6 { // a restarted Redis is empty: the count starts again
		r, err := st.Take(ctx, "u", p, 1)
		if err != nil || r.Allowed != (i < 5) {
			t.Fatalf("take %d after recovery: %+v, %v", i, r, err)
		}
	}
}

// TestCloseWaits: Close waits for the calls running, and later calls fail
// with ErrClosed.
func TestCloseWaits(t *testing.T) {
	addr, conns := redistest.BlackHole(t)
	for _, bounded := range []bool{true, false} {
		rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: bounded, ReadTimeout: 300 * time.Millisecond, MaxRetries: -1})
		st, err := redisstore.New(rc, redisstore.WithTimeout(150*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		p := policy("close", algo.GCRA, "5/second")
		before := conns.Load()
		start := time.Now()
		go func() { _, _ = st.Take(context.Background(), "u", p, 1) }()
		// Wait until the call has connected: it is then waiting for the
		// hung server, inside the store (which it entered before dialing).
		for conns.Load() == before {
			if time.Since(start) > 10*time.Second {
				t.Fatal("the call never connected to the black hole")
			}
			time.Sleep(time.Millisecond)
		}
		if err := st.Close(); err != nil {
			t.Fatal(err)
		}
		// The call ends at its timeout (150ms after it started); Close
		// must not return before.
		if took := time.Since(start); took < 145*time.Millisecond {
			t.Fatalf("ContextTimeoutEnabled=%v: Close returned %v after the call started, before the call's 150ms timeout", bounded, took)
		}
		if _, err := st.Take(context.Background(), "u", p, 1); !errors.Is(err, redisstore.ErrClosed) {
			t.Fatalf("Take after Close: %v, want ErrClosed", err)
		}
		if cleared, err := st.Reset(context.Background(), "u", p); cleared || !errors.Is(err, redisstore.ErrClosed) {
			t.Fatalf("Reset after Close: %v, %v; want false, ErrClosed", cleared, err)
		}
		_ = rc.Close()
	}
}
