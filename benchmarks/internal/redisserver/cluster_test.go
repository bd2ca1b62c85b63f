package redisserver

import (
	"context"
	"os"
	"slices"
	"testing"

	"github.com/redis/go-redis/v9"
)

// TestStartCluster starts clusters of 1 and 3 masters and finds, in every
// node's CLUSTER SLOTS, each master owning its range of slots and nothing
// else; a ClusterClient then writes keys of every master, and Stop leaves
// no process behind.
func TestStartCluster(t *testing.T) {
	if !Available() {
		if os.Getenv("RLKIT_REQUIRE_REDIS") == "1" {
			t.Fatal(ErrNotInstalled)
		}
		t.Skip(ErrNotInstalled)
	}
	for _, masters := range []int{1, 3} {
		c, err := StartCluster(masters)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		want := make([]redis.ClusterSlot, masters)
		for i, addr := range c.Addrs() {
			lo, hi := c.Slots(i)
			want[i] = redis.ClusterSlot{Start: lo, End: hi, Nodes: []redis.ClusterNode{{Addr: addr}}}
		}
		if lo, _ := c.Slots(0); lo != 0 {
			t.Errorf("%d masters: the first starts at slot %d", masters, lo)
		}
		if _, hi := c.Slots(masters - 1); hi != SlotCount-1 {
			t.Errorf("%d masters: the last ends at slot %d", masters, hi)
		}
		for _, addr := range c.Addrs() {
			n := redis.NewClient(&redis.Options{Addr: addr})
			got, err := n.ClusterSlots(ctx).Result()
			n.Close()
			if err != nil {
				t.Fatalf("%s: %v", addr, err)
			}
			slices.SortFunc(got, func(a, b redis.ClusterSlot) int { return a.Start - b.Start })
			if !slices.EqualFunc(got, want, func(a, b redis.ClusterSlot) bool {
				return a.Start == b.Start && a.End == b.End && len(a.Nodes) == 1 && len(b.Nodes) == 1 && a.Nodes[0].Addr == b.Nodes[0].Addr
			}) {
				t.Errorf("%d masters: %s: CLUSTER SLOTS = %+v, want %+v", masters, addr, got, want)
			}
		}
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
		for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
			if err := cc.Set(ctx, k, 1, 0).Err(); err != nil {
				t.Errorf("%d masters: SET %s: %v", masters, k, err)
			}
		}
		cc.Close()
		if pids := c.Pids(); len(pids) != masters || slices.Contains(pids, 0) {
			t.Errorf("%d masters: pids %v", masters, pids)
		}
		c.Stop()
		for _, n := range c.nodes {
			select {
			case <-n.done:
			default:
				t.Errorf("%d masters: %s still running after Stop", masters, n.addr)
			}
		}
	}
}
