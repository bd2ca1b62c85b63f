package main

import (
	"fmt"
	"strings"
	"testing"
)

// output is what two runs of the benchmark binary print, cut down: rows of
// several scenarios, a custom metric, a failed and a skipped sub-benchmark.
const output = `goos: linux
goarch: amd64
pkg: github.com/rlkit/rlkit/benchmarks
cpu: AMD EPYC
BenchmarkOneKey/rlkit-memstore-Take-2     	 1000000	        70.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkOneKey/sethvargo-memorystore-2   	 1000000	        90.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkOneKey/baseline-map-atomic-2     	 1000000	        10.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkMemoryPerKey/rlkit-memstore-2    	       1	1484081257 ns/op	        67.11 B/key	      1484 ns/key	134206904 B/op	     845 allocs/op
BenchmarkMemoryPerKey/baseline-map-int64-2	       1	 864795022 ns/op	        71.89 B/key	       864.8 ns/key	127779176 B/op	 1008215 allocs/op
BenchmarkRedis/floor/raw-evalsha/seq-2    	    3480	     34847 ns/op	         0 failed/op	      1947 redis-ns/op	     296 B/op	       8 allocs/op
BenchmarkRedis/rlkit/gcra/seq-2           	    1837	     68593 ns/op	         0 failed/op	     14443 redis-ns/op	     496 B/op	      11 allocs/op
BenchmarkRedis/redis_rate/gcra/seq-2      	    1837	     70000 ns/op	         0 failed/op	     14443 redis-ns/op	     496 B/op	      11 allocs/op
BenchmarkOverAdmission/memory/rlkit-memstore-Take-2 	    1014	    512296 ns/op	       100.0 admitted-max	       100.0 admitted-min	         0 failed-max
BenchmarkOverAdmission/redis/throttled-gcra-2 	       1	 126949140 ns/op	       100.0 admitted-max	        95.00 admitted-min	        66.00 failed-max
BenchmarkOverAdmission/nethttp/rlkit-nethttp-2 	--- FAIL: BenchmarkOverAdmission/nethttp/rlkit-nethttp-2
    overadmission_test.go:70: trial admitted 0 of 256 requests with 0 failed, want exactly 100 and none failed
BenchmarkLoad/rlkit-redis-2 	--- SKIP: BenchmarkLoad/rlkit-redis-2
    main_test.go:38: redis-server not in PATH; skipping
--- FAIL: BenchmarkOverAdmission
FAIL
exit status 1
goos: linux
BenchmarkOneKey/rlkit-memstore-Take-2     	 1000000	        80.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkOneKey/sethvargo-memorystore-2   	 1000000	       100.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkOneKey/baseline-map-atomic-2     	 1000000	        12.0 ns/op	       0 B/op	       0 allocs/op
`

func parsed(t *testing.T) *results {
	t.Helper()
	r := newResults()
	if err := r.parse(strings.NewReader(output)); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParse(t *testing.T) {
	r := parsed(t)
	got := r.samples["BenchmarkOneKey/rlkit-memstore-Take"]
	if len(got) != 2 || got[0].metrics["ns/op"] != 70 || got[1].metrics["ns/op"] != 80 || got[0].iterations != 1000000 {
		t.Errorf("OneKey rlkit samples = %+v, want 70 and 80 ns/op", got)
	}
	if s := r.samples["BenchmarkMemoryPerKey/rlkit-memstore"]; len(s) != 1 || s[0].metrics["B/key"] != 67.11 || s[0].metrics["allocs/op"] != 845 {
		t.Errorf("MemoryPerKey samples = %+v", s)
	}
	if _, ok := r.samples["BenchmarkOverAdmission/nethttp/rlkit-nethttp"]; ok {
		t.Error("a failed sub-benchmark was parsed as a row")
	}
	if len(r.fails) != 2 || !strings.Contains(r.fails[0], "rlkit-nethttp") || !strings.Contains(r.fails[0], "trial admitted 0") {
		t.Errorf("fails = %q, want the sub-benchmark's with its message, then the parent's", r.fails)
	}
	if why := r.skips["BenchmarkLoad/rlkit-redis"]; why != "redis-server not in PATH; skipping" {
		t.Errorf("skip reason = %q", why)
	}
	if r.order[0] != "BenchmarkOneKey/rlkit-memstore-Take" || len(r.order) != 10 {
		t.Errorf("order = %q", r.order)
	}
}

func TestSummarize(t *testing.T) {
	mk := func(v ...float64) []sample {
		var s []sample
		for _, x := range v {
			s = append(s, sample{metrics: map[string]float64{"ns/op": x}})
		}
		return s
	}
	for _, tc := range []struct {
		in               []float64
		median, min, max float64
	}{
		{[]float64{3}, 3, 3, 3},
		{[]float64{5, 1, 3}, 3, 1, 5},
		{[]float64{4, 1, 3, 10}, 3.5, 1, 10},
	} {
		st := summarize(mk(tc.in...), "ns/op")
		if st.median != tc.median || st.min != tc.min || st.max != tc.max || st.n != len(tc.in) {
			t.Errorf("summarize(%v) = %+v, want median %v, min %v, max %v", tc.in, st, tc.median, tc.min, tc.max)
		}
	}
	if st := summarize(mk(1), "B/op"); st.n != 0 {
		t.Errorf("summarize of a missing unit = %+v, want n 0", st)
	}
}

func TestFormats(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{fmtNs(30.26), "30.3 ns"},
		{fmtNs(1234), "1.23 µs"},
		{fmtNs(136300), "136.3 µs"},
		{fmtNs(1.5e6), "1.5 ms"},
		{fmtCount(134206904), "134,206,904"},
		{fmtCount(845), "845"},
		{fmtCount(4359539.5), "4,359,540"},
		{fmtCount(0.5), "0.5"},
		{fmtRatio(0.781), "0.78×"},
		{fmtRatio(12.34), "12.3×"},
		{fmtPercent(0.534), "53.4%"},
		{span(fmtNs, stat{min: 47.8, max: 52.1}), "47.8–52.1 ns"},
		{span(fmtNs, stat{min: 900, max: 1200}), "900 ns–1.2 µs"},
		{span(fmtCount, stat{min: 100, max: 100}), "100"},
		{anchor("1,000,000 distinct keys, cycled"), "1000000-distinct-keys-cycled"},
		{anchor("Echo: rlkit adapter against the built-in `middleware.RateLimiter`"), "echo-rlkit-adapter-against-the-built-in-middlewareratelimiter"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %q, want %q", tc.got, tc.want)
		}
	}
}

// TestRender renders every part of the report from the canned output and
// checks the figures a reader would quote.
func TestRender(t *testing.T) {
	defer func(n int) { minRuns = n }(minRuns)
	minRuns = 2
	r := parsed(t)
	versions := map[string]string{"github.com/sethvargo/go-limiter": "v1.2.0", "github.com/go-redis/redis_rate/v10": "v10.0.1"}
	var b strings.Builder
	renderSummary(&b, r, versions)
	for _, sc := range scenarios {
		renderScenario(&b, r, sc, versions)
	}
	renderOverAdmission(&b, r, versions)
	out := b.String()
	wantIn(t, "report", out,
		// One key: medians 75 and 95 ns over a baseline of 11 ns.
		"| **rlkit** memstore, `Take` (fixed window) | 75 ns | 70–80 ns | 0 | 0 | 6.82× |",
		"| sethvargo/go-limiter memorystore v1.2.0 | 95 ns | 90–100 ns | 0 | 0 | 8.64× |",
		"| baseline: `map[string]*atomic.Int64`, Add and compare | 11 ns | 10–12 ns | 0 | 0 | 1 (baseline) |",
		// Summary: 75/95, ranges 70–80 and 90–100 do not overlap (two runs
		// are enough for this test; the report wants minRuns).
		"| rlkit memstore, `Take` (fixed window) | sethvargo/go-limiter memorystore v1.2.0 | 0.79× | rlkit faster |",
		// Redis peers against rlkit on the same algorithm; one run tells
		// nothing apart.
		"| rlkit redisstore, GCRA | go-redis/redis_rate (GCRA) v10.0.1 | 0.98× | too few runs |",
		// Memory: B/key against the int64 map.
		"| **rlkit** memstore | 67.1 B | 67.1 B | 1.48 µs | 134,206,904 | 845 | 0.93× |",
		// Over-admission.
		"| throttled, goredisstore.v9 (GCRA) | the store, on Redis | 1 | 95–100 | 66 | admits fewer: calls failed under contention |",
		"| **rlkit** memstore, `Take` (fixed window) | the store, in memory | 1014 | 100 | 0 | exact |",
		"_No rows: this scenario did not run",
	)
}

// TestRenderMetrics renders the metrics table from three runs' rows: the
// times of the separate rows, what each observer adds from the
// interleaved row.
func TestRenderMetrics(t *testing.T) {
	var in strings.Builder
	for _, run := range []struct {
		rows  [5]float64 // none, noop, prom, otel, observe-prom
		added [3]float64 // noop, prom, otel
	}{
		{[5]float64{200, 215, 230, 900, 20}, [3]float64{80, 120, 700}},
		{[5]float64{300, 320, 340, 1000, 22}, [3]float64{90, 150, 800}},
		{[5]float64{210, 240, 300, 950, 21}, [3]float64{85, 125, 750}},
	} {
		for i, name := range []string{"decide-none", "decide-noop", "decide-prom", "decide-otel", "observe-prom"} {
			fmt.Fprintf(&in, "BenchmarkMetrics/%s-2 \t 1000000\t %.1f ns/op\t 0 B/op\t 0 allocs/op\n", name, run.rows[i])
		}
		fmt.Fprintf(&in, "BenchmarkMetrics/interleaved-2 \t 500000\t 2000 ns/op\t %.1f noop-added-ns\t %.1f otel-added-ns\t %.1f prom-added-ns\t 0 B/op\t 0 allocs/op\n",
			run.added[0], run.added[2], run.added[1])
	}
	r := newResults()
	if err := r.parse(strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderMetrics(&b, r)
	out := b.String()
	wantIn(t, "metrics table", out,
		"| decision, no observer (baseline) | 210 ns | 200–300 ns | 0 | — |  |",
		"| decision, an observer that does nothing (what core adds for any observer) | 240 ns | 215–320 ns | 0 | +85 ns | +80 ns to +90 ns |",
		"| decision, **`metrics/prom`** observer | 300 ns | 230–340 ns | 0 | +125 ns | +120 ns to +150 ns |",
		"| decision, `metrics/otel` observer (OpenTelemetry SDK) | 950 ns | 900 ns–1 µs | 0 | +750 ns | +700 ns to +800 ns |",
		"| `metrics/prom` `Observe` alone | 21 ns | 20–22 ns | 0 |  |  |",
		"3 samples per row",
		// prom's own part per run: 40, 60, 40.
		"Here it adds +125 ns (median over the runs) and 0 allocs/op (the most of any run): **over** budget. Of that, core's part (the observer that does nothing) is +85 ns, `metrics/prom` itself +40 ns.",
	)
	if strings.Contains(out, "`metrics/otel` `Observe` alone") {
		t.Errorf("a row that did not run is in the table\n%s", out)
	}

	// Within budget; over it by an allocation whatever the time.
	for _, tc := range []struct{ in, want string }{
		{"BenchmarkMetrics/decide-prom-2 1 200 ns/op 0 allocs/op\nBenchmarkMetrics/interleaved-2 1 900 ns/op 50 prom-added-ns 0 allocs/op\n",
			"Here it adds +50 ns (median over the runs) and 0 allocs/op (the most of any run): within budget."},
		{"BenchmarkMetrics/decide-prom-2 1 200 ns/op 1 allocs/op\nBenchmarkMetrics/interleaved-2 1 900 ns/op 10 prom-added-ns 0 allocs/op\n",
			"Here it adds +10 ns (median over the runs) and 1 allocs/op (the most of any run): **over** budget."},
		{"BenchmarkMetrics/decide-prom-2 1 200 ns/op 0 allocs/op\nBenchmarkMetrics/interleaved-2 1 900 ns/op -5 prom-added-ns 2 allocs/op\n",
			"Here it adds −5 ns (median over the runs) and 2 allocs/op (the most of any run): **over** budget."},
	} {
		r = newResults()
		if err := r.parse(strings.NewReader(tc.in)); err != nil {
			t.Fatal(err)
		}
		b.Reset()
		renderMetrics(&b, r)
		if !strings.Contains(b.String(), tc.want) {
			t.Errorf("metrics table lacks %q\n%s", tc.want, b.String())
		}
	}
	// Nothing ran.
	b.Reset()
	renderMetrics(&b, newResults())
	if !strings.Contains(b.String(), "_No rows: this scenario did not run") {
		t.Errorf("empty metrics table = %q", b.String())
	}
}

// TestRenderFeatures renders the features table from three runs' rows:
// the rows' times, bytes and allocations, what each feature adds from the
// interleaved row, against its own baseline.
func TestRenderFeatures(t *testing.T) {
	var in strings.Builder
	for _, run := range []struct {
		ns    [4]float64 // baseline, plan, decision-context, gin-baseline
		added [2]float64 // plan, gin-decision-context
	}{
		{[4]float64{900, 950, 2400, 1800}, [2]float64{20, 2100}},
		{[4]float64{1000, 1020, 2500, 1900}, [2]float64{30, 2300}},
		{[4]float64{880, 900, 2300, 1850}, [2]float64{-5, 2200}},
	} {
		fmt.Fprintf(&in, "BenchmarkFeatures/baseline-2 \t 1000000\t %.1f ns/op\t 64 B/op\t 2 allocs/op\n", run.ns[0])
		fmt.Fprintf(&in, "BenchmarkFeatures/plan-2 \t 1000000\t %.1f ns/op\t 64 B/op\t 2 allocs/op\n", run.ns[1])
		fmt.Fprintf(&in, "BenchmarkFeatures/decision-context-2 \t 1000000\t %.1f ns/op\t 656 B/op\t 5 allocs/op\n", run.ns[2])
		fmt.Fprintf(&in, "BenchmarkFeatures/gin-baseline-2 \t 1000000\t %.1f ns/op\t 392 B/op\t 6 allocs/op\n", run.ns[3])
		fmt.Fprintf(&in, "BenchmarkFeatures/gin-decision-context-2 \t 1000000\t 4000 ns/op\t 1320 B/op\t 11 allocs/op\n")
		fmt.Fprintf(&in, "BenchmarkFeatures/interleaved-2 \t 500000\t 9000 ns/op\t %.1f gin-decision-context-added-ns\t %.1f plan-added-ns\t 0 B/op\t 0 allocs/op\n",
			run.added[1], run.added[0])
	}
	r := newResults()
	if err := r.parse(strings.NewReader(in.String())); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderFeatures(&b, r)
	out := b.String()
	wantIn(t, "features table", out,
		"## Customer features",
		"| `nethttp`, the example configuration (baseline) | 900 ns | 880 ns–1 µs | 64 | 2 | — |  |  |",
		"| + a plan: `tiers`, `WithPlan` resolving a known plan | 950 ns | 900 ns–1.02 µs | 64 | 2 | +20 ns | −5 ns to +30 ns | 0 B, 0 |",
		// No interleaved figure for it: the time is left blank, the
		// memory still compared.
		"| + `core.WithDecisionContext(true)`, the handler reading it | 2.4 µs | 2.3–2.5 µs | 656 | 5 |  |  | +592 B, +3 |",
		// Against Gin's own baseline.
		"| + `core.WithDecisionContext(true)`, the handler reading it | 4 µs | 4 µs | 1320 | 11 | +2.2 µs | +2.1 µs to +2.3 µs | +928 B, +5 |",
		"3 samples per row",
	)
	if strings.Contains(out, "penalty") {
		t.Errorf("a row that did not run is in the table\n%s", out)
	}
	b.Reset()
	renderFeatures(&b, newResults())
	if !strings.Contains(b.String(), "_No rows: this scenario did not run") {
		t.Errorf("empty features table = %q", b.String())
	}
}

// wantIn reports each of want that out, the text of what, lacks.
func wantIn(t *testing.T, what, out string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(out, w) {
			t.Errorf("%s lacks %q\n%s", what, w, out)
		}
	}
}

// summaryAnd renders the summary of the benchmark output in, then the
// tables of the scenarios pick selects.
func summaryAnd(t *testing.T, in string, pick func(scenario) bool) string {
	t.Helper()
	r := newResults()
	if err := r.parse(strings.NewReader(in)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderSummary(&b, r, nil)
	for _, sc := range scenarios {
		if pick(sc) {
			renderScenario(&b, r, sc, nil)
		}
	}
	return b.String()
}

// TestRenderInterleaved renders two frameworks' tables and summary lines
// from three runs with an interleaved row: the added-time columns, and the
// comparison of what rlkit and the built-in add, run by run, beside the
// whole rows' (whose ranges overlap here).
func TestRenderInterleaved(t *testing.T) {
	var in strings.Builder
	for _, v := range []struct{ bare, builtin, rlkit, bAdd, rAdd float64 }{
		{200, 1000, 900, 800, 700}, {210, 1200, 1100, 810, 690}, {190, 950, 1000, 790, 710},
	} {
		fmt.Fprintf(&in, "BenchmarkFiber/bare-2 \t 1000000\t %.1f ns/op\t 0 B/op\t 0 allocs/op\n", v.bare)
		fmt.Fprintf(&in, "BenchmarkFiber/builtin-2 \t 1000000\t %.1f ns/op\t 48 B/op\t 4 allocs/op\n", v.builtin)
		fmt.Fprintf(&in, "BenchmarkFiber/rlkit-2 \t 1000000\t %.1f ns/op\t 0 B/op\t 0 allocs/op\n", v.rlkit)
		fmt.Fprintf(&in, "BenchmarkFiber/interleaved-2 \t 100000\t 4000 ns/op\t %.1f builtin-added-ns\t %.1f rlkit-added-ns\t 48 B/op\t 4 allocs/op\n", v.bAdd, v.rAdd)
	}
	// Echo: the machine's speed drifts from run to run, so the added
	// times' ranges overlap, but rlkit adds 0.9× the built-in's in every
	// run; its whole rows' ranges overlap too.
	for _, v := range []struct{ bAdd, rAdd float64 }{{500, 450}, {700, 630}, {900, 810}} {
		fmt.Fprintf(&in, "BenchmarkEcho/bare-2 \t 1000000\t 300 ns/op\t 16 B/op\t 1 allocs/op\n")
		fmt.Fprintf(&in, "BenchmarkEcho/builtin-2 \t 1000000\t %.1f ns/op\t 96 B/op\t 2 allocs/op\n", 300+v.bAdd)
		fmt.Fprintf(&in, "BenchmarkEcho/rlkit-2 \t 1000000\t %.1f ns/op\t 64 B/op\t 2 allocs/op\n", 300+v.rAdd)
		fmt.Fprintf(&in, "BenchmarkEcho/interleaved-2 \t 100000\t 4000 ns/op\t %.1f builtin-added-ns\t %.1f rlkit-added-ns\t 48 B/op\t 4 allocs/op\n", v.bAdd, v.rAdd)
	}
	out := summaryAnd(t, in.String(), func(sc scenario) bool { return sc.framework == "Fiber" || sc.framework == "Echo" })
	wantIn(t, "report", out,
		"| bare Fiber, no limiter | 200 ns | 190–210 ns | 0 | 0 | 1 (baseline) | — | |",
		"| Fiber's built-in limiter | 1 µs | 950 ns–1.2 µs | 48 | 4 | 5.00× | +800 ns | +790 ns to +810 ns |",
		"| **rlkit** adapter | 1 µs | 900 ns–1.1 µs | 0 | 0 | 5.00× | +700 ns | +690 ns to +710 ns |",
		"| rlkit adapter | Fiber's built-in limiter | 1.00× | overlap |",
		// Added: 700/800, 690/810, 710/790 run by run.
		"| rlkit adapter, added time (interleaved) | Fiber's built-in limiter | 0.88× (runs 0.85×–0.90×) | rlkit faster |",
		"| rlkit adapter | Echo's built-in limiter | 0.93× | overlap |",
		"| rlkit adapter, added time (interleaved) | Echo's built-in limiter | 0.90× (runs 0.90×–0.90×) | rlkit faster |",
		"| Echo's built-in limiter | 1 µs | 800 ns–1.2 µs | 96 | 2 | 3.33× | +700 ns | +500 ns to +900 ns |",
	)
	if strings.Contains(out, "`interleaved`  |") || strings.Contains(out, "| `interleaved` |") {
		t.Errorf("the interleaved row is shown as a participant\n%s", out)
	}
}

// TestRenderInterleavedStores: a parallel store scenario's interleaved run
// gives each row's time per decision (<row>-ns), shown beside the row's
// own and compared run by run with each peer ("time (interleaved)").
func TestRenderInterleavedStores(t *testing.T) {
	var in strings.Builder
	// The machine's speed drifts: the own rows' ranges overlap, but rlkit
	// takes 0.6×–0.7× go-limiter's time in every interleaved run, and the
	// same as ulule's in one.
	for _, v := range []struct{ rlkit, peer, rI, pI, uI float64 }{{40, 55, 36, 60, 50}, {60, 70, 49, 70, 49}, {50, 100, 45, 75, 60}} {
		fmt.Fprintf(&in, "BenchmarkParallel10kKeys/rlkit-memstore-Take-2 \t 1000000\t %.1f ns/op\t 0 B/op\t 0 allocs/op\n", v.rlkit)
		fmt.Fprintf(&in, "BenchmarkParallel10kKeys/sethvargo-memorystore-2 \t 1000000\t %.1f ns/op\t 0 B/op\t 0 allocs/op\n", v.peer)
		fmt.Fprintf(&in, "BenchmarkParallel10kKeys/ulule-memory-2 \t 1000000\t 200 ns/op\t 31 B/op\t 2 allocs/op\n")
		fmt.Fprintf(&in, "BenchmarkParallel10kKeys/baseline-map-atomic-2 \t 1000000\t 12 ns/op\t 0 B/op\t 0 allocs/op\n")
		fmt.Fprintf(&in, "BenchmarkParallel10kKeys/interleaved-2 \t 100000\t 1500 ns/op\t 13 baseline-map-atomic-ns\t %.1f rlkit-memstore-Take-ns\t %.1f sethvargo-memorystore-ns\t %.1f ulule-memory-ns\t 81 B/op\t 5 allocs/op\n", v.rI, v.pI, v.uI)
	}
	out := summaryAnd(t, in.String(), func(sc scenario) bool { return sc.prefix == "BenchmarkParallel10kKeys/" })
	wantIn(t, "report", out,
		"| participant | time/op (median) | min–max | B/op | allocs/op | × baseline | interleaved (median) | interleaved, min–max |",
		"| **rlkit** memstore, `Take` (fixed window) | 50 ns | 40–60 ns | 0 | 0 | 4.17× | 45 ns | 36–49 ns |",
		"| baseline: `map[string]*atomic.Int64`, Add and compare | 12 ns | 12 ns | 0 | 0 | 1 (baseline) | 13 ns | 13 ns |",
		"| rlkit memstore, `Take` (fixed window) | sethvargo/go-limiter memorystore | 0.71× | overlap |",
		// 36/60, 49/70, 45/75 run by run.
		"| rlkit memstore, `Take` (fixed window), time (interleaved) | sethvargo/go-limiter memorystore | 0.60× (runs 0.60×–0.70×) | rlkit faster |",
		// 36/50, 49/49, 45/60: one run even.
		"| rlkit memstore, `Take` (fixed window), time (interleaved) | ulule/limiter, memory store | 0.75× (runs 0.72×–1.00×) | overlap |",
	)
	if strings.Contains(out, "| `interleaved` |") {
		t.Errorf("the interleaved row is shown as a participant\n%s", out)
	}
}

// replayOutput is what go test prints for the replay benchmarks, two runs.
const replayOutput = `goos: linux
pkg: github.com/rlkit/rlkit/cmd/rlkit/internal/replay
BenchmarkReplayCLF-2    	       2	 400000000 ns/op	 226.00 MB/s	   1250000 lines/s	34355656 B/op	   34126 allocs/op
BenchmarkReplayCLF-2    	       2	 500000000 ns/op	 181.00 MB/s	   1000000 lines/s	34355240 B/op	   34125 allocs/op
BenchmarkReplayCLFStacked-2    	       2	 800000000 ns/op	 113.00 MB/s	    625000 lines/s	34355656 B/op	   34126 allocs/op
BenchmarkReplayCLFStacked-2    	       2	 1000000000 ns/op	 90.50 MB/s	    500000 lines/s	34355240 B/op	   34125 allocs/op
BenchmarkCountLines-2   	      51	  41673686 ns/op	2176.92 MB/s	  12000000 lines/s	 1048744 B/op	       4 allocs/op
BenchmarkCountLines-2   	      51	  50000000 ns/op	2000.00 MB/s	  10000000 lines/s	 1048744 B/op	       4 allocs/op
BenchmarkReplayDistinctKeys/keys=1000000-2        	       1	1158430415 ns/op	    863000 lines/s	       126.8 peak-live-MB	       173.5 peak-total-MB	200425456 B/op	    7618 allocs/op
BenchmarkReplayDistinctKeys/keys=3000000-2         	       1	5955449300 ns/op	    503000 lines/s	       153.5 peak-live-MB	       316.3 peak-total-MB	624376464 B/op	    8811 allocs/op
BenchmarkReplayDistinctKeys/keys=10000000-2        	       1	23348439232 ns/op	    428000 lines/s	       163.6 peak-live-MB	       324.7 peak-total-MB	1878606800 B/op	   12507 allocs/op
BenchmarkReplayDistinctKeys/keys=20000000-2        	       1	38437195174 ns/op	    520000 lines/s	       166.9 peak-live-MB	       333.1 peak-total-MB	3661708320 B/op	   17013 allocs/op
BenchmarkReplayDistinctKeys/keys=10000000-2        	       1	23348439232 ns/op	    430000 lines/s	       165.6 peak-live-MB	       326.7 peak-total-MB	1878606800 B/op	   12507 allocs/op
BenchmarkReplayDistinctKeys/keys=20000000-2        	       1	38437195174 ns/op	    522000 lines/s	       168.9 peak-live-MB	       335.1 peak-total-MB	3661708320 B/op	   17013 allocs/op
PASS
`

func TestRenderReplay(t *testing.T) {
	r := newResults()
	if err := r.parse(strings.NewReader(replayOutput)); err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	renderReplay(&b, r)
	got := b.String()
	for _, want := range []string{
		"## Replay (`rlkit replay`)\n",
		"| replay: read, parse, decide, count | 1,125,000 | 1,000,000–1,250,000 | 203.5 | 34,355,448 | 34,126 | 0.10× |\n",
		"| baseline: count the lines (`bufio.Scanner`) | 11,000,000 | 10,000,000–12,000,000 | 2088.5 | 1,048,744 | 4 | 1 (baseline) |\n",
		"2 samples per row, one per run.",
		"The replay's median, 1,125,000 lines/s, is 10.2% of the line count's; the target of 1,000,000 lines/s is met.",
		"| replay, a rule stacked over the API | 562,500 | 500,000–625,000 |",
		"With a rule stacked over the API, the median is 562,500 lines/s, 50% of the replay's without it",
		"| 1,000,000 | 126.8 | 126.8 | 863,000 |\n",
		"| 10,000,000 | 164.6 | 163.6–165.6 | 429,000 |\n",
		"| 20,000,000 | 167.9 | 166.9–168.9 | 521,000 |\n",
		"At 10,000,000 distinct keys a replay held at most 164.6 MB live. Twice as many keys, 20,000,000, held 167.9 MB (1.02×): it stays within its bounds.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the replay section lacks %q:\n%s", want, got)
		}
	}
	var empty strings.Builder
	renderReplay(&empty, newResults())
	if !strings.Contains(empty.String(), "_No rows: this scenario did not run") {
		t.Errorf("without samples: %s", empty.String())
	}
	if !wantReplay(".") || !wantReplay("Replay") || !wantReplay("CountLines") || !wantReplay("DistinctKeys") || wantReplay("OneKey") {
		t.Error("wantReplay selects the wrong runs")
	}
}
