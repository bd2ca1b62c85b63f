package core

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

const leaseTableYAML = `
rate_limit:
  enabled: true
  consistency: lease
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "1000/minute"
`

// blockCount is how many keys' blocks l holds.
func blockCount(l *Limiter) int {
	n := 0
	for i := range l.blocks.shards {
		sh := &l.blocks.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}

// TestLeaseKeysBounded: a flood of distinct keys leaves at most
// WithLeaseKeys entries (rounded to whole shards), and each key is still
// decided.
func TestLeaseKeysBounded(t *testing.T) {
	cfg := mustParse(t, leaseTableYAML)
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := NewLimiter(cfg, WithClock(clock), WithLeaseKeys(2*blockShards))
	for i := range 20000 {
		if d := l.Decide(context.Background(), "GET", "/api/search", "user-"+strconv.Itoa(i), false); !d.Allowed {
			t.Fatalf("user-%d refused", i)
		}
	}
	if n := blockCount(l); n > 2*blockShards {
		t.Errorf("%d keys' blocks held, want at most %d", n, 2*blockShards)
	}
}

// TestLeaseEvictsLeastUsed: in a full shard, a new key evicts an entry
// without a live block first, else the one that decided the fewest units.
func TestLeaseEvictsLeastUsed(t *testing.T) {
	cfg := mustParse(t, leaseTableYAML)
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := NewLimiter(cfg, WithClock(clock), WithLeaseKeys(2*blockShards)) // 2 per shard
	// Four keys of one shard.
	var keys []string
	first := l.blocks.shard("k0")
	for i := 0; len(keys) < 4; i++ {
		if k := "k" + strconv.Itoa(i); l.blocks.shard(k) == first {
			keys = append(keys, k)
		}
	}
	hot, cold, next, last := keys[0], keys[1], keys[2], keys[3]
	decide := func(key string, n int) {
		for range n {
			l.Decide(context.Background(), "GET", "/api/search", key, false)
		}
	}
	held := func(want ...string) {
		t.Helper()
		first.mu.Lock()
		var got []string
		for _, key := range keys {
			for k := range first.m {
				if k.key == key {
					got = append(got, key)
				}
			}
		}
		first.mu.Unlock()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("held %v, want %v", got, want)
		}
	}
	// A key holding nothing live goes before one holding a live block.
	decide(hot, 20) // alone, then blocks of 1, 2, 4 and 8, all spent
	decide(hot, 1)  // a block of 16, live
	decide(cold, 3) // alone, a block of 1, spent: nothing live
	decide(next, 1) // evicts cold: hot's block is live
	held(hot, next)
	// Every block ends with the window: of two keys holding nothing, the
	// one that decided fewer units goes; then the hot key, holding nothing,
	// goes before cold, holding a live unit, though it decided more.
	clock.Advance(time.Minute)
	decide(next, 1) // decided alone in a window that ended: alone again
	decide(cold, 2) // evicts next, which holds nothing and decided less than hot; then a block of 1
	held(hot, cold)
	decide(last, 1) // hot holds nothing live (its block ended); cold holds a unit
	held(cold, last)
}
