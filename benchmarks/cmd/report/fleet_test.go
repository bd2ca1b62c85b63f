package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fleetRow is one system's numbers at one number of goroutines in one run.
type fleetRow struct {
	rate, p50, p99, over, windows, failed float64
}

// fleetOutput prints runs of BenchmarkFleet as go test does (metrics
// sorted by unit; over-bound for rlkit only), systems in the benchmark's
// order, each at 1 and 64 goroutines, and a row of another benchmark.
func fleetOutput(runs []map[string][2]fleetRow) string {
	var b strings.Builder
	for _, run := range runs {
		for _, sys := range []string{"gubernator-batching", "gubernator-global", "rlkit-exact", "rlkit-lease"} {
			rows, ok := run[sys]
			if !ok {
				continue
			}
			for i, g := range []int{1, 64} {
				r := rows[i]
				bound := ""
				if strings.HasPrefix(sys, "rlkit") {
					bound = "\t         0 over-bound"
				}
				fmt.Fprintf(&b, "BenchmarkFleet/%s/g%d-2 \t    3207\t     96699 ns/op\t %.0f dec/s/node\t %g failed/op\t %g over-adm%s\t %.0f p50-ns\t %.0f p99-ns\t %g windows\t  9000 B/op\t 120 allocs/op\n",
					sys, g, r.rate, r.failed, r.over, bound, r.p50, r.p99, r.windows)
			}
		}
	}
	b.WriteString("BenchmarkRedis/rlkit/gcra/par64-2 \t 1000 \t 20000 ns/op\t 5 dec/s/node\n")
	return b.String()
}

func TestFleet(t *testing.T) {
	row := func(rate, p50, p99, over float64) fleetRow {
		return fleetRow{rate: rate, p50: p50, p99: p99, over: over, windows: 16}
	}
	var runs []map[string][2]fleetRow
	for _, run := range []struct {
		lease, exact, global, batching float64 // dec/s/node at 64 goroutines
		globalOver                     float64
		batchingFailed                 float64
	}{
		{90000, 70000, 3400, 4400, 60, 0},
		{100000, 75000, 3500, 4500, 77, 0.001},
		{80000, 65000, 3300, 4300, 70, 0},
	} {
		runs = append(runs, map[string][2]fleetRow{
			"rlkit-lease":       {row(40000, 15000, 30000, 0), row(run.lease, 200000, 1000000, 0)},
			"rlkit-exact":       {row(35000, 14000, 33000, 0), row(run.exact, 220000, 950000, 0)},
			"gubernator-global": {row(2900, 67000, 1200000, 47), row(run.global, 4000000, 20000000, run.globalOver)},
			"gubernator-batching": {row(256, 1670000, 3800000, 0),
				{rate: run.batching, p50: 3700000, p99: 14000000, windows: 16, failed: run.batchingFailed}},
		})
	}
	r := newResults()
	if err := r.parse(strings.NewReader(fleetOutput(runs))); err != nil {
		t.Fatal(err)
	}
	fl := r.fleet()
	if got, want := strings.Join(fl.systems, " "), "rlkit-lease rlkit-exact gubernator-global gubernator-batching"; got != want {
		t.Errorf("systems %q, want %q (fleetLabels' order)", got, want)
	}
	if fmt.Sprint(fl.goroutines) != "[1 64]" {
		t.Errorf("goroutines %v, want [1 64]", fl.goroutines)
	}
	if st := fl.stat("rlkit-lease", 64, "dec/s/node"); st.n != 3 || st.median != 90000 || st.min != 80000 || st.max != 100000 {
		t.Errorf("rlkit-lease at 64: %+v, want median 90000 over 80000–100000", st)
	}
	if len(fl.missing) != 0 {
		t.Errorf("missing %v, want none", fl.missing)
	}

	var b strings.Builder
	renderFleet(&b, fl, "fleet.png", map[string]string{gubernatorModule: "v2.13.0"})
	out := b.String()
	wantIn(t, "fleet section", out,
		"## Fleet: rlkit and gubernator on three nodes",
		"rlkit next to gubernator v2.13.0, a distributed rate-limit service",
		"A **node** is one instance of the limiter",
		"**Over-admission** is what a hot key was let through beyond its limit in one window",
		"![decisions per second per node against goroutines](fleet.png)",
		"| system | goroutines | decisions/s per node (median) | min–max | p50 | p99 | over-admission (most) | stated bound | hot-key windows | failed calls (worst run) |\n",
		// rlkit first, each system's goroutines in order.
		"| rlkit, `consistency: lease` | 1 | 40,000 | 40,000 | 15 µs | 30 µs | 0 | 0 | 16 | 0 |\n"+
			"| rlkit, `consistency: lease` | 64 | 90,000 | 80,000–100,000 | 200 µs | 1 ms | 0 | 0 | 16 | 0 |\n"+
			"| rlkit, `consistency: exact` | 1 | 35,000 | 35,000 | 14 µs | 33 µs | 0 | 0 | 16 | 0 |\n",
		// gubernator: the worst run's over-admission, no bound stated.
		"| gubernator v2.13.0, GLOBAL | 1 | 2900 | 2900 | 67 µs | 1.2 ms | 47 | none stated | 16 | 0 |\n"+
			"| gubernator v2.13.0, GLOBAL | 64 | 3400 | 3300–3500 | 4 ms | 20 ms | 77 | none stated | 16 | 0 |\n",
		// The worst run's failed calls.
		"| gubernator v2.13.0, BATCHING | 64 | 4400 | 4300–4500 | 3.7 ms | 14 ms | 0 | none stated | 16 | 0.1% |\n",
		"Medians and min–max over 3 runs",
		// 90,000 ÷ 3,400 = 26.5, ranges apart; latencies 200 µs ÷ 4 ms,
		// 1 ms ÷ 20 ms. 70,000 ÷ 4,400 = 15.9.
		"| rlkit, consistency: lease | gubernator v2.13.0, GLOBAL | 26.5× | rlkit more | 0.05× | 0.05× |\n",
		"| rlkit, consistency: exact | gubernator v2.13.0, BATCHING | 15.9× | rlkit more | 0.06× | 0.07× |\n",
	)
	if strings.Contains(out, "has no rows") {
		t.Errorf("every system ran, yet the section lists one without rows:\n%s", out)
	}

	png := filepath.Join(t.TempDir(), "fleet.png")
	if err := writeFleetPNG(png, fl, nil); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(png)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cfg, err := pngDecodeConfig(f)
	if err != nil || cfg.Width < 600 || cfg.Height < 300 {
		t.Errorf("picture: %+v, %v; want a PNG of at least 600×300", cfg, err)
	}
}

// TestFleetMissing: a system that did not run has no rows and is named
// with the reason its skip gave (or a pointer to one when go test printed
// none); with fewer than minRuns runs the comparison says so; the lease
// comparison is gone with its system.
func TestFleetMissing(t *testing.T) {
	one := map[string][2]fleetRow{
		"rlkit-exact":         {{rate: 35000, p50: 14000, p99: 33000, windows: 8}, {rate: 70000, p50: 220000, p99: 950000, windows: 8}},
		"gubernator-global":   {{rate: 2900, p50: 67000, p99: 1200000, over: 47, windows: 8}, {rate: 3400, p50: 4000000, p99: 20000000, over: 77, windows: 8}},
		"gubernator-batching": {{rate: 256, p50: 1670000, p99: 3800000, windows: 8}, {rate: 4400, p50: 3700000, p99: 14000000, windows: 8}},
	}
	in := fleetOutput([]map[string][2]fleetRow{one}) +
		"--- SKIP: BenchmarkFleet/rlkit-lease\n    fleet_test.go:176: consistency: lease is refused by this rlkit: unknown field\n"
	r := newResults()
	if err := r.parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	fl := r.fleet()
	if why := fl.missing["rlkit-lease"]; why != "consistency: lease is refused by this rlkit: unknown field" || len(fl.missing) != 1 {
		t.Errorf("missing %q, want rlkit-lease with its reason", fl.missing)
	}
	var b strings.Builder
	renderFleet(&b, fl, "fleet.png", nil)
	out := b.String()
	wantIn(t, "fleet section without lease", out,
		"rlkit, `consistency: lease` has no rows: consistency: lease is refused by this rlkit: unknown field.\n",
		"| rlkit, consistency: exact | gubernator, BATCHING | 15.9× | too few runs | 0.06× | 0.07× |\n",
		"Medians and min–max over 1 run;",
	)
	if strings.Contains(out, "| rlkit, `consistency: lease` |") || strings.Contains(out, "| rlkit, consistency: lease |") {
		t.Errorf("rlkit-lease did not run, yet has a row:\n%s", out)
	}

	// Without the skip's message (go test prints none without -v).
	r = newResults()
	if err := r.parse(strings.NewReader(fleetOutput([]map[string][2]fleetRow{one}))); err != nil {
		t.Fatal(err)
	}
	b.Reset()
	renderFleet(&b, r.fleet(), "fleet.png", nil)
	wantIn(t, "fleet section, lease silent", b.String(),
		"rlkit, `consistency: lease` has no rows: skipped or failed (see the notes at the top; `go test -run '^$' -bench BenchmarkFleet/rlkit-lease -v` says why).\n")

	// Nothing ran.
	b.Reset()
	fl = newResults().fleet()
	renderFleet(&b, fl, "fleet.png", nil)
	if len(fl.systems) != 0 || !strings.Contains(b.String(), "_No rows: the fleet benchmark did not run") || strings.Contains(b.String(), "![") {
		t.Errorf("empty fleet: %+v, %q", fl, b.String())
	}
}
