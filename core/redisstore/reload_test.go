package redisstore_test

import (
	"context"
	"log/slog"
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
	"github.com/rlkit/rlkit/internal/reloadtest"
)

// TestReloadKeepsCountsServer plays the reload scenario on a Redis
// server, on its clock.
func TestReloadKeepsCountsServer(t *testing.T) {
	t.Parallel()
	c := client(t, redistest.StartServer(t).Addr())
	reloadtest.Run(t, func() store.Store { return newStore(t, c) }, nil)
}

// TestReloadKeepsCountsCluster plays it on a Redis Cluster.
func TestReloadKeepsCountsCluster(t *testing.T) {
	t.Parallel()
	c := clusterClient(t, redistest.StartCluster(t))
	reloadtest.Run(t, func() store.Store { return newStore(t, c) }, nil)
}

// TestRaisedLimitNotDeniedFromCache: a caller at its limit is denied
// from the deny cache (no round trip), but once a reload raises the
// limit, the cached denial no longer answers: the caller gets what the
// new limit leaves, 3 of 5.
func TestRaisedLimitNotDeniedFromCache(t *testing.T) {
	t.Parallel()
	st := newStore(t, client(t, redistest.StartServer(t).Addr()))
	lim := core.NewLimiter(nil, core.WithStore(st), core.WithLogger(slog.New(slog.DiscardHandler)))
	load := func(limit string) {
		t.Helper()
		cfg, err := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n  rules:\n    - name: api\n      paths: [\"/api\"]\n      limit: \""+limit+"\"\n"), "api.yaml")
		if err != nil {
			t.Fatal(err)
		}
		lim.SetConfig(cfg)
	}
	expect := func(allowed bool, remaining int64) {
		t.Helper()
		d := lim.Decide(context.Background(), "GET", "/api", "alice", false)
		if d.Err != nil || d.Allowed != allowed || d.Result.Remaining != remaining {
			t.Fatalf("allowed %v, %d left, error %v; want %v, %d", d.Allowed, d.Result.Remaining, d.Err, allowed, remaining)
		}
	}
	load("2/hour")
	expect(true, 1)
	expect(true, 0)
	expect(false, 0)
	expect(false, 0)
	if hits := st.Stats().DenyCacheHits; hits != 1 {
		t.Fatalf("deny cache hits %d, want 1: the second denial was answered locally", hits)
	}
	load("5/hour")
	expect(true, 2)
	expect(true, 1)
	expect(true, 0)
	expect(false, 0)
	if hits := st.Stats().DenyCacheHits; hits != 1 {
		t.Fatalf("deny cache hits %d after the raise, want still 1", hits)
	}
}
