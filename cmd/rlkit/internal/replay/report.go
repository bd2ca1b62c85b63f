package replay

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rlkit/rlkit/cmd/rlkit/internal/termtext"
	"github.com/rlkit/rlkit/core/algo"
)

// Report is what a replay found: over the whole log, and per rule (per
// rule and plan, for a rule whose plans have limits of their own). Its
// JSON form is `rlkit replay --format json`'s output.
type Report struct {
	LogFormat string `json:"log_format"`
	// Lines are the log's lines (blank ones aside): Requests, Malformed
	// and Unrequested add up to them. Malformed lines could not be read,
	// FirstMalformed names the first few; Unrequested lines log no
	// request (a request line of "-", as nginx logs a connection that
	// sent none, answered 400 or 408).
	Lines          int64       `json:"lines"`
	Malformed      int64       `json:"malformed"`
	FirstMalformed []Malformed `json:"first_malformed"`
	Unrequested    int64       `json:"unrequested"`
	// Requests were decided: the lines read.
	Requests int64 `json:"requests"`
	// From and To are the earliest and latest time stamps (RFC 3339, UTC).
	From string `json:"from"`
	To   string `json:"to"`
	// OutOfOrder requests were logged earlier than one before them, by
	// at most OutOfOrderMaxSeconds; each was decided at the clock's time.
	OutOfOrder           int64   `json:"out_of_order"`
	OutOfOrderMaxSeconds float64 `json:"out_of_order_max_seconds"`
	// Outliers are lines more than Options.MaxAhead later than both the
	// line before them and the line after them, taken at the time of the
	// line before (see Options.MaxAhead); From and To leave their own
	// time stamps out.
	Outliers int64 `json:"outliers"`
	// Exempt requests passed uncounted (an exempt path), Banned ones were
	// refused by the ban list, Held ones waited under a rule's wait.
	Exempt int64 `json:"exempt"`
	Banned int64 `json:"banned"`
	Held   int64 `json:"held"`
	// StoreKeys and StoreEvictions are the memory store's counters at
	// the end and the live ones it dropped to stay within its bound.
	StoreKeys      int64  `json:"store_keys"`
	StoreEvictions uint64 `json:"store_evictions"`
	// RefuseShare is the share of a rule's units (its requests weighted)
	// the recommended limits may refuse.
	RefuseShare float64      `json:"refuse_share"`
	Notes       []string     `json:"notes"`
	Rules       []RuleReport `json:"rules"`
}

// RuleReport is one rule's figures (under one plan).
type RuleReport struct {
	Rule      string   `json:"rule"`
	Plan      string   `json:"plan,omitempty"`
	Algorithm string   `json:"algorithm"`
	Limits    []string `json:"limits"`
	Mode      string   `json:"mode"`  // enforce or shadow (a shadow rule's refusals are the ones it would make)
	Count     string   `json:"count"` // all, failures or successes
	Key       string   `json:"key"`
	Stacked   bool     `json:"stacked"`
	// WaitSeconds is the rule's wait (0: none); Concurrent its
	// concurrency limit, which is not replayed (NotReplayed says why).
	WaitSeconds float64 `json:"wait_seconds"`
	Concurrent  int64   `json:"concurrent"`
	NotReplayed string  `json:"not_replayed,omitempty"`
	// Requests counted under the rule, and how many it would refuse
	// (denied, by its penalty among them, or, in shadow mode, would
	// deny), their share of Requests; Waited were admitted after a wait;
	// Bypassed passed by the allow list.
	Requests     int64   `json:"requests"`
	Refused      int64   `json:"refused"`
	RefusedShare float64 `json:"refused_share"`
	Penalized    int64   `json:"penalized"`
	Waited       int64   `json:"waited"`
	Bypassed     int64   `json:"bypassed"`
	// TopRefused are the keys it would refuse most (see KeyCount).
	TopRefused []KeyCount `json:"top_refused"`
	// Windows are the recommendations, one per limit.
	Windows []WindowReport `json:"windows"`
}

// WindowReport is the demand on one limit of a rule and the limits it
// recommends. Counts are in units (a request's cost: its path's weight),
// the units the rule would count: all requests' under count: all, the
// failures' or successes' under count: failures or successes. They are
// the log's demand, what each key asked for, refused or not.
type WindowReport struct {
	Limit string `json:"limit"`
	// Window says how windows are cut: fixed windows of the limit's
	// period aligned on the Unix epoch (as the fixed-window algorithm
	// aligns them), or calendar periods.
	Window string `json:"window"`
	// Keys counted units; KeyWindows are the (key, window) pairs with a
	// unit, Units their sum.
	Keys       int64 `json:"keys"`
	KeyWindows int64 `json:"key_windows"`
	Units      int64 `json:"units"`
	// PeakP99, PeakP999 and PeakMax are the 99th and 99.9th percentiles
	// (nearest rank) and the largest of the keys' peaks, a key's peak
	// being the most it counted in any one window.
	PeakP99  int64 `json:"peak_p99"`
	PeakP999 int64 `json:"peak_p999"`
	PeakMax  int64 `json:"peak_max"`
	// LimitRefusedShare is the share of Units a limit of the rule's count
	// per window would refuse, as Σ max(0, c − count) over the
	// key-window counts c (a fixed window's refusals).
	LimitRefusedShare float64 `json:"limit_refused_share"`
	// Recommended is the smallest limit per window that refuses at most
	// the refuse share of Units, so counted, and RecommendedShare what it
	// refuses.
	Recommended      int64   `json:"recommended"`
	RecommendedShare float64 `json:"recommended_share"`
	// Exact is true when no key was forgotten to stay within the
	// bounded key table and every unit counted in the window of its own
	// time stamp; else EvictedKeys were forgotten (each counted as two
	// keys if seen again), SplitWindows of them while a window was open
	// (its count split in two), and DisplacedUnits, logged out of order in
	// a window earlier than the last two its key counted in, were counted
	// in the earlier of those. Figures above 1,024 units may be high by up
	// to 1/64 (1.6%) whatever Exact says (log-bucketed histograms).
	Exact          bool  `json:"exact"`
	EvictedKeys    int64 `json:"evicted_keys"`
	SplitWindows   int64 `json:"split_windows"`
	DisplacedUnits int64 `json:"displaced_units"`
	// Count is the rule's limit per window.
	Count int64 `json:"count"`
	// Peaks is the distribution of the keys' peaks (for plots).
	Peaks []Bucket `json:"-"`
}

func (r *Replayer) report(rd *reader) *Report {
	rep := &Report{
		LogFormat:      r.o.Format,
		Lines:          rd.lines,
		Malformed:      rd.malformed,
		FirstMalformed: rd.first,
		Unrequested:    rd.unrequested,
		Requests:       r.decided,
		OutOfOrder:     r.late,
		Outliers:       r.outliers,
		Exempt:         r.exempt,
		Banned:         r.banned,
		Held:           r.held,
		RefuseShare:    r.o.RefuseShare,
		Notes:          []string{},
	}
	if rep.FirstMalformed == nil {
		rep.FirstMalformed = []Malformed{}
	}
	rep.OutOfOrderMaxSeconds = time.Duration(r.maxLate).Seconds()
	if r.started {
		rep.From = time.Unix(0, r.min).UTC().Format(time.RFC3339Nano)
		rep.To = time.Unix(0, r.max).UTC().Format(time.RFC3339Nano)
	}
	st := r.store.Stats()
	rep.StoreKeys, rep.StoreEvictions = st.Keys, st.Evictions
	if !r.rules.Config.Enabled() {
		rep.Notes = append(rep.Notes, "limiting is off in this file (enabled is not true): every request passes uncounted")
	}
	if r.outliers > 0 {
		f := r.firstOutlier
		rep.Notes = append(rep.Notes, fmt.Sprintf("%s more than %s later than both the line before and the line after (--max-ahead), taken at the time of the line before (the first line of all: of the line after); the first, %s:%d, was logged at %s",
			counted(r.outliers, "line"), r.o.MaxAhead, f.file, f.line, time.Unix(0, f.at).UTC().Format(time.RFC3339Nano)))
	}
	if r.maxLate > int64(time.Minute) {
		f := r.farthest
		rep.Notes = append(rep.Notes, fmt.Sprintf("requests were out of order by up to %s: %s:%d, logged at %s, moved the clock that far ahead of a line after it; a request logged before the clock is decided at the clock's time, and counts in the per-key figures at its own",
			time.Duration(r.maxLate), f.file, f.line, time.Unix(0, f.at).UTC().Format(time.RFC3339Nano)))
	}
	for _, h := range r.p.unlogged {
		rep.Notes = append(rep.Notes, fmt.Sprintf("a rule counts per header %s, which the %s log does not hold: its requests count under their client IP, the header's fallback", h, r.o.Format))
	}
	for _, s := range r.order {
		rep.Rules = append(rep.Rules, r.ruleReport(s))
	}
	return rep
}

func (r *Replayer) ruleReport(s *ruleStats) RuleReport {
	rr := RuleReport{Rule: s.name, Plan: s.plan, Requests: s.requests, Refused: s.refused, Penalized: s.penalized, Waited: s.waited, Bypassed: s.bypassed, Limits: []string{}, Windows: []WindowReport{}}
	if s.requests > 0 {
		rr.RefusedShare = float64(s.refused) / float64(s.requests)
	}
	rr.TopRefused = s.top.top(r.o.Top)
	rule := s.rule
	if rule == nil {
		return rr
	}
	rr.Algorithm = rule.Policy.Algorithm.String()
	for _, l := range rule.Policy.Limits {
		rr.Limits = append(rr.Limits, l.String())
	}
	rr.Mode = "enforce"
	if rule.Shadow() {
		rr.Mode = "shadow"
	}
	rr.Count, rr.Key, rr.Stacked, rr.Concurrent = rule.Count(), rule.Key(), rule.Stacked(), rule.Concurrent()
	if w, ok := r.rules.waits[s.name]; ok {
		rr.WaitSeconds = w.wait.Seconds()
	}
	if rr.Concurrent > 0 {
		rr.NotReplayed = fmt.Sprintf("concurrent: %d: the log has no request durations, so every request is completed at once and never holds a slot", rr.Concurrent)
	}
	if s.table == nil {
		return rr
	}
	t := s.table
	t.finish()
	for i, l := range rule.Policy.Limits {
		w := WindowReport{Limit: l.String(), Count: l.Count, EvictedKeys: t.evicted, SplitWindows: t.split, DisplacedUnits: t.displaced[i], Exact: t.evicted == 0 && t.displaced[i] == 0}
		w.Window = windowText(rule.Policy.Location, l)
		counts, peaks := &t.counts[i], &t.peaks[i]
		w.Keys, w.KeyWindows, w.Units = peaks.cnt, counts.cnt, counts.tot
		w.PeakP99, w.PeakP999, w.PeakMax = peaks.quantile(0.99), peaks.quantile(0.999), peaks.max
		if counts.tot > 0 {
			w.LimitRefusedShare = float64(counts.over(l.Count)) / float64(counts.tot)
			var refused int64
			w.Recommended, refused = counts.limitFor(r.o.RefuseShare)
			w.RecommendedShare = float64(refused) / float64(counts.tot)
		}
		w.Peaks = peaks.buckets()
		rr.Windows = append(rr.Windows, w)
	}
	return rr
}

// windowText says how the windows of l are cut.
func windowText(loc *time.Location, l algo.Limit) string {
	if l.Calendar != 0 {
		name := "UTC"
		if loc != nil {
			name = loc.String()
		}
		return "calendar " + l.Calendar.String() + "s of " + name
	}
	return "fixed windows of " + durationText(l.Period) + " aligned on the Unix epoch"
}

// durationText writes d as a limit's period reads: "1s", "1m", "5m",
// "1h", "1d".
func durationText(d time.Duration) string {
	switch {
	case d%(24*time.Hour) == 0:
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	case d%time.Hour == 0:
		return strconv.FormatInt(int64(d/time.Hour), 10) + "h"
	case d%time.Minute == 0:
		return strconv.FormatInt(int64(d/time.Minute), 10) + "m"
	}
	return d.String()
}

// WriteText writes rep as the text report of `rlkit replay`.
func (rep *Report) WriteText(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "Replayed %s (%s, %s malformed, %s with no request)", counted(rep.Requests, "request"), counted(rep.Lines, "line"), count(rep.Malformed), count(rep.Unrequested))
	if rep.From != "" {
		fmt.Fprintf(&b, " from %s to %s", rep.From, rep.To)
	}
	b.WriteString(".\n")
	fmt.Fprintf(&b, "Exempt %s, banned %s, held by a wait %s; out of order %s (by at most %s); memory store %s, %s evicted.\n",
		count(rep.Exempt), count(rep.Banned), count(rep.Held), count(rep.OutOfOrder), secondsText(rep.OutOfOrderMaxSeconds), counted(rep.StoreKeys, "key"), count(int64(rep.StoreEvictions)))
	for _, m := range rep.FirstMalformed {
		fmt.Fprintf(&b, "malformed: %s:%d: %s\n", termtext.Printable(m.File), m.Line, m.Reason) // a reason quotes what it cites (see quote)
	}
	if rep.Malformed > int64(len(rep.FirstMalformed)) {
		fmt.Fprintf(&b, "malformed: %s more\n", count(rep.Malformed-int64(len(rep.FirstMalformed))))
	}
	for _, n := range rep.Notes {
		fmt.Fprintf(&b, "note: %s\n", termtext.Printable(n))
	}
	b.WriteString("\n")
	rows := [][]string{{"rule", "limit", "algorithm", "requests", "refused", "share"}}
	for _, r := range rep.Rules {
		rows = append(rows, []string{r.name(), strings.Join(r.Limits, " + "), r.Algorithm, count(r.Requests), count(r.Refused), percent(r.RefusedShare)})
	}
	table(&b, rows, 3)
	for _, r := range rep.Rules {
		fmt.Fprintf(&b, "\n%s", r.name())
		var about []string
		if r.Mode == "shadow" {
			about = append(about, "shadow: refusals are the ones it would make")
		}
		if r.Count != "" && r.Count != "all" {
			about = append(about, "counts "+r.Count)
		}
		if r.Key != "" && r.Key != "user" {
			about = append(about, "key "+r.Key)
		}
		if r.Stacked {
			about = append(about, "stacked")
		}
		if len(about) > 0 {
			fmt.Fprintf(&b, " (%s)", strings.Join(about, ", "))
		}
		b.WriteString("\n")
		if r.NotReplayed != "" {
			fmt.Fprintf(&b, "  not replayed: %s\n", r.NotReplayed)
		}
		if r.WaitSeconds > 0 || r.Penalized > 0 || r.Bypassed > 0 {
			fmt.Fprintf(&b, "  waited %s, penalized %s, allowed by the list %s\n", count(r.Waited), count(r.Penalized), count(r.Bypassed))
		}
		if len(r.TopRefused) > 0 {
			var keys []string
			for _, k := range r.TopRefused {
				s := termtext.Printable(k.Key) + " " + count(k.Refused)
				if k.Error > 0 {
					s += " (±" + count(k.Error) + ")"
				}
				keys = append(keys, s)
			}
			fmt.Fprintf(&b, "  refused most: %s\n", strings.Join(keys, ", "))
		}
		for _, w := range r.Windows {
			if w.Units == 0 {
				fmt.Fprintf(&b, "  %s: nothing counted\n", w.Limit)
				continue
			}
			fmt.Fprintf(&b, "  %s (%s): %s, %s; peak per key p99 %s, p99.9 %s, max %s\n",
				w.Limit, w.Window, counted(w.Keys, "key"), counted(w.Units, "unit"), count(w.PeakP99), count(w.PeakP999), count(w.PeakMax))
			fmt.Fprintf(&b, "    %s per window refuses %s of units; %s would refuse %s (at most %s)\n",
				count(w.Count), percent(w.LimitRefusedShare), count(w.Recommended), percent(w.RecommendedShare), percent(rep.RefuseShare))
			if !w.Exact {
				var why []string
				if w.EvictedKeys > 0 {
					why = append(why, fmt.Sprintf("%s forgotten to stay within the key bound, %s of them in an open window", counted(w.EvictedKeys, "key"), count(w.SplitWindows)))
				}
				if w.DisplacedUnits > 0 {
					why = append(why, fmt.Sprintf("%s logged out of order counted in a later window than their own", counted(w.DisplacedUnits, "unit")))
				}
				fmt.Fprintf(&b, "    approximate: %s\n", strings.Join(why, "; "))
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// table writes rows in columns two spaces apart, the first left columns
// aligned left and the others (numbers) right.
func table(b *strings.Builder, rows [][]string, left int) {
	width := make([]int, len(rows[0]))
	for _, row := range rows {
		for i, c := range row {
			width[i] = max(width[i], utf8.RuneCountInString(c))
		}
	}
	for _, row := range rows {
		for i, c := range row {
			pad := strings.Repeat(" ", width[i]-utf8.RuneCountInString(c))
			if i > 0 {
				b.WriteString("  ")
			}
			if i < left {
				b.WriteString(c)
				if i < len(row)-1 {
					b.WriteString(pad)
				}
			} else {
				b.WriteString(pad + c)
			}
		}
		b.WriteString("\n")
	}
}

func (r RuleReport) name() string {
	if r.Plan != "" {
		return termtext.Printable(r.Rule) + " (plan " + termtext.Printable(r.Plan) + ")"
	}
	return termtext.Printable(r.Rule)
}

// count writes n with thousands separators: 1,234,567.
func count(n int64) string { return termtext.Count(n) }

// counted is n and the noun, plural but for 1: "1 key", "1,024 keys".
func counted(n int64, noun string) string { return termtext.Counted(n, noun) }

// percent writes a share as a percentage: "1.25%", "0.01%", "0%".
func percent(share float64) string {
	if share == 0 {
		return "0%"
	}
	p := share * 100
	switch {
	case p >= 10:
		return strconv.FormatFloat(p, 'f', 1, 64) + "%"
	case p >= 0.01:
		return strconv.FormatFloat(p, 'f', 2, 64) + "%"
	}
	return strconv.FormatFloat(p, 'g', 2, 64) + "%"
}

func secondsText(s float64) string {
	return time.Duration(s * float64(time.Second)).String()
}
