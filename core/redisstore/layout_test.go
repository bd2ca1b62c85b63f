package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// incrExpire is what a limiter built on INCR and EXPIRE does for one
// request: INCR the window's key, EXPIRE it for one period when the count
// is new, and admit when the count is within the limit (counting the
// request either way).
func incrExpire(t *testing.T, rc *redis.Client, key string, limit int64, period time.Duration) bool {
	t.Helper()
	ctx := context.Background()
	n, err := rc.Incr(ctx, key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if n == 1 {
		if err := rc.Expire(ctx, key, period).Err(); err != nil {
			t.Fatal(err)
		}
	}
	return n <= limit
}

// window returns the index of the window of the given period holding the
// server's time, first waiting for the next window when the current one
// ends within margin.
func window(t *testing.T, rc *redis.Client, period, margin time.Duration) int64 {
	t.Helper()
	now, err := rc.Time(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	idx := now.UnixMicro() / period.Microseconds()
	if end := time.UnixMicro((idx + 1) * period.Microseconds()); end.Sub(now) < margin {
		time.Sleep(end.Sub(now) + 10*time.Millisecond)
		idx++
	}
	return idx
}

// TestIncrExpireKeys: with WithIncrExpireKeys(true) a one-limit fixed
// window counts in rl:{<user>}:<rule>:<window>, the count a plain integer:
// counts made by an INCR+EXPIRE limiter are counted by the store and the
// store's by it, exactly, both ways; a window the store opens lives one
// period. Other policies keep the default layout; the prefix still
// applies; an '@' in a rule name is escaped.
func TestIncrExpireKeys(t *testing.T) {
	t.Parallel()
	rc := client(t, redistest.StartServer(t).Addr())
	ctx := context.Background()
	st := newStore(t, rc, redisstore.WithIncrExpireKeys(true))
	const period = time.Hour
	search := policy("search", algo.FixedWindow, "5/hour")
	idx := window(t, rc, period, 5*time.Second)
	key := func(user, rule string) string { return "rl:{" + user + "}:" + rule + ":" + strconv.FormatInt(idx, 10) }
	get := func(k string) string {
		t.Helper()
		v, err := rc.Get(ctx, k).Result()
		if err != nil {
			t.Fatalf("GET %s: %v", k, err)
		}
		return v
	}
	take := func(user string, p *store.Policy, allowed bool, remaining int64) {
		t.Helper()
		r, err := st.Take(ctx, user, p, 1)
		if err != nil || r.Allowed != allowed || r.Remaining != remaining {
			t.Fatalf("Take(%s): allowed %v, remaining %d, err %v; want %v, %d", user, r.Allowed, r.Remaining, err, allowed, remaining)
		}
	}

	// The other limiter counts alice twice; the store counts on from 2.
	alice := key("alice", "search")
	for range 2 {
		if !incrExpire(t, rc, alice, 5, period) {
			t.Fatal("the INCR+EXPIRE limiter denied within the limit")
		}
	}
	take("alice", search, true, 2)
	if got := get(alice); got != "3" {
		t.Fatalf("%s = %q after 2 INCRs and 1 Take, want 3", alice, got)
	}
	take("alice", search, true, 1)
	take("alice", search, true, 0)
	take("alice", search, false, 0) // denied: its cost is given back
	if got := get(alice); got != "5" {
		t.Fatalf("%s = %q at the limit, want 5", alice, got)
	}
	if incrExpire(t, rc, alice, 5, period) { // the other limiter sees the store's counts
		t.Fatal("the INCR+EXPIRE limiter admitted a sixth request")
	}

	// The store opens bob's window: the key holds the count, with a TTL
	// of one period; the other limiter counts on from it.
	bob := key("bob", "search")
	take("bob", search, true, 4)
	take("bob", search, true, 3)
	if got := get(bob); got != "2" {
		t.Fatalf("%s = %q after 2 Takes, want 2", bob, got)
	}
	if ttl, err := rc.PTTL(ctx, bob).Result(); err != nil || ttl <= period-5*time.Second || ttl > period {
		t.Fatalf("PTTL %s = %v, %v; want one period (%v) from the window's first request", bob, ttl, err, period)
	}
	for i := range 4 {
		if got := incrExpire(t, rc, bob, 5, period); got != (i < 3) {
			t.Fatalf("INCR+EXPIRE request %d for bob after 2 Takes: admitted %v", i+1, got)
		}
	}
	take("bob", search, false, 0)
	if cleared, err := st.Reset(ctx, "bob", search); !cleared || err != nil {
		t.Fatalf("Reset(bob): %v, %v; want true", cleared, err)
	}
	if n, err := rc.Exists(ctx, bob).Result(); err != nil || n != 0 {
		t.Fatalf("%s after Reset: exists %d, %v", bob, n, err)
	}

	// Several limits, or another algorithm: the default layout.
	for _, p := range []*store.Policy{
		policy("search", algo.FixedWindow, "5/hour", "50/day"),
		policy("search", algo.GCRA, "5/hour"),
	} {
		take("carol", p, true, 4)
		want := fmt.Sprintf("rl:{carol}:search@%016x", p.CounterID(0))
		if p.Algorithm == algo.FixedWindow {
			want += ":" + strconv.FormatInt(idx, 10)
		}
		if n, err := rc.Exists(ctx, want).Result(); err != nil || n != 1 {
			t.Fatalf("%v %v: key %s exists %d, %v; want the default layout", p.Algorithm, p.Limits, want, n, err)
		}
	}
	at := policy("a@b", algo.FixedWindow, "5/hour")
	take("dave", at, true, 4)
	if got := get(key("dave", "a%40b")); got != "1" {
		t.Fatalf("rule a@b: %q, want its count in rl:{dave}:a%%40b:<window>", got)
	}
	other := newStore(t, rc, redisstore.WithIncrExpireKeys(true), redisstore.WithPrefix("svc:"))
	if r, err := other.Take(ctx, "erin", search, 1); err != nil || !r.Allowed {
		t.Fatalf("with a prefix: %+v, %v", r, err)
	}
	if got := get("svc:{erin}:search:" + strconv.FormatInt(idx, 10)); got != "1" {
		t.Fatalf("with WithPrefix(svc:): %q, want 1 in svc:{erin}:search:<window>", got)
	}
	keys, err := rc.Keys(ctx, "*").Result()
	if err != nil || len(keys) != 6 {
		t.Fatalf("keys %q, %v; want 6 (alice's, carol's three, dave's, erin's)", keys, err)
	}
}

// TestIncrExpireKeysThroughLimiter: through a core.Limiter, with a key
// function that returns the bare user id, a request writes exactly the
// seed layout's key.
func TestIncrExpireKeysThroughLimiter(t *testing.T) {
	t.Parallel()
	rc := client(t, redistest.StartServer(t).Addr())
	st := newStore(t, rc, redisstore.WithIncrExpireKeys(true))
	cfg, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{
		{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"10/minute"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	lim := core.NewLimiter(cfg, core.WithStore(st))
	idx := window(t, rc, time.Minute, 5*time.Second)
	for range 3 {
		if d := lim.Decide(context.Background(), "GET", "/api/search", "alice", false); !d.Allowed || d.Err != nil {
			t.Fatalf("Decide: allowed %v, err %v", d.Allowed, d.Err)
		}
	}
	key := fmt.Sprintf("rl:{alice}:search:%d", idx)
	if got, err := rc.Get(context.Background(), key).Result(); err != nil || got != "3" {
		t.Errorf("GET %s = %q, %v; want 3", key, got, err)
	}
}
