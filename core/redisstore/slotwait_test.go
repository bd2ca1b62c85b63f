package redisstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestSlotWaitRedis: on a redis-server shared by two limiters (two
// processes), a request held for a slot (core.RuleSpec.Concurrent with
// core.RuleSpec.Wait) on one is admitted soon after the other gives the
// slot back, which no release in its own process tells it: the head of
// the queue asks the server again at least every 50ms. One whose slot
// does not come back within the wait is refused then for lack of a slot.
func TestSlotWaitRedis(t *testing.T) {
	t.Parallel()
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: export
      paths: ["/export"]
      concurrent: 1
      wait: 10s
    - name: quick
      paths: ["/quick"]
      concurrent: 1
      wait: 300ms
`), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	srv := redistest.StartServer(t)
	one := core.NewLimiter(cfg, core.WithStore(newStore(t, client(t, srv.Addr()))))
	two := core.NewLimiter(cfg, core.WithStore(newStore(t, client(t, srv.Addr()))))
	ctx := context.Background()

	held := one.Decide(ctx, "GET", "/export", "alice", false)
	if !held.Allowed {
		t.Fatalf("first: %+v, want admitted", held)
	}
	done := make(chan core.Decision, 1)
	go func() { done <- two.Decide(ctx, "GET", "/export", "alice", false) }()
	select {
	case d := <-done:
		t.Fatalf("decided while the slot was taken: %+v", d)
	case <-time.After(200 * time.Millisecond):
	}
	freed := time.Now()
	one.Complete(ctx, &held, 200)
	var d core.Decision
	select {
	case d = <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the held request was not admitted within 5s of the slot coming back")
	}
	if after := time.Since(freed); !d.Allowed || d.Waited < 200*time.Millisecond || after > 2*time.Second {
		t.Fatalf("held request: allowed %v, waited %v, decided %v after the slot came back; want admitted, within 2s", d.Allowed, d.Waited, after)
	}
	two.Complete(ctx, &d, 200)

	q := one.Decide(ctx, "GET", "/quick", "bob", false)
	start := time.Now()
	r := two.Decide(ctx, "GET", "/quick", "bob", false)
	if took := time.Since(start); r.Allowed || !r.ConcurrencyDenied || r.RetryAfterSeconds() != 1 || r.Waited < 300*time.Millisecond || took > 5*time.Second {
		t.Fatalf("held past its wait: allowed %v, concurrency denied %v, Retry-After %d, waited %v in %v; want refused after 300ms", r.Allowed, r.ConcurrencyDenied, r.RetryAfterSeconds(), r.Waited, took)
	}
	one.Complete(ctx, &q, 200)
}
