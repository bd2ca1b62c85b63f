package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// machine describes where the report ran.
type machine struct {
	cpu    string
	cores  int
	memory string
	os     string
	kernel string
	goVer  string
	commit string
}

// collectMachine reads the CPU model and memory from /proc, the OS from
// /etc/os-release, the Go version from the go command, and rlkit's commit
// from git (dir is the benchmarks module, inside rlkit's repository).
func collectMachine(dir string) machine {
	m := machine{cpu: "unknown CPU", cores: runtime.NumCPU(), os: runtime.GOOS + "/" + runtime.GOARCH}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				kb, _ := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
				m.memory = strconv.FormatFloat(kb/(1<<20), 'f', 1, 64) + " GiB"
			}
		}
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for line := range strings.Lines(string(b)) {
			if v, ok := strings.CutPrefix(strings.TrimSpace(line), "PRETTY_NAME="); ok {
				m.os = strings.Trim(v, `"`) + " (" + runtime.GOARCH + ")"
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if out, err := exec.Command(goCommand(), "env", "GOVERSION").Output(); err == nil {
		m.goVer = strings.TrimSpace(string(out))
	} else {
		m.goVer = runtime.Version()
	}
	if out, err := exec.Command("git", "-C", dir, "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "-C", filepath.Dir(dir), "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(strings.TrimSpace(string(st))) > 0 {
			m.commit += " with uncommitted changes"
		}
	}
	return m
}

// reportRun is what the header says of a run of the report: its options
// and arguments, the machine, the redis-server it used, when it started
// and where its raw output is.
type reportRun struct {
	o       options
	args    []string
	m       machine
	redis   string
	started time.Time
	raw     string
}

func writeHeader(b *strings.Builder, run reportRun) {
	cmdline := "go run ./cmd/report"
	if len(run.args) > 0 {
		cmdline += " " + strings.Join(run.args, " ")
	}
	benchtime := run.o.benchtime
	if benchtime == "" {
		benchtime = "1s (go test's default)"
	}
	fmt.Fprintf(b, "# rlkit benchmarks: results\n\n")
	fmt.Fprintf(b, "Written by `%s` (in `benchmarks/`); regenerate it with the same command rather than editing it.\n\n", cmdline)
	b.WriteString("| | |\n|---|---|\n")
	fmt.Fprintf(b, "| date | %s |\n", run.started.UTC().Format("2006-01-02 15:04 MST"))
	mach := fmt.Sprintf("%s, %d cores, %s", run.m.cpu, run.m.cores, run.m.memory)
	fmt.Fprintf(b, "| machine | %s |\n", mach)
	fmt.Fprintf(b, "| system | %s, %s |\n", run.m.os, run.m.kernel)
	fmt.Fprintf(b, "| Go | %s, GOMAXPROCS %d |\n", run.m.goVer, runtime.GOMAXPROCS(0))
	if run.m.commit != "" {
		fmt.Fprintf(b, "| rlkit | commit %s |\n", run.m.commit)
	}
	fmt.Fprintf(b, "| redis-server | %s |\n", run.redis)
	fmt.Fprintf(b, "| runs | %s of the test binary, one after another; each runs every benchmark once (`-test.count 1`), -benchtime %s, -bench `%s` |\n", plural(run.o.count, "run"), benchtime, run.o.bench)
	fmt.Fprintf(b, "| took | %s |\n", time.Since(run.started).Round(time.Second))
	fmt.Fprintf(b, "| raw output | [`%s`](%s) |\n\n", run.raw, run.raw)
	b.WriteString("How to read the tables: each row is one participant; its median is over the runs, and min–max shows the spread between runs. " +
		"The last column divides a row's median by the baseline's median **of the same run** (a bare handler, a plain map, or the cheapest Redis round trip): " +
		"that ratio carries over to other machines far better than any absolute figure, and on a shared machine it is the number to quote. " +
		"When two rows' min–max ranges overlap, the run does not tell them apart.\n\n")
}

func writeNotes(b *strings.Builder, notes []string, r *results) {
	if len(notes) == 0 && len(r.skips) == 0 && len(r.fails) == 0 {
		return
	}
	b.WriteString("## Notes on this run\n\n")
	for _, n := range notes {
		fmt.Fprintf(b, "- %s\n", n)
	}
	seen := map[string]bool{}
	for name, why := range r.skips {
		key := name + why
		if seen[key] {
			continue
		}
		seen[key] = true
		fmt.Fprintf(b, "- skipped `%s`: %s\n", name, why)
	}
	for _, f := range r.fails {
		fmt.Fprintf(b, "- failed:\n\n  ```\n  %s\n  ```\n", strings.ReplaceAll(f, "\n", "\n  "))
	}
	b.WriteString("\n")
}

// peers lists the peer libraries: what the benchmarks use of each.
var peers = []struct{ module, use string }{
	{"golang.org/x/time", "`rate.Limiter`, one for every key (one-key, denied-key and over-admission rows); Echo's and tollbooth's stores are built on it"},
	{"github.com/sethvargo/go-limiter", "`memorystore` (token bucket), `httplimit` middleware"},
	{"github.com/ulule/limiter/v3", "`drivers/store/memory`, `drivers/store/redis`, `drivers/middleware/stdlib` (fixed window)"},
	{"github.com/throttled/throttled/v2", "`GCRARateLimiterCtx` over `store/memstore` and `store/goredisstore.v9`, `HTTPRateLimiterCtx`"},
	{"github.com/go-redis/redis_rate/v10", "`Limiter.Allow` (GCRA in one Lua script)"},
	{"github.com/didip/tollbooth/v7", "`limiter.Limiter.LimitReached`, `tollbooth.LimitHandler` (v8 is not served by the module proxy this project can reach: v7.0.2 is the newest that builds here)"},
	{"github.com/labstack/echo/v4", "`middleware.RateLimiter` with `RateLimiterMemoryStore`"},
	{"github.com/gofiber/fiber/v2", "`middleware/limiter` (fixed window, default memory storage)"},
	{"github.com/gin-gonic/gin", "bare engine only (Gin has no built-in limiter)"},
	{"github.com/redis/go-redis/v9", "the client of every Redis participant"},
	{"github.com/tsenart/vegeta/v12", "load generator of the load run (library)"},
	{"github.com/gubernator-io/gubernator/v2", "a cluster of three daemons in process (`SpawnDaemon`), called through its gRPC `V1Client`, `TOKEN_BUCKET` with behaviours `BATCHING` and `GLOBAL` (fleet section)"},
	{"gonum.org/v1/plot", "draws algorithms.png, redis-goroutines.png and fleet.png"},
}

func writePeers(b *strings.Builder, versions map[string]string) {
	b.WriteString("## Peers and versions\n\n| module | version | used |\n|---|---|---|\n")
	for _, p := range peers {
		v := versions[p.module]
		if v == "" {
			v = "—"
		}
		fmt.Fprintf(b, "| %s | %s | %s |\n", p.module, v, p.use)
	}
	b.WriteString("\nrlkit is the working tree of this repository (`replace github.com/rlkit/rlkit => ../` in `benchmarks/go.mod`), so the peers never enter rlkit's own go.mod.\n")
}
