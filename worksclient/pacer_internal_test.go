package worksclient

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"
)

type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }
func (c *stepClock) NewTimer(time.Duration) (<-chan time.Time, func() bool) {
	panic("no timer expected")
}

// TestPacerBounded: keys that have gone idle are dropped as new keys come,
// so the map never holds much more than twice the keys in use.
func TestPacerBounded(t *testing.T) {
	clk := &stepClock{now: time.Unix(1_800_000_000, 0)}
	p := NewPacer(time.Second, WithClock(clk))
	ctx := context.Background()
	peak := 0
	for i := range 100_000 {
		if err := p.Wait(ctx, fmt.Sprintf("GET /k%d", i)); err != nil {
			t.Fatal(err)
		}
		clk.now = clk.now.Add(10 * time.Millisecond) // 100 keys in use at any time
		peak = max(peak, p.store.Len())
	}
	if peak > 2*100+minSweep {
		t.Errorf("the pacer held up to %d keys with 100 in use, want at most %d", peak, 2*100+minSweep)
	}
	// A key dropped and seen again is as free as a new one.
	clk.now = clk.now.Add(time.Hour)
	if err := p.Wait(ctx, "GET /k0"); err != nil {
		t.Fatal(err)
	}
}

// TestPacerHeapBounded: the memory of a Pacer (its store and the
// outbound.Limiter's state) stops growing with the number of keys seen:
// 200,000 more keys, at 100 a second, add less than a megabyte to the
// heap, where keeping them would take tens.
func TestPacerHeapBounded(t *testing.T) {
	clk := &stepClock{now: time.Unix(1_800_000_000, 0)}
	p := NewPacer(time.Second, WithClock(clk))
	ctx := context.Background()
	run := func(from, to int) uint64 {
		for i := from; i < to; i++ {
			if err := p.Wait(ctx, fmt.Sprintf("GET /k%d", i)); err != nil {
				t.Fatal(err)
			}
			clk.now = clk.now.Add(10 * time.Millisecond)
		}
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := run(0, 100_000)
	after := run(100_000, 300_000)
	t.Logf("heap after 100,000 keys %d KB, after 300,000 %d KB", before/1024, after/1024)
	if after > before+1<<20 {
		t.Errorf("heap grew by %d KB over 200,000 more keys, want under 1 MB", (after-before)/1024)
	}
	runtime.KeepAlive(p)
}
