package benchmarks

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"

	"github.com/rlkit/rlkit/benchmarks/internal/redisserver"
)

// The load run drives rlkit's demo server, examples/server, over loopback
// with vegeta (as a library): the real program a user would start, in its
// own process, once without the limiter and once with it. The servers are
// measured interleaved, in blocks of requests, so that the machine's
// changing load weighs on every target alike.

// serverEnv names the environment variable through which cmd/report hands
// the path of an examples/server binary it built to BenchmarkLoad; without
// it, BenchmarkLoad builds one (go build ../examples/server) on first use.
const serverEnv = "RLKIT_BENCH_SERVER"

const (
	// loadWorkers is the number of vegeta workers, each with its own
	// keep-alive connection, sending the next request as soon as its last
	// one is answered (a closed loop at the server's maximum rate).
	loadWorkers = 16
	// loadBlock is the number of requests a target is sent in a row: one
	// block per target per round, 12.5 ms at 20,000 req/s: short enough
	// that a burst of the machine's other load mostly spans a whole round,
	// and so weighs on every target of it.
	loadBlock = 250
	// loadRounds is the number of rounds of one measurement: 40,000
	// requests per target, 2 s of each at 20,000 req/s.
	loadRounds = 160
	// loadWarmUp is the number of untimed blocks each target is sent
	// before the first timed one (1,000 requests): connections, heaps and
	// the limiter's key are in place before anything is measured.
	loadWarmUp = 4
	// loadMaxDuration bounds one block, whatever its size: the run stops
	// there and fails rather than running on.
	loadMaxDuration = 30 * time.Second
	loadTimeout     = 5 * time.Second
	// loadSecret signs nothing (the load sends no tokens); examples/server
	// requires one of at least 32 bytes.
	loadSecret = "rlkit-benchmarks-load-run-secret-not-for-production"
	// startTimeout bounds a server's start, from exec to its banner.
	startTimeout = 20 * time.Second
)

// A loadTarget is one examples/server configuration of the load run: the
// same YAML, one rule for /api/search and the default limit, with limiting
// on or off, on the memory store or on Redis.
type loadTarget struct {
	name    string
	enabled bool
	limit   string
	redis   bool
	// consistency, when set, is the file's consistency (lease).
	consistency string
	// denying: the limit is reached at once, so nearly every answer is a
	// 429 (expected; denied/op counts them).
	denying bool
}

// loadTargets are the servers of the load run; the first, bare, is the
// baseline of the others' ratios, and bare-again the same server again.
var loadTargets = []loadTarget{
	{name: "bare", enabled: false, limit: "2000000000/hour"},
	{name: "bare-again", enabled: false, limit: "2000000000/hour"},
	{name: "rlkit-memory", enabled: true, limit: "2000000000/hour"},
	{name: "rlkit-memory-denying", enabled: true, limit: "10/second", denying: true},
	{name: "rlkit-redis", enabled: true, limit: "2000000000/hour", redis: true},
	{name: "rlkit-redis-lease", enabled: true, limit: "2000000000/hour", redis: true, consistency: "lease"},
}

func (t loadTarget) config() string {
	more := ""
	if t.consistency != "" {
		more = "  consistency: " + t.consistency + "\n"
	}
	return fmt.Sprintf(`rate_limit:
  enabled: %t
%s  rules:
    - name: search
      paths: ["/api/search"]
      limit: %q
  default: %q
`, t.enabled, more, t.limit, t.limit)
}

// BenchmarkLoad measures examples/server over loopback: GET /api/search
// with no token (so the limiter, when on, counts every request under the
// one client IP, 127.0.0.1), from loadWorkers vegeta workers in a closed
// loop. Targets, each two server processes, from the same YAML:
//
//   - bare: enabled: false, the server without the limiter (the baseline);
//   - bare-again: the same as bare, measured as any other target: what
//     the method cannot tell from nothing;
//   - rlkit-memory: enabled: true, a limit no run reaches (2,000,000,000 per
//     hour), the memory store: what counting costs a server;
//   - rlkit-memory-denying: a limit of 10 per second, so nearly every
//     request is answered 429 with its JSON body and headers: what holding
//     back an abusive client costs;
//   - rlkit-redis: as rlkit-memory, with -redis on the shared redis-server
//     (left out, with a log line, without one);
//   - rlkit-redis-lease: as rlkit-redis, with consistency: lease: the
//     server takes its quota from Redis in blocks.
//
// Each target runs as two server processes, the first of every target
// started in the targets' order, the second ones in the reverse order, and
// its rounds alternate between them, so that every target takes the same
// mean place in the start order: with one process per target, an
// identical server started later served 0.90-1.005x the req/s of one
// started earlier (eight runs, either order). The targets
// are measured interleaved: every server is started and warmed up
// (loadWarmUp untimed blocks each), then each round sends every target one
// block of loadBlock requests, in an order shuffled every round (so that
// no target always follows the same one), each block timed on its own,
// and each target's blocks add up to its time. One op is one measurement of
// loadRounds rounds (40,000 requests per target; fewer rounds when
// -test.benchtime is a duration under 1s, as for a quick smoke run), so a
// run of the test binary gives one sample of every target, all taken
// within seconds of each other. Reported per target: <target>-req/s
// (requests per second of its blocks' wall time), <target>-p50-ns and
// <target>-p99-ns (latency of one request as vegeta measures it, from
// sending to the end of the body), <target>-x-bare (its req/s over bare's,
// in this run), for the denying target <target>-denied/op (the share of
// 429s), and on Linux <target>-server-cpu-ns and <target>-client-cpu-ns:
// the CPU time (user and system) the server process and this process,
// the client, used per request during the target's blocks (the server's
// from /proc/<pid>/stat, in ticks of 10 ms summed over the blocks). Each
// vegeta worker keeps its connection from block to block.
//
// Client and server share the machine's cores, so req/s is a property of
// the pair; the ratio to bare, measured in the same rounds, is what
// carries over. The CPU per request says where a difference comes from,
// and moves less than req/s with the machine's other load.
func BenchmarkLoad(b *testing.B) {
	bin := serverBinary(b)
	dir := b.TempDir()
	var runs []*loadRun
	b.Cleanup(func() {
		for _, r := range runs {
			for _, in := range r.instances {
				if in != nil {
					in.server.stop()
					in.client.CloseIdleConnections()
				}
			}
		}
	})
	var redisAddr string
	for _, t := range loadTargets {
		if t.redis {
			addr, ok := loadRedisAddr(b)
			if !ok {
				b.Logf("%s left out: redis-server not in PATH (set %s=1 to fail instead, or %s to use a running server)", t.name, requireRedisEnv, redisserver.AddrEnv)
				continue
			}
			redisAddr = addr
		}
		runs = append(runs, &loadRun{target: t})
	}
	// The first instances in the targets' order, the second ones in the
	// reverse order: every target's mean place in the start order is the
	// same.
	for i := range 2 {
		for j := range runs {
			r := runs[j]
			if i == 1 {
				r = runs[len(runs)-1-j]
			}
			var addr string
			if r.target.redis {
				addr = redisAddr
			}
			name := fmt.Sprintf("%s-%d", r.target.name, i)
			r.instances[i] = newLoadInstance(startLoadServer(b, bin, dir, name, r.target, addr))
		}
	}
	for _, r := range runs {
		for _, in := range r.instances {
			for range loadWarmUp {
				r.block(b, in, false)
			}
		}
	}
	rounds := loadRoundsFor(benchtime())
	for _, r := range runs {
		r.latencies = make([]time.Duration, 0, b.N*rounds*loadBlock)
	}
	order := make([]int, len(runs))
	rng := rand.New(rand.NewPCG(1, 2))
	b.ResetTimer()
	for range b.N {
		for round := range rounds {
			for i := range order {
				order[i] = i
			}
			rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
			for _, i := range order {
				runs[i].block(b, runs[i].instances[round%2], true)
			}
		}
	}
	b.StopTimer()
	for _, r := range runs {
		r.report(b, runs[0].rate())
	}
}

// loadRedisAddr returns the redis-server of the Redis target, and false
// when there is none to use (it fails b when RLKIT_REQUIRE_REDIS=1).
func loadRedisAddr(b *testing.B) (string, bool) {
	if os.Getenv(redisserver.AddrEnv) == "" && !redisserver.Available() && os.Getenv(requireRedisEnv) != "1" {
		return "", false
	}
	return benchRedisAddr(b), true
}

// benchtime returns the -test.benchtime of this run when it is a
// duration, else 0 (its default, or a count of iterations: "3x").
func benchtime() time.Duration {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return 0
	}
	d, err := time.ParseDuration(f.Value.String())
	if err != nil {
		return 0
	}
	return d
}

// loadRoundsFor returns the rounds of one measurement under -test.benchtime
// d: loadRounds, or fewer in proportion to a d under 1s (at least 1).
func loadRoundsFor(d time.Duration) int {
	if d <= 0 || d >= time.Second {
		return loadRounds
	}
	return max(1, int(float64(loadRounds)*d.Seconds()))
}

// TestLoadRoundsFor checks the rounds of one measurement: all of them
// under go test's default -benchtime or a count of iterations, fewer in
// proportion under a short one, never none.
func TestLoadRoundsFor(t *testing.T) {
	for _, tc := range []struct {
		d    time.Duration
		want int
	}{{0, loadRounds}, {time.Second, loadRounds}, {5 * time.Second, loadRounds}, {100 * time.Millisecond, loadRounds / 10}, {500 * time.Millisecond, loadRounds / 2}, {time.Millisecond, 1}} {
		if got := loadRoundsFor(tc.d); got != tc.want {
			t.Errorf("loadRoundsFor(%v) = %d, want %d", tc.d, got, tc.want)
		}
	}
}

// A loadRun is one target of the load run: its two server processes
// and what its timed blocks measured.
type loadRun struct {
	target    loadTarget
	instances [2]*loadInstance
	spent     time.Duration // wall time of the timed blocks
	// CPU time the server and this process (the client) used during the
	// timed blocks; cpuLost when it could not be read (not Linux).
	serverCPU, clientCPU time.Duration
	cpuLost              bool
	latencies            []time.Duration
	denied               int
}

// A loadInstance is one server process of a target, with the client its
// blocks share.
type loadInstance struct {
	server *loadServer
	url    string
	client *http.Client
}

// newLoadInstance returns the instance of server s, with a client that
// keeps a keep-alive connection per worker from one block to the next (as
// vegeta's own: a dialer with TCP keep-alive, no redirects followed).
func newLoadInstance(s *loadServer) *loadInstance {
	dialer := &net.Dialer{KeepAlive: 30 * time.Second}
	return &loadInstance{
		server: s,
		url:    "http://" + s.addr + "/api/search",
		client: &http.Client{
			Timeout:       loadTimeout,
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
			Transport: &http.Transport{
				DialContext:         dialer.DialContext,
				MaxIdleConnsPerHost: loadWorkers,
			},
		},
	}
}

// block sends loadBlock requests to instance in of the run's target from
// loadWorkers vegeta workers in a closed loop and, when timed, adds its
// wall time, CPU times, latencies and 429s to the run. Any answer but 200
// (or 429 when the target is denying) fails b.
func (r *loadRun) block(b *testing.B, in *loadInstance, timed bool) {
	var issued atomic.Int64
	targeter := func(t *vegeta.Target) error {
		if issued.Add(1) > loadBlock {
			return vegeta.ErrNoTargets
		}
		t.Method, t.URL = "GET", in.url
		return nil
	}
	atk := vegeta.NewAttacker(vegeta.Client(in.client), vegeta.Workers(loadWorkers), vegeta.MaxWorkers(loadWorkers))
	var answered, denied, failed int
	var firstErr string
	server0, ok0 := processCPU(in.server.cmd.Process.Pid)
	client0, ok1 := selfCPU()
	start := time.Now()
	for res := range atk.Attack(targeter, vegeta.ConstantPacer{}, loadMaxDuration, r.target.name) {
		if res.Error == vegeta.ErrNoTargets.Error() && res.Code == 0 {
			continue // a worker asked for a target after the last one
		}
		answered++
		if timed {
			r.latencies = append(r.latencies, res.Latency)
		}
		switch {
		case res.Code == http.StatusOK:
		case res.Code == http.StatusTooManyRequests && r.target.denying:
			denied++
		default:
			failed++
			if firstErr == "" {
				firstErr = fmt.Sprintf("status %d %s", res.Code, res.Error)
			}
		}
	}
	elapsed := time.Since(start)
	server1, ok2 := processCPU(in.server.cmd.Process.Pid)
	client1, ok3 := selfCPU()
	if failed > 0 {
		b.Fatalf("%s: %d of %d requests failed, the first: %s", r.target.name, failed, answered, firstErr)
	}
	if answered != loadBlock {
		b.Fatalf("%s: %d of %d requests answered within %v", r.target.name, answered, loadBlock, loadMaxDuration)
	}
	if timed {
		r.spent += elapsed
		r.serverCPU += server1 - server0
		r.clientCPU += client1 - client0
		r.cpuLost = r.cpuLost || !(ok0 && ok1 && ok2 && ok3)
		r.denied += denied
	}
}

// rate returns the run's requests per second of its timed blocks.
func (r *loadRun) rate() float64 { return float64(len(r.latencies)) / r.spent.Seconds() }

// report reports the run's metrics, among them its req/s over bare's (the
// baseline's req/s in the same rounds).
func (r *loadRun) report(b *testing.B, bare float64) {
	slices.Sort(r.latencies)
	name := r.target.name
	b.ReportMetric(r.rate(), name+"-req/s")
	b.ReportMetric(float64(quantile(r.latencies, 0.50)), name+"-p50-ns")
	b.ReportMetric(float64(quantile(r.latencies, 0.99)), name+"-p99-ns")
	if name != loadTargets[0].name {
		b.ReportMetric(r.rate()/bare, name+"-x-bare")
	}
	if r.target.denying {
		b.ReportMetric(float64(r.denied)/float64(len(r.latencies)), name+"-denied/op")
	}
	if !r.cpuLost {
		b.ReportMetric(float64(r.serverCPU)/float64(len(r.latencies)), name+"-server-cpu-ns")
		b.ReportMetric(float64(r.clientCPU)/float64(len(r.latencies)), name+"-client-cpu-ns")
	}
}

// quantile returns the q-quantile of sorted (nearest rank); 0 of none.
func quantile[T time.Duration | int64](sorted []T, q float64) T {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

// A loadServer is a running examples/server process.
type loadServer struct {
	addr   string
	cmd    *exec.Cmd
	done   chan struct{}
	stderr *cappedBuffer
}

// startLoadServer starts bin with target t's configuration, written to
// dir/<name>.yaml, on a free port of 127.0.0.1 (-addr 127.0.0.1:0; the
// address is read from its banner).
func startLoadServer(b *testing.B, bin, dir, name string, t loadTarget, redisAddr string) *loadServer {
	cfg := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(cfg, []byte(t.config()), 0o644); err != nil {
		b.Fatal(err)
	}
	args := []string{"-config", cfg, "-addr", "127.0.0.1:0", "-jwt-secret", loadSecret}
	if redisAddr != "" {
		args = append(args, "-redis", "redis://"+redisAddr+"/0")
	}
	cmd := exec.Command(bin, args...)
	cmd.SysProcAttr = childProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	s := &loadServer{cmd: cmd, done: make(chan struct{}), stderr: &cappedBuffer{max: 64 << 10}}
	cmd.Stderr = s.stderr
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	addrc := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "listening on http://"); ok {
				addrc <- a
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		_ = cmd.Wait()
		close(s.done)
	}()
	select {
	case s.addr = <-addrc:
		return s
	case <-s.done:
		b.Fatalf("examples/server %s exited before listening: %s", strings.Join(args, " "), s.stderr)
	case <-time.After(startTimeout):
		s.stop()
		b.Fatalf("examples/server %s printed no listening address within %v: %s", strings.Join(args, " "), startTimeout, s.stderr)
	}
	return nil
}

// stop sends SIGTERM (the server shuts down gracefully) and kills it if it
// has not exited within 10 s.
func (s *loadServer) stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// cappedBuffer keeps the first max bytes written to it; safe for
// concurrent use.
type cappedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if room := c.max - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (c *cappedBuffer) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// The examples/server binary this test binary built, if any.
var builtServer struct {
	once sync.Once
	dir  string
	path string
	err  error
}

// serverBinary returns $RLKIT_BENCH_SERVER, or builds examples/server from
// the rlkit module this module replaces (..) once per test binary, into a
// temporary directory removed at exit (stopLoadServers).
func serverBinary(tb testing.TB) string {
	if p := os.Getenv(serverEnv); p != "" {
		return p
	}
	builtServer.once.Do(func() {
		builtServer.dir, builtServer.err = os.MkdirTemp("", "rlkit-bench-server-")
		if builtServer.err != nil {
			return
		}
		builtServer.path = filepath.Join(builtServer.dir, "server")
		builtServer.err = buildServer(builtServer.path)
	})
	if builtServer.err != nil {
		tb.Fatal(builtServer.err)
	}
	return builtServer.path
}

// buildServer builds rlkit's examples/server into out with the go command
// that runs this test (or the one in PATH), from the rlkit module root, the
// parent of the benchmarks module.
func buildServer(out string) error {
	root, err := filepath.Abs("..")
	if err != nil {
		return err
	}
	if _, err := os.Stat(filepath.Join(root, "examples", "server", "main.go")); err != nil {
		return fmt.Errorf("examples/server not found under %s: %w", root, err)
	}
	cmd := exec.Command(goCommand(), "build", "-o", out, "./examples/server")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("go build ./examples/server: %v\n%s", err, b)
	}
	return nil
}

// goCommand returns the go command of the toolchain that built this
// binary, else "go" from PATH.
func goCommand() string {
	p := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return "go"
}

// stopLoadServers removes the examples/server binary this test binary
// built, if any. (The servers themselves stop at BenchmarkLoad's cleanup.)
func stopLoadServers() {
	if builtServer.dir != "" {
		_ = os.RemoveAll(builtServer.dir)
	}
}
