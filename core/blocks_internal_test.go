package core

import (
	"context"
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

// TestLeaseEvictsLeastUsed: in a full shard, a new key evicts an expired
// entry first, else the one that decided the fewest units.
func TestLeaseEvictsLeastUsed(t *testing.T) {
	cfg := mustParse(t, leaseTableYAML)
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := NewLimiter(cfg, WithClock(clock), WithLeaseKeys(2*blockShards)) // 2 per shard
	// Three keys of one shard.
	var keys []string
	first := l.blocks.shard("k0")
	for i := 0; len(keys) < 3; i++ {
		if k := "k" + strconv.Itoa(i); l.blocks.shard(k) == first {
			keys = append(keys, k)
		}
	}
	hot, cold, next := keys[0], keys[1], keys[2]
	decide := func(key string, n int) {
		for range n {
			l.Decide(context.Background(), "GET", "/api/search", key, false)
		}
	}
	held := func(key string) bool {
		first.mu.Lock()
		defer first.mu.Unlock()
		for k := range first.m {
			if k.key == key {
				return true
			}
		}
		return false
	}
	decide(hot, 20)
	decide(cold, 2)
	decide(next, 1)
	if !held(hot) || held(cold) || !held(next) {
		t.Errorf("held hot %v, cold %v, next %v; want the cold key evicted", held(hot), held(cold), held(next))
	}
	// The hot key's block expires with its window: it goes before the
	// key that decided one unit.
	clock.Advance(time.Minute)
	decide(next, 1)
	decide(cold, 1)
	if held(hot) || !held(cold) || !held(next) {
		t.Errorf("held hot %v, cold %v, next %v; want the expired hot key evicted", held(hot), held(cold), held(next))
	}
}
