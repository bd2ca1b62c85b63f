package memstore

import (
	"math"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/rlkit/rlkit/core"
)

// TestSlotSize pins the slot at 32 bytes: memory per key depends on it.
func TestSlotSize(t *testing.T) {
	if got := unsafe.Sizeof(slot{}); got != 32 {
		t.Fatalf("slot is %d bytes, want 32", got)
	}
}

// TestShardSize pins a shard at one 64-byte cache line.
func TestShardSize(t *testing.T) {
	if got := unsafe.Sizeof(shard{}); got != 64 {
		t.Fatalf("shard is %d bytes, want 64", got)
	}
}

func TestLevel(t *testing.T) {
	for _, tt := range []struct {
		capacity, remaining int64
		want                uint64
	}{
		{5, 5, 0},       // nothing consumed
		{5, 4, 4},       // 1 of 5: log16(5) − log16(4) = 36 − 32
		{5, 3, 12},      // 2 of 5: 36 − 24
		{5, 2, 20},      // 3 of 5
		{5, 1, 36},      // all but one unit
		{5, 0, 255},     // at the limit
		{5, -1, 255},    // never returned by algo, still at the limit
		{1, 1, 0},       // capacity 1, nothing consumed
		{1, 0, 255},     // capacity 1, at the limit
		{2, 1, 16},      // half consumed: one halving
		{1000, 999, 0},  // 1 of 1000: a little
		{1000, 500, 16}, // half
		{1000, 250, 32}, // three quarters: two halvings
		{1000, 1, 159},
		{math.MaxInt32, 1, 254}, // saturated below the limit
		{1 << 30, 1 << 15, 240}, // 15 halvings
		{math.MaxInt32, math.MaxInt32 - 1, 0},
		{0, 1, 0},               // not a valid limit
		{5, 7, 0},               // remaining above capacity: nothing consumed
		{math.MaxInt64, 1, 254}, // not a valid limit: no overflow past 254
	} {
		if got := level(tt.capacity, tt.remaining); got != tt.want {
			t.Errorf("level(%d, %d) = %d, want %d", tt.capacity, tt.remaining, got, tt.want)
		}
	}
}

// TestLevelMonotone: for every capacity up to 600 and a few large ones,
// the level never falls as the remaining units fall, and only "nothing
// left" is at the limit.
func TestLevelMonotone(t *testing.T) {
	caps := []int64{math.MaxInt32, 1 << 30, 1_000_000_007}
	for c := int64(1); c <= 600; c++ {
		caps = append(caps, c)
	}
	for _, c := range caps {
		prev := uint64(0)
		for r := c; r >= 0; r-- {
			if c > 600 && r > 600 && r < c-600 {
				r = 600 // the ends only
			}
			got := level(c, r)
			if got < prev {
				t.Fatalf("capacity %d: level(%d) = %d below level(%d) = %d", c, r, got, r+1, prev)
			}
			if (got == atLimit) != (r == 0) {
				t.Fatalf("level(%d, %d) = %d", c, r, got)
			}
			prev = got
		}
	}
}

// TestPackRoundsExpiryUp: a counter counts as expired at most 256 ns late
// and never early, keeps its level, and every level sorts above every
// expiry of the level below.
func TestPackRoundsExpiryUp(t *testing.T) {
	for _, exp := range []int64{1, 255, 256, 257, 1_700_000_000_000_000_123, 1 << 62, 1<<62 + 1<<60 + 3} {
		for _, lvl := range []uint64{0, 1, 127, 254, atLimit} {
			m := pack(exp, lvl)
			if expired(m, exp-1) {
				t.Errorf("pack(%d, %d): expired at %d, before its expiry", exp, lvl, exp-1)
			}
			if !expired(m, exp+255) {
				t.Errorf("pack(%d, %d): not expired at %d, 255 ns after its expiry", exp, lvl, exp+255)
			}
			if got := m >> levelShift; got != lvl {
				t.Errorf("pack(%d, %d): level %d", exp, lvl, got)
			}
		}
		if pack(math.MaxInt64, 0) >= pack(exp, 1) {
			t.Errorf("level 0 with the latest expiry sorts above level 1 expiring at %d", exp)
		}
	}
	// The latest instant keeps out of the level byte, and is never expired
	// before it.
	for _, lvl := range []uint64{0, 1, atLimit} {
		m := pack(math.MaxInt64, lvl)
		if m>>levelShift != lvl || expired(m, math.MaxInt64-1) {
			t.Errorf("pack(MaxInt64, %d) = %#x: level %d, expired at MaxInt64−1: %v", lvl, m, m>>levelShift, expired(m, math.MaxInt64-1))
		}
	}
	// An expiry at or before 256 ns (a caller's clock near or before 1970)
	// rounds up to 256 ns: the word is never 0, which marks an empty slot.
	for _, exp := range []int64{256, 1, 0, -1, math.MinInt64} {
		m := pack(exp, 0)
		if m == 0 || !expired(m, 256) || expired(m, 255) {
			t.Errorf("pack(%d, 0) = %#x: expired at 256: %v, at 255: %v; want a word not 0, true, false", exp, m, expired(m, 256), expired(m, 255))
		}
	}
}

// TestTiedEvictionsKeepProbesShort: a flood of keys whose counters all tie
// (one fixed window, one level) evicts a tenth of the shard again and
// again; the drops are spread over the table, so the entries stay close to
// their home slots (about 0.4 on average, as for random keys at this
// load). Dropping the first ones in table order instead empties one region
// while the rest fills: here entries then sat 2 to 3 slots from home on
// average and over 100 at worst, and in a full store of a million keys
// thousands, every miss probing as far.
func TestTiedEvictionsKeepProbesShort(t *testing.T) {
	s := New(WithShards(1), WithMaxKeys(2000))
	p := &core.Policy{Name: "p", Algorithm: core.FixedWindow, Limits: []core.Limit{{Count: 1000, Period: time.Hour}}}
	var r core.Result
	for i := range 100_000 {
		s.TakeAt(&r, "flood-"+strconv.Itoa(i), p, 1, 1_700_000_000_000_000_000)
	}
	sh := &s.shards[0]
	mask := len(sh.slots) - 1
	n, disp, worst := 0, 0, 0
	for j, e := range sh.slots {
		if e.h != 0 {
			d := (j - int(e.h)&mask) & mask
			n, disp, worst = n+1, disp+d, max(worst, d)
		}
	}
	if n != sh.n || n < 1800 {
		t.Fatalf("%d entries (n = %d), want 1,800 to 2,000", n, sh.n)
	}
	if avg := float64(disp) / float64(n); avg > 1 || worst > 40 {
		t.Fatalf("entries sit %.2f slots from home on average, %d at worst; want at most 1 and 40 (load %d/%d)", avg, worst, n, len(sh.slots))
	}
}
