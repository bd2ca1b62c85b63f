package main

import (
	"cmp"
	"fmt"
	"image/color"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// sweepBench is the benchmark of the goroutines sweep: one row per run,
// with a metric "<participant>:g<goroutines>:dec/s" per point.
const sweepBench = "BenchmarkRedisGoroutines"

// sweepLabels label the sweep's participants, in the order the table and
// the legend list them; the module is the peer's, for its version.
var sweepLabels = []struct{ name, label, module string }{
	{"rlkit-batched-fixed_window", "rlkit redisstore, batched (default), fixed window", ""},
	{"rlkit-batched-gcra", "rlkit redisstore, batched (default), GCRA", ""},
	{"rlkit-unbatched-fixed_window", "rlkit redisstore, unbatched (`WithBatch(0)`), fixed window", ""},
	{"ulule-fixed_window", "ulule/limiter, Redis store (fixed window)", "github.com/ulule/limiter/v3"},
	{"redis_rate-gcra", "go-redis/redis_rate (GCRA)", "github.com/go-redis/redis_rate/v10"},
}

// sweepColors are the lines' colours, by participant.
var sweepColors = map[string]color.Color{
	"rlkit-batched-fixed_window":   color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"rlkit-batched-gcra":           color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"rlkit-unbatched-fixed_window": color.RGBA{R: 0x9e, G: 0xc6, B: 0xe6, A: 0xff},
	"ulule-fixed_window":           color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"redis_rate-gcra":              color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// sweep is the parsed goroutines sweep: per participant (in order of
// first appearance) and number of goroutines, the decisions per second
// over the runs.
type sweep struct {
	participants []string
	goroutines   []int
	rates        map[string]map[int]stat
}

// sweep collects the sweep's metrics from every run; it has no
// participants when the sweep did not run.
func (r *results) sweep() sweep {
	sw := sweep{rates: map[string]map[int]stat{}}
	samples := r.samples[sweepBench]
	points := map[string]map[int][]sample{}
	for _, s := range samples {
		for unit, v := range s.metrics {
			rest, ok := strings.CutSuffix(unit, ":dec/s")
			if !ok {
				continue
			}
			name, gs, ok := strings.Cut(rest, ":g")
			g, err := strconv.Atoi(gs)
			if !ok || err != nil || g <= 0 {
				continue
			}
			if points[name] == nil {
				points[name] = map[int][]sample{}
				sw.participants = append(sw.participants, name)
			}
			points[name][g] = append(points[name][g], sample{metrics: map[string]float64{"dec/s": v}})
			if !slices.Contains(sw.goroutines, g) {
				sw.goroutines = append(sw.goroutines, g)
			}
		}
	}
	slices.Sort(sw.goroutines)
	// Known participants first, in sweepLabels' order; others after, by name.
	sortKnownFirst(sw.participants, func(n string) int {
		return slices.IndexFunc(sweepLabels, func(l struct{ name, label, module string }) bool { return l.name == n })
	})
	for name, byG := range points {
		sw.rates[name] = map[int]stat{}
		for g, ss := range byG {
			sw.rates[name][g] = summarize(ss, "dec/s")
		}
	}
	return sw
}

// sweepLabel returns the label of participant name, with the peer's
// version.
func sweepLabel(name string, versions map[string]string) string {
	for _, l := range sweepLabels {
		if l.name == name {
			if v := versions[l.module]; l.module != "" && v != "" {
				return l.label + " " + v
			}
			return l.label
		}
	}
	return "`" + name + "`"
}

// renderSweep writes the sweep's section: the picture, a table of the
// median decisions per second (and their range over the runs) per number
// of goroutines, and rlkit batched against each peer at 1 and 64
// goroutines.
func renderSweep(b *strings.Builder, sw sweep, png string, versions map[string]string) {
	b.WriteString("## Redis: decisions per second against goroutines\n\n")
	if len(sw.participants) == 0 {
		b.WriteString("_No rows: the goroutines sweep did not run (see the notes at the top)._\n\n")
		return
	}
	b.WriteString("`BenchmarkRedisGoroutines`: at each number of goroutines, each participant in turn (same redis-server as above, its own go-redis client with a pool of 64 connections, its own key, every call admitted, rlkit's deny cache off) makes 2,048 decisions (32 per goroutine past 64) from that many goroutines released together; decisions per second is their count over the wall time to the last answer. " +
		"rlkit batched is the store's default: the decisions that wait for Redis while its calls are in flight go as one script call. Past 64 goroutines every client also waits for a pooled connection.\n\n")
	fmt.Fprintf(b, "![decisions per second against goroutines](%s)\n\n", png)
	b.WriteString("| participant |")
	for _, g := range sw.goroutines {
		fmt.Fprintf(b, " %d |", g)
	}
	b.WriteString("\n|---|" + strings.Repeat("--:|", len(sw.goroutines)) + "\n")
	for _, name := range sw.participants {
		fmt.Fprintf(b, "| %s |", sweepLabel(name, versions))
		for _, g := range sw.goroutines {
			st, ok := sw.rates[name][g]
			if !ok || st.n == 0 {
				b.WriteString(" |")
				continue
			}
			fmt.Fprintf(b, " %s<br>%s |", fmtKilo(st.median), span(fmtKilo, st))
		}
		b.WriteString("\n")
	}
	n := 0
	for _, st := range sw.rates[sw.participants[0]] {
		n = max(n, st.n)
	}
	fmt.Fprintf(b, "\nDecisions per second, median and min–max over %s.\n\n", plural(n, "run"))
	// rlkit batched against the peer of its algorithm: time per decision,
	// rlkit ÷ peer (the inverse of the rates' ratio).
	pairs := [][2]string{{"rlkit-batched-fixed_window", "ulule-fixed_window"}, {"rlkit-batched-gcra", "redis_rate-gcra"}, {"rlkit-batched-fixed_window", "rlkit-unbatched-fixed_window"}}
	var lines []string
	for _, g := range []int{1, 64} {
		for _, pr := range pairs {
			a, okA := sw.rates[pr[0]][g]
			p, okP := sw.rates[pr[1]][g]
			if !okA || !okP || a.n == 0 || p.n == 0 {
				continue
			}
			verdict := rateVerdict(a, p, "rlkit faster", "rlkit slower")
			lines = append(lines, fmt.Sprintf("| %d | %s | %s | %s | %s |", g, strings.ReplaceAll(sweepLabel(pr[0], versions), "`", ""),
				sweepLabel(pr[1], versions), fmtRatio(ratio(p.median, a.median)), verdict))
		}
	}
	if len(lines) > 0 {
		b.WriteString("Time per decision, rlkit batched ÷ the other (the inverse of the ratio of their decisions per second; below 1: rlkit takes less time):\n\n")
		b.WriteString("| goroutines | rlkit | other | rlkit ÷ other | verdict |\n|--:|---|---|--:|---|\n")
		b.WriteString(strings.Join(lines, "\n") + "\n\n")
	}
}

// fmtKilo formats decisions per second: 812, 14.1k, 70.6k.
func fmtKilo(v float64) string {
	if math.IsNaN(v) {
		return "—"
	}
	if v < 1000 {
		return strconv.FormatFloat(math.Round(v), 'f', 0, 64)
	}
	return trim(v/1000, 1) + "k"
}

// writeSweepPNG draws the sweep to path: decisions per second (median over
// the runs, with the runs' range as error bars) against goroutines on a
// log₂ axis, one line per participant.
func writeSweepPNG(path string, sw sweep, versions map[string]string) error {
	p := goroutinePlot("Redis: decisions per second against goroutines (median of the runs, bars: min–max)",
		"goroutines calling at once", "decisions per second", sw.goroutines)
	p.Y.Min = 0
	for i, name := range sw.participants {
		var pts plotter.XYs
		var errs plotter.YErrors
		for _, g := range sw.goroutines {
			st, ok := sw.rates[name][g]
			if !ok || st.n == 0 {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(g), Y: st.median})
			errs = append(errs, struct{ Low, High float64 }{st.median - st.min, st.max - st.median})
			p.Y.Max = max(p.Y.Max, st.max)
		}
		if len(pts) == 0 {
			continue
		}
		c, ok := sweepColors[name]
		if !ok {
			c = color.Gray{Y: uint8(40 * (i % 5))}
		}
		if err := addSeries(p, pts, errs, c, strings.Contains(name, "unbatched"), sweepLabel(name, versions)); err != nil {
			return err
		}
	}
	p.Y.Max *= 1.08
	return savePNG(p, path)
}

// goroutinePlot is a plot titled title, with a grid and the legend at its
// top left, whose x axis (labelled x) is goroutines on a log₂ scale,
// ticked at each of goroutines, and whose y axis is labelled y.
func goroutinePlot(title, x, y string, goroutines []int) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.Title.TextStyle.Font.Size = vg.Points(12)
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = goroutineTicks(goroutines)
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	return p
}

// addSeries draws one series on p: a line of colour c (dashed or not)
// through pts, a dot on each, the error bars errs, and label (without
// its Markdown backquotes) in the legend.
func addSeries(p *plot.Plot, pts plotter.XYs, errs plotter.YErrors, c color.Color, dashed bool, label string) error {
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	line.Color, line.Width = c, vg.Points(2)
	if dashed {
		line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
	}
	points.Color, points.Shape = c, draw.CircleGlyph{}
	bars, err := plotter.NewYErrorBars(struct {
		plotter.XYer
		plotter.YErrorer
	}{pts, errs})
	if err != nil {
		return err
	}
	bars.Color = c
	p.Add(line, points, bars)
	p.Legend.Add(strings.ReplaceAll(label, "`", ""), line, points)
	return nil
}

// savePNG draws p, 9 by 5 inches, into the PNG file path.
func savePNG(p *plot.Plot, path string) error {
	img := vgimg.New(9*vg.Inch, 5*vg.Inch)
	p.Draw(draw.New(img))
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// rateVerdict compares rlkit's rate a with a peer's p: more (a higher
// rate, in every run) or fewer, "overlap" when some run of one was at
// least as good as some run of the other, "too few runs" under minRuns.
func rateVerdict(a, p stat, more, fewer string) string {
	switch {
	case min(a.n, p.n) < minRuns:
		return "too few runs"
	case !overlaps(a, p) && a.median > p.median:
		return more
	case !overlaps(a, p):
		return fewer
	}
	return "overlap"
}

// sortKnownFirst sorts names by their place in a list of known names
// (index; -1: not in it), the unknown ones after, by name.
func sortKnownFirst(names []string, index func(string) int) {
	rank := func(n string) int {
		if i := index(n); i >= 0 {
			return i
		}
		return math.MaxInt
	}
	slices.SortFunc(names, func(a, b string) int {
		return cmp.Or(cmp.Compare(rank(a), rank(b)), strings.Compare(a, b))
	})
}

// goroutineTicks labels the sweep's points on the log axis.
type goroutineTicks []int

func (t goroutineTicks) Ticks(lo, hi float64) []plot.Tick {
	var ticks []plot.Tick
	for _, g := range t {
		if x := float64(g); x >= lo && x <= hi {
			ticks = append(ticks, plot.Tick{Value: x, Label: strconv.Itoa(g)})
		}
	}
	return ticks
}
