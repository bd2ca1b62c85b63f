package worksredis

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redistest"
)

// TestFaultPacerHoldStoreFailsClosed: a Pacer whose Redis user may write
// the counters but not read the holds (NOPERM) must not start a request
// under a key that another process holds (a Retry-After): it fails closed
// on the holds as on the counters.
func TestFaultPacerHoldStoreFailsClosed(t *testing.T) {
	srv := redistest.StartServer(t)
	admin := srv.Client(t)
	ctx := context.Background()
	other := NewPacer(admin, 10*time.Millisecond)
	t.Cleanup(func() { _ = other.Close() })
	const key = "POST /v1.0/users"
	if err := other.Delay(ctx, key, time.Minute); err != nil {
		t.Fatal(err)
	}
	if err := admin.Do(ctx, "ACL", "SETUSER", "pacer", "on", ">pw", "~worksclient:pace:{*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	c := redis.NewClient(&redis.Options{Addr: srv.Addr(), Username: "pacer", Password: "pw", MaxRetries: -1})
	t.Cleanup(func() { _ = c.Close() })
	p := NewPacer(c, 10*time.Millisecond)
	t.Cleanup(func() { _ = p.Close() })
	if err := p.Wait(ctx, "GET /free"); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("Wait on a free key with the holds unreadable = %v, want the NOPERM error", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if err := p.Wait(cctx, key); err == nil || !strings.Contains(err.Error(), "NOPERM") {
		t.Fatalf("Wait on a key held by another process = %v, want the NOPERM error", err)
	}
}
