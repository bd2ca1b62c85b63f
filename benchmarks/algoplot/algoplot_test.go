package algoplot

import (
	"bytes"
	"fmt"
	"image/png"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
)

// want is what Default must produce, derived by hand where the algorithm
// makes it simple (see checkDefault) and pinned for the sliding window.
var want = map[algo.Algorithm]struct {
	total      int
	perWindow  []int
	peak       int
	longestGap time.Duration
}{
	// 9 requests before 1.0 s, all admitted; then the first 10 of each
	// window (1.0–1.3 s, 2.0–2.3 s): 19 between 0.7 and 1.3 s, nothing from
	// 1.3 to 2.0 s.
	algo.FixedWindow: {29, []int{9, 10, 10}, 19, 700 * time.Millisecond},
	// The previous window's 9, weighted by the part of it still inside the
	// sliding second, hold room; 15 pass in 0.7–1.7 s, since the estimate
	// spreads the 9 of 0.7–1.0 s over the whole first window.
	algo.SlidingWindow: {27, []int{9, 9, 9}, 15, 133333334},
	// A full bucket of 10 at 0.7 s refilled at 10/s: the request at
	// 2.9667 s is the last of floor(10 + 10×2.2667) = 32; after the burst,
	// one every 0.1 s.
	algo.TokenBucket: {32, []int{9, 13, 10}, 19, 100 * time.Millisecond},
	algo.GCRA:        {32, []int{9, 13, 10}, 19, 100 * time.Millisecond},
}

// checkDefault checks Simulate(Default()) against want and against
// invariants that hold for any limiter.
func checkDefault(r Result) error {
	if r.OfferedTotal != 69 { // 0.7 s + k/30 s < 3 s for k = 0…68
		return fmt.Errorf("offered %d requests, want 69", r.OfferedTotal)
	}
	if len(r.Offered) != 30 || r.Offered[6] != 0 || r.Offered[7] != 3 || r.Offered[29] != 3 {
		return fmt.Errorf("offered per bucket %v, want 7 zeros then 23 threes", r.Offered)
	}
	if len(r.Series) != len(Algorithms) {
		return fmt.Errorf("%d series, want %d", len(r.Series), len(Algorithms))
	}
	for i, s := range r.Series {
		if s.Algorithm != Algorithms[i] {
			return fmt.Errorf("series %d is %v, want %v", i, s.Algorithm, Algorithms[i])
		}
		w := want[s.Algorithm]
		if s.Total != w.total || !slices.Equal(s.PerWindow, w.perWindow) || s.PeakPeriod != w.peak || s.LongestGap != w.longestGap {
			return fmt.Errorf("%v: admitted %d (per window %v), at most %d within 1 s, longest gap %v; want %d (%v), %d, %v",
				s.Algorithm, s.Total, s.PerWindow, s.PeakPeriod, s.LongestGap, w.total, w.perWindow, w.peak, w.longestGap)
		}
		sum := 0
		for b, n := range s.Admitted {
			if n > r.Offered[b] {
				return fmt.Errorf("%v: bucket %d admitted %d of %d offered", s.Algorithm, b, n, r.Offered[b])
			}
			sum += n
		}
		if sum != s.Total {
			return fmt.Errorf("%v: buckets sum to %d, total is %d", s.Algorithm, sum, s.Total)
		}
		// The window algorithms never admit more than the limit within one
		// aligned window (the sliding window's current count is part of
		// what it checks); the bucket algorithms may, by their burst.
		if s.Algorithm == algo.FixedWindow || s.Algorithm == algo.SlidingWindow {
			for wi, n := range s.PerWindow {
				if n > int(r.Limit.Count) {
					return fmt.Errorf("%v: window %d admitted %d, over the limit %d", s.Algorithm, wi, n, r.Limit.Count)
				}
			}
		}
	}
	return nil
}

func TestDefault(t *testing.T) {
	if err := checkDefault(Simulate(Default())); err != nil {
		t.Fatal(err)
	}
}

// TestWritePNG checks that the picture is a PNG of the expected size and
// that drawing it twice gives the same bytes, so a regenerated
// algorithms.png changes only when the data or the drawing code does.
func TestWritePNG(t *testing.T) {
	r := Simulate(Default())
	dir := t.TempDir()
	var files [2][]byte
	for i := range files {
		path := filepath.Join(dir, fmt.Sprintf("a%d.png", i))
		if err := r.WritePNG(path); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		files[i] = b
	}
	img, err := png.Decode(bytes.NewReader(files[0]))
	if err != nil {
		t.Fatal(err)
	}
	if b := img.Bounds(); b.Dx() < 600 || b.Dy() < 400 {
		t.Errorf("picture is %v, want at least 600×400", b)
	}
	if !bytes.Equal(files[0], files[1]) {
		t.Error("two drawings of the same data differ")
	}
}

// BenchmarkSimulate measures the simulation behind algorithms.png, and
// checks it as TestDefault does, so that CI's benchmark smoke run (which
// runs no tests) still catches a generator that drifted.
func BenchmarkSimulate(b *testing.B) {
	var r Result
	for b.Loop() {
		r = Simulate(Default())
	}
	if err := checkDefault(r); err != nil {
		b.Fatal(err)
	}
}
