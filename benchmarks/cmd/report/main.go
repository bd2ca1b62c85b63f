// Command report runs rlkit's benchmarks against the peer libraries and
// writes RESULTS.md, algorithms.png, redis-goroutines.png and fleet.png.
// From the
// benchmarks module:
//
//	cd benchmarks && go run ./cmd/report
//
// It starts what the benchmarks need — its own redis-server on a free
// loopback port (stopped afterwards; without redis-server in PATH the Redis
// tables are skipped and the report says so) and an examples/server binary
// for the load run — builds the benchmark test binary once, runs it -count
// times (each run executes every benchmark once, so a burst of noise on a
// shared machine spreads over all participants instead of hitting one),
// parses the standard benchmark output itself and renders one table per
// scenario: median, min–max, B/op, allocs/op and the ratio to the baseline
// measured in the same run. When -bench selects them, it also runs the
// benchmarks of `rlkit replay` (BenchmarkReplayCLF and BenchmarkCountLines,
// in rlkit's own module, -count times in one go test run) for the Replay
// section. The Redis Cluster scale-out (BenchmarkClusterScale) starts its
// own clusters of redis-servers. It also simulates rlkit's algorithms on a
// fake clock and draws algorithms.png, and draws the Redis goroutines sweep
// (decisions per second against goroutines) as redis-goroutines.png, and
// the fleet of three nodes, rlkit against gubernator (decisions per second
// per node against goroutines), as fleet.png.
//
// Flags:
//
//	-count N        runs of the test binary (default 5)
//	-benchtime D    passed to every run (default: go test's, 1s)
//	-bench RE       which benchmarks (default ".", all)
//	-quick          a fast smoke run: -benchtime 100ms unless given
//	-out FILE       the report (default RESULTS.md)
//	-png FILE       the picture (default algorithms.png)
//	-gpng FILE      the goroutines sweep's picture (default redis-goroutines.png)
//	-fpng FILE      the fleet's picture (default fleet.png)
//	-raw FILE       the raw output of every run (default results/latest.txt)
//
// Relative paths are relative to the benchmarks module's directory.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/rlkit/rlkit/benchmarks/algoplot"
	"github.com/rlkit/rlkit/benchmarks/internal/redisserver"
)

const (
	benchModule = "github.com/rlkit/rlkit/benchmarks"
	// serverEnv hands the examples/server binary to BenchmarkLoad (see
	// load_test.go).
	serverEnv = "RLKIT_BENCH_SERVER"
	// runTimeout bounds one run of the test binary.
	runTimeout = "60m"
)

type options struct {
	count     int
	benchtime string
	bench     string
	quick     bool
	out, png  string
	gpng      string
	fpng      string
	raw       string
}

func main() {
	var o options
	flag.IntVar(&o.count, "count", 5, "runs of the benchmark binary; each runs every benchmark once")
	flag.StringVar(&o.benchtime, "benchtime", "", "-test.benchtime of every run (default: go test's, 1s)")
	flag.StringVar(&o.bench, "bench", ".", "-test.bench: which benchmarks to run")
	flag.BoolVar(&o.quick, "quick", false, "fast smoke run: -benchtime 100ms unless -benchtime is given")
	flag.StringVar(&o.out, "out", "RESULTS.md", "the report to write")
	flag.StringVar(&o.png, "png", "algorithms.png", "the picture of the algorithms to write")
	flag.StringVar(&o.gpng, "gpng", "redis-goroutines.png", "the picture of the Redis goroutines sweep to write")
	flag.StringVar(&o.fpng, "fpng", "fleet.png", "the picture of the fleet (rlkit and gubernator on three nodes) to write")
	flag.StringVar(&o.raw, "raw", filepath.Join("results", "latest.txt"), "where to keep the raw benchmark output")
	flag.Parse()
	if flag.NArg() > 0 || o.count < 1 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(o, os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "report:", err)
		os.Exit(1)
	}
}

func run(o options, args []string) error {
	started := time.Now()
	dir, err := moduleDir()
	if err != nil {
		return err
	}
	abs := func(p string) string {
		if filepath.IsAbs(p) {
			return p
		}
		return filepath.Join(dir, p)
	}
	if o.quick && o.benchtime == "" {
		o.benchtime = "100ms"
	}
	tmp, err := os.MkdirTemp("", "rlkit-report-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)

	info := collectMachine(dir)
	var notes []string
	env := os.Environ()

	// Redis.
	redisNote := "not in PATH: the Redis tables are skipped"
	if redisserver.Available() {
		srv, err := redisserver.Start()
		if err != nil {
			notes = append(notes, "redis-server could not be started, so the Redis rows are missing: "+err.Error())
			redisNote = "failed to start: " + err.Error()
		} else {
			defer srv.Stop()
			env = append(env, redisserver.AddrEnv+"="+srv.Addr())
			redisNote = redisVersion() + ", started by this command on " + srv.Addr() + " (--save '' --appendonly no), stopped afterwards"
			logf("redis-server on %s", srv.Addr())
		}
	} else {
		notes = append(notes, "redis-server is not in PATH, so the Redis tables and the Redis rows of the load run and the over-admission check are skipped (apt-get install redis-server).")
	}

	// examples/server for the load run.
	serverBin := filepath.Join(tmp, "server")
	logf("building examples/server")
	if err := goRun(filepath.Dir(dir), "build", "-o", serverBin, "./examples/server"); err != nil {
		notes = append(notes, "examples/server did not build, so the load run failed: "+firstLine(err.Error()))
	} else {
		env = append(env, serverEnv+"="+serverBin)
	}

	// The benchmark binary, built once.
	testBin := filepath.Join(tmp, "bench.test")
	logf("building the benchmarks")
	if err := goRun(dir, "test", "-c", "-o", testBin, "."); err != nil {
		return err
	}

	if err := os.MkdirAll(filepath.Dir(abs(o.raw)), 0o755); err != nil {
		return err
	}
	rawFile, err := os.Create(abs(o.raw))
	if err != nil {
		return err
	}
	defer rawFile.Close()

	res := newResults()
	testArgs := []string{"-test.run", "^$", "-test.bench", o.bench, "-test.benchmem", "-test.count", "1", "-test.timeout", runTimeout}
	if o.benchtime != "" {
		testArgs = append(testArgs, "-test.benchtime", o.benchtime)
	}
	for i := 1; i <= o.count; i++ {
		logf("run %d of %d: %s %s", i, o.count, filepath.Base(testBin), strings.Join(testArgs, " "))
		var buf bytes.Buffer
		cmd := exec.Command(testBin, testArgs...)
		cmd.Dir, cmd.Env = dir, env
		w := io.MultiWriter(&buf, rawFile, os.Stderr)
		cmd.Stdout, cmd.Stderr = w, w
		runErr := cmd.Run()
		if err := res.parse(&buf); err != nil {
			return err
		}
		if runErr != nil {
			notes = append(notes, fmt.Sprintf("run %d of %d ended with %v; its failures are listed below, every row it did measure is counted.", i, o.count, runErr))
		}
	}

	// The replay benchmarks, in rlkit's own module.
	if wantReplay(o.bench) {
		logf("running the replay benchmarks in %s", replayPkg)
		if err := runReplay(dir, o.count, o.benchtime, rawFile, res); err != nil {
			notes = append(notes, "the replay benchmarks failed: "+firstLine(err.Error()))
		}
	}

	// The picture and its table.
	sim := algoplot.Simulate(algoplot.Default())
	if err := sim.WritePNG(abs(o.png)); err != nil {
		return fmt.Errorf("write %s: %w", o.png, err)
	}

	versions := moduleVersions(dir)
	sw := res.sweep()
	if len(sw.participants) > 0 {
		if err := writeSweepPNG(abs(o.gpng), sw, versions); err != nil {
			return fmt.Errorf("write %s: %w", o.gpng, err)
		}
	}
	fl := res.fleet()
	if len(fl.systems) > 0 {
		if err := writeFleetPNG(abs(o.fpng), fl, versions); err != nil {
			return fmt.Errorf("write %s: %w", o.fpng, err)
		}
	}
	var b strings.Builder
	writeHeader(&b, reportRun{o, args, info, redisNote, started, relTo(dir, abs(o.raw))})
	writeNotes(&b, notes, res)
	renderSummary(&b, res, versions)
	fmt.Fprintf(&b, "## Algorithms under a steady 3× overload\n\n![requests admitted per 100 ms by each rlkit algorithm](%s)\n\n%s\n\n%s\n",
		relTo(filepath.Dir(abs(o.out)), abs(o.png)), sim.Describe(), sim.Markdown())
	b.WriteString("How to read it: the fixed window admits its whole quota at the start of every window and nothing after, so its admissions come in bursts at 3× the limit followed by long gaps, and a client that starts late in a window gets two quotas through around the boundary (\"most within any 1 s\"). " +
		"The sliding window weighs the previous window's count as if it had been spread evenly over that window, so after a late start it still lets more than the limit through within one second, then paces with short gaps. " +
		"The token bucket and GCRA admit their burst (the quota, once, from idle) and then one request per tenth of the period, evenly. " +
		"The counts come from `core/algo`, the functions every rlkit store applies; `algoplot`'s test pins them.\n\n")
	for _, sc := range scenarios {
		renderScenario(&b, res, sc, versions)
		if sc.prefix == "BenchmarkRedis/" && sc.suffix == "/par64" {
			renderSweep(&b, sw, relTo(filepath.Dir(abs(o.out)), abs(o.gpng)), versions)
		}
	}
	renderClusterScale(&b, res, runtime.NumCPU())
	renderLoad(&b, res, versions)
	renderOverAdmission(&b, res, versions)
	renderFleet(&b, fl, relTo(filepath.Dir(abs(o.out)), abs(o.fpng)), versions)
	renderMetrics(&b, res)
	renderFeatures(&b, res)
	renderReplay(&b, res)
	writePeers(&b, versions)
	if err := os.WriteFile(abs(o.out), []byte(b.String()), 0o644); err != nil {
		return err
	}
	logf("wrote %s, %s and %s in %v", abs(o.out), abs(o.png), abs(o.raw), time.Since(started).Round(time.Second))
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "report: "+format+"\n", args...)
}

// moduleDir returns the benchmarks module's directory: the working
// directory or one above it whose go.mod declares benchModule, or
// ./benchmarks.
func moduleDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	isBench := func(d string) bool {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err != nil {
			return false
		}
		first, _, _ := strings.Cut(string(b), "\n")
		return strings.TrimSpace(strings.TrimPrefix(first, "module")) == benchModule
	}
	for d := wd; ; d = filepath.Dir(d) {
		if isBench(d) {
			return d, nil
		}
		if sub := filepath.Join(d, "benchmarks"); isBench(sub) {
			return sub, nil
		}
		if filepath.Dir(d) == d {
			return "", errors.New("run from rlkit's benchmarks/ directory: no go.mod of " + benchModule + " here or above")
		}
	}
}

// goCommand is the go command of the toolchain running this program (go
// run), else go from PATH.
func goCommand() string {
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// goRun runs the go command in dir, its output in the error.
func goRun(dir string, args ...string) error {
	cmd := exec.Command(goCommand(), args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// moduleVersions returns the version of every module in the benchmarks
// module's build list.
func moduleVersions(dir string) map[string]string {
	cmd := exec.Command(goCommand(), "list", "-m", "-f", "{{.Path}} {{.Version}}", "all")
	cmd.Dir = dir
	out, err := cmd.Output()
	v := map[string]string{}
	if err != nil {
		return v
	}
	for line := range strings.Lines(string(out)) {
		if p, ver, ok := strings.Cut(strings.TrimSpace(line), " "); ok {
			v[p] = ver
		}
	}
	return v
}

// redisVersion returns "redis-server 7.0.15" from `redis-server --version`
// ("Redis server v=7.0.15 sha=..."), or what it printed.
func redisVersion() string {
	v := redisserver.Version()
	for f := range strings.FieldsSeq(v) {
		if n, ok := strings.CutPrefix(f, "v="); ok {
			return "redis-server " + n
		}
	}
	return v
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// relTo returns p relative to dir, with forward slashes, or p.
func relTo(dir, p string) string {
	if r, err := filepath.Rel(dir, p); err == nil {
		return filepath.ToSlash(r)
	}
	return p
}
