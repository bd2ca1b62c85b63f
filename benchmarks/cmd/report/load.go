package main

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
)

// loadBench is the benchmark of the load run (BenchmarkLoad in
// load_test.go): one sample per run, every target's metrics in it, named
// <target>-req/s, <target>-p50-ns, <target>-p99-ns, <target>-x-bare,
// <target>-denied/op, <target>-server-cpu-ns and <target>-client-cpu-ns.
const loadBench = "BenchmarkLoad"

// loadBase is the load run's baseline target.
const loadBase = "bare"

// loadTargets returns the targets of the load run's samples: the baseline
// first, then the others by name.
func loadTargets(samples []sample) []string {
	seen := map[string]bool{}
	var names []string
	for _, s := range samples {
		for unit := range s.metrics {
			if t, ok := strings.CutSuffix(unit, "-req/s"); ok && !seen[t] {
				seen[t] = true
				names = append(names, t)
			}
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		switch {
		case a == b:
			return 0
		case a == loadBase:
			return -1
		case b == loadBase:
			return 1
		}
		return strings.Compare(a, b)
	})
	return names
}

// renderLoad writes the load run's table: per target, the median req/s
// and its min–max over the runs, the median p50 and p99 latencies, the
// share of 429s, the median CPU time per request of server and client, and
// its req/s over bare's in the same run (median and min–max of the runs'
// ratios).
func renderLoad(b *strings.Builder, r *results, versions map[string]string) {
	b.WriteString("## Real server over loopback (examples/server)\n\n")
	b.WriteString("rlkit's demo server, `examples/server`, in its own process, driven over loopback by vegeta (as a library): 16 workers in a closed loop, each with a keep-alive connection kept from block to block, `GET /api/search` without a token (so the limiter counts every request under the one client IP). " +
		"Two server processes per row, from the same YAML with `enabled: false` (bare) and `enabled: true`, the second ones started in the reverse order of the first (with one process per row, an identical server started later served 0.90–1.005× the req/s of one started earlier in eight runs), each row's rounds alternating between its two; \"bare again\" is the bare server again, measured as any other row: what the method cannot tell from nothing. " +
		"The rows are measured interleaved: each server is warmed up with 1,000 untimed requests, then every run sends 160 rounds, each round a block of 250 requests to every server in an order shuffled every round, each block timed on its own (40,000 requests per server per run, spread over the whole run), so that the machine's changing load weighs on every row alike. " +
		"req/s is a row's requests over the wall time of its blocks; p50/p99 the latency of one request; CPU/req the CPU time (user and system) the server process and the client (the benchmark process) used per request during the row's blocks; × bare the row's req/s over bare's in the same run (median and min–max over the runs). " +
		fmt.Sprintf("Client and server share the machine's %d CPUs, so read req/s against bare; the CPU per request says where a difference comes from.\n\n", runtime.NumCPU()))
	samples := r.samples[loadBench]
	targets := loadTargets(samples)
	if len(targets) == 0 {
		b.WriteString("_No rows: this scenario did not run (see the notes at the top)._\n\n")
		return
	}
	sc := scenario{labels: map[string]string{
		loadBase:     "examples/server, `enabled: false` (no limiter)",
		"bare-again": "the same, `enabled: false`, again (what the method cannot tell from nothing)",
	}}
	b.WriteString("| participant | req/s (median) | min–max | p50 | p99 | 429s | server CPU/req | client CPU/req | × bare (median) | × bare, min–max |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	runs := 0
	for _, t := range targets {
		rate := summarize(samples, t+"-req/s")
		runs = max(runs, rate.n)
		cells := []string{label(sc, t, versions), fmtRate(rate.median), span(fmtRate, rate),
			medianOf(fmtNs, summarize(samples, t+"-p50-ns")), medianOf(fmtNs, summarize(samples, t+"-p99-ns")),
			medianOf(fmtPercent, summarize(samples, t+"-denied/op")),
			medianOf(fmtNs, summarize(samples, t+"-server-cpu-ns")), medianOf(fmtNs, summarize(samples, t+"-client-cpu-ns"))}
		if t == loadBase {
			cells = append(cells, "1 (baseline)", "")
		} else if x := summarize(samples, t+"-x-bare"); x.n > 0 {
			cells = append(cells, fmtRatio(x.median), fmtRatio(x.min)+"–"+fmtRatio(x.max))
		} else {
			cells = append(cells, "", "")
		}
		fmt.Fprintf(b, "| %s |\n", strings.Join(cells, " | "))
	}
	fmt.Fprintf(b, "\n%s per row, one per run of the test binary.\n\n", plural(runs, "sample"))
}
