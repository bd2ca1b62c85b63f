package main

import (
	"fmt"
	"image/color"
	"math"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
)

// fleetPrefix names the fleet's rows: BenchmarkFleet/<system>/g<goroutines>
// (fleet_test.go), metrics dec/s/node, p50-ns, p99-ns, over-adm, windows,
// failed/op and, for rlkit, over-bound.
const fleetPrefix = "BenchmarkFleet/"

// gubernatorModule is the module of the fleet's gubernator rows.
const gubernatorModule = "github.com/gubernator-io/gubernator/v2"

// fleetLabels label the fleet's systems, in the order the table and the
// legend list them; the module is the peer's, for its version.
var fleetLabels = []struct {
	name, label, module string
	color               color.Color
}{
	{"rlkit-lease", "rlkit, `consistency: lease`", "", color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}},
	{"rlkit-exact", "rlkit, `consistency: exact`", "", color.RGBA{R: 0x9e, G: 0xc6, B: 0xe6, A: 0xff}},
	{"gubernator-global", "gubernator, GLOBAL", gubernatorModule, color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}},
	{"gubernator-batching", "gubernator, BATCHING", gubernatorModule, color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}},
}

// fleetPairs are the systems the section compares at fleetCompareAt
// goroutines: rlkit's first.
var fleetPairs = [][2]string{{"rlkit-lease", "gubernator-global"}, {"rlkit-exact", "gubernator-batching"}}

// fleetCompareAt is the number of goroutines of the section's ratios.
const fleetCompareAt = 64

// fleet is the parsed fleet benchmark: per system (in fleetLabels'
// order, then others by name) and number of goroutines, the samples of
// every run.
type fleet struct {
	systems    []string
	goroutines []int
	samples    map[string]map[int][]sample
	// missing holds the systems of fleetLabels without rows, with the
	// reason a run gave for skipping them ("" when none printed one: go
	// test prints skips with -test.v only).
	missing map[string]string
}

// fleet collects the fleet's rows from every run.
func (r *results) fleet() fleet {
	fl := fleet{samples: map[string]map[int][]sample{}, missing: map[string]string{}}
	for _, name := range r.order {
		rest, ok := strings.CutPrefix(name, fleetPrefix)
		if !ok {
			continue
		}
		sys, gs, ok := strings.Cut(rest, "/g")
		g, err := strconv.Atoi(gs)
		if !ok || err != nil || g <= 0 {
			continue
		}
		if fl.samples[sys] == nil {
			fl.samples[sys] = map[int][]sample{}
			fl.systems = append(fl.systems, sys)
		}
		fl.samples[sys][g] = append(fl.samples[sys][g], r.samples[name]...)
		if !slices.Contains(fl.goroutines, g) {
			fl.goroutines = append(fl.goroutines, g)
		}
	}
	for _, l := range fleetLabels {
		if fl.samples[l.name] == nil {
			fl.missing[l.name] = r.skips[fleetPrefix+l.name]
		}
	}
	slices.Sort(fl.goroutines)
	sortKnownFirst(fl.systems, func(n string) int {
		for i, l := range fleetLabels {
			if l.name == n {
				return i
			}
		}
		return -1
	})
	return fl
}

// stat returns the stat of unit of system at g goroutines over the runs.
func (fl fleet) stat(system string, g int, unit string) stat {
	return summarize(fl.samples[system][g], unit)
}

// fleetLabel returns the label of system, with the peer's version.
func fleetLabel(system string, versions map[string]string) string {
	for _, l := range fleetLabels {
		if l.name == system {
			if v := versions[l.module]; l.module != "" && v != "" {
				return strings.Replace(l.label, ",", " "+v+",", 1)
			}
			return l.label
		}
	}
	return "`" + system + "`"
}

// renderFleet writes the fleet's section: what was run, the picture, a
// table per system and number of goroutines (decisions per second per
// node, latency, over-admission on the hot keys and the bound stated for
// it) and rlkit against gubernator at fleetCompareAt goroutines.
func renderFleet(b *strings.Builder, fl fleet, png string, versions map[string]string) {
	b.WriteString("## Fleet: rlkit and gubernator on three nodes\n\n")
	guber := "gubernator"
	if v := versions[gubernatorModule]; v != "" {
		guber += " " + v
	}
	fmt.Fprintf(b, "`BenchmarkFleet` puts rlkit next to %s, a distributed rate-limit service, as a fleet of three application nodes would use them. "+
		"A **node** is one instance of the limiter an application process talks to; the three nodes of each system run in the benchmark's process and talk over loopback. "+
		"gubernator: a cluster of three gubernator daemons (each with the other two as peers, their default settings), and each node's requests go to its own daemon through gubernator's gRPC client, one request per call, as an application calls its local instance; "+
		"a key belongs to one daemon (by consistent hash). With behaviour **BATCHING** (the default) the other daemons forward each request to the owner, in batches (they wait up to 500 µs to fill one), and the owner decides; "+
		"with **GLOBAL** every daemon decides from its own copy of the key at once and sends the hits to the owner (every 100 ms), which sends its count back to all. "+
		"rlkit: three `core.Limiter`s, each with its own Redis client and `redisstore` (its defaults: concurrent decisions batched into one script call, keys over their limit refused locally until their window ends; timeout 5 s), all on one redis-server, deciding with `Limiter.Decide`. "+
		"With **`consistency: exact`** (the default) each decision is counted in Redis; with **`consistency: lease`** each limiter takes quota from Redis in blocks and decides from them locally, taking smaller blocks as a key nears its limit.\n\n", guber)
	b.WriteString("The load: 1,000 keys. Half of all decisions go to 8 **hot keys**, limit 10 per second each, asked far more (each gets 1/16 of all decisions: some 50 per second at the least, thousands at the most); the other half to 992 keys, limit 10,000 per second, which none comes near. " +
		"Every limit is a fixed window of one second (gubernator's `TOKEN_BUCKET`: the whole limit back when its duration has passed since the key's first hit; rlkit's `fixed_window`, windows aligned to the second). " +
		"At each number of goroutines, the goroutines make the benchmark's decisions between them, going round the three nodes, so that each node gets a third; **decisions per second per node** is all decisions over the wall time, divided by 3. p50 and p99 are the latency of one decision as the calling goroutine sees it.\n\n")
	b.WriteString("**Over-admission** is what a hot key was let through beyond its limit in one window: for every hot key and every window, the requests admitted in that window minus 10, the largest over all keys and windows (0 when no window admitted more than 10); the table shows the largest over the runs. " +
		"A request counts in the window the system itself says it counted it in, by the window end its answer reports (gubernator's reset time, rlkit's time to reset after the answer came); ends less than half a second apart are one window, since different nodes, or a round trip, see the same window end a little apart, while two windows end a second apart. " +
		"(The most admitted within any one-second span would not do: a fixed window rightly lets up to twice its limit through across a window boundary.) " +
		"The stated bound is the over-admission the system promises not to exceed: for rlkit's fixed windows it is 0 in both modes (under `lease`, blocks another node holds unspent can only make it admit fewer); gubernator states none.\n\n")
	if len(fl.systems) == 0 {
		b.WriteString("_No rows: the fleet benchmark did not run (see the notes at the top)._\n\n")
		return
	}
	fmt.Fprintf(b, "![decisions per second per node against goroutines](%s)\n\n", png)
	b.WriteString("| system | goroutines | decisions/s per node (median) | min–max | p50 | p99 | over-admission (most) | stated bound | hot-key windows | failed calls (worst run) |\n|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	runs := 0
	for _, sys := range fl.systems {
		bound := "none stated"
		for _, g := range fl.goroutines {
			rate := fl.stat(sys, g, "dec/s/node")
			if rate.n == 0 {
				continue
			}
			runs = max(runs, rate.n)
			over := fl.stat(sys, g, "over-adm")
			overCell := ""
			if over.n > 0 {
				overCell = fmtCount(over.max)
			}
			if st := fl.stat(sys, g, "over-bound"); st.n > 0 {
				bound = fmtCount(st.max)
			}
			failed := ""
			if st := fl.stat(sys, g, "failed/op"); st.n > 0 {
				failed = fmtPercent(st.max)
			}
			fmt.Fprintf(b, "| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s |\n", fleetLabel(sys, versions), g,
				fmtRate(rate.median), span(fmtRate, rate),
				medianOf(fmtNs, fl.stat(sys, g, "p50-ns")), medianOf(fmtNs, fl.stat(sys, g, "p99-ns")),
				overCell, bound, medianOf(fmtCount, fl.stat(sys, g, "windows")), failed)
		}
	}
	fmt.Fprintf(b, "\nMedians and min–max over %s; over-admission and failed calls are the worst run's; hot-key windows is how many windows of the 8 hot keys, together, one run counted (median), whole or cut by the start or end of the measurement.\n\n", plural(runs, "run"))
	for _, l := range fleetLabels {
		why, ok := fl.missing[l.name]
		if !ok {
			continue
		}
		if why == "" {
			why = "skipped or failed (see the notes at the top; `go test -run '^$' -bench BenchmarkFleet/" + l.name + " -v` says why)"
		}
		fmt.Fprintf(b, "%s has no rows: %s.\n\n", fleetLabel(l.name, versions), strings.TrimSuffix(why, "."))
	}
	var lines []string
	for _, pr := range fleetPairs {
		a, p := fl.stat(pr[0], fleetCompareAt, "dec/s/node"), fl.stat(pr[1], fleetCompareAt, "dec/s/node")
		if a.n == 0 || p.n == 0 {
			continue
		}
		verdict := rateVerdict(a, p, "rlkit more", "rlkit fewer")
		ratioOf := func(unit string) string {
			return fmtRatio(ratio(fl.stat(pr[0], fleetCompareAt, unit).median, fl.stat(pr[1], fleetCompareAt, unit).median))
		}
		lines = append(lines, fmt.Sprintf("| %s | %s | %s | %s | %s | %s |",
			strings.ReplaceAll(fleetLabel(pr[0], versions), "`", ""), fleetLabel(pr[1], versions),
			fmtRatio(ratio(a.median, p.median)), verdict, ratioOf("p50-ns"), ratioOf("p99-ns")))
	}
	if len(lines) > 0 {
		fmt.Fprintf(b, "rlkit ÷ gubernator at %d goroutines, medians (decisions per second: above 1, rlkit decides more; latency: below 1, rlkit answers sooner):\n\n", fleetCompareAt)
		b.WriteString("| rlkit | gubernator | decisions/s per node | verdict | p50 | p99 |\n|---|---|--:|---|--:|--:|\n")
		b.WriteString(strings.Join(lines, "\n") + "\n\n")
	}
}

// writeFleetPNG draws the fleet to path: decisions per second per node
// (median over the runs, the runs' range as error bars, on a log axis)
// against goroutines (a log₂ axis), one line per system.
func writeFleetPNG(path string, fl fleet, versions map[string]string) error {
	p := goroutinePlot("Three nodes: decisions per second per node against goroutines (median of the runs, bars: min–max)",
		"goroutines calling at once, spread over the three nodes", "decisions per second per node", fl.goroutines)
	// The systems lie orders of magnitude apart: a log axis shows each.
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = math.Inf(1)
	for i, sys := range fl.systems {
		var pts plotter.XYs
		var errs plotter.YErrors
		for _, g := range fl.goroutines {
			st := fl.stat(sys, g, "dec/s/node")
			if st.n == 0 {
				continue
			}
			if st.min <= 0 {
				continue // nothing decided: no point on a log axis
			}
			pts = append(pts, plotter.XY{X: float64(g), Y: st.median})
			errs = append(errs, struct{ Low, High float64 }{st.median - st.min, st.max - st.median})
			p.Y.Max = max(p.Y.Max, st.max)
			p.Y.Min = min(p.Y.Min, st.min)
		}
		if len(pts) == 0 {
			continue
		}
		c := color.Color(color.Gray{Y: uint8(40 * (i % 5))})
		for _, l := range fleetLabels {
			if l.name == sys {
				c = l.color
			}
		}
		if err := addSeries(p, pts, errs, c, strings.HasPrefix(sys, "gubernator"), fleetLabel(sys, versions)); err != nil {
			return err
		}
	}
	if math.IsInf(p.Y.Min, 1) {
		p.Y.Min, p.Y.Max = 1, 10
	}
	p.Y.Min /= 1.5
	p.Y.Max *= 1.5
	return savePNG(p, path)
}
