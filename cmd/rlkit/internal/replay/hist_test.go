package replay

import "testing"

// TestHistRecommendations checks the figures of a distribution worked out
// by hand: key-window counts 100×1, 10×5, 50, 3000 and 4000 (7,200 units).
func TestHistRecommendations(t *testing.T) {
	var h hist
	for range 100 {
		h.add(1)
	}
	for range 10 {
		h.add(5)
	}
	for _, v := range []int64{50, 3000, 4000} {
		h.add(v)
	}
	if h.cnt != 113 || h.tot != 7200 || h.max != 4000 {
		t.Fatalf("cnt %d, tot %d, max %d; want 113, 7200, 4000", h.cnt, h.tot, h.max)
	}
	// Nearest rank: p50 is the 57th count (1), p95 the 108th (5), p99 the
	// 112th (3000, in the bucket 2976–3007: its top), p99.9 the 113th
	// (4000, the largest: itself).
	for _, c := range []struct {
		q    float64
		want int64
	}{{0.5, 1}, {0.95, 5}, {0.99, 3007}, {0.999, 4000}, {1, 4000}} {
		if got := h.quantile(c.q); got != c.want {
			t.Errorf("quantile(%v) = %d, want %d", c.q, got, c.want)
		}
	}
	// Σ max(0, c − L).
	for _, c := range []struct{ limit, want int64 }{
		{0, 7200},
		{1, 40 + 49 + 2999 + 3999}, // the 1s refuse nothing
		{5, 45 + 2995 + 3995},
		{50, 2950 + 3950},
		{3928, 72},
		{4000, 0},
		// 2990 falls within 3000's bucket (2976–3007): an upper bound,
		// min(1×(3007−2990), 3000−2976) = 17 for the 10 refused, with
		// 4000's 1010.
		{2990, 17 + 1010},
	} {
		if got := h.over(c.limit); got != c.want {
			t.Errorf("over(%d) = %d, want %d", c.limit, got, c.want)
		}
	}
	// The smallest limit refusing at most a share of the 7,200 units.
	for _, c := range []struct {
		share          float64
		limit, refused int64
	}{
		{0.01, 3928, 72},  // 72 units: 4000 − L ≤ 72
		{0.5, 1700, 3600}, // 3600: (4000 − L) + (3000 − L) ≤ 3600
		{0.99, 1, 7087},   // 7128: a limit of 1 refuses 40 + 49 + 2999 + 3999
		{0.9, 260, 6480},  // 6480: 7000 − 2L ≤ 6480
	} {
		limit, refused := h.limitFor(c.share)
		if limit != c.limit || refused != c.refused {
			t.Errorf("limitFor(%v) = %d refusing %d, want %d refusing %d", c.share, limit, refused, c.limit, c.refused)
		}
	}
}

// TestHistBuckets: above 1,024 a bucket spans less than 1/64 of its
// values, and every value falls in its own bucket's bounds.
func TestHistBuckets(t *testing.T) {
	for _, v := range []int64{1024, 1025, 1055, 1056, 2047, 2048, 3000, 1 << 20, 1<<20 + 12345, 1<<40 + 7, 1<<62 - 1} {
		lo, hi := bounds(bucket(v))
		if v < lo || v > hi || float64(hi-lo+1) > float64(lo)/64 {
			t.Errorf("value %d: bucket %d–%d", v, lo, hi)
		}
	}
	if lo, hi := bounds(bucket(1024)); lo != 1024 || hi != 1039 {
		t.Errorf("1024's bucket %d–%d, want 1024–1039", lo, hi)
	}
}
