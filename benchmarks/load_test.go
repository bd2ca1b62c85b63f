package benchmarks

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
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
)

// The load run drives rlkit's demo server, examples/server, over loopback
// with vegeta (as a library): the real program a user would start, in its
// own process, once without the limiter and once with it.

// serverEnv names the environment variable through which cmd/report hands
// the path of an examples/server binary it built to BenchmarkLoad; without
// it, BenchmarkLoad builds one (go build ../examples/server) on first use.
const serverEnv = "RLKIT_BENCH_SERVER"

const (
	// loadWorkers is the number of vegeta workers, each with its own
	// keep-alive connection, sending the next request as soon as its last
	// one is answered (a closed loop at the server's maximum rate).
	loadWorkers = 16
	// loadMaxDuration bounds one attack, whatever b.N: the run stops there
	// and the row fails rather than running on.
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
	// denying: the limit is reached at once, so nearly every answer is a
	// 429 (expected; denied/op counts them).
	denying bool
}

var loadTargets = []loadTarget{
	{name: "bare", enabled: false, limit: "2000000000/hour"},
	{name: "rlkit-memory", enabled: true, limit: "2000000000/hour"},
	{name: "rlkit-memory-denying", enabled: true, limit: "10/second", denying: true},
	{name: "rlkit-redis", enabled: true, limit: "2000000000/hour", redis: true},
}

func (t loadTarget) config() string {
	return fmt.Sprintf(`rate_limit:
  enabled: %t
  rules:
    - name: search
      paths: ["/api/search"]
      limit: %q
  default: %q
`, t.enabled, t.limit, t.limit)
}

// BenchmarkLoad measures examples/server over loopback: GET /api/search
// with no token (so the limiter, when on, counts every request under the
// one client IP, 127.0.0.1), from loadWorkers vegeta workers in a closed
// loop, b.N requests per run (bounded by loadMaxDuration). Reported: req/s
// (answers per second of wall time), p50-ns and p99-ns (latency of one
// request as vegeta measures it, from sending to the end of the body), and
// for the denying target denied/op (the share of 429s). ns/op is wall time
// per request, the inverse of req/s. Targets, each its own server process
// started once for all of its runs, from the same YAML:
//
//   - bare: enabled: false, the server without the limiter (the baseline);
//   - rlkit-memory: enabled: true, a limit no run reaches (2,000,000,000 per
//     hour), the memory store: what counting costs a server;
//   - rlkit-memory-denying: a limit of 10 per second, so nearly every
//     request is answered 429 with its JSON body and headers: what holding
//     back an abusive client costs;
//   - rlkit-redis: as rlkit-memory, with -redis on the shared redis-server
//     (skipped without one).
//
// Client and server share the machine's cores, so req/s is a property of
// the pair; the ratio to bare, measured in the same run, is what carries
// over.
func BenchmarkLoad(b *testing.B) {
	bin := serverBinary(b)
	dir := b.TempDir()
	servers := map[string]*loadServer{}
	b.Cleanup(func() {
		for _, s := range servers {
			s.stop()
		}
	})
	for _, t := range loadTargets {
		b.Run(t.name, func(b *testing.B) {
			s := servers[t.name]
			if s == nil {
				var redisAddr string
				if t.redis {
					redisAddr = benchRedisAddr(b)
				}
				s = startLoadServer(b, bin, dir, t, redisAddr)
				servers[t.name] = s
				warmUp(b, "http://"+s.addr+"/api/search")
			}
			attack(b, "http://"+s.addr+"/api/search", t.denying)
		})
	}
}

// attack sends b.N requests to url and reports the metrics of
// BenchmarkLoad. Any answer but 200 (or 429 when denying) fails the row.
func attack(b *testing.B, url string, denying bool) {
	var issued atomic.Int64
	n := int64(b.N)
	targeter := func(t *vegeta.Target) error {
		if issued.Add(1) > n {
			return vegeta.ErrNoTargets
		}
		t.Method, t.URL = "GET", url
		return nil
	}
	atk := vegeta.NewAttacker(
		vegeta.Workers(loadWorkers), vegeta.MaxWorkers(loadWorkers),
		vegeta.Connections(loadWorkers), vegeta.KeepAlive(true),
		vegeta.Timeout(loadTimeout), vegeta.Redirects(vegeta.NoFollow),
	)
	latencies := make([]time.Duration, 0, b.N)
	var denied, failed int
	var firstErr string
	b.ResetTimer()
	for res := range atk.Attack(targeter, vegeta.ConstantPacer{}, loadMaxDuration, "load") {
		if res.Error == vegeta.ErrNoTargets.Error() && res.Code == 0 {
			continue // a worker asked for a target after the last one
		}
		latencies = append(latencies, res.Latency)
		switch {
		case res.Code == http.StatusOK:
		case res.Code == http.StatusTooManyRequests && denying:
			denied++
		default:
			failed++
			if firstErr == "" {
				firstErr = fmt.Sprintf("status %d %s", res.Code, res.Error)
			}
		}
	}
	b.StopTimer()
	if failed > 0 {
		b.Fatalf("%d of %d requests failed, the first: %s", failed, len(latencies), firstErr)
	}
	if len(latencies) != b.N {
		b.Fatalf("%d of %d requests answered within %v", len(latencies), b.N, loadMaxDuration)
	}
	slices.Sort(latencies)
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
	b.ReportMetric(float64(quantile(latencies, 0.50)), "p50-ns")
	b.ReportMetric(float64(quantile(latencies, 0.99)), "p99-ns")
	if denying {
		b.ReportMetric(float64(denied)/float64(b.N), "denied/op")
	}
}

// warmUpRequests are sent to a new server before its first measured run,
// so that no target's first run pays for the server's first connections,
// its heap growing and the limiter's first keys.
const warmUpRequests = 512

// warmUp sends warmUpRequests to url from loadWorkers goroutines.
func warmUp(b *testing.B, url string) {
	c := &http.Client{Timeout: loadTimeout, Transport: &http.Transport{MaxIdleConnsPerHost: loadWorkers}}
	defer c.CloseIdleConnections()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	for range loadWorkers {
		wg.Go(func() {
			for range warmUpRequests / loadWorkers {
				resp, err := c.Get(url)
				if err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		})
	}
	wg.Wait()
	if firstErr != nil {
		b.Fatalf("warm-up of %s: %v", url, firstErr)
	}
}

// quantile returns the q-quantile of sorted (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
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

// startLoadServer starts bin with target t's configuration on a free port
// of 127.0.0.1 (-addr 127.0.0.1:0; the address is read from its banner).
func startLoadServer(b *testing.B, bin, dir string, t loadTarget, redisAddr string) *loadServer {
	cfg := filepath.Join(dir, t.name+".yaml")
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
