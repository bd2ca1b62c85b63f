package redisstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/redistest"
)

// leaseFleetFile is one fixed window of 100 per 2 s per user; %s is the
// file's consistency (and lease_block).
const leaseFleetFile = `
rate_limit:
  enabled: true
  consistency: %s
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "100/2s"
`

// TestLeaseFleetRedis: four limiters, each with its own client and store,
// share a Redis server (and a Cluster); 16 goroutines send requests of 16
// users to all of them, far over the limit, within one window at a time
// (the load stops 300 ms before the window ends on the server's clock,
// so that every decision falls in it). Exact mode admits exactly the
// limit of each user in each window; lease mode never more, and at most
// P × B fewer (4 processes, blocks of at most 12: an eighth of 100):
// the units left in blocks when the load stops.
func TestLeaseFleetRedis(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		// clients starts the Redis of the fleet and returns a function
		// that makes a client of it.
		clients func(t *testing.T) func() redis.UniversalClient
	}{
		{"server", func(t *testing.T) func() redis.UniversalClient {
			addr := redistest.StartServer(t).Addr()
			return func() redis.UniversalClient { return client(t, addr) }
		}},
		{"cluster", func(t *testing.T) func() redis.UniversalClient {
			c := redistest.StartCluster(t)
			return func() redis.UniversalClient { return clusterClient(t, c) }
		}},
	} {
		for _, consistency := range []string{"exact", "lease"} {
			t.Run(tc.name+"/"+consistency, func(t *testing.T) {
				t.Parallel()
				leaseFleet(t, tc.clients(t), consistency)
			})
		}
	}
}

func leaseFleet(t *testing.T, newClient func() redis.UniversalClient, consistency string) {
	const (
		period = 2 * time.Second
		limit  = 100
		users  = 16
	)
	setting := consistency
	if consistency == "lease" {
		setting += "\n  lease_block: 20"
	}
	doc := fmt.Sprintf(leaseFleetFile, setting)
	cfg, err := core.ParseConfig([]byte(doc), "fleet.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var fleet [4]*core.Limiter
	var first redis.UniversalClient
	for i := range fleet {
		c := newClient()
		if i == 0 {
			first = c
		}
		fleet[i] = core.NewLimiter(cfg, core.WithStore(newStore(t, c)))
	}
	ctx := context.Background()
	// Redis counts the window on its own clock: wait for the start of
	// one there.
	serverNow := func() time.Time {
		now, err := first.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	for w := range 2 {
		now := serverNow()
		start := now.Truncate(period).Add(period + 20*time.Millisecond)
		time.Sleep(start.Sub(now))
		deadline := time.Now().Add(period - 20*time.Millisecond - 300*time.Millisecond)
		var (
			mu       sync.Mutex
			admitted [users]int
			sent     int
		)
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var mine [users]int
				n := 0
				for i := 0; time.Now().Before(deadline); i++ {
					u := (g + i) % users
					d := fleet[(g+i/users)%4].Decide(ctx, "GET", "/api/search", fmt.Sprintf("user-%d", u), false)
					if d.Err != nil {
						t.Errorf("store error: %v", d.Err)
						return
					}
					if d.Allowed {
						mine[u]++
					}
					n++
				}
				mu.Lock()
				for u := range mine {
					admitted[u] += mine[u]
				}
				sent += n
				mu.Unlock()
			}()
		}
		wg.Wait()
		if end := serverNow(); end.Truncate(period) != start.Truncate(period) {
			t.Fatalf("window %d: the load ran past the window's end (started %v, ended %v)", w, start, end)
		}
		under := 0
		for u, n := range admitted {
			low := limit
			if consistency == "lease" {
				low = limit - 4*12
			}
			if n > limit || n < low {
				t.Errorf("window %d, user-%d: admitted %d, want %d to %d", w, u, n, low, limit)
			}
			under += limit - n
		}
		t.Logf("window %d: %d requests sent, %d of %d units left unspent (in blocks)", w, sent, under, users*limit)
		if sent < 4*users*limit {
			t.Fatalf("window %d: only %d requests sent, too few to reach every limit", w, sent)
		}
	}
}
