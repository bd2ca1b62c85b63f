package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// clusterPrefix names the rows of the Redis Cluster table
// (BenchmarkClusterScale in cluster_test.go), one per cluster size:
// masters-<n>, with the metrics dec/s, p50-ns, p99-ns, dec/call,
// server-cpu-ns, client-cpu-ns, busiest-server-cpus, cpus and
// machine-cpus.
const clusterPrefix = "BenchmarkClusterScale/masters-"

// Thresholds of the verdict on what bounds a row: a redis-server busy
// this share of a core or more is full (it runs commands on one thread),
// as is a machine whose CPUs are busy this share of their count or more.
const (
	serverFull  = 0.9
	machineFull = 0.9
)

// A clusterRow is the samples of one cluster size.
type clusterRow struct {
	masters int
	samples []sample
}

// clusterRows returns the rows of the Redis Cluster table by number of
// masters.
func clusterRows(r *results) []clusterRow {
	var rows []clusterRow
	for _, name := range r.order {
		rest, ok := strings.CutPrefix(name, clusterPrefix)
		if !ok {
			continue
		}
		m, err := strconv.Atoi(rest)
		if err != nil || m < 1 {
			continue
		}
		rows = append(rows, clusterRow{masters: m, samples: r.samples[name]})
	}
	slices.SortFunc(rows, func(a, b clusterRow) int { return a.masters - b.masters })
	return rows
}

// clusterRatios returns the decisions/s of row over base's, run by run
// (the i-th sample of each: every run of the test binary measures every
// size once), or, when the rows have not as many samples, the ratio of
// their medians alone.
func clusterRatios(row, base clusterRow) stat {
	if len(row.samples) != len(base.samples) {
		q := ratio(summarize(row.samples, "dec/s").median, summarize(base.samples, "dec/s").median)
		return stat{n: 1, median: q, min: q, max: q}
	}
	var per []sample
	for i, s := range row.samples {
		a, ok1 := s.metrics["dec/s"]
		b, ok2 := base.samples[i].metrics["dec/s"]
		if ok1 && ok2 {
			per = append(per, sample{metrics: map[string]float64{"x": ratio(a, b)}})
		}
	}
	return summarize(per, "x")
}

// renderClusterScale writes the Redis Cluster section: per cluster size,
// decisions/s (median, min–max, and over the smallest cluster's in the
// same run), latencies, decisions per script call, CPU per decision of
// servers and client, and the CPUs busy; then what bounds each size on
// the machine of the run (cpus CPUs).
func renderClusterScale(b *strings.Builder, r *results, cpus int) {
	b.WriteString("## Redis Cluster scale-out\n\n")
	b.WriteString("rlkit's decisions on a Redis Cluster of one master (all 16,384 slots) and of three (the slots split evenly), each master a redis-server process on loopback that the benchmark starts (cluster mode, no persistence, no replicas). " +
		"`core.Limiter.Decide` over `redisstore.Store` with its defaults (exact counting, batches of up to 128 decisions per master; deny cache off, timeout 5 s) over a go-redis `ClusterClient` (`ContextTimeoutEnabled`, a pool of 256 per master), from 256 goroutines, on 100,000 identities whose keys fall in slots all over the cluster, each given one decision before any is measured; a limit no run reaches (2,000,000,000 per hour), so every decision admits and writes. " +
		"Decisions/s is the decisions over the wall time; × 1 master divides it by the one-master cluster's of the same run (median and min–max of the runs' ratios). " +
		"Decisions per call is how many decisions a script call to a master carried on average (INFO commandstats). " +
		"CPU/decision is the CPU time (user and system) of all the masters and of the client (the benchmark process) per decision; " +
		"busiest server is the CPU time of the busiest master over the wall time (1 is a whole core, all that a redis-server's single command thread can use); " +
		"client + servers, and the whole machine (/proc/stat: any process's), are CPUs busy over the wall time. " +
		fmt.Sprintf("Client and servers share the machine's %d CPUs.\n\n", cpus))
	rows := clusterRows(r)
	if len(rows) == 0 {
		b.WriteString("_No rows: this scenario did not run (see the notes at the top)._\n\n")
		return
	}
	base := rows[0]
	fmt.Fprintf(b, "| masters | decisions/s (median) | min–max | × %s (median) | × %s, min–max | p50 | p99 | decisions per call | server CPU/decision | client CPU/decision | busiest server (CPUs) | client + servers (CPUs) | whole machine (CPUs) |\n",
		plural(base.masters, "master"), plural(base.masters, "master"))
	b.WriteString("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	runs := 0
	for _, row := range rows {
		rate := summarize(row.samples, "dec/s")
		if rate.n == 0 {
			continue
		}
		runs = max(runs, rate.n)
		x, xSpan := "1 (baseline)", ""
		if row.masters != base.masters {
			q := clusterRatios(row, base)
			x, xSpan = fmtRatio(q.median), fmtRatio(q.min)+"–"+fmtRatio(q.max)
		}
		fmt.Fprintf(b, "| %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			row.masters, fmtRate(rate.median), span(fmtRate, rate), x, xSpan,
			medianOf(fmtNs, summarize(row.samples, "p50-ns")), medianOf(fmtNs, summarize(row.samples, "p99-ns")),
			medianOf(fmtPerCall, summarize(row.samples, "dec/call")),
			medianOf(fmtNs, summarize(row.samples, "server-cpu-ns")), medianOf(fmtNs, summarize(row.samples, "client-cpu-ns")),
			medianOf(fmtCPUs, summarize(row.samples, "busiest-server-cpus")), medianOf(fmtCPUs, summarize(row.samples, "cpus")),
			medianOf(fmtCPUs, summarize(row.samples, "machine-cpus")))
	}
	fmt.Fprintf(b, "\n%s per row, one per run of the test binary.\n\n", plural(runs, "sample"))
	b.WriteString("What bounds it on the machine of the run (medians over the runs):\n\n")
	for _, row := range rows {
		if summarize(row.samples, "dec/s").n == 0 {
			continue
		}
		fmt.Fprintf(b, "- %s: %s\n", plural(row.masters, "master"), clusterBound(row, cpus))
	}
	b.WriteString("\n")
	if len(rows) > 1 {
		first, last := rows[0], rows[len(rows)-1]
		c0, c1 := clusterCPU(first), clusterCPU(last)
		if c0 > 0 && c1 > 0 {
			fmt.Fprintf(b, "Per decision, client and servers together spent %s of CPU with %s and %s with %s (%s). "+
				"Where the machine's CPUs are full, decisions/s follows the inverse of that, whatever the number of masters: more masters raise it only where one master is the limit and the others get CPUs of their own (cores or machines of their own, which the machine of the run cannot give them).\n\n",
				fmtNs(c0), plural(first.masters, "master"), fmtNs(c1), plural(last.masters, "master"), fmtRatio(c1/c0))
		}
	}
}

// clusterCPU returns the median CPU time of client and servers per
// decision of row, 0 when it was not measured.
func clusterCPU(row clusterRow) float64 {
	srv, cli := summarize(row.samples, "server-cpu-ns"), summarize(row.samples, "client-cpu-ns")
	if srv.n == 0 || cli.n == 0 {
		return 0
	}
	return srv.median + cli.median
}

// clusterBound says what bounds row: a master whose command thread is
// full, the machine's CPUs, or neither (the decisions waited on their
// calls in flight), with the figures behind the verdict and where the
// CPU time per decision went.
func clusterBound(row clusterRow, cpus int) string {
	busiest := summarize(row.samples, "busiest-server-cpus")
	ours := summarize(row.samples, "cpus")
	machine := summarize(row.samples, "machine-cpus")
	if busiest.n == 0 || ours.n == 0 {
		return "not measured (CPU times are read on Linux only)."
	}
	var s string
	switch {
	case busiest.median >= serverFull:
		s = fmt.Sprintf("a server: the busiest master used %s of a core, all that its command thread can.", fmtCPUs(busiest.median))
	case machine.n > 0 && machine.median >= machineFull*float64(cpus):
		s = fmt.Sprintf("the machine: %s of its %d CPUs were busy, %s of them with this benchmark's client and servers, the rest with other processes; the busiest master used %s of a core.",
			fmtCPUs(machine.median), cpus, fmtCPUs(ours.median), fmtCPUs(busiest.median))
	case machine.n > 0:
		s = fmt.Sprintf("neither a server (the busiest master used %s of a core) nor the machine (%s of its %d CPUs busy, %s with this benchmark): the decisions waited on their calls in flight.",
			fmtCPUs(busiest.median), fmtCPUs(machine.median), cpus, fmtCPUs(ours.median))
	default:
		s = fmt.Sprintf("the busiest master used %s of a core, client and servers %s of the machine's %d CPUs.", fmtCPUs(busiest.median), fmtCPUs(ours.median), cpus)
	}
	srv, cli := summarize(row.samples, "server-cpu-ns"), summarize(row.samples, "client-cpu-ns")
	if srv.n > 0 && cli.n > 0 {
		s += fmt.Sprintf(" Per decision the servers spent %s of CPU and the client %s (%s of the two).", fmtNs(srv.median), fmtNs(cli.median), fmtPercent(cli.median/(srv.median+cli.median)))
	}
	return s
}

// fmtCPUs formats a number of CPUs busy: "1.47".
func fmtCPUs(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) }

// fmtPerCall formats decisions per call: "73.8".
func fmtPerCall(v float64) string { return trim(v, 1) }
