package main

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/rlkit/rlkit/cmd/rlkit/internal/replay"
)

// Colours of the marks of a replay's plot.
var (
	limitColor       = color.RGBA{R: 200, G: 30, B: 30, A: 255}
	p99Color         = color.RGBA{R: 30, G: 90, B: 200, A: 255}
	p999Color        = color.RGBA{R: 130, G: 40, B: 170, A: 255}
	recommendedColor = color.RGBA{R: 20, G: 150, B: 60, A: 255}
)

// plotDir makes dir if need be and checks that a plot can be written
// into it, by writing an empty file there and removing it.
func plotDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".rlkit-plot-*.png")
	if err != nil {
		return err
	}
	name := f.Name()
	err = f.Close()
	if rerr := os.Remove(name); err == nil {
		err = rerr
	}
	return err
}

// writePlots writes one PNG per rule of rep into dir (made if need be):
// <rule>.png, or <rule>@<plan>.png for a plan's limits. No rule or plan
// name holds '@' (names are letters, digits, '_', '.' and '-'), so no two
// rules or plans share a name; a name that differs from an earlier one
// only in case, which a file system that ignores case takes as the same,
// gets ~2, ~3, and so on.
func writePlots(dir string, rep *replay.Report) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	seen := map[string]int{} // names in lower case, and how many had it
	for _, r := range rep.Rules {
		name := r.Rule
		if r.Plan != "" {
			name += "@" + r.Plan
		}
		lower := strings.ToLower(name)
		if seen[lower]++; seen[lower] > 1 {
			name += "~" + strconv.Itoa(seen[lower])
		}
		if err := writePlot(filepath.Join(dir, name+".png"), r); err != nil {
			return fmt.Errorf("plot of rule %q: %w", r.Rule, err)
		}
	}
	return nil
}

// writePlot draws rule r: per limit, a panel with the cumulative
// distribution of the keys' peaks (the share of keys whose most in one
// window was at most x) and vertical lines at the rule's limit, the
// peaks' 99th and 99.9th percentiles and the recommended limit.
func writePlot(path string, r replay.RuleReport) error {
	panels := max(len(r.Windows), 1)
	img := vgimg.New(9*vg.Inch, vg.Length(panels)*4*vg.Inch)
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: panels, Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadX: vg.Points(6), PadY: vg.Points(12)}
	if len(r.Windows) == 0 {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("rule %s: no limit counted (%s)", r.Rule, orNone(r.NotReplayed))
		p.Draw(dc)
	}
	for i, w := range r.Windows {
		p, err := peakPlot(r, w)
		if err != nil {
			return err
		}
		p.Draw(tiles.At(dc, 0, i))
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

func orNone(s string) string {
	if s == "" {
		return "no request counted"
	}
	return s
}

// peakPlot is the panel of one limit of r.
func peakPlot(r replay.RuleReport, w replay.WindowReport) (*plot.Plot, error) {
	p := plot.New()
	name := r.Rule
	if r.Plan != "" {
		name += " (plan " + r.Plan + ")"
	}
	p.Title.Text = fmt.Sprintf("rule %s, %s: keys by their most units in one window (%s)", name, w.Limit, w.Window)
	p.Title.TextStyle.Font.Size = vg.Points(11)
	p.X.Label.Text = "peak units per key per window"
	p.Y.Label.Text = "share of keys with a peak at most x"
	p.Y.Min, p.Y.Max = 0, 1.02
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = false, false
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	if w.Keys == 0 || len(w.Peaks) == 0 {
		p.Title.Text += ": nothing counted"
		p.X.Min, p.X.Max = 0, float64(max(w.Count, 1))*1.2
		if err := vline(p, float64(w.Count), 1.02, limitColor, nil, fmt.Sprintf("limit %d", w.Count)); err != nil {
			return nil, err
		}
		return p, nil
	}
	hi := max(w.PeakMax, w.Count, w.Recommended)
	if hi >= 50 {
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		p.X.Min = 1
	} else {
		p.X.Min = 0
	}
	p.X.Max = float64(hi) * 1.15
	// The cumulative distribution, a step at the top of each bucket.
	var pts plotter.XYs
	var seen int64
	pts = append(pts, plotter.XY{X: max(p.X.Min, 1), Y: 0})
	for _, b := range w.Peaks {
		pts = append(pts, plotter.XY{X: float64(b.Low), Y: float64(seen) / float64(w.Keys)})
		seen += b.Count
		pts = append(pts, plotter.XY{X: float64(b.High), Y: float64(seen) / float64(w.Keys)})
	}
	pts = append(pts, plotter.XY{X: p.X.Max, Y: 1})
	line, err := plotter.NewLine(pts)
	if err != nil {
		return nil, err
	}
	line.Width = vg.Points(2)
	line.Color = color.Gray{Y: 40}
	p.Add(line)
	p.Legend.Add(fmt.Sprintf("%d keys", w.Keys), line)
	dash := func(a, b float64) []vg.Length { return []vg.Length{vg.Points(a), vg.Points(b)} }
	for _, m := range []struct {
		x      int64
		c      color.Color
		dashes []vg.Length
		label  string
	}{
		{w.Count, limitColor, nil, fmt.Sprintf("the rule's limit: %d", w.Count)},
		{w.PeakP99, p99Color, dash(6, 3), fmt.Sprintf("p99 of peaks: %d", w.PeakP99)},
		{w.PeakP999, p999Color, dash(2, 2), fmt.Sprintf("p99.9 of peaks: %d", w.PeakP999)},
		{w.Recommended, recommendedColor, dash(8, 2), fmt.Sprintf("recommended: %d (refuses %.3g%%)", w.Recommended, w.RecommendedShare*100)},
	} {
		if m.x <= 0 {
			continue
		}
		if err := vline(p, float64(m.x), 1.02, m.c, m.dashes, m.label); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// vline draws a vertical line at x, from 0 to top, into p and its legend.
func vline(p *plot.Plot, x, top float64, c color.Color, dashes []vg.Length, label string) error {
	l, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: top}})
	if err != nil {
		return err
	}
	l.Color, l.Width, l.Dashes = c, vg.Points(1.5), dashes
	p.Add(l)
	p.Legend.Add(label, l)
	return nil
}
