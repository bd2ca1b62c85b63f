package redisstore_test

import (
	"context"
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestClearOnSuccessRedis: on a real redis-server, a rule counting
// failures with clear_on_success: two failures, a success that clears
// them (one reset, under the caller's key only), then the limit's three
// failures admitted again and the next request refused; bob's failures
// are kept.
func TestClearOnSuccessRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      algorithm: gcra
      limit: "3/hour"
      count: failures
      clear_on_success: true
`), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(newStore(t, client(t, srv.Addr()))))
	ctx := context.Background()
	login := func(id string, status int) core.Decision {
		t.Helper()
		d := l.Decide(ctx, "POST", "/login", id, false)
		if d.Err != nil {
			t.Fatal(d.Err)
		}
		if d.Allowed {
			l.Complete(ctx, &d, status)
		}
		return d
	}
	for _, id := range []string{"alice", "alice", "bob", "bob"} {
		login(id, 401)
	}
	if d := login("alice", 200); !d.Allowed || d.Result.Remaining != 0 {
		t.Fatalf("the success: allowed %v, remaining %d; want allowed, 0 (two failures counted)", d.Allowed, d.Result.Remaining)
	}
	for i := range 3 {
		if d := login("alice", 401); !d.Allowed || d.Result.Remaining != int64(2-i) {
			t.Fatalf("failure %d after the success: allowed %v, remaining %d; want allowed, %d", i, d.Allowed, d.Result.Remaining, 2-i)
		}
	}
	if d := login("alice", 401); d.Allowed || d.Status() != 429 {
		t.Fatalf("the limit's fourth failure: allowed %v, status %d; want 429", d.Allowed, d.Status())
	}
	if d := login("bob", 401); !d.Allowed || d.Result.Remaining != 0 {
		t.Fatalf("bob: allowed %v, remaining %d; want his third failure admitted, 0 left", d.Allowed, d.Result.Remaining)
	}
}
