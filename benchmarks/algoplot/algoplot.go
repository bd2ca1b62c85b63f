// Package algoplot simulates rlkit's four algorithms under one steady
// overload on a fake clock and draws what each admits over time, for
// benchmarks/algorithms.png and the table beside it in RESULTS.md.
//
// The simulation is deterministic: it calls core/algo's Apply at instants
// it computes (no clock, no store), so the picture and the counts are the
// same on every machine and every run.
package algoplot

import (
	"fmt"
	"image/color"
	"os"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rlkit/rlkit/core/algo"
)

// Scenario is one client sending evenly spaced requests at Rate per second
// from Start to End (offsets from the start of a window) against one key
// limited to Limit, counted per Bucket from 0 to End.
type Scenario struct {
	Limit      algo.Limit
	Rate       int64
	Start, End time.Duration
	Bucket     time.Duration
}

// Default is the scenario of algorithms.png: a limit of 10 per second and a
// client sending 30 per second (3× the limit), evenly, from 0.7 s to 3 s.
// Windows start at 0 s, 1 s and 2 s, so the load crosses two window
// boundaries, and it starts late in the first window, so that the fixed
// window's burst at the boundary shows in full: the 9 requests before
// 1.0 s and the 10 after it pass back to back, 19 in 0.6 s.
func Default() Scenario {
	return Scenario{
		Limit:  algo.Limit{Count: 10, Period: time.Second},
		Rate:   30,
		Start:  700 * time.Millisecond,
		End:    3 * time.Second,
		Bucket: 100 * time.Millisecond,
	}
}

// Algorithms are the algorithms simulated, in the order drawn.
var Algorithms = []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA}

// epoch is the fake clock's instant for offset 0: a whole number of
// seconds (and of any Period that divides a day), so that offset 0 is a
// window boundary as windows align on floor(now/Period).
const epoch = int64(1_800_000_000) * int64(time.Second)

// Series is what one algorithm admitted.
type Series struct {
	Algorithm algo.Algorithm
	// Admitted counts the admitted requests per bucket.
	Admitted []int
	// Total is the number of admitted requests.
	Total int
	// PerWindow counts the admitted requests per window of the limit
	// (Period-long, aligned on 0).
	PerWindow []int
	// PeakPeriod is the most requests admitted within any Period-long span.
	PeakPeriod int
	// LongestGap is the longest time between two consecutive admitted
	// requests, while the client keeps sending.
	LongestGap time.Duration
}

// Result is the outcome of Simulate.
type Result struct {
	Scenario
	// Offered counts the requests sent per bucket; OfferedTotal all of them.
	Offered      []int
	OfferedTotal int
	Series       []Series
}

// Instants returns the offsets at which the client of sc sends: Start +
// k×1s/Rate (rounded down to the nanosecond) for every k while before End.
func (sc Scenario) Instants() []time.Duration {
	var out []time.Duration
	for k := int64(0); ; k++ {
		t := sc.Start + time.Duration(k*int64(time.Second)/sc.Rate)
		if t >= sc.End {
			return out
		}
		out = append(out, t)
	}
}

// Simulate runs every algorithm of Algorithms over sc: one fresh state per
// algorithm, one request of cost 1 at each instant.
func Simulate(sc Scenario) Result {
	instants := sc.Instants()
	buckets := int((sc.End + sc.Bucket - 1) / sc.Bucket)
	windows := int((sc.End + sc.Limit.Period - 1) / sc.Limit.Period)
	r := Result{Scenario: sc, Offered: make([]int, buckets), OfferedTotal: len(instants)}
	for _, t := range instants {
		r.Offered[t/sc.Bucket]++
	}
	for _, a := range Algorithms {
		s := Series{Algorithm: a, Admitted: make([]int, buckets), PerWindow: make([]int, windows)}
		var (
			state    algo.State
			out      algo.Outcome
			admitted []time.Duration
		)
		for _, t := range instants {
			algo.Apply(a, &state, &sc.Limit, epoch+int64(t), 1, &out)
			if out.Allowed {
				s.Admitted[t/sc.Bucket]++
				s.PerWindow[t/sc.Limit.Period]++
				admitted = append(admitted, t)
			}
		}
		s.Total = len(admitted)
		s.PeakPeriod = peak(admitted, sc.Limit.Period)
		for i := 1; i < len(admitted); i++ {
			s.LongestGap = max(s.LongestGap, admitted[i]-admitted[i-1])
		}
		r.Series = append(r.Series, s)
	}
	return r
}

// peak returns the most instants of sorted within any span of length d.
func peak(sorted []time.Duration, d time.Duration) int {
	best, j := 0, 0
	for i := range sorted {
		for sorted[i]-sorted[j] >= d {
			j++
		}
		best = max(best, i-j+1)
	}
	return best
}

// seconds formats d in seconds, as "0.7 s".
func seconds(d time.Duration) string {
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.3f", d.Seconds()), "0"), ".") + " s"
}

// Describe says in one sentence what r simulated.
func (r Result) Describe() string {
	return fmt.Sprintf("One key limited to %s; one client sends %d requests per second, evenly spaced, from %s to %s (%d requests, %.0f× the limit); windows start every %s from 0 s. Fake clock, so the counts are exact and the same on every run.",
		r.Limit, r.Rate, seconds(r.Start), seconds(r.End), r.OfferedTotal,
		float64(r.Rate)*r.Limit.Period.Seconds()/float64(r.Limit.Count), seconds(r.Limit.Period))
}

// Markdown returns r as a table: per algorithm, the requests admitted in
// all, per window, at most within one period, the longest gap between
// admissions, and the admissions per bucket.
func (r Result) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| algorithm | admitted (of %d) | per window | most within any %s | longest gap | admitted per %s, from 0 s |\n",
		r.OfferedTotal, seconds(r.Limit.Period), r.Bucket)
	b.WriteString("|---|---|---|---|---|---|\n")
	fmt.Fprintf(&b, "| (offered) | %d | | | | `%s` |\n", r.OfferedTotal, ints(r.Offered, " "))
	for _, s := range r.Series {
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s | `%s` |\n",
			s.Algorithm, s.Total, ints(s.PerWindow, " + "), s.PeakPeriod, seconds(s.LongestGap.Round(time.Millisecond)), ints(s.Admitted, " "))
	}
	return b.String()
}

func ints(v []int, sep string) string {
	s := make([]string, len(v))
	for i, n := range v {
		s[i] = fmt.Sprint(n)
	}
	return strings.Join(s, sep)
}

var (
	colors = map[algo.Algorithm]color.Color{
		algo.FixedWindow:   color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
		algo.SlidingWindow: color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
		algo.TokenBucket:   color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
		algo.GCRA:          color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff},
	}
	grey      = color.Gray{Y: 0x99}
	lightGrey = color.Gray{Y: 0xcc}
)

// WritePNG draws r to path: one panel per algorithm, stacked on one time
// axis, each with the requests admitted per bucket (a step line), the
// offered load (dashed), the limit's rate per bucket (dotted) and the
// window boundaries (thin vertical lines).
func (r Result) WritePNG(path string) error {
	const width, panelHeight = 9 * vg.Inch, 1.9 * vg.Inch
	rows := make([][]*plot.Plot, len(r.Series))
	yMax := 0
	for _, n := range r.Offered {
		yMax = max(yMax, n)
	}
	for _, s := range r.Series {
		for _, n := range s.Admitted {
			yMax = max(yMax, n)
		}
	}
	limitPerBucket := float64(r.Limit.Count) * float64(r.Bucket) / float64(r.Limit.Period)
	for i, s := range r.Series {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("%s: %d of %d admitted; at most %d within any %s; longest gap %s",
			s.Algorithm, s.Total, r.OfferedTotal, s.PeakPeriod, seconds(r.Limit.Period), seconds(s.LongestGap.Round(time.Millisecond)))
		if i == 0 {
			p.Title.Text = fmt.Sprintf("Limit %s; one client sends %d/s evenly from %s (%.0f× the limit); fake clock\n\n",
				r.Limit, r.Rate, seconds(r.Start), float64(r.Rate)*r.Limit.Period.Seconds()/float64(r.Limit.Count)) + p.Title.Text
		}
		p.Title.TextStyle.Font.Size = vg.Points(11)
		p.X.Min, p.X.Max = 0, r.End.Seconds()
		p.Y.Min, p.Y.Max = 0, float64(yMax)+0.5
		p.Y.Label.Text = fmt.Sprintf("admitted per %s", strings.TrimSuffix(seconds(r.Bucket), " s")+" s")
		p.X.Tick.Marker = secondTicks{step: r.Limit.Period.Seconds()}
		if i == len(r.Series)-1 {
			p.X.Label.Text = "time (s)"
		}
		p.Add(plotter.NewGrid())

		var boundary *plotter.Line
		for w := r.Limit.Period; w < r.End; w += r.Limit.Period {
			l, err := plotter.NewLine(plotter.XYs{{X: w.Seconds(), Y: 0}, {X: w.Seconds(), Y: float64(yMax) + 0.5}})
			if err != nil {
				return err
			}
			l.Color, l.Width = lightGrey, vg.Points(2)
			p.Add(l)
			boundary = l
		}
		offered, err := stepLine(r.Offered, r.Bucket, r.End)
		if err != nil {
			return err
		}
		offered.Color, offered.Dashes = grey, []vg.Length{vg.Points(4), vg.Points(3)}
		limit, err := plotter.NewLine(plotter.XYs{{X: 0, Y: limitPerBucket}, {X: r.End.Seconds(), Y: limitPerBucket}})
		if err != nil {
			return err
		}
		limit.Color, limit.Dashes = color.Black, []vg.Length{vg.Points(1), vg.Points(2)}
		admitted, err := stepLine(s.Admitted, r.Bucket, r.End)
		if err != nil {
			return err
		}
		admitted.Color, admitted.Width = colors[s.Algorithm], vg.Points(2.5)
		admitted.FillColor = withAlpha(colors[s.Algorithm], 0x40)
		p.Add(offered, limit, admitted)
		if i == 0 {
			p.Legend.Top, p.Legend.Left = true, true
			p.Legend.TextStyle.Font.Size = vg.Points(9)
			p.Legend.Add("admitted", admitted)
			p.Legend.Add(fmt.Sprintf("offered (%d/s)", r.Rate), offered)
			p.Legend.Add(fmt.Sprintf("limit rate (%s)", r.Limit), limit)
			if boundary != nil {
				p.Legend.Add("window boundary", boundary)
			}
		}
		rows[i] = []*plot.Plot{p}
	}
	img := vgimg.New(width, panelHeight*vg.Length(len(rows)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(rows), Cols: 1, PadX: vg.Millimeter, PadY: 2 * vg.Millimeter,
		PadTop: vg.Millimeter, PadBottom: vg.Millimeter, PadLeft: vg.Millimeter, PadRight: 3 * vg.Millimeter}
	canvases := plot.Align(rows, tiles, dc)
	for i := range rows {
		rows[i][0].Draw(canvases[i][0])
	}
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

// stepLine draws counts per bucket as a step line from 0 to end.
func stepLine(counts []int, bucket, end time.Duration) (*plotter.Line, error) {
	pts := make(plotter.XYs, 0, len(counts)+1)
	for i, n := range counts {
		pts = append(pts, plotter.XY{X: (time.Duration(i) * bucket).Seconds(), Y: float64(n)})
	}
	pts = append(pts, plotter.XY{X: end.Seconds(), Y: float64(counts[len(counts)-1])})
	l, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	l.StepStyle = plotter.PostStep
	return l, nil
}

func withAlpha(c color.Color, a uint8) color.Color {
	r, g, b, _ := c.RGBA()
	// Premultiplied, as color.RGBA is.
	return color.RGBA{R: uint8(r >> 8 * uint32(a) / 0xff), G: uint8(g >> 8 * uint32(a) / 0xff), B: uint8(b >> 8 * uint32(a) / 0xff), A: a}
}

// secondTicks marks every step seconds, labelled, and every tenth of it.
type secondTicks struct{ step float64 }

func (t secondTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	minor := t.step / 10
	for i := 0; ; i++ {
		x := float64(i) * minor
		if x > max+1e-9 {
			return ticks
		}
		if x < min-1e-9 {
			continue
		}
		label := ""
		if i%10 == 0 {
			label = fmt.Sprintf("%g", x)
		}
		ticks = append(ticks, plot.Tick{Value: x, Label: label})
	}
}
