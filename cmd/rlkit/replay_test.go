package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/cmd/rlkit/internal/replay"
)

// replayRules has a search limit of 2 a second and a login guard counting
// failures, 2 a minute.
const replayRules = `rate_limit:
  enabled: true
  default: "100/minute"
  exempt_paths: ["/health"]
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/second"
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      count: failures
`

// replayLog: 203.0.113.7 searches 4 times in one second (2 refused);
// 198.51.100.9 fails to log in 3 times (1 refused); a health check; a
// connection that sent no request.
const replayLog = `203.0.113.7 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search?q=a HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search?q=b HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search?q=c HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search?q=d HTTP/1.1" 200 512
198.51.100.9 - - [02/Jun/2026:07:15:02 +0000] "POST /login HTTP/1.1" 401 64
198.51.100.9 - - [02/Jun/2026:07:15:03 +0000] "POST /login HTTP/1.1" 401 64
198.51.100.9 - - [02/Jun/2026:07:15:04 +0000] "POST /login HTTP/1.1" 401 64
10.0.0.1 - - [02/Jun/2026:07:15:05 +0000] "GET /health HTTP/1.1" 200 2
192.0.2.50 - - [02/Jun/2026:07:15:05 +0000] "-" 400 0
not a log line
`

func TestReplayText(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules, "access.log", replayLog)
	out, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "access.log")
	want := `Replayed 8 requests (10 lines, 1 malformed, 1 with no request) from 2026-06-02T07:15:01Z to 2026-06-02T07:15:05Z.
Exempt 1, banned 0, held by a wait 0; out of order 0 (by at most 0s); memory store 2 keys, 0 evicted.
malformed: access.log:10: no [time]

rule     limit       algorithm     requests  refused  share
search   2/second    fixed_window         4        2  50.0%
login    2/minute    fixed_window         3        1  33.3%
default  100/minute  fixed_window         0        0     0%

search
  refused most: 203.0.113.7 2
  2/second (fixed windows of 1s aligned on the Unix epoch): 1 key, 4 units; peak per key p99 4, p99.9 4, max 4
    2 per window refuses 50.0% of units; 4 would refuse 0% (at most 0.10%)

login (counts failures)
  refused most: 198.51.100.9 1
  2/minute (fixed windows of 1m aligned on the Unix epoch): 1 key, 3 units; peak per key p99 3, p99.9 3, max 3
    2 per window refuses 33.3% of units; 3 would refuse 0% (at most 0.10%)

default
  100/minute: nothing counted
`
	if code != 0 || out != want || errOut != "" {
		t.Errorf("replay: status %d, stderr %q, stdout\n%s\nwant 0, nothing, and\n%s", code, errOut, out, want)
	}
}

func TestReplayJSON(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules, "access.log", replayLog)
	out, _, code := rlkit(t, dir, "replay", "-config", "rules.yaml", "-format", "json", "-refuse-share", "0.3", "access.log")
	if code != 0 {
		t.Fatalf("status %d, want 0", code)
	}
	var rep replay.Report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not a report: %v\n%s", err, out)
	}
	if rep.Lines != 10 || rep.Requests != 8 || rep.Malformed != 1 || rep.Unrequested != 1 || rep.Exempt != 1 || rep.RefuseShare != 0.3 ||
		len(rep.FirstMalformed) != 1 || rep.FirstMalformed[0] != (replay.Malformed{File: "access.log", Line: 10, Reason: "no [time]"}) {
		t.Errorf("report %+v", rep)
	}
	if len(rep.Rules) != 3 {
		t.Fatalf("%d rules, want 3", len(rep.Rules))
	}
	s := rep.Rules[0]
	want := replay.WindowReport{Limit: "2/second", Window: "fixed windows of 1s aligned on the Unix epoch", Keys: 1, KeyWindows: 1, Units: 4,
		PeakP99: 4, PeakP999: 4, PeakMax: 4, LimitRefusedShare: 0.5, Recommended: 3, RecommendedShare: 0.25, Exact: true, Count: 2}
	if s.Rule != "search" || s.Algorithm != "fixed_window" || !slices.Equal(s.Limits, []string{"2/second"}) || s.Mode != "enforce" || s.Count != "all" || s.Key != "user" ||
		s.Requests != 4 || s.Refused != 2 || s.RefusedShare != 0.5 || len(s.TopRefused) != 1 || s.TopRefused[0] != (replay.KeyCount{Key: "203.0.113.7", Refused: 2}) ||
		len(s.Windows) != 1 || s.Windows[0].Limit != want.Limit {
		t.Fatalf("rule search %+v", s)
	}
	if w := s.Windows[0]; !reflect.DeepEqual(w, want) {
		t.Errorf("search's window %+v\nwant %+v", w, want)
	}
	if l := rep.Rules[1]; l.Rule != "login" || l.Count != "failures" || l.Refused != 1 || l.Windows[0].Units != 3 {
		t.Errorf("rule login %+v", l)
	}
	// The keys are those docs/cli.md documents.
	var m struct {
		Top   map[string]json.RawMessage
		Rules []map[string]json.RawMessage `json:"rules"`
	}
	json.Unmarshal([]byte(out), &m.Top)
	json.Unmarshal(m.Top["rules"], &m.Rules)
	var windows []map[string]json.RawMessage
	if len(m.Rules) > 0 {
		json.Unmarshal(m.Rules[0]["windows"], &windows)
	}
	for _, c := range []struct {
		obj  map[string]json.RawMessage
		keys string
	}{
		{m.Top, "log_format lines malformed first_malformed unrequested requests from to out_of_order out_of_order_max_seconds outliers exempt banned held store_keys store_evictions refuse_share notes rules"},
		{m.Rules[0], "rule algorithm limits mode count key stacked wait_seconds concurrent requests refused refused_share penalized waited bypassed top_refused windows"},
		{windows[0], "limit count window keys key_windows units peak_p99 peak_p999 peak_max limit_refused_share recommended recommended_share exact evicted_keys split_windows displaced_units"},
	} {
		for _, k := range strings.Fields(c.keys) {
			if _, ok := c.obj[k]; !ok {
				t.Errorf("the JSON report lacks %q", k)
			}
		}
		if n := len(strings.Fields(c.keys)); len(c.obj) != n {
			t.Errorf("the JSON report has %d keys where docs/cli.md documents %d: %s", len(c.obj), n, c.keys)
		}
	}
}

// TestReplayOutOfOrderNote: lines a year ahead of the lines after them
// are named in a note, in the text report and the JSON one.
func TestReplayOutOfOrderNote(t *testing.T) {
	log := `203.0.113.7 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search?q=a HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2026:07:15:02 +0000] "GET /api/search?q=b HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2027:07:15:03 +0000] "GET /api/search?q=c HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2027:07:15:04 +0000] "GET /api/search?q=d HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2026:07:15:05 +0000] "GET /api/search?q=e HTTP/1.1" 200 512
`
	dir := files(t, "rules.yaml", replayRules, "access.log", log)
	const note = "requests were out of order by up to 8759h59m59s: access.log:4, logged at 2027-06-02T07:15:04Z, moved the clock that far ahead of a line after it; " +
		"a request logged before the clock is decided at the clock's time, and counts in the per-key figures at its own"
	out, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "access.log")
	if code != 0 || !strings.Contains(out, "\nnote: "+note+"\n") {
		t.Errorf("replay: status %d, stderr %q, stdout\n%s\nwant the note %q", code, errOut, out, note)
	}
	out, _, code = rlkit(t, dir, "replay", "--config", "rules.yaml", "--format", "json", "access.log")
	var rep replay.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || !slices.Equal(rep.Notes, []string{note}) {
		t.Errorf("replay --format json: status %d, %v, notes %q; want %q", code, err, rep.Notes, note)
	}
}

// TestReplayMaxAhead: a line a year later than both the line before it
// and the line after it is taken at the time of the line before, and
// named in a note; with --max-ahead 0 it stops the clock for the lines
// after it, decided out of order at its time.
func TestReplayMaxAhead(t *testing.T) {
	log := `203.0.113.7 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search?q=a HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2026:07:15:02 +0000] "GET /api/search?q=b HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2027:07:15:03 +0000] "GET /api/search?q=c HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2026:07:15:04 +0000] "GET /api/search?q=d HTTP/1.1" 200 512
203.0.113.7 - - [02/Jun/2026:07:15:05 +0000] "GET /api/search?q=e HTTP/1.1" 200 512
`
	dir := files(t, "rules.yaml", replayRules, "access.log", log)
	const note = "1 line more than 1m0s later than both the line before and the line after (--max-ahead), taken at the time of the line before (the first line of all: of the line after); " +
		"the first, access.log:3, was logged at 2027-06-02T07:15:03Z"
	out, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "access.log")
	if code != 0 || !strings.Contains(out, " to 2026-06-02T07:15:05Z.\n") || !strings.Contains(out, "\nnote: "+note+"\n") || !strings.Contains(out, "search   2/second    fixed_window         5        0") {
		t.Errorf("replay: status %d, stderr %q, stdout\n%s\nwant the note %q and none refused (2 in 07:15:02)", code, errOut, out, note)
	}
	for _, c := range []struct {
		flag                string
		outliers, late, ref int64
	}{{"--max-ahead=1m", 1, 0, 0}, {"--max-ahead=0", 0, 2, 1}, {"--max-ahead=8761h", 0, 2, 1}} {
		out, _, code = rlkit(t, dir, "replay", "--config", "rules.yaml", "--format", "json", c.flag, "access.log")
		var rep replay.Report
		if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil || rep.Outliers != c.outliers || rep.OutOfOrder != c.late || rep.Rules[0].Refused != c.ref {
			t.Errorf("replay %s: status %d, %v, outliers %d, out of order %d, refused %+v; want %d, %d, %d", c.flag, code, err, rep.Outliers, rep.OutOfOrder, rep.Rules, c.outliers, c.late, c.ref)
		}
	}
	if _, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "--max-ahead=-1s", "access.log"); code != 2 || !strings.Contains(errOut, "--max-ahead") {
		t.Errorf("--max-ahead=-1s: status %d, stderr %q; want 2", code, errOut)
	}
}

// TestReplayStdinGzip: with no log, or "-", the log is standard input,
// read through gzip when compressed.
func TestReplayStdinGzip(t *testing.T) {
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(replayLog))
	zw.Close()
	dir := files(t, "rules.yaml", replayRules, "access.log.gz", z.String())
	for _, args := range [][]string{{"replay", "--config", "rules.yaml"}, {"replay", "--config", "rules.yaml", "-"}} {
		cmd := exec.Command(binary, args...)
		cmd.Dir, cmd.Stdin = dir, bytes.NewReader(z.Bytes())
		out, err := cmd.Output()
		if err != nil || !strings.HasPrefix(string(out), "Replayed 8 requests (10 lines, 1 malformed, 1 with no request)") || !strings.Contains(string(out), "malformed: -:10:") {
			t.Errorf("rlkit %q < access.log.gz: %v\n%s", args, err, out)
		}
	}
	if out, _, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "access.log.gz"); code != 0 || !strings.HasPrefix(out, "Replayed 8 requests") {
		t.Errorf("replay access.log.gz: status %d\n%s", code, out)
	}
}

func TestReplayBadConfig(t *testing.T) {
	dir := files(t, "bad.yaml", twoErrors, "access.log", replayLog)
	out, errOut, code := rlkit(t, dir, "replay", "--config", "bad.yaml", "access.log")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "bad.yaml:7:14: rule \"api\": field \"limit\"") || !strings.Contains(errOut, "\nbad.yaml:8:14: ") {
		t.Errorf("bad config: status %d, stdout %q, stderr %q; want 1 and the errors with their lines", code, out, errOut)
	}
	if _, errOut, code := rlkit(t, dir, "replay", "--config", "missing.yaml", "access.log"); code != 1 || !strings.Contains(errOut, "missing.yaml") {
		t.Errorf("missing config: status %d, stderr %q; want 1 naming it", code, errOut)
	}
}

func TestReplayUnreadableLog(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules, "access.log", replayLog)
	os.Mkdir(filepath.Join(dir, "logs"), 0o755)
	for _, log := range []string{"missing.log", "logs"} {
		out, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "access.log", log)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, "rlkit: ") || !strings.Contains(errOut, log) {
			t.Errorf("replay access.log %s: status %d, stdout %q, stderr %q; want 1 and the log named", log, code, out, errOut)
		}
	}
	// A gzip log cut short is an error, not the end of the log.
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	zw.Write([]byte(strings.Repeat(replayLog, 100)))
	zw.Close()
	os.WriteFile(filepath.Join(dir, "cut.gz"), z.Bytes()[:z.Len()/2], 0o600)
	if out, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "cut.gz"); code != 1 || out != "" || !strings.Contains(errOut, "cut.gz") {
		t.Errorf("replay cut.gz: status %d, stdout %q, stderr %q; want 1 naming it", code, out, errOut)
	}
}

func TestReplayUsage(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules, "access.log", replayLog)
	for _, args := range [][]string{
		{"replay", "access.log"}, // no --config
		{"replay", "--config", "rules.yaml", "--log-format", "xml", "access.log"},
		{"replay", "--config", "rules.yaml", "--bogus", "access.log"},
		{"replay", "--config", "rules.yaml", "--format", "csv", "access.log"},
		{"replay", "--config", "rules.yaml", "--field", "time=ts", "access.log"},                      // CLF has fixed fields
		{"replay", "--config", "rules.yaml", "--log-format", "json", "--field", "when", "access.log"}, // not NAME=PATH
		{"replay", "--config", "rules.yaml", "--identity", "cookie:sid", "access.log"},
		{"replay", "--config", "rules.yaml", "--identity", "header:X-Api-Key", "access.log"}, // CLF logs no such header
		{"replay", "--config", "rules.yaml", "--refuse-share", "1.5", "access.log"},
		{"replay", "--config", "rules.yaml", "--refuse-share", "-1", "access.log"},
		{"replay", "--config", "rules.yaml", "--progress=maybe", "access.log"},
	} {
		out, errOut, code := rlkit(t, dir, args...)
		if code != 2 || !strings.HasPrefix(errOut, "rlkit: ") || out != "" {
			t.Errorf("rlkit %q: status %d, stdout %q, stderr %q; want 2 and an error on stderr", args, code, out, errOut)
		}
	}
	if out, _, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "--progress=false", "access.log"); code != 0 || !strings.HasPrefix(out, "Replayed") {
		t.Errorf("--progress=false: status %d, stdout %q", code, out)
	}
}

// TestReplayPlot: --plot writes one PNG per rule, each an image.
func TestReplayPlot(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules, "access.log", replayLog)
	if _, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "--plot", "plots/x", "access.log"); code != 0 {
		t.Fatalf("replay --plot: status %d, stderr %q", code, errOut)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "plots", "x"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
		f, err := os.Open(filepath.Join(dir, "plots", "x", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil || img.Bounds().Dx() < 400 || img.Bounds().Dy() < 200 {
			t.Errorf("%s: %v, bounds %v; want a PNG image", e.Name(), err, img.Bounds())
		}
	}
	if !slices.Equal(names, []string{"default.png", "login.png", "search.png"}) {
		t.Errorf("plots %q, want one per rule", names)
	}
}

// TestReplayPlotFailure: a --plot directory that cannot be made or
// written into is an error before any log is read (exit 1, the directory
// named); a plot that cannot be written once the logs were replayed is an
// error after the report, which is printed whole.
func TestReplayPlotFailure(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules, "access.log", replayLog, "file", "not a directory")
	// missing.log would be an error of its own, were it opened first.
	out, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "--plot", "file/plots", "access.log", "missing.log")
	if code != 1 || out != "" || !strings.HasPrefix(errOut, "rlkit: --plot file/plots: ") || strings.Contains(errOut, "missing.log") || strings.Count(errOut, "\n") != 1 {
		t.Errorf("--plot file/plots: status %d, stdout %q, stderr %q; want 1, nothing, and the directory named", code, out, errOut)
	}
	// search.png is a directory: that plot cannot be written.
	if err := os.MkdirAll(filepath.Join(dir, "plots", "search.png"), 0o755); err != nil {
		t.Fatal(err)
	}
	text, _, _ := rlkit(t, dir, "replay", "--config", "rules.yaml", "access.log")
	for _, format := range []string{"text", "json"} {
		out, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "--format", format, "--plot", "plots", "access.log")
		if code != 1 || !strings.HasPrefix(errOut, "rlkit: --plot plots: plot of rule \"search\": ") || strings.Count(errOut, "\n") != 1 {
			t.Errorf("--format %s, a plot that cannot be written: status %d, stderr %q; want 1 and the plot named", format, code, errOut)
		}
		var rep replay.Report
		switch {
		case format == "text" && out != text:
			t.Errorf("--format text, a plot that cannot be written: stdout\n%s\nwant the report\n%s", out, text)
		case format == "json" && (json.Unmarshal([]byte(out), &rep) != nil || rep.Requests != 8 || len(rep.Rules) != 3):
			t.Errorf("--format json, a plot that cannot be written: stdout\n%s\nwant the report", out)
		}
	}
	// search, the first rule, stops the plots; the check leaves nothing.
	if entries, _ := os.ReadDir(filepath.Join(dir, "plots")); len(entries) != 1 || entries[0].Name() != "search.png" {
		t.Errorf("plots/ holds %v; want search.png alone", entries)
	}
}

// TestReplayProgressFirstFrame: the progress meter draws nothing before
// the first MiB is read or 200ms passed, so that no frame shows a rate
// and a time left measured over a few bytes.
func TestReplayProgressFirstFrame(t *testing.T) {
	var out bytes.Buffer
	p := newProgress(&out, 213<<20)
	clock := p.start
	p.now = func() time.Time { return clock }
	p.add(2) // the gzip check
	clock = clock.Add(150 * time.Millisecond)
	p.add(64 << 10)
	if out.Len() != 0 {
		t.Fatalf("after 64 KiB in 150ms the meter shows %q; want nothing", out.String())
	}
	p.add(1 << 20)
	if !strings.Contains(out.String(), "replaying") {
		t.Fatalf("after a MiB the meter shows %q; want a frame", out.String())
	}
	out.Reset()
	q := newProgress(&out, 213<<20)
	clock = q.start
	q.now = func() time.Time { return clock }
	q.add(2)
	clock = clock.Add(200 * time.Millisecond)
	q.add(2)
	if !strings.Contains(out.String(), "replaying") {
		t.Errorf("after 200ms the meter shows %q; want a frame", out.String())
	}
}

// TestReplayRefuseShareUnits: --refuse-share is a share of a rule's units
// (its requests weighted, what its limit counts), in the flag's help, in
// docs/cli.md and in the recommendations: a caller of 10 requests of
// weight 5 and ten callers of one request each make 60 units in a minute;
// a share of 0.4 lets a limit refuse 24 of them: 26 per window, which
// refuses 24 of the first caller's 50.
func TestReplayRefuseShareUnits(t *testing.T) {
	help, _, _ := rlkit(t, t.TempDir(), "replay", "--help")
	const want = "the share of a rule's units (its requests weighted, as its limits count them) a recommended limit may refuse"
	if got := strings.ToLower(strings.Join(strings.Fields(helpOf(help, "--refuse-share")), " ")); got != want+"." {
		t.Errorf("--refuse-share's help %q, want %q", got, want+".")
	}
	data, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), "| `--refuse-share` | `0.001` | "+want+" |") {
		t.Errorf("docs/cli.md's --refuse-share row does not read %q", want)
	}
	rules := "rate_limit:\n  enabled: true\n  default: 1000/minute\n  rules:\n    - name: heavy\n      paths: [/h, /l]\n      limit: 1000/minute\n      weights:\n        /h: 5\n"
	var log strings.Builder
	for range 10 {
		log.WriteString(`192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET /h HTTP/1.1" 200 1` + "\n")
	}
	for i := range 10 {
		fmt.Fprintf(&log, `192.0.2.%d - - [02/Jun/2026:07:15:01 +0000] "GET /l HTTP/1.1" 200 1`+"\n", 10+i)
	}
	dir := files(t, "rules.yaml", rules, "access.log", log.String())
	out, _, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "--format", "json", "--refuse-share", "0.4", "access.log")
	var rep replay.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("status %d, %v", code, err)
	}
	if w := rep.Rules[0].Windows[0]; w.Units != 60 || w.Recommended != 26 || w.RecommendedShare != 24.0/60 {
		t.Errorf("heavy: %d units, recommended %d refusing %v; want 60, 26, 0.4", w.Units, w.Recommended, w.RecommendedShare)
	}
}

// helpOf returns the help text of flag in kong's help output.
func helpOf(help, flag string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(help, "\n") {
		t := strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(t, flag+"="), t == flag:
			in = true
			if _, rest, ok := strings.Cut(t, "  "); ok {
				b.WriteString(strings.TrimSpace(rest))
			}
		case in && strings.HasPrefix(t, "-"), in && t == "":
			return b.String()
		case in:
			b.WriteString(" " + t)
		}
	}
	return b.String()
}

// TestReplayPlotNames: each rule and plan has a plot of its own: rule
// a.b's is a.b.png, rule a's under plan b a@b.png (no rule or plan name
// holds '@'; a plan's counters are its own, whether it lists the rule or
// not, so a.b has a plot under plan b too); names that differ only in case, which a file system that
// ignores case takes as one, get ~2, ~3 after the first.
func TestReplayPlotNames(t *testing.T) {
	rules := `rate_limit:
  enabled: true
  default: "100/minute"
  tiers:
    b:
      rules:
        a: 5/minute
  rules:
    - name: a.b
      paths: ["/x"]
      limit: "2/second"
    - name: a
      paths: ["/y"]
      limit: "2/second"
    - name: A
      paths: ["/z"]
      limit: "2/second"
`
	log := `{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/x","ip":"192.0.2.1","status":200,"plan":"b"}
{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/y","ip":"192.0.2.1","status":200,"plan":"b"}
{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/y","ip":"192.0.2.1","status":200}
{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/z","ip":"192.0.2.1","status":200}
`
	dir := files(t, "rules.yaml", rules, "access.jsonl", log)
	if _, errOut, code := rlkit(t, dir, "replay", "--config", "rules.yaml", "--log-format", "json", "--plan", "field:plan", "--plot", "plots", "access.jsonl"); code != 0 {
		t.Fatalf("replay --plot: status %d, stderr %q", code, errOut)
	}
	entries, err := os.ReadDir(filepath.Join(dir, "plots"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if want := []string{"A~2.png", "a.b.png", "a.b@b.png", "a.png", "a@b.png", "default.png"}; !slices.Equal(names, want) {
		t.Errorf("plots %q, want %q", names, want)
	}
}

// TestReplayAlgorithmsFixture replays testdata/algorithms.jsonl under
// testdata/algorithms.yaml: a limit of 2 a second under each algorithm,
// and 2 a calendar day of Asia/Tokyo, refusing what was counted by hand.
// Caller 192.0.2.1 asks each of /fixed, /sliding, /token and /gcra at
// these instants, in seconds after 07:15:00: 0, .1, .2, .5, .75, 1.0,
// 1.1, 1.2, 1.6, 2.05.
//
//   - fixed_window: [0,1) admits 0 and .1, refuses .2, .5, .75; [1,2)
//     admits 1.0 and 1.1, refuses 1.2 and 1.6; [2,3) admits 2.05: 5
//     refused. 192.0.2.2 asks /fixed at 0, .3 and .6 too: 1 refused, so
//     6 of 13.
//   - sliding_window, admitted while prev×(1−elapsed) + cur + 1 ≤ 2:
//     [0,1) as above (cur 2); in [1,2) prev is 2, so 1.0 (3), 1.1 (2.8)
//     and 1.2 (2.6) are refused and 1.6 (1.8) admitted (cur 1); at 2.05
//     prev is 1: 1.95, admitted. 6 refused.
//   - token_bucket (capacity 2, 2 whole tokens a second): 0 and .1 take
//     both; .2 finds none; .5 takes the one refilled since 0; .75 none;
//     1.0 takes one; 1.1 and 1.2 none; 1.6 one; 2.05 one. 4 refused.
//   - gcra (emission interval .5 s, tolerance 1 s), admitted while
//     TAT + .5 − now ≤ 1: after 0 and .1 TAT is 1.0; .2 (1.3) refused;
//     .5 (1.0) admitted, TAT 1.5; .75 (1.25) refused; 1.0 (1.0) admitted,
//     TAT 2.0; 1.1 (1.4) and 1.2 (1.3) refused; 1.6 (.9) and 2.05 (.95)
//     admitted. 4 refused.
//   - calendar days of Asia/Tokyo (UTC+9), whose day starts at 15:00 UTC:
//     14:59:58, 14:59:59 twice and 14:59:59.999 (2 refused), then 15:00:00
//     twice and 15:00:01 (1 refused). 3 refused.
//
// Per fixed window of a second, 192.0.2.1 asks 5, 4 and 1 of each rule:
// a peak of 5, and 5 is the smallest limit that refuses none.
func TestReplayAlgorithmsFixture(t *testing.T) {
	out, errOut, code := rlkit(t, "testdata", "replay", "--config", "algorithms.yaml", "--log-format", "json", "algorithms.jsonl")
	want := `Replayed 50 requests (50 lines, 0 malformed, 0 with no request) from 2026-06-02T07:15:00Z to 2026-06-02T15:00:01Z.
Exempt 0, banned 0, held by a wait 0; out of order 0 (by at most 0s); memory store 6 keys, 0 evicted.

rule     limit        algorithm       requests  refused  share
fixed    2/second     fixed_window          13        6  46.2%
sliding  2/second     sliding_window        10        6  60.0%
token    2/second     token_bucket          10        4  40.0%
gcra     2/second     gcra                  10        4  40.0%
export   2/day        fixed_window           7        3  42.9%
default  1000/second  fixed_window           0        0     0%

fixed
  refused most: 192.0.2.1 5, 192.0.2.2 1
  2/second (fixed windows of 1s aligned on the Unix epoch): 2 keys, 13 units; peak per key p99 5, p99.9 5, max 5
    2 per window refuses 46.2% of units; 5 would refuse 0% (at most 0.10%)

sliding
  refused most: 192.0.2.1 6
  2/second (fixed windows of 1s aligned on the Unix epoch): 1 key, 10 units; peak per key p99 5, p99.9 5, max 5
    2 per window refuses 50.0% of units; 5 would refuse 0% (at most 0.10%)

token
  refused most: 192.0.2.1 4
  2/second (fixed windows of 1s aligned on the Unix epoch): 1 key, 10 units; peak per key p99 5, p99.9 5, max 5
    2 per window refuses 50.0% of units; 5 would refuse 0% (at most 0.10%)

gcra
  refused most: 192.0.2.1 4
  2/second (fixed windows of 1s aligned on the Unix epoch): 1 key, 10 units; peak per key p99 5, p99.9 5, max 5
    2 per window refuses 50.0% of units; 5 would refuse 0% (at most 0.10%)

export
  refused most: 192.0.2.1 3
  2/day (calendar days of Asia/Tokyo): 1 key, 7 units; peak per key p99 4, p99.9 4, max 4
    2 per window refuses 42.9% of units; 4 would refuse 0% (at most 0.10%)

default
  1000/second: nothing counted
`
	if code != 0 || out != want || errOut != "" {
		t.Errorf("replay: status %d, stderr %q, stdout\n%s\nwant 0, nothing, and\n%s", code, errOut, out, want)
	}
	out, _, code = rlkit(t, "testdata", "replay", "--config", "algorithms.yaml", "--log-format", "json", "--format", "json", "algorithms.jsonl")
	var rep replay.Report
	if err := json.Unmarshal([]byte(out), &rep); code != 0 || err != nil {
		t.Fatalf("replay --format json: status %d, %v", code, err)
	}
	got := map[string][2]int64{}
	for _, r := range rep.Rules {
		got[r.Rule] = [2]int64{r.Requests, r.Refused}
	}
	if want := map[string][2]int64{"fixed": {13, 6}, "sliding": {10, 6}, "token": {10, 4}, "gcra": {10, 4}, "export": {7, 3}, "default": {0, 0}}; !reflect.DeepEqual(got, want) {
		t.Errorf("requests and refusals per rule %v, want %v", got, want)
	}
}
