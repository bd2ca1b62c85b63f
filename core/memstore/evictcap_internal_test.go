package memstore

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// TestEvictionThatFreesNothingKeepsCap: an eviction pass can free nothing
// (its cut comes from a sample, and a candidate is dropped only once acc
// reaches the estimated eligible count); insert then drops one counter
// (evictOne), so a full shard never holds more than its cap, and the cells
// handed out never more than the caps together (without evictOne, a cell
// beyond the caps was handed out; with a one-level chunk directory sized
// to the caps, alloc then indexed past it and panicked). The hashes are
// chosen so that the sampled
// counters of level 0 are the ones closest to expiry; under load, lock-free
// decisions that raise level or expiry between evict's pass and drop do
// the same.
func TestEvictionThatFreesNothingKeepsCap(t *testing.T) {
	const capN = 2560 // 10 chunks, no spare cell
	s := New(WithShards(1), WithMaxKeys(capN))
	var r store.Result
	for rank := range capN {
		sampled := rank%20 == 0                                                    // evict samples every 20th live counter in index order
		period, cost := 2*time.Hour+time.Duration(rank)*time.Millisecond, int64(1) // level 0
		switch {
		case sampled && rank < 100:
			period = time.Hour + time.Duration(rank)*time.Millisecond // level 0, soonest expiry
		case sampled:
			cost = 500 // level 15
		}
		p := &store.Policy{Name: "p", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 1000, Period: period}}}
		s.takeOne(&r, 1<<40|uint64(rank), p, cost, 1, true) // home slot = rank
		if !r.Allowed {
			t.Fatalf("rank %d denied", rank)
		}
	}
	if s.Len() != capN {
		t.Fatalf("Len = %d, want %d", s.Len(), capN)
	}
	defer func() {
		if e := recover(); e != nil {
			t.Fatalf("inserting into the full shard panicked: %v (n = %d, cap = %d, cells handed out %d)",
				e, s.shards[0].n, s.shards[0].cap, s.next.Load())
		}
	}()
	p := &store.Policy{Name: "p", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 1000, Period: time.Hour}}}
	s.takeOne(&r, 1<<40|3000, p, 1, 1, true)
	if n := s.Len(); n > capN || s.next.Load() > capN {
		t.Fatalf("after an insert into a full shard: Len = %d, cells handed out %d; want at most %d each", n, s.next.Load(), capN)
	}
}

// TestEvictionUnderLoadKeepsCap: the same without crafted hashes. A
// one-shard store of 16 counters; goroutines take, round-robin, from 16 hot
// GCRA keys (each admission moves its counter's expiry, so the counter
// evict's pass picked as the one to drop is the one next admitted), while
// another creates new keys. The shard must never hold more than its cap.
func TestEvictionUnderLoadKeepsCap(t *testing.T) {
	s := New(WithShards(1), WithMaxKeys(16))
	hot := &store.Policy{Name: "hot", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 1_000_000, Period: time.Second}}}
	var stop atomic.Bool
	var wg sync.WaitGroup
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; !stop.Load(); i++ {
				_, _ = s.Take(ctx, "hot"+strconv.Itoa((i+g*8)%16), hot, 1)
			}
		}()
	}
	worst := 0
	deadline := time.Now().Add(2 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		_, _ = s.Take(ctx, "new"+strconv.Itoa(i), hot, 1)
		if n := s.Len(); n > worst {
			worst = n
		}
		if worst > 16 {
			break
		}
	}
	stop.Store(true)
	wg.Wait()
	if worst > 16 {
		t.Fatalf("the shard held %d counters, cap 16 (cells handed out: %d)", worst, s.next.Load())
	}
}

// TestEvictionUnderLoadKeepsCellsWithinCaps: the public API only. 16
// shards of 16 counters (256 cells); two goroutines take from 256 hot GCRA
// keys round-robin while the test creates new keys. An eviction pass that
// frees nothing (see above) let a shard take a 257th cell: with a one-level
// chunk directory Take panicked (index out of range) within a fraction of
// a second without -race, and without evictOne more than 256 cells are
// handed out (under -race a run may pass: the window between evict's pass
// and drop is hit less often).
func TestEvictionUnderLoadKeepsCellsWithinCaps(t *testing.T) {
	s := New(WithShards(16), WithMaxKeys(256))
	hot := &store.Policy{Name: "hot", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 1_000_000, Period: time.Second}}}
	var (
		stop     atomic.Bool
		wg       sync.WaitGroup
		panicked atomic.Value
	)
	catch := func() {
		if e := recover(); e != nil {
			panicked.Store(e)
			stop.Store(true)
		}
	}
	for g := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer catch()
			for i := 0; !stop.Load(); i++ {
				_, _ = s.Take(ctx, "hot"+strconv.Itoa((i+g*128)%256), hot, 1)
			}
		}()
	}
	func() {
		defer catch()
		deadline := time.Now().Add(2 * time.Second)
		for i := 0; !stop.Load() && time.Now().Before(deadline); i++ {
			_, _ = s.Take(ctx, "new"+strconv.Itoa(i), hot, 1)
		}
	}()
	stop.Store(true)
	wg.Wait()
	if e := panicked.Load(); e != nil {
		t.Fatalf("Take panicked: %v (cells handed out %d)", e, s.next.Load())
	}
	if n := s.next.Load(); n > 256 {
		t.Fatalf("%d cells handed out, more than the shards' caps together (256)", n)
	}
}
