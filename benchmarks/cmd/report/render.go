package main

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// row is one participant's line of a table.
type row struct {
	name    string
	samples []sample
}

// rows returns the rows of sc in the order the run printed them.
func (r *results) rows(sc scenario) []row {
	var out []row
	for _, name := range r.order {
		rest, ok := strings.CutPrefix(name, sc.prefix)
		if !ok {
			continue
		}
		if sc.suffix != "" {
			if rest, ok = strings.CutSuffix(rest, sc.suffix); !ok {
				continue
			}
		}
		if rest == interleavedRow {
			continue // not a participant: its metrics are the rows' (see added)
		}
		out = append(out, row{name: rest, samples: r.samples[name]})
	}
	return out
}

// label returns the label of row name in sc, with the peer's version.
func label(sc scenario, name string, versions map[string]string) string {
	if l, ok := sc.labels[name]; ok {
		return l
	}
	p, ok := participants[name]
	if !ok {
		return "`" + name + "`"
	}
	mod := p.module
	if name == "builtin" && sc.framework != "" {
		mod = frameworkModules[sc.framework]
		p.label = sc.framework + "'s built-in limiter"
	}
	if v := versions[mod]; mod != "" && v != "" {
		return p.label + " " + v
	}
	return p.label
}

// renderScenario writes one scenario's table: per row, the median of the
// primary metric, its min–max over the runs, the secondary metrics'
// medians and the ratio of the primary median to the baseline's.
func renderScenario(b *strings.Builder, r *results, sc scenario, versions map[string]string) {
	fmt.Fprintf(b, "## %s\n\n%s\n\n", sc.title, sc.about)
	rows := r.rows(sc)
	if len(rows) == 0 {
		b.WriteString("_No rows: this scenario did not run (see the notes at the top)._\n\n")
		return
	}
	base := summarize(r.samples[sc.prefix+sc.base+sc.suffix], sc.primary.unit)
	interleaved := len(r.samples[sc.prefix+interleavedRow]) > 0
	fmt.Fprintf(b, "| participant | %s (median) | min–max |", sc.primary.header)
	for _, c := range sc.secondary {
		fmt.Fprintf(b, " %s |", c.header)
	}
	b.WriteString(" × baseline |")
	if interleaved && sc.framework != "" {
		b.WriteString(" added, interleaved (median) | added, min–max |")
	} else if interleaved {
		b.WriteString(" interleaved (median) | interleaved, min–max |")
	}
	b.WriteString("\n|---|--:|--:|")
	b.WriteString(strings.Repeat("--:|", len(sc.secondary)+1))
	if interleaved {
		b.WriteString("--:|--:|")
	}
	b.WriteString("\n")
	for _, rw := range rows {
		st := summarize(rw.samples, sc.primary.unit)
		if st.n == 0 {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s |", label(sc, rw.name, versions), sc.primary.format(st.median), span(sc.primary.format, st))
		for _, c := range sc.secondary {
			if s := summarize(rw.samples, c.unit); s.n > 0 && c.worst {
				fmt.Fprintf(b, " %s |", c.format(s.max))
			} else if s.n > 0 {
				fmt.Fprintf(b, " %s |", c.format(s.median))
			} else {
				b.WriteString(" |")
			}
		}
		switch {
		case rw.name == sc.base:
			b.WriteString(" 1 (baseline) |")
		case base.n == 0:
			b.WriteString(" |")
		default:
			fmt.Fprintf(b, " %s |", fmtRatio(ratio(st.median, base.median)))
		}
		if interleaved {
			switch a := r.added(sc, rw.name); {
			case rw.name == sc.base && sc.framework != "":
				b.WriteString(" — | |")
			case a.n > 0 && sc.framework == "":
				fmt.Fprintf(b, " %s | %s |", fmtNs(a.median), span(fmtNs, a))
			case a.n > 0:
				fmt.Fprintf(b, " %s | %s |", signedNs(a.median), signedNs(a.min)+" to "+signedNs(a.max))
			default:
				b.WriteString(" | |")
			}
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "\n%s per row, one per run of the test binary.", plural(len(rows[0].samples), "sample"))
	if interleaved && sc.framework == "" {
		b.WriteString(" \"Interleaved\" comes from a run of every row in turn (`interleaved`), the goroutines running one row together and moving on to the next together: per row and round, a collection of the garbage of the rows before, 8,192 untimed decisions per goroutine to bring its memory back into the caches, then 32,768 timed; the wall time per decision over all goroutines, rows measured milliseconds apart, so that the machine's changing load weighs on all alike; median and min–max over the runs.")
	} else if interleaved {
		b.WriteString(" \"Added, interleaved\" comes from a run of every row interleaved in blocks of 256 requests (`interleaved`): a row's time per request minus bare's, measured microseconds apart, so that the machine's changing load weighs on both alike; median and min–max over the runs.")
	}
	b.WriteString("\n\n")
}

// interleavedRow is the sub-benchmark of a scenario that runs every row
// in turn: in a framework scenario it reports what each row adds to the
// baseline (<row>-added-ns; see benchFramework), in a parallel store
// scenario each row's time per decision (<row>-ns; see benchParallel).
const interleavedRow = "interleaved"

// interleavedMetric is the metric of row in sc's interleaved runs.
func interleavedMetric(sc scenario, row string) string {
	if sc.framework != "" {
		return row + "-added-ns"
	}
	return row + "-ns"
}

// added is, in sc's interleaved runs, what row adds to the baseline (a
// framework scenario) or its time per decision (a store scenario).
func (r *results) added(sc scenario, row string) stat {
	return summarize(r.samples[sc.prefix+interleavedRow], interleavedMetric(sc, row))
}

// addedRatios is, over sc's interleaved runs, row a's interleaved metric
// (see added) divided by row b's in the same run.
func (r *results) addedRatios(sc scenario, a, b string) stat {
	var q []sample
	for _, s := range r.samples[sc.prefix+interleavedRow] {
		x, okA := s.metrics[interleavedMetric(sc, a)]
		y, okB := s.metrics[interleavedMetric(sc, b)]
		if okA && okB && y > 0 {
			q = append(q, sample{metrics: map[string]float64{"ratio": x / y}})
		}
	}
	return summarize(q, "ratio")
}

// minRuns is the fewest samples per row for which the summary calls a
// difference: with one run every difference looks certain.
var minRuns = 3

// comparison is one line of the summary: rlkit's row against a peer's.
type comparison struct {
	scenario  scenario
	rlkit     string
	peer      string
	rlkitStat stat
	peerStat  stat
	distinct  bool
	// added: the stats are what each adds to the baseline, interleaved;
	// runs is then the ratio of the two in each run, and distinct says
	// that every run's is on the same side of 1.
	added bool
	runs  stat
}

// comparisons returns rlkit against every peer row, per scenario.
func (r *results) comparisons() []comparison {
	var out []comparison
	for _, sc := range scenarios {
		if sc.rlkit == "" {
			continue
		}
		for _, rw := range r.rows(sc) {
			if rw.name == sc.base || strings.HasPrefix(rw.name, "rlkit") || strings.HasPrefix(rw.name, "baseline") ||
				strings.HasPrefix(rw.name, "floor") || rw.name == "bare" {
				continue
			}
			rl := sc.rlkit
			if sc.rlkitFor != nil {
				rl = sc.rlkitFor(rw.name)
			}
			rs := summarize(r.samples[sc.prefix+rl+sc.suffix], sc.primary.unit)
			ps := summarize(rw.samples, sc.primary.unit)
			if rs.n == 0 || ps.n == 0 {
				continue
			}
			out = append(out, comparison{scenario: sc, rlkit: rl, peer: rw.name, rlkitStat: rs, peerStat: ps, distinct: !overlaps(rs, ps)})
			// What each adds to the baseline, measured interleaved: the
			// two are measured microseconds apart in every run, so they
			// are compared run by run.
			if runs := r.addedRatios(sc, rl, rw.name); runs.n > 0 {
				out = append(out, comparison{scenario: sc, rlkit: rl, peer: rw.name, rlkitStat: r.added(sc, rl), peerStat: r.added(sc, rw.name),
					runs: runs, distinct: runs.max < 1 || runs.min > 1, added: true})
			}
		}
	}
	return out
}

// renderSummary writes rlkit against each peer, scenario by scenario: the
// ratio of the medians, and whether the runs' ranges overlap (then the run
// does not tell the two apart).
func renderSummary(b *strings.Builder, r *results, versions map[string]string) {
	cs := r.comparisons()
	if len(cs) == 0 {
		return
	}
	b.WriteString("## rlkit against each peer\n\n")
	b.WriteString("The ratio of rlkit's median to the peer's in the same run, from the tables below (below 1: rlkit takes less time or memory). " +
		"\"overlap\" means some run of one was at least as good as some run of the other: this run does not tell them apart, whatever the medians say; with fewer than 3 runs no difference is called. " +
		"Redis peers are compared with rlkit's store on the same algorithm. " +
		"A framework's adapter has a second line, \"added time (interleaved)\": what each limiter adds to the bare framework, from the run that serves every row in turn, microseconds apart (see its table); as the two are measured side by side in every run, its ratio is the median of the runs' ratios (their min–max in brackets), and a difference is called when every run's ratio is on the same side of 1. " +
		"The parallel store scenarios have one too, \"time (interleaved)\": each limiter's time per decision from the run that runs every row in turn, milliseconds apart, compared the same way.\n\n")
	b.WriteString("| scenario | rlkit row | peer | rlkit ÷ peer | verdict |\n|---|---|---|--:|---|\n")
	for _, c := range cs {
		q := ratio(c.rlkitStat.median, c.peerStat.median)
		shown := fmtRatio(q)
		if c.added {
			q = c.runs.median
			shown = fmtRatio(q) + " (runs " + fmtRatio(c.runs.min) + "–" + fmtRatio(c.runs.max) + ")"
		}
		verdict := "overlap"
		switch {
		case min(c.rlkitStat.n, c.peerStat.n) < minRuns || c.added && c.runs.n < minRuns:
			verdict = "too few runs"
		case c.distinct:
			better := q < 1
			if c.scenario.higher {
				better = q > 1
			}
			word := map[bool]string{true: "faster", false: "slower"}[better]
			if c.scenario.primary.unit == "B/key" {
				word = map[bool]string{true: "leaner", false: "heavier"}[better]
			}
			verdict = "rlkit " + word
		}
		what := ""
		switch {
		case c.added && c.scenario.framework != "":
			what = ", added time (interleaved)"
		case c.added:
			what = ", time (interleaved)"
		}
		fmt.Fprintf(b, "| [%s](#%s) | %s%s | %s | %s | %s |\n", c.scenario.title, anchor(c.scenario.title),
			strings.ReplaceAll(label(c.scenario, c.rlkit, versions), "**", ""), what,
			label(c.scenario, c.peer, versions), shown, verdict)
	}
	b.WriteString("\n")
}

// anchor returns the GitHub anchor of a heading.
func anchor(title string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(title) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteRune('-')
		case r > 127 && r != '×' && r != '–' && r != '…':
			b.WriteRune(r)
		}
	}
	return b.String()
}

// renderOverAdmission writes the over-admission check: per participant,
// the fewest and most requests one trial admitted, the most failed calls in
// one trial, and a verdict against the quota of 100.
func renderOverAdmission(b *strings.Builder, r *results, versions map[string]string) {
	const prefix = "BenchmarkOverAdmission/"
	b.WriteString("## Over-admission check\n\n")
	b.WriteString("Per trial, 64 goroutines released together make 4 requests each (256) on one fresh key, quota 100 per hour; exactly 100 must pass. " +
		"In-memory and Redis limiters are called directly; middleware serves `GET /api/search` in process, a new client IP per trial (200 admitted, 429 denied, anything else failed). " +
		"A failed call is not an admission. rlkit's rows fail the run unless every trial admits exactly 100.\n\n")
	b.WriteString("| participant | through | trials | admitted per trial (min–max) | failed calls per trial (max) | verdict |\n|---|---|--:|--:|--:|---|\n")
	any := false
	for _, name := range r.order {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		any = true
		ss := r.samples[name]
		lo, hi, failed := summarize(ss, "admitted-min"), summarize(ss, "admitted-max"), summarize(ss, "failed-max")
		var trials int64
		for _, s := range ss {
			trials += s.iterations
		}
		group, impl, _ := strings.Cut(rest, "/")
		lbl, via := impl, group
		switch group {
		case "memory":
			lbl, via = label(scenario{}, impl, versions), "the store, in memory"
		case "redis":
			lbl, via = label(scenario{}, strings.Replace(impl, "-", "/", 1), versions), "the store, on Redis"
		case "nethttp":
			lbl, via = label(scenario{}, impl, versions), "net/http middleware"
		default: // gin, echo, fiber
			fw := strings.ToUpper(group[:1]) + group[1:]
			lbl, via = label(scenario{framework: fw}, impl, versions), fw+" middleware"
			if impl == "rlkit" {
				lbl = "**rlkit** `" + group + "rl`"
			}
		}
		verdict := "exact"
		switch {
		case hi.max > 100:
			verdict = fmt.Sprintf("**over-admits** (up to %s)", fmtCount(hi.max))
		case lo.min < 100 && failed.max > 0:
			verdict = "admits fewer: calls failed under contention"
		case lo.min < 100:
			verdict = "admits fewer"
		case failed.max > 0:
			verdict = "exact, with failed calls"
		}
		fmt.Fprintf(b, "| %s | %s | %d | %s | %s | %s |\n", lbl, via, trials, span(fmtCount, stat{min: lo.min, max: hi.max}), fmtCount(failed.max), verdict)
	}
	if !any {
		b.WriteString("| _did not run_ | | | | | |\n")
	}
	b.WriteString("\n")
}

// Formats.

// span formats st's min–max with the unit once: "47.8–52.1 ns".
func span(format func(float64) string, st stat) string {
	lo, hi := format(st.min), format(st.max)
	if lo == hi {
		return lo
	}
	if i := strings.LastIndexByte(lo, ' '); i > 0 && strings.HasSuffix(hi, lo[i:]) {
		lo = lo[:i]
	}
	return lo + "–" + hi
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func fmtNs(ns float64) string {
	switch {
	case math.IsNaN(ns):
		return "—"
	case ns >= 1e9:
		return trim(ns/1e9, 2) + " s"
	case ns >= 1e6:
		return trim(ns/1e6, 2) + " ms"
	case ns >= 1e4:
		return trim(ns/1e3, 1) + " µs"
	case ns >= 1e3:
		return trim(ns/1e3, 2) + " µs"
	}
	return trim(ns, 1) + " ns"
}

// fmtCount formats a count (B/op, allocs/op, requests): a median of an
// even number of runs may end in .5, which is rounded away from 10 on.
func fmtCount(v float64) string {
	if math.Abs(v) >= 10 {
		v = math.Round(v)
	}
	if v == math.Trunc(v) && math.Abs(v) < 1e15 {
		return group(strconv.FormatInt(int64(v), 10))
	}
	return trim(v, 1)
}

func fmtBytes(v float64) string { return trim(v, 1) + " B" }

func fmtRate(v float64) string { return group(strconv.FormatInt(int64(math.Round(v)), 10)) }

func fmtPercent(v float64) string {
	if v == 0 {
		return "0"
	}
	return trim(v*100, 1) + "%"
}

func fmtRatio(q float64) string {
	if math.IsNaN(q) {
		return "—"
	}
	if q >= 10 {
		return trim(q, 1) + "×"
	}
	return strconv.FormatFloat(q, 'f', 2, 64) + "×"
}

// trim formats v with at most prec decimals, without trailing zeros.
func trim(v float64, prec int) string {
	s := strconv.FormatFloat(v, 'f', prec, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	if i := strings.IndexByte(s, '.'); i < 0 {
		return group(s)
	} else {
		return group(s[:i]) + s[i:]
	}
}

// group inserts thousands separators into an integer's digits.
func group(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	if len(s) <= 4 {
		if neg {
			return "-" + s
		}
		return s
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
