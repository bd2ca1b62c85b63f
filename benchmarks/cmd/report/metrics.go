package main

import (
	"fmt"
	"strings"
)

// metricsPrefix names the rows of the metrics table (BenchmarkMetrics in
// metrics_test.go).
const metricsPrefix = "BenchmarkMetrics/"

// metricsRows label the rows of the metrics table, in its order; decide
// rows get the difference to decide-none.
var metricsRows = []struct{ name, label string }{
	{"decide-none", "decision, no observer (baseline)"},
	{"decide-noop", "decision, an observer that does nothing (what core adds for any observer)"},
	{"decide-prom", "decision, **`metrics/prom`** observer"},
	{"decide-otel", "decision, `metrics/otel` observer (OpenTelemetry SDK)"},
	{"decide-none-timed", "decision on a store whose calls core times (as Redis's: one call in 16, the default), no observer"},
	{"decide-noop-timed", "the same, an observer that does nothing (core's two clock reads, one call in 16)"},
	{"decide-prom-timed", "the same, **`metrics/prom`** observer"},
	{"observe-prom", "`metrics/prom` `Observe` alone"},
	{"observe-otel", "`metrics/otel` `Observe` alone (OpenTelemetry SDK)"},
}

// promBudgetNs is the Prometheus observer's budget: it adds at most this
// much to a decision, and no allocation.
const promBudgetNs = 50

// renderMetrics writes the metrics overhead table: per row, the median
// time, its min–max and the median allocs; for a decision with an
// observer, what the observer adds to a decision, from the interleaved
// row (its <variant>-added-ns metrics: median and min–max over the runs);
// then the Prometheus observer against its budget.
func renderMetrics(b *strings.Builder, r *results) {
	b.WriteString("## Metrics overhead\n\n")
	b.WriteString("What the metrics packages add to a decision: `core.Limiter.Decide` on one existing key, rule `search`, a quota no run reaches, the memory store with the system clock, one goroutine; then the observers' `Observe` alone on the event such a decision makes (allowed, no latency: the memory store's calls are not timed, see `store.LocalStore`). " +
		"\"Added\" comes from a run of the seven decision limiters interleaved in blocks of 256 decisions, in an order shuffled every round (`interleaved`): each observer's time per decision minus the no-observer limiter's, measured microseconds apart, so that the machine's changing load weighs on both alike; median and min–max over the runs. " +
		"The observer that does nothing shows what core adds as soon as any observer is set (it builds and passes the event; with a store that is not in the process, such as Redis, it also reads the clock before and after the store call, tens of nanoseconds against a round trip of tens of microseconds).\n\n")
	interleaved := r.samples[metricsPrefix+"interleaved"]
	if summarize(r.samples[metricsPrefix+"decide-none"], "ns/op").n == 0 && len(interleaved) == 0 {
		b.WriteString("_No rows: this scenario did not run (see the notes at the top)._\n\n")
		return
	}
	b.WriteString("| row | time/op (median) | min–max | allocs/op | added to a decision (median) | added, min–max |\n|---|--:|--:|--:|--:|--:|\n")
	runs := 0
	for _, row := range metricsRows {
		ss := r.samples[metricsPrefix+row.name]
		st := summarize(ss, "ns/op")
		if st.n == 0 {
			continue
		}
		runs = max(runs, st.n)
		added, addedSpan := "", ""
		if v, ok := strings.CutPrefix(row.name, "decide-"); ok {
			if v == "none" || v == "none-timed" {
				added = "—"
			} else if a := summarize(interleaved, v+"-added-ns"); a.n > 0 {
				added, addedSpan = signedNs(a.median), signedNs(a.min)+" to "+signedNs(a.max)
			}
		}
		allocs := ""
		if a := summarize(ss, "allocs/op"); a.n > 0 {
			allocs = fmtCount(a.median)
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s |\n", row.label, fmtNs(st.median), span(fmtNs, st), allocs, added, addedSpan)
	}
	fmt.Fprintf(b, "\n%s per row, one per run of the test binary.\n\n", plural(runs, "sample"))
	prom := summarize(interleaved, "prom-added-ns")
	if prom.n == 0 {
		return
	}
	allocs := summarize(r.samples[metricsPrefix+"decide-prom"], "allocs/op")
	allocs.max = max(allocs.max, summarize(interleaved, "allocs/op").max)
	verdict := "within"
	if prom.median > promBudgetNs || allocs.max > 0 {
		verdict = "**over**"
	}
	fmt.Fprintf(b, "The budget: the Prometheus observer adds at most %d ns and 0 allocations per decision. Here it adds %s (median over the runs) and %s allocs/op (the most of any run): %s budget.", promBudgetNs, signedNs(prom.median), fmtCount(allocs.max), verdict)
	if noop := summarize(interleaved, "noop-added-ns"); noop.n > 0 {
		// prom's own part, run by run.
		var own []sample
		for _, s := range interleaved {
			p, ok1 := s.metrics["prom-added-ns"]
			n, ok2 := s.metrics["noop-added-ns"]
			if ok1 && ok2 {
				own = append(own, sample{metrics: map[string]float64{"ns": p - n}})
			}
		}
		fmt.Fprintf(b, " Of that, core's part (the observer that does nothing) is %s, `metrics/prom` itself %s.", signedNs(noop.median), signedNs(summarize(own, "ns").median))
	}
	if timed := summarize(interleaved, "prom-timed-added-ns"); timed.n > 0 {
		verdict := "within"
		if timed.median > promBudgetNs {
			verdict = "**over**"
		}
		fmt.Fprintf(b, " On a store whose calls core times (Redis; one call in 16 by default, `core.WithLatencySampling`; the memory store's are not timed), it adds %s: %s budget", signedNs(timed.median), verdict)
		if noop := summarize(interleaved, "noop-timed-added-ns"); noop.n > 0 {
			fmt.Fprintf(b, "; of that, %s is core's timing of the sampled calls (two clock reads each), paid with any observer", signedNs(noop.median))
		}
		b.WriteString(".")
	}
	b.WriteString("\n\n")
}

// signedNs formats a difference of times with its sign: "+12.5 ns",
// "−3 ns".
func signedNs(ns float64) string {
	if ns < 0 {
		return "−" + fmtNs(-ns)
	}
	return "+" + fmtNs(ns)
}
