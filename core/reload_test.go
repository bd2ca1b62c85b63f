package core_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// Two configurations to swap: "stable" is the same in both; "probe" keeps
// its policy but changes its weights and (with the file) header style;
// "flip" changes its count, and counts on from what it spent under the
// other; "span" changes its period, so it counts apart under each; B adds
// a rule in shadow mode on /probe.
const (
	reloadA = `rate_limit:
  enabled: true
  headers: draft
  rules:
    - name: stable
      paths: ["/stable"]
      limit: "1000000000/hour"
    - name: probe
      paths: ["/probe"]
      limit: "1000000000/hour"
    - name: flip
      paths: ["/flip"]
      limit: "1000000000/hour"
    - name: span
      paths: ["/span"]
      limit: "1000000000/hour"
`
	reloadB = `rate_limit:
  enabled: true
  headers: legacy
  rules:
    - name: stable
      paths: ["/stable"]
      limit: "1000000000/hour"
    - name: watch
      paths: ["/probe"]
      limit: "1/hour"
      mode: shadow
    - name: probe
      paths: ["/probe"]
      limit: "1000000000/hour"
      weights:
        "/probe": 2
    - name: flip
      paths: ["/flip"]
      limit: "2000000000/hour"
    - name: span
      paths: ["/span"]
      limit: "1000000000/day"
`
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestReloadUnderLoad swaps two configurations 100 times while 8
// goroutines decide requests: every decision is wholly under one of them
// (its rule, cost, mode and header style agree), and the counters of the
// rules whose name, algorithm and periods did not change carry over
// exactly, under either count.
func TestReloadUnderLoad(t *testing.T) {
	dir := t.TempDir()
	fa, fb := filepath.Join(dir, "a.yaml"), filepath.Join(dir, "b.yaml")
	writeFile(t, fa, reloadA)
	writeFile(t, fb, reloadB)
	cfg, err := core.LoadConfig(fa)
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0)) // no window ends
	store := memstore.New(memstore.WithClock(clock))
	defer store.Close()
	l := core.NewLimiter(cfg, core.WithStore(store), core.WithLogger(slog.New(slog.DiscardHandler)))
	// Half the goroutines decide through a Flow, as adapters do.
	flow := &core.Flow[string]{Limiter: l, ClientIP: func(string) string { return "alice" }}

	var (
		stop                                      atomic.Bool
		stable, probe, flipA, flipB, spanA, spanB atomic.Int64 // units admitted
		wg                                        sync.WaitGroup
		torn                                      atomic.Value
		shadowed                                  atomic.Int64
		decided                                   atomic.Int64 // requests decided so far
	)
	for g := range 8 {
		wg.Go(func() {
			for i := 0; !stop.Load() || i < 50; i++ {
				path := []string{"/stable", "/probe", "/flip", "/span"}[(g+i)%4]
				var d core.Decision
				if g%2 == 0 {
					d = l.Decide(t.Context(), "GET", core.Path(path), "alice", false)
				} else {
					d, _ = flow.Decide(t.Context(), "", "GET", core.Path(path), "")
				}
				if !d.Allowed || d.Err != nil {
					torn.Store(fmt.Sprintf("request denied or failed: %s: rule %v, err %v, result %+v", path, d.Rule, d.Err, d.Result))
					return
				}
				h := http.Header{}
				d.SetHeaders(h)
				decided.Add(1)
				switch path {
				case "/stable":
					stable.Add(d.Cost)
				case "/probe":
					// A: cost 1, draft headers, no shadow rule. B: cost
					// 2, legacy headers, the shadow rule denying all but
					// its first request.
					a := d.Cost == 1 && h.Get("RateLimit") != "" && h.Get("X-RateLimit-Limit") == ""
					b := d.Cost == 2 && h.Get("RateLimit") == "" && h.Get("X-RateLimit-Limit") != ""
					if !a && !b {
						torn.Store("torn decision: cost " + h.Get("X-RateLimit-Limit") + h.Get("RateLimit"))
						return
					}
					if d.ShadowDenied {
						if !b {
							torn.Store("a shadow denial under A")
							return
						}
						shadowed.Add(1)
					}
					probe.Add(d.Cost)
				case "/flip":
					if d.Rule.Policy.Limits[0].Count == 1_000_000_000 {
						flipA.Add(1)
					} else {
						flipB.Add(1)
					}
				case "/span":
					if d.Rule.Policy.Limits[0].Period == time.Hour {
						spanA.Add(1)
					} else {
						spanB.Add(1)
					}
				}
			}
		})
	}
	for i := range 100 {
		f := fb
		if i%2 == 1 {
			f = fa
		}
		if err := l.ReloadFile(f); err != nil {
			t.Fatal(err)
		}
		// Let requests run under each configuration.
		for n := decided.Load() + 16; decided.Load() < n && torn.Load() == nil; {
			time.Sleep(50 * time.Microsecond)
		}
	}
	stop.Store(true)
	wg.Wait()
	if msg := torn.Load(); msg != nil {
		t.Fatal(msg)
	}
	if s := l.ReloadStats(); s.Reloads != 100 || s.Failures != 0 || s.LastError != nil {
		t.Errorf("ReloadStats = %+v, want 100 reloads, no failure", s)
	}
	if shadowed.Load() == 0 {
		t.Errorf("the shadow rule of B denied nothing")
	}
	if flipA.Load() == 0 || flipB.Load() == 0 || spanA.Load() == 0 || spanB.Load() == 0 {
		t.Fatalf("flip counted %d under A, %d under B, span %d and %d: want all", flipA.Load(), flipB.Load(), spanA.Load(), spanB.Load())
	}
	// Configuration A runs now. One more request under each rule shows
	// what its counter holds.
	check := func(path string, used int64, limit int64) {
		t.Helper()
		d := l.Decide(t.Context(), "GET", core.Path(path), "alice", false)
		if want := limit - used - d.Cost; d.Result.Remaining != want {
			t.Errorf("%s: remaining %d, want %d (%d used before)", path, d.Result.Remaining, want, used)
		}
	}
	check("/stable", stable.Load(), 1_000_000_000)
	check("/probe", probe.Load(), 1_000_000_000)
	check("/flip", flipA.Load()+flipB.Load(), 1_000_000_000) // one counter under both counts
	check("/span", spanA.Load(), 1_000_000_000)              // B's requests counted apart
	if err := l.ReloadFile(fb); err != nil {
		t.Fatal(err)
	}
	check("/flip", flipA.Load()+flipB.Load()+1, 2_000_000_000)
	check("/span", spanB.Load(), 1_000_000_000)
}

func TestReloadBadFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rl.yaml")
	writeFile(t, file, reloadA)
	var logs bytes.Buffer
	l := core.NewLimiter(nil, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: noTime}))),
		core.WithClock(store.NewManualClock(time.Unix(1_700_000_000, 0))))
	if err := l.ReloadFile(file); err != nil {
		t.Fatal(err)
	}
	running := l.Config()
	wantLog := `level=INFO msg="rlkit: rate-limit config swapped in (kept and new_terms rules keep their counts; afresh and added rules start from zero)" file=` + file +
		` enabled=true rules=4 kept=[] new_terms=[] afresh=[] added="[default stable probe flip span]" removed=[]` + "\n"
	if logs.String() != wantLog {
		t.Errorf("log:\n%s\nwant:\n%s", logs.String(), wantLog)
	}

	logs.Reset()
	writeFile(t, file, strings.Replace(reloadB, `"2000000000/hour"`, `"2000000000/fortnight"`, 1))
	err := l.ReloadFile(file)
	var ce *core.ConfigError
	if !errors.As(err, &ce) || ce.Line != 19 || ce.Rule != "flip" {
		t.Fatalf("bad file: got %v, want the ConfigError of line 19, rule flip", err)
	}
	if l.Config() != running {
		t.Errorf("a bad file replaced the running configuration")
	}
	s := l.ReloadStats()
	if s.Reloads != 1 || s.Failures != 1 || s.LastError != err || s.LastReload != time.Unix(1_700_000_000, 0).UnixNano() {
		t.Errorf("ReloadStats = %+v, want 1 reload, 1 failure, the error, the reload's time", s)
	}
	wantLog = `level=ERROR msg="rlkit: rate-limit config reload failed; the running configuration stays" file=` + file + ` error="` +
		strings.ReplaceAll(err.Error(), `"`, `\"`) + `"` + "\n"
	if logs.String() != wantLog {
		t.Errorf("log:\n%s\nwant:\n%s", logs.String(), wantLog)
	}

	// A missing file is a failure too.
	if err := l.ReloadFile(filepath.Join(dir, "nope.yaml")); !errors.Is(err, os.ErrNotExist) || l.Config() != running {
		t.Errorf("missing file: got %v, want os.ErrNotExist and the running configuration", err)
	}
	// A good file swaps, names what changed, and clears LastError.
	logs.Reset()
	writeFile(t, file, strings.Replace(reloadB, "    - name: stable\n      paths: [\"/stable\"]\n      limit: \"1000000000/hour\"\n", "", 1))
	if err := l.ReloadFile(file); err != nil {
		t.Fatal(err)
	}
	if s := l.ReloadStats(); s.Reloads != 2 || s.Failures != 2 || s.LastError != nil {
		t.Errorf("ReloadStats = %+v, want 2 reloads, 2 failures, no last error", s)
	}
	if !strings.Contains(logs.String(), ` kept="[default probe]" new_terms=[flip] afresh=[span] added=[watch] removed=[stable]`) {
		t.Errorf("log:\n%s\nwant kept [default probe], new_terms [flip], afresh [span], added [watch], removed [stable]", logs.String())
	}
}

// TestSetConfigOff turns limiting off and on again while serving.
func TestSetConfigOff(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(reloadA), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.DiscardHandler)))
	if d := l.Decide(t.Context(), "GET", "/stable", "alice", false); d.Rule == nil {
		t.Fatal("not counted before SetConfig(nil)")
	}
	l.SetConfig(nil)
	if d := l.Decide(t.Context(), "GET", "/stable", "alice", false); d.Rule != nil || !d.Allowed {
		t.Errorf("after SetConfig(nil): %+v, want allowed uncounted", d)
	}
	l.SetConfig(cfg)
	if d := l.Decide(t.Context(), "GET", "/stable", "alice", false); d.Result.Remaining != 1_000_000_000-2 {
		t.Errorf("after SetConfig(cfg): remaining %d, want %d (the counter carried over)", d.Result.Remaining, 1_000_000_000-2)
	}
}

func noTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}

// TestReloadsDoNotOverlap: a slow reload of an old file never swaps in
// after a later one of the new content.
func TestReloadsDoNotOverlap(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rl.yaml")
	var big strings.Builder
	big.WriteString("rate_limit:\n  enabled: true\n  rules:\n")
	for i := range 3000 {
		fmt.Fprintf(&big, "    - name: r%d\n      paths: [\"/r/%d\"]\n      limit: \"10/second\"\n", i, i)
	}
	writeFile(t, file, big.String())
	l := core.NewLimiter(nil, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.DiscardHandler)))
	first := make(chan error, 1)
	go func() { first <- l.ReloadFile(file) }()
	time.Sleep(time.Millisecond) // let it start reading
	tmp := file + ".tmp"
	writeFile(t, tmp, reloadA)
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	if err := l.ReloadFile(file); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := len(l.Config().Rules()); n != 4 {
		t.Errorf("the limiter runs %d rules, want the 4 of the file as it is now", n)
	}
}

// TestReloadWarnsThroughItsLogger: a reloaded file with rules but no
// enabled field turns limiting off, and the limiter's own logger says so.
func TestReloadWarnsThroughItsLogger(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, file, strings.Replace(reloadA, "  enabled: true\n", "", 1))
	var logs bytes.Buffer
	l := core.NewLimiter(nil, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: noTime}))))
	if err := l.ReloadFile(file); err != nil {
		t.Fatal(err)
	}
	want := `level=WARN msg="rlkit: rate-limit config has rules but no enabled field: limiting is off (add enabled: true to turn it on, or enabled: false to say so)" file=` + file + " rules=4\n"
	if !strings.HasPrefix(logs.String(), want) || l.Config().Enabled() {
		t.Errorf("log:\n%s\nwant first:\n%s(and limiting off)", logs.String(), want)
	}
}

// TestLongPathCompilesInLinearSpace: a rule path of 20,000 segments
// compiles with little memory (building each segment's prefix for error
// messages took 1.2 GB).
func TestLongPathCompilesInLinearSpace(t *testing.T) {
	path := strings.Repeat("/a", 20_000)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	if _, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{{Name: "r", Paths: []string{path}, Limit: []string{"1/s"}}}}); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 64<<20 {
		t.Errorf("compiling a 20,000-segment path allocated %d MB, want under 64", n>>20)
	}
}

// TestReloadLoosensLoudly: a reload that turns limiting off, or puts an
// enforced rule in shadow mode, warns.
func TestReloadLoosensLoudly(t *testing.T) {
	file := filepath.Join(t.TempDir(), "rl.yaml")
	writeFile(t, file, reloadA)
	var logs bytes.Buffer
	l := core.NewLimiter(nil, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: noTime}))))
	if err := l.ReloadFile(file); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	writeFile(t, file, strings.Replace(reloadA, "      limit: \"1000000000/hour\"\n    - name: flip", "      limit: \"1000000000/hour\"\n      mode: shadow\n    - name: flip", 1))
	if err := l.ReloadFile(file); err != nil {
		t.Fatal(err)
	}
	if want := `level=WARN msg="rlkit: rate-limit config swapped in with enforced rules now in shadow mode: they deny nothing" rules=[probe]` + "\n"; !strings.HasSuffix(logs.String(), want) {
		t.Errorf("log:\n%s\nwant last:\n%s", logs.String(), want)
	}
	logs.Reset()
	writeFile(t, file, strings.Replace(reloadA, "enabled: true", "enabled: false", 1))
	if err := l.ReloadFile(file); err != nil {
		t.Fatal(err)
	}
	if want := `level=WARN msg="rlkit: rate-limit config swapped in with limiting off: every request now passes uncounted" file=` + file + " enabled=false\n"; !strings.HasSuffix(logs.String(), want) {
		t.Errorf("log:\n%s\nwant last:\n%s", logs.String(), want)
	}
}

// TestConfigErrorsBounded: a huge value is quoted clipped, and a file of
// thousands of bad rules reports fifty and counts the rest.
func TestConfigErrorsBounded(t *testing.T) {
	_, err := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n  default: \""+strings.Repeat("9", 1<<20)+"/s\"\n"), "big.yaml")
	if err == nil || len(err.Error()) > 400 || !strings.Contains(err.Error(), `value "`+strings.Repeat("9", 64)+`…"`) {
		t.Errorf("a 1 MB value: %d bytes of error, want under 400 with the value clipped: %.300s", len(err.Error()), err)
	}
	var b strings.Builder
	b.WriteString("rate_limit:\n  enabled: true\n  rules:\n")
	for i := range 2000 {
		fmt.Fprintf(&b, "    - name: r%d\n      paths: [\"/r/%d\"]\n      limit: \"1/fortnight\"\n", i, i)
	}
	_, err = core.ParseConfig([]byte(b.String()), "many.yaml")
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 51 || lines[50] != "rate-limit config: and 1950 more problems" {
		t.Errorf("2,000 bad rules: %d lines, last %q; want 51, the count of the 1,950 more", len(lines), lines[len(lines)-1])
	}
}

// TestReloadLogsWhatCarriesOver: the swap's log line sorts the rules by
// what became of their counts: kept (same terms), new_terms (a count, a
// burst, the limits' order: counts carry over), afresh (the algorithm
// changed, or every period; or one limit of a new period, named with the
// rule, beside limits that carry over), added and removed.
func TestReloadLogsWhatCarriesOver(t *testing.T) {
	const before = `rate_limit:
  enabled: true
  default: "60/minute"
  rules:
    - {name: same, paths: ["/same"], limit: "10/hour"}
    - {name: raised, paths: ["/raised"], limit: "10/hour"}
    - {name: burst, paths: ["/burst"], limit: "10/hour", algorithm: gcra, burst: 20}
    - {name: swapped, paths: ["/swapped"], limit: ["10/hour", "100/day"]}
    - {name: algo, paths: ["/algo"], limit: "10/hour"}
    - {name: period, paths: ["/period"], limit: "10/hour"}
    - {name: grown, paths: ["/grown"], limit: "10/hour"}
    - {name: old, paths: ["/old"], limit: "10/hour"}
`
	const after = `rate_limit:
  enabled: true
  default: "60/minute"
  rules:
    - {name: new, paths: ["/new"], limit: "10/hour"}
    - {name: grown, paths: ["/grown"], limit: ["10/hour", "1000/day"]}
    - {name: period, paths: ["/period"], limit: "10/day"}
    - {name: algo, paths: ["/algo"], limit: "10/hour", algorithm: sliding_window}
    - {name: swapped, paths: ["/swapped"], limit: ["100/day", "10/hour"]}
    - {name: burst, paths: ["/burst"], limit: "10/hour", algorithm: gcra, burst: 30}
    - {name: raised, paths: ["/raised"], limit: "20/hour"}
    - {name: same, paths: ["/same"], limit: "10/hour", weights: {"/same": 2}}
`
	var logs bytes.Buffer
	l := core.NewLimiter(nil, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: noTime}))))
	for _, y := range []string{before, after} {
		cfg, err := core.ParseConfig([]byte(y), "rl.yaml")
		if err != nil {
			t.Fatal(err)
		}
		logs.Reset()
		l.SetConfig(cfg)
	}
	want := `level=INFO msg="rlkit: rate-limit config swapped in (kept and new_terms rules keep their counts; afresh and added rules start from zero)"` +
		` enabled=true rules=8 kept="[default same]" new_terms="[grown swapped burst raised]" afresh="[grown(1000/day) period algo]" added=[new] removed=[old]` + "\n"
	if logs.String() != want {
		t.Errorf("log:\n%s\nwant:\n%s", logs.String(), want)
	}
}
