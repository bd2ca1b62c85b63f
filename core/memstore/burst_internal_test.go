//go:build !race

package memstore

import (
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestMemoryAfterBurst: a burst of 1,000,000 short-lived identities fills
// a default store; once they expire, one Sweep gives the memory back: the
// heap is within 1 MiB of an empty store's (the shards' free lists, which
// kept their arrays before, about 4.6 MiB here, are made anew).
func TestMemoryAfterBurst(t *testing.T) {
	if testing.Short() {
		t.Skip("a million keys")
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0).Truncate(time.Hour))
	base := heapInUse()
	s := New(WithClock(clock))
	empty := heapInUse()
	short := &store.Policy{Name: "short", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 1, Period: time.Second}}}
	var r store.Result
	now := clock.Now()
	for i := range 1_000_000 {
		s.TakeAt(&r, "k"+strconv.Itoa(i), short, 1, now)
	}
	peak := heapInUse()
	clock.Advance(2 * time.Second)
	s.Sweep()
	after := heapInUse()
	freeCap, tab := 0, 0
	for i := range s.shards {
		freeCap += cap(s.shards[i].free)
		tab += len(*s.shards[i].tab.Load())
	}
	t.Logf("heap: empty store %d KiB, peak %d KiB, after sweep %d KiB (Len %d, cells %d); free lists keep capacity for %d cells (%d KiB), index slots %d",
		(empty-base)>>10, (peak-base)>>10, (after-base)>>10, s.Len(), s.next.Load(), freeCap, freeCap*4>>10, tab)
	if after > empty+1<<20 {
		t.Errorf("after the sweep %d KiB more than an empty store (peak %d KiB more)", (after-empty)>>10, (peak-empty)>>10)
	}
	runtime.KeepAlive(s)
}
