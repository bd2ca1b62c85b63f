package grpcrl_test

import (
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"google.golang.org/grpc/codes"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestFaultGRPCRedisKilled: a gRPC server limited on a real redis-server
// that is SIGKILLed. Fail-open, every call is answered OK (without
// rate-limit metadata) while Redis is down; fail-closed, every call ends
// with Unavailable, a RetryInfo of one second and retry-after 1; no call
// waits on Redis for more than the bound. After a restart, counting
// resumes exactly: a fresh caller gets its 3 calls and is then refused.
func TestFaultGRPCRedisKilled(t *testing.T) {
	// The store's timeout is 500 ms (room for the first dial and script
	// load under -race on a loaded machine); a call answered within 2 s
	// never waited on go-redis's own timeouts.
	const bound = 2 * time.Second
	for _, open := range []bool{true, false} {
		srv := redistest.StartServer(t)
		client := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
		t.Cleanup(func() { _ = client.Close() })
		store, err := redisstore.New(client, redisstore.WithTimeout(500*time.Millisecond), redisstore.WithBreaker(3, 200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		conn, _ := serve(t, config(t, testConfig), core.WithStore(store), core.WithFailOpen(open), core.WithLogger(discard), keys)
		for i := range 3 {
			if r := say(t, conn, "hi", apiKey("before")...); r.code != codes.OK || get(t, r.header, "ratelimit") == "" {
				t.Fatalf("open %v, call %d before the kill: %v %v", open, i+1, r.code, r.header)
			}
		}
		srv.Kill()
		for i := range 10 {
			began := time.Now()
			r := say(t, conn, "hi", apiKey("during")...)
			took := time.Since(began)
			if took > bound {
				t.Errorf("open %v, call %d with Redis down took %v, want at most %v", open, i+1, took, bound)
			}
			switch {
			case open && (r.code != codes.OK || len(limitMD(r.header)) != 0):
				t.Errorf("fail-open call %d: %v %v, want OK without metadata", i+1, r.code, limitMD(r.header))
			case !open && (r.code != codes.Unavailable || r.retry != time.Second || get(t, r.header, "retry-after") != "1"):
				t.Errorf("fail-closed call %d: %v retry %v %v, want Unavailable, RetryInfo 1s, retry-after 1", i+1, r.code, r.retry, r.header)
			}
		}
		srv.Restart(t)
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := say(t, conn, "probe", apiKey("probe")...)
			if get(t, r.header, "ratelimit") != "" {
				break // counted again
			}
			if time.Now().After(deadline) {
				t.Fatalf("open %v: counting did not resume within 10s of the restart", open)
			}
			time.Sleep(50 * time.Millisecond)
		}
		var got []codes.Code
		for range 4 {
			got = append(got, say(t, conn, "hi", apiKey("after")...).code)
		}
		if want := []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted}; !slices.Equal(got, want) {
			t.Errorf("open %v, after the restart: %v, want %v", open, got, want)
		}
	}
}
