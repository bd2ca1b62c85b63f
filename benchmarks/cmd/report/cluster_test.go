package main

import (
	"fmt"
	"strings"
	"testing"
)

// clusterLine is one line of BenchmarkClusterScale's output, its metrics
// in the order go test prints them (ns/op, the others by unit, then B/op
// and allocs/op).
func clusterLine(masters int, busiest, clientNs, cpus, perCall, rate, machine, p50, p99, serverNs float64) string {
	return fmt.Sprintf("BenchmarkClusterScale/masters-%d-2 \t  210462\t      5610 ns/op\t %g busiest-server-cpus\t %g client-cpu-ns\t %g cpus\t %g dec/call\t %g dec/s\t %g machine-cpus\t %g p50-ns\t %g p99-ns\t %g server-cpu-ns\t     184 B/op\t       5 allocs/op\n",
		masters, busiest, clientNs, cpus, perCall, rate, machine, p50, p99, serverNs)
}

// TestRenderClusterScale renders the Redis Cluster section from three runs
// of BenchmarkClusterScale: per cluster size the median decisions/s and
// its range, the median and range of the runs' own ratios to one master
// (not the ratio of the medians), latencies, decisions per call, CPU per
// decision and CPUs busy; then the verdict on what bounds each size and
// the CPU per decision of the two.
func TestRenderClusterScale(t *testing.T) {
	var in strings.Builder
	in.WriteString("goos: linux\ngoarch: amd64\npkg: github.com/rlkit/rlkit/benchmarks\n")
	for _, run := range []struct{ one, three float64 }{
		{180000, 190000}, // 1.056
		{150000, 140000}, // 0.933
		{170000, 200000}, // 1.176
	} {
		in.WriteString(clusterLine(1, 0.73, 4188, 1.47, 73.81, run.one, 1.999, 1382785, 3570771, 4086))
		in.WriteString(clusterLine(3, 0.33, 4266, 1.806, 19.84, run.three, 2.003, 1233946, 3800446, 5168))
	}
	r := newResults()
	if err := r.parse(strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderClusterScale(&b, r, 2)
	wantIn(t, "cluster section", b.String(),
		"## Redis Cluster scale-out\n\n",
		"Client and servers share the machine's 2 CPUs.",
		"| masters | decisions/s (median) | min–max | × 1 master (median) | × 1 master, min–max | p50 | p99 | decisions per call | server CPU/decision | client CPU/decision | busiest server (CPUs) | client + servers (CPUs) | whole machine (CPUs) |\n"+
			"|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n"+
			"| 1 | 170,000 | 150,000–180,000 | 1 (baseline) |  | 1.38 ms | 3.57 ms | 73.8 | 4.09 µs | 4.19 µs | 0.73 | 1.47 | 2.00 |\n"+
			"| 3 | 190,000 | 140,000–200,000 | 1.06× | 0.93×–1.18× | 1.23 ms | 3.8 ms | 19.8 | 5.17 µs | 4.27 µs | 0.33 | 1.81 | 2.00 |\n",
		"3 samples per row",
		"- 1 master: the machine: 2.00 of its 2 CPUs were busy, 1.47 of them with this benchmark's client and servers, the rest with other processes; the busiest master used 0.73 of a core. Per decision the servers spent 4.09 µs of CPU and the client 4.19 µs (50.6% of the two).\n",
		"- 3 masters: the machine: 2.00 of its 2 CPUs were busy, 1.81 of them with this benchmark's client and servers, the rest with other processes; the busiest master used 0.33 of a core. Per decision the servers spent 5.17 µs of CPU and the client 4.27 µs (45.2% of the two).\n",
		"Per decision, client and servers together spent 8.27 µs of CPU with 1 master and 9.43 µs with 3 masters (1.14×).",
	)
}

// TestClusterBound checks the other verdicts: a full master, neither a
// master nor the machine full, no CPU figures; the rows in order of their
// masters whatever the order of the output; and the ratio of the medians
// when the rows have not as many samples.
func TestClusterBound(t *testing.T) {
	// The largest first: the rows go by number of masters, one master the
	// baseline.
	in := clusterLine(3, 0.4, 4000, 1.1, 30, 231000, 1.2, 1e6, 3e6, 5000) +
		clusterLine(1, 0.97, 3000, 1.6, 120, 200000, 1.7, 1e6, 3e6, 4000) +
		clusterLine(1, 0.95, 3000, 1.6, 120, 220000, 1.7, 1e6, 3e6, 4000) +
		"BenchmarkClusterScale/masters-5-2 \t 1000\t 5000 ns/op\t 100000 dec/s\n"
	r := newResults()
	if err := r.parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderClusterScale(&b, r, 2)
	wantIn(t, "cluster verdicts", b.String(),
		"| × 1 master (median) |",
		"|--:|\n| 1 | 210,000 | 200,000–220,000 | 1 (baseline) |",
		// 231,000 over the median of 200,000 and 220,000.
		"| 3 | 231,000 | 231,000 | 1.10× | 1.10×–1.10× |",
		"| 5 | 100,000 | 100,000 | 0.48× | 0.48×–0.48× |  |  |  |  |  |  |  |  |\n",
		"- 1 master: a server: the busiest master used 0.96 of a core, all that its command thread can. Per decision the servers spent 4 µs of CPU and the client 3 µs (42.9% of the two).\n",
		"- 3 masters: neither a server (the busiest master used 0.40 of a core) nor the machine (1.20 of its 2 CPUs busy, 1.10 with this benchmark): the decisions waited on their calls in flight.",
		"- 5 masters: not measured (CPU times are read on Linux only).\n",
	)
	if strings.Contains(b.String(), "Per decision, client and servers together") {
		t.Errorf("the CPU per decision of the largest cluster is not measured, yet compared:\n%s", b.String())
	}

	b.Reset()
	renderClusterScale(&b, newResults(), 2)
	if !strings.Contains(b.String(), "_No rows: this scenario did not run") {
		t.Errorf("empty cluster section = %q", b.String())
	}
}
