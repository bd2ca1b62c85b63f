package redisstore

import (
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestStats: a store on one server reports Keys -1, the deny cache's hits
// exactly, and its node's breaker as it closes, opens, turns half-open
// after the cool-down and closes again.
func TestStats(t *testing.T) {
	mini := redistest.StartMini(t)
	rc := redis.NewClient(&redis.Options{Addr: mini.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rc.Close() })
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st, err := New(rc, WithBreaker(2, time.Second), WithClock(clock), WithTimeout(redistest.StoreTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	ctx := context.Background()
	p := testPolicy(t, "api", "2/hour")
	want := store.Stats{Store: "redis", Keys: -1, Nodes: []store.NodeStats{{Node: mini.Addr(), Breaker: store.BreakerClosed}}}
	check := func(what string) {
		t.Helper()
		if got := st.Stats(); !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: Stats() = %+v, want %+v", what, got, want)
		}
	}
	check("new store")
	for i := range 3 { // the third is denied by Redis, and cached
		if r, err := st.Take(ctx, "u", p, 1); err != nil || r.Allowed != (i < 2) {
			t.Fatalf("take %d: %+v, %v", i+1, r, err)
		}
	}
	check("no denial from the cache yet")
	for range 5 {
		if r, err := st.Take(ctx, "u", p, 1); err != nil || r.Allowed {
			t.Fatalf("over the limit: %+v, %v", r, err)
		}
	}
	want.DenyCacheHits = 5
	check("5 denials from the cache")
	if cleared, err := st.Reset(ctx, "u", p); !cleared || err != nil {
		t.Fatalf("Reset: %v, %v", cleared, err)
	}
	if r, err := st.Take(ctx, "u", p, 1); err != nil || !r.Allowed {
		t.Fatalf("after Reset: %+v, %v", r, err)
	}
	check("after Reset")

	mini.Close()
	for range 2 {
		if _, err := st.Take(ctx, "v", p, 1); err == nil {
			t.Fatal("Redis closed, and the call succeeded")
		}
	}
	want.Nodes[0].Breaker = store.BreakerOpen
	check("two failures")
	clock.Advance(time.Second)
	want.Nodes[0].Breaker = store.BreakerHalfOpen
	check("cool-down over")
	if err := mini.Restart(); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Take(ctx, "v", p, 1); err != nil {
		t.Fatalf("the probe: %v", err)
	}
	want.Nodes[0].Breaker = store.BreakerClosed
	check("probe answered")

	off, err := New(rc, WithDenyCache(false), WithTimeout(redistest.StoreTimeout))
	if err != nil {
		t.Fatal(err)
	}
	for range 4 {
		_, _ = off.Take(ctx, "w", p, 1)
	}
	if got := off.Stats().DenyCacheHits; got != 0 {
		t.Fatalf("deny cache off: %d hits", got)
	}
}

// TestStatsCluster: before a ClusterClient has its slot map the store
// knows only the cluster as a whole; then the masters it has called,
// sorted by address, each with its own breaker.
func TestStatsCluster(t *testing.T) {
	f := newFakeCluster(t)
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st, err := New(f.client, WithBreaker(2, time.Second), WithClock(clock), WithTimeout(redistest.StoreTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	nodes := func(want ...store.NodeStats) {
		t.Helper()
		if got := st.Stats().Nodes; !reflect.DeepEqual(got, want) {
			t.Fatalf("Stats().Nodes = %+v, want %+v", got, want)
		}
	}
	nodes(store.NodeStats{Node: "cluster", Breaker: store.BreakerClosed})
	ctx := context.Background()
	p := testPolicy(t, "api", "5/hour")
	a, b := f.nodeAddrs[nodeA], f.nodeAddrs[nodeB]
	onA, onB := f.users(t, nodeA, 1)[0], f.users(t, nodeB, 1)[0]
	if _, err := st.Take(ctx, onB, p, 1); err != nil {
		t.Fatal(err)
	}
	nodes(store.NodeStats{Node: b, Breaker: store.BreakerClosed})
	if _, err := st.Take(ctx, onA, p, 1); err != nil {
		t.Fatal(err)
	}
	nodes(store.NodeStats{Node: a, Breaker: store.BreakerClosed}, store.NodeStats{Node: b, Breaker: store.BreakerClosed})
	f.servers[nodeA].Close()
	for range 2 {
		if _, err := st.Take(ctx, onA, p, 1); err == nil {
			t.Fatal("the node is down, and the call succeeded")
		}
	}
	nodes(store.NodeStats{Node: a, Breaker: store.BreakerOpen}, store.NodeStats{Node: b, Breaker: store.BreakerClosed})
}
