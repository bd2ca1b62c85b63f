package memstore_test

import (
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
)

// TestEvictionRacePlainConfig: decisions without the shard mutex racing
// eviction passes (which could free nothing, so that a shard went past its
// cap and, once every cell was handed out, a decision panicked), with an ordinary
// configuration: WithMaxKeys(1024) and the default 64 shards (16 counters
// each), the system clock, a token bucket of 100/minute, two goroutines
// taking random identities among 3,072. It reports the first panic.
func TestEvictionRacePlainConfig(t *testing.T) {
	s := memstore.New(memstore.WithMaxKeys(1024))
	p := pol("tb", algo.TokenBucket, "100/minute")
	keys := make([]string, 3*1024)
	for i := range keys {
		keys[i] = "id-" + strconv.Itoa(i)
	}
	var (
		stop   atomic.Bool
		wg     sync.WaitGroup
		panics atomic.Int64
		first  atomic.Value
		ops    atomic.Int64
	)
	for g := range 2 {
		wg.Go(func() {
			x := uint32(g*7919 + 1)
			for !stop.Load() {
				func() {
					defer func() {
						if e := recover(); e != nil {
							panics.Add(1)
							first.CompareAndSwap(nil, fmt.Sprint(e))
						}
					}()
					for range 1024 {
						x ^= x << 13
						x ^= x >> 17
						x ^= x << 5
						_, _ = s.Take(ctx, keys[x%uint32(len(keys))], p, 1)
						ops.Add(1)
					}
				}()
			}
		})
	}
	// With the two-level chunk directory (a block covers 2^20 cells), a
	// shard past its cap no longer panics here: the bound is checked too,
	// every 10 ms (every shard is full: 48 identities for 16 counters each).
	deadline := time.Now().Add(2 * time.Second)
	worst := 0
	for time.Now().Before(deadline) && panics.Load() == 0 {
		time.Sleep(10 * time.Millisecond)
		worst = max(worst, lenNoBlock(s))
	}
	stop.Store(true)
	if panics.Load() > 0 {
		t.Fatalf("after %d decisions a decision panicked: %v (Len %d, bound 1024)", ops.Load(), first.Load(), lenNoBlock(s))
	}
	wg.Wait()
	if worst = max(worst, s.Len()); worst > 1024 {
		t.Fatalf("after %d decisions the store held %d counters, bound 1024", ops.Load(), worst)
	}
	t.Logf("%d decisions, no panic, Stats %+v", ops.Load(), s.Stats())
}

// lenNoBlock is s.Len, or -1 when a shard's mutex stays locked (after a
// panic under it) for 100 ms.
func lenNoBlock(s *memstore.Store) int {
	c := make(chan int, 1)
	go func() { c <- s.Len() }()
	select {
	case n := <-c:
		return n
	case <-time.After(100 * time.Millisecond):
		return -1
	}
}
