package main

import (
	"fmt"
	"strings"
	"testing"
)

// TestRenderLoad renders the load run's table from three runs of
// BenchmarkLoad: per target the median req/s and its range, the median
// latencies and 429s, and the median and range of the runs' own ratios to
// bare (not the ratio of the medians).
func TestRenderLoad(t *testing.T) {
	var in strings.Builder
	for _, run := range []struct {
		bare, memory, redis float64 // req/s
		x                   float64 // rlkit-memory-x-bare
		bareCPU             float64 // bare-server-cpu-ns
	}{
		{20000, 19400, 12000, 0.97, 48000},
		{18000, 17500, 11000, 0.972, 50000},
		{22000, 20900, 13000, 0.95, 47000},
	} {
		// Metrics in the order go test prints them: sorted by unit.
		fmt.Fprintf(&in, "BenchmarkLoad-2 \t 1\t 15000000000 ns/op\t 60000 bare-client-cpu-ns\t 900000 bare-p50-ns\t 3000000 bare-p99-ns\t %.0f bare-req/s\t %.0f bare-server-cpu-ns"+
			"\t 0.9950 rlkit-memory-denying-denied/op\t 800000 rlkit-memory-denying-p50-ns\t 2500000 rlkit-memory-denying-p99-ns\t 25000 rlkit-memory-denying-req/s\t 1.200 rlkit-memory-denying-x-bare"+
			"\t 61000 rlkit-memory-client-cpu-ns\t 950000 rlkit-memory-p50-ns\t 3200000 rlkit-memory-p99-ns\t %.0f rlkit-memory-req/s\t 51000 rlkit-memory-server-cpu-ns\t %.4f rlkit-memory-x-bare"+
			"\t 1500000 rlkit-redis-p50-ns\t 5000000 rlkit-redis-p99-ns\t %.0f rlkit-redis-req/s\t %.4f rlkit-redis-x-bare\t 99000000 B/op\t 1000000 allocs/op\n",
			run.bare, run.bareCPU, run.memory, run.x, run.redis, run.redis/run.bare)
	}
	r := newResults()
	if err := r.parse(strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderLoad(&b, r, nil)
	out := b.String()
	wantIn(t, "load table", out,
		"## Real server over loopback (examples/server)",
		"| examples/server, `enabled: false` (no limiter) | 20,000 | 18,000–22,000 | 900 µs | 3 ms |  | 48 µs | 60 µs | 1 (baseline) |  |\n"+
			"| **rlkit** on, memory store | 19,400 | 17,500–20,900 | 950 µs | 3.2 ms |  | 51 µs | 61 µs | 0.97× | 0.95×–0.97× |\n"+
			"| rlkit on, limit reached (nearly every answer a 429) | 25,000 | 25,000 | 800 µs | 2.5 ms | 99.5% |  |  | 1.20× | 1.20×–1.20× |\n"+
			// Redis per run: 0.6, 0.611, 0.591.
			"| rlkit on, Redis store | 12,000 | 11,000–13,000 | 1.5 ms | 5 ms |  |  |  | 0.60× | 0.59×–0.61× |\n",
		"3 samples per row",
	)

	// Without Redis: no Redis row. A target of another name is listed
	// under its name, after the baseline whatever its name; the others in
	// the order of their names.
	r = newResults()
	if err := r.parse(strings.NewReader("BenchmarkLoad-2 \t 1\t 1000 ns/op\t 21000 alpha-req/s\t 1.05 alpha-x-bare\t 19800 bare-again-req/s\t 0.99 bare-again-x-bare\t 20000 bare-req/s\t 19000 rlkit-memory-req/s\t 0.95 rlkit-memory-x-bare\n")); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	renderLoad(&b, r, nil)
	if want := "| examples/server, `enabled: false` (no limiter) | 20,000 | 20,000 |  |  |  |  |  | 1 (baseline) |  |\n" +
		"| `alpha` | 21,000 | 21,000 |  |  |  |  |  | 1.05× | 1.05×–1.05× |\n" +
		"| the same, `enabled: false`, again (what the method cannot tell from nothing) | 19,800 | 19,800 |  |  |  |  |  | 0.99× | 0.99×–0.99× |\n" +
		"| **rlkit** on, memory store | 19,000 | 19,000 |  |  |  |  |  | 0.95× | 0.95×–0.95× |\n"; strings.Contains(b.String(), "Redis store") || !strings.Contains(b.String(), want) {
		t.Errorf("load table without Redis lacks %q:\n%s", want, b.String())
	}
	// Nothing ran.
	b.Reset()
	renderLoad(&b, newResults(), nil)
	if !strings.Contains(b.String(), "_No rows: this scenario did not run") {
		t.Errorf("empty load table = %q", b.String())
	}
}
