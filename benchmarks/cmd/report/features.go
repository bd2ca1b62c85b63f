package main

import (
	"fmt"
	"strings"
)

// featuresPrefix names the rows of the features table (BenchmarkFeatures
// in features_test.go).
const featuresPrefix = "BenchmarkFeatures/"

// featuresRows label the rows of the features table, in its order, each
// with the row it is compared with ("" for a baseline).
var featuresRows = []struct{ name, base, label string }{
	{"baseline", "", "`nethttp`, the example configuration (baseline)"},
	{"plan", "baseline", "+ a plan: `tiers`, `WithPlan` resolving a known plan"},
	{"plan-cached", "plan", "+ the plan cached: `core.WithLimitCache`, the lookup asked once per caller and TTL"},
	{"lists", "baseline", "+ allow and ban lists: 10,000 banned IPv4 /24s, 10,000 allowed IPv6 /48s, the client in none"},
	{"baseline-ipv6", "", "`nethttp`, the same, an IPv6 client (baseline of the next row)"},
	{"lists-ipv6", "baseline-ipv6", "+ the same lists, the IPv6 client in none"},
	{"penalty", "baseline", "+ a `penalty` on the matched rule (the ban's check)"},
	{"lease", "baseline", "+ `consistency: lease` on the matched rule (decided from the limiter's block of the key; the memory store, which holds the count, asked once per block)"},
	{"wait", "baseline", "+ `wait: 2s` on the matched rule (admitted at once: nothing held)"},
	{"count-failures-200", "baseline", "+ `count: failures`, answered 200 (a peek)"},
	{"count-failures-401", "baseline", "+ `count: failures`, answered 401 (a peek and a take)"},
	{"clear-on-success-200", "count-failures-200", "+ `clear_on_success: true`, answered 200 (a peek and a reset)"},
	{"calendar", "baseline", "+ `window: calendar` on the matched rule (per calendar day in Europe/Berlin)"},
	{"token-bucket-100", "baseline", "the matched rule as a `token_bucket` of weight 100 (baseline of the next row)"},
	{"cost-response", "token-bucket-100", "+ `cost: response`, the handler reporting 100 (a peek, then a charge)"},
	{"concurrent", "baseline", "+ `concurrent: 64` beside the limit (a slot taken and given back)"},
	{"denied-handler", "baseline", "+ `WithDeniedHandler` (admitted: not called)"},
	{"decision-context", "baseline", "+ `core.WithDecisionContext(true)`, the handler reading it"},
	{"key-ip", "baseline", "+ `key: ip` on the matched rule (the key built per request)"},
	{"stack", "baseline", "+ a rule stacked over `/api/**` (`stack: true`): two rules taken in one store call, both in the headers"},
	{"baseline-kb", "", "`nethttp`, the matched rule on `/api/kb/{kb}/search` (baseline of the next row)"},
	{"key-user-param", "baseline-kb", "+ `key: user+param:kb` (the parameter read from the path, the key built)"},
	{"baseline-again", "baseline", "the baseline again, a second identical middleware (what the method cannot tell from nothing)"},
	{"gin-baseline", "", "`ginrl` on Gin, the same configuration (baseline of the next row)"},
	{"gin-decision-context", "gin-baseline", "+ `core.WithDecisionContext(true)`, the handler reading it"},
}

// renderFeatures writes the table of the customer features: per row, the
// median time, its min–max, the median B/op and allocs/op; for a feature,
// what it adds to its baseline: time from the interleaved row (its
// <row>-added-ns metrics: median and min–max over the runs), bytes and
// allocations as the difference of the rows' medians.
func renderFeatures(b *strings.Builder, r *results) {
	b.WriteString("## Customer features\n\n")
	b.WriteString("What each customer feature (plans, allow and ban lists, penalties, waiting, counting by outcome, calendar quotas, costs after the response, concurrency limits, keys per rule, stacked limits, the denied handler, the Decision in the context) adds to an admitted request through `nethttp`: `GET /api/search` from one client IP, the example configuration with a search limit no run reaches, the default memory store, a writer that keeps nothing, a handler writing a small JSON body; the last two rows through Gin and `ginrl`. " +
		"Each row is its own benchmark (time, B/op, allocs/op). \"Added time\" comes from a run of every row interleaved in blocks of 256 requests (`interleaved`): a row's time per request minus its baseline's, measured microseconds apart, so that the machine's changing load weighs on both alike; median and min–max over the runs. " +
		"Added bytes and allocations are the difference of the rows' medians. " +
		"The rows are served in an order shuffled every round, so that no row always pays for the traces of the same predecessor in the caches; the baseline built a second time (\"the baseline again\") shows what such a difference can be when there is none.\n\n")
	interleaved := r.samples[featuresPrefix+"interleaved"]
	if summarize(r.samples[featuresPrefix+"baseline"], "ns/op").n == 0 && len(interleaved) == 0 {
		b.WriteString("_No rows: this scenario did not run (see the notes at the top)._\n\n")
		return
	}
	b.WriteString("| row | time/op (median) | min–max | B/op | allocs/op | added time (median) | added, min–max | added B/op, allocs/op |\n|---|--:|--:|--:|--:|--:|--:|--:|\n")
	runs := 0
	for _, row := range featuresRows {
		ss := r.samples[featuresPrefix+row.name]
		st := summarize(ss, "ns/op")
		if st.n == 0 {
			continue
		}
		runs = max(runs, st.n)
		bytes, allocs := summarize(ss, "B/op"), summarize(ss, "allocs/op")
		added, addedSpan, addedMem := "—", "", ""
		if row.base != "" {
			added = ""
			if a := summarize(interleaved, row.name+"-added-ns"); a.n > 0 {
				added, addedSpan = signedNs(a.median), signedNs(a.min)+" to "+signedNs(a.max)
			}
			base := r.samples[featuresPrefix+row.base]
			bb, ba := summarize(base, "B/op"), summarize(base, "allocs/op")
			if bytes.n > 0 && allocs.n > 0 && bb.n > 0 && ba.n > 0 {
				addedMem = signedCount(bytes.median-bb.median) + " B, " + signedCount(allocs.median-ba.median)
			}
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", row.label, fmtNs(st.median), span(fmtNs, st),
			medianOf(fmtCount, bytes), medianOf(fmtCount, allocs), added, addedSpan, addedMem)
	}
	fmt.Fprintf(b, "\n%s per row, one per run of the test binary.\n\n", plural(runs, "sample"))
}

// medianOf formats st's median, or "" when it has no sample.
func medianOf(format func(float64) string, st stat) string {
	if st.n == 0 {
		return ""
	}
	return format(st.median)
}

// signedCount formats a difference of counts with its sign: "+592",
// "−8", "0".
func signedCount(v float64) string {
	switch {
	case v < 0:
		return "−" + fmtCount(-v)
	case v > 0:
		return "+" + fmtCount(v)
	}
	return "0"
}
