package redisstore_test

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
)

// stackFile stacks a per-user limit over /api and a per-IP one over
// every path on a per-user search limit: a request to /api/search counts
// under three keys' counters, of two callers' hash tags. No rule counts
// in windows, whose end at the next hour would make the counts depend on
// the time the test runs.
const stackFile = `
rate_limit:
  enabled: true
  default: "100/minute"
  rules:
    - name: global
      stack: true
      paths: ["/api/**"]
      limit: "5/hour"
      algorithm: gcra
    - name: per-ip
      stack: true
      paths: ["/**"]
      limit: "8/hour"
      key: ip
      algorithm: token_bucket
    - name: search
      paths: ["/api/search"]
      limit: "2/hour"
      algorithm: gcra
`

// stackFlow is a flow over (user, client IP) requests on st's limiter.
func stackFlow(t *testing.T, c redis.UniversalClient) *core.Flow[[2]string] {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(stackFile), "stack.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return &core.Flow[[2]string]{
		Limiter:  core.NewLimiter(cfg, core.WithStore(newStore(t, c))),
		Key:      func(r [2]string) (string, error) { return r[0], nil },
		ClientIP: func(r [2]string) string { return r[1] },
	}
}

// TestStackedRulesRedis: stacked rules through a core.Limiter on a Redis
// server and on a Cluster, where a user's keys and an IP's lie in other
// slots (and, for some users, on other masters): exact counts, a refusal
// by any rule consumes from none, and concurrent requests admit exactly
// what the tightest rule allows.
func TestStackedRulesRedis(t *testing.T) {
	t.Parallel()
	for _, tc := range backends {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := tc.client(t)
			for u := range 4 { // users whose tags lie in different slots
				user, ip := fmt.Sprintf("user-%d", u), fmt.Sprintf("198.51.100.%d", u)
				f := stackFlow(t, c)
				ctx := context.Background()
				want := []struct {
					path      string
					rule      string
					allowed   bool
					remaining int64
				}{
					{"/api/search", "search", true, 1}, // search 1, global 4, per-ip 7
					{"/api/search", "search", true, 0}, // search 0, global 3, per-ip 6
					{"/api/search", "search", false, 0},
					{"/api/x", "global", true, 2},  // global 2, per-ip 5, default 99
					{"/api/x", "global", true, 1},  // per-ip 4
					{"/api/x", "global", true, 0},  // per-ip 3
					{"/api/x", "global", false, 0}, // per-ip stays 3
					{"/other", "per-ip", true, 2},  // default 96
					{"/other", "per-ip", true, 1},  //
					{"/other", "per-ip", true, 0},  //
					{"/other", "per-ip", false, 0}, // the default keeps 94
					{"/api/search", "", false, 0},  // all three refuse: the longest wait answers
				}
				for i, w := range want {
					d, err := f.Decide(ctx, [2]string{user, ip}, http.MethodGet, core.Path(w.path), "")
					if err != nil {
						t.Fatal(err)
					}
					if d.Err != nil || d.Allowed != w.allowed || d.Rule == nil || w.rule != "" && d.Rule.Name != w.rule || d.Allowed && d.Result.Remaining != w.remaining {
						t.Fatalf("%s request %d (%s): allowed %v, rule %v, remaining %d, err %v; want %v, %s, %d", user, i, w.path, d.Allowed, d.Rule, d.Result.Remaining, d.Err, w.allowed, w.rule, w.remaining)
					}
				}
				// Another user on the same address finds per-ip spent, its own
				// counters untouched.
				d, _ := f.Decide(ctx, [2]string{user + "-b", ip}, http.MethodGet, "/api/search", "")
				if d.Allowed || d.Rule.Name != "per-ip" {
					t.Fatalf("%s-b: allowed %v, rule %s; want refused by per-ip", user, d.Allowed, d.Rule.Name)
				}
				d, _ = f.Decide(ctx, [2]string{user + "-b", ip + "0"}, http.MethodGet, "/api/search", "")
				if !d.Allowed || d.Rule.Name != "search" || d.Result.Remaining != 1 {
					t.Fatalf("%s-b elsewhere: allowed %v, rule %s, remaining %d; want search, 1", user, d.Allowed, d.Rule.Name, d.Result.Remaining)
				}
			}
			// Concurrent requests of one caller: exactly 2 searches
			// admitted, and global and per-ip took exactly those. (On a
			// Cluster the user's keys and the IP's may lie on two masters:
			// the user's, the rule that applies, are taken first, so that
			// the requests search refuses never take per-ip's.)
			f := stackFlow(t, c)
			var (
				wg       sync.WaitGroup
				admitted atomic.Int64
			)
			for range 32 {
				wg.Go(func() {
					d, _ := f.Decide(context.Background(), [2]string{"racer", "203.0.113.9"}, http.MethodGet, "/api/search", "")
					if d.Err != nil {
						t.Error(d.Err)
					}
					if d.Allowed {
						admitted.Add(1)
					}
				})
			}
			wg.Wait()
			n := admitted.Load()
			if n != 2 {
				t.Fatalf("%d concurrent searches admitted, want 2", n)
			}
			d, _ := f.Decide(context.Background(), [2]string{"racer", "203.0.113.9"}, http.MethodGet, "/api/x", "")
			if !d.Allowed || d.Rule.Name != "global" || d.Result.Remaining != 4-n {
				t.Fatalf("after the race: allowed %v, rule %s, remaining %d; want global with %d left", d.Allowed, d.Rule.Name, d.Result.Remaining, 4-n)
			}
			d, _ = f.Decide(context.Background(), [2]string{"racer-b", "203.0.113.9"}, http.MethodGet, "/other", "")
			if !d.Allowed || d.Rule.Name != "per-ip" || d.Result.Remaining != 6-n {
				t.Fatalf("after the race, per-ip: allowed %v, rule %s, remaining %d; want %d left", d.Allowed, d.Rule.Name, d.Result.Remaining, 6-n)
			}
		})
	}
}
