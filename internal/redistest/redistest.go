package redistest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"
)

// StoreTimeout is the store timeout (redisstore.WithTimeout,
// redishold.WithTimeout) of the tests about counting, holds and state, not
// time-outs (the fault tests set their own): generous, because on a loaded
// machine under -race a first call (a dial and a script load) or one call
// to miniredis's Lua can take longer than a store's 100ms default.
const StoreTimeout = 5 * time.Second

// requireEnv is the environment variable that, set to "1", turns a missing
// redis-server from a skipped test into a failed one.
const requireEnv = "RLKIT_REQUIRE_REDIS"

const (
	slotCount = 16384
	// busOffset is the distance from a cluster node's client port to its
	// cluster bus port, fixed by Redis.
	busOffset = 10000
	// Ports are picked in [minPort, maxPort), and cluster buses land in
	// [minPort+busOffset, maxPort+busOffset): both below 32768, where Linux
	// starts handing out ephemeral ports by default, so an outgoing
	// connection is unlikely to take a port between its check and its use.
	minPort = 12000
	maxPort = 22700

	readyTimeout   = 5 * time.Second
	clusterTimeout = 10 * time.Second
	stopTimeout    = 10 * time.Second
	// nodeTimeout is every cluster node's cluster-node-timeout: a master
	// unreachable this long is suspected (PFAIL), and marked failed (FAIL)
	// once the other masters agree, usually within a second more.
	nodeTimeout  = 5 * time.Second
	probeTimeout = time.Second
	pollInterval = 10 * time.Millisecond
	portAttempts = 10
)

var errPortTaken = errors.New("port taken")

// Available reports whether redis-server and redis-cli are both in PATH.
func Available() bool {
	_, errServer := exec.LookPath("redis-server")
	_, errCLI := exec.LookPath("redis-cli")
	return errServer == nil && errCLI == nil
}

func required() bool { return os.Getenv(requireEnv) == "1" }

// Require skips the test when redis-server or redis-cli is not in PATH, or
// fails it when RLKIT_REQUIRE_REDIS=1.
func Require(t testing.TB) {
	t.Helper()
	if Available() {
		return
	}
	if required() {
		t.Fatalf("redistest: redis-server and redis-cli are required (%s=1) but not in PATH; install them, e.g. apt-get install redis-server redis-tools", requireEnv)
	}
	t.Skipf("redistest: redis-server or redis-cli not in PATH; skipping (set %s=1 to fail instead)", requireEnv)
}

// A Server is a redis-server process on 127.0.0.1 that keeps nothing on disk.
// Its methods are safe for concurrent use.
type Server struct {
	bin     string
	port    int
	dir     string
	logPath string
	extra   []string // arguments after the common ones (cluster mode)

	mu   sync.Mutex
	proc *process // nil while stopped
}

type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when cmd.Wait has returned
}

// StartServer starts a redis-server on a free loopback port and waits until
// it answers PING. It calls Require first. The server is killed at cleanup.
func StartServer(t testing.TB) *Server {
	t.Helper()
	Require(t)
	return startServer(t, t.TempDir(), "")
}

// startServer starts a server whose working directory, log and (when
// clusterConf is not empty) cluster config live in dir; extra are further
// arguments of a cluster node.
func startServer(t testing.TB, dir, clusterConf string, extra ...string) *Server {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	s := &Server{bin: bin, dir: dir, logPath: filepath.Join(dir, "redis.log")}
	if clusterConf != "" {
		s.extra = []string{
			"--cluster-enabled", "yes",
			"--cluster-config-file", clusterConf,
			"--cluster-node-timeout", strconv.Itoa(int(nodeTimeout / time.Millisecond)),
		}
		s.extra = append(s.extra, extra...)
	}
	// Registered after t.TempDir, so it runs before the directory goes.
	t.Cleanup(s.Kill)
	for range portAttempts {
		if s.port, err = freePort(clusterConf != ""); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		if clusterConf != "" {
			// A failed attempt may have written a node ID for the old port.
			_ = os.Remove(clusterConf)
		}
		err = s.start()
		if err == nil {
			return s
		}
		if !errors.Is(err, errPortTaken) {
			t.Fatalf("redistest: %v", err)
		}
	}
	t.Fatalf("redistest: no usable port after %d attempts: %v", portAttempts, err)
	return nil
}

func (s *Server) running() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc != nil
}

// Addr returns the server's address, "127.0.0.1:port". It stays the same
// across Restart.
func (s *Server) Addr() string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port))
}

// start runs redis-server on s.port and waits until it answers. It returns
// an error wrapping errPortTaken when the port (or the cluster bus port)
// was in use.
func (s *Server) start() error {
	args := []string{
		"--port", strconv.Itoa(s.port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
		"--dir", s.dir,
	}
	args = append(args, s.extra...)
	logf, err := os.OpenFile(s.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	fi, err := logf.Stat()
	if err != nil {
		logf.Close()
		return err
	}
	logStart := fi.Size()
	cmd := exec.Command(s.bin, args...)
	cmd.Dir = s.dir
	// An *os.File is handed to the child as is: no copying goroutine.
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return fmt.Errorf("start redis-server: %w", err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()

	if err := s.waitReady(p); err != nil {
		s.Kill()
		out := readLog(s.logPath, logStart)
		if strings.Contains(out, "Address already in use") {
			return fmt.Errorf("redis-server on %s: %w: %s", s.Addr(), errPortTaken, out)
		}
		return fmt.Errorf("redis-server on %s: %v\nredis-server %s\noutput (%s):\n%s",
			s.Addr(), err, strings.Join(quoteArgs(args), " "), s.logPath, out)
	}
	return nil
}

// waitReady polls until the server answers PING and INFO reports p's pid,
// so that another server already on the port is not mistaken for p.
func (s *Server) waitReady(p *process) error {
	addr := s.Addr()
	pid := strconv.Itoa(p.cmd.Process.Pid)
	deadline := time.Now().Add(readyTimeout)
	for {
		err := func() error {
			if _, err := probeString(addr, probeTimeout, "PING"); err != nil {
				return err
			}
			info, err := probeString(addr, probeTimeout, "INFO", "server")
			if err != nil {
				return err
			}
			if got := infoField(info, "process_id"); got != pid {
				return fmt.Errorf("%s is answered by pid %s, want %s", addr, got, pid)
			}
			return nil
		}()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PING answer within %v: %v", readyTimeout, err)
		}
		select {
		case <-p.done:
			return fmt.Errorf("exited before answering PING (%v)", p.cmd.ProcessState)
		case <-time.After(pollInterval):
		}
	}
}

// Kill sends SIGKILL and waits for the process to exit, like a crash. It
// does nothing when the server is not running.
func (s *Server) Kill() { s.halt(false) }

// Stop sends SIGTERM and waits for the process to exit (sending SIGKILL
// after 10s). It does nothing when the server is not running.
func (s *Server) Stop() { s.halt(true) }

// Pause sends SIGSTOP: the server keeps its connections and its port but
// answers nothing, like a hung host, until Resume. It does nothing when the
// server is not running. Kill and Stop work on a paused server.
func (s *Server) Pause() { s.signal(syscall.SIGSTOP) }

// Resume sends SIGCONT to a paused server, which then answers what it was
// sent meanwhile. It does nothing when the server is not running.
func (s *Server) Resume() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc != nil {
		_ = s.proc.cmd.Process.Signal(sig)
	}
}

func (s *Server) halt(graceful bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p := s.proc
	if p == nil {
		return
	}
	s.proc = nil
	// SIGCONT after SIGTERM: a paused server handles the SIGTERM only once
	// it runs again.
	if graceful && p.cmd.Process.Signal(syscall.SIGTERM) == nil && p.cmd.Process.Signal(syscall.SIGCONT) == nil {
		select {
		case <-p.done:
			return
		case <-time.After(stopTimeout):
		}
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Restart starts the server again on the same port after Kill or Stop and
// waits until it answers PING. The new server is empty; a cluster node
// keeps its cluster identity (its nodes.conf), so a restarted master
// rejoins with the slots it had (see Cluster.Nodes). Restart fails the
// test when the server is still running or cannot start.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if s.running() {
		t.Fatalf("redistest: Restart of %s while it is running; call Kill or Stop first", s.Addr())
	}
	if err := s.start(); err != nil {
		t.Fatalf("redistest: restart: %v", err)
	}
}

// Client returns a go-redis client for the server, closed at t's cleanup.
// It keeps working across Kill and Restart: commands fail while the server
// is down and succeed again once it is back.
//
// Unlike go-redis's defaults, it neither retries commands nor redials, so
// a command against a killed server fails within milliseconds instead of
// about two seconds. A test that needs other options builds its own client
// for Addr.
func (s *Server) Client(t testing.TB) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{
		Addr:          s.Addr(),
		MaxRetries:    -1,
		DialerRetries: 1,
	})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// A Cluster is three redis-server nodes in cluster mode on 127.0.0.1, each
// a master for a third of the hash slots, with no replicas. Every node has
// cluster-node-timeout 5000 (ms).
type Cluster struct {
	nodes []*Server
}

// A ClusterOption configures StartCluster.
type ClusterOption func(*clusterConfig)

type clusterConfig struct {
	fullCoverage bool
}

// RequireFullCoverage sets cluster-require-full-coverage on every node.
// With true, Redis's default and StartCluster's, once the cluster marks a
// master failed (FAIL, about cluster-node-timeout after it stopped
// answering) every node refuses every query with CLUSTERDOWN, for the
// failed master's slots and its own alike; with false the others go on
// serving their slots.
func RequireFullCoverage(on bool) ClusterOption {
	return func(c *clusterConfig) { c.fullCoverage = on }
}

// StartCluster starts three cluster-mode nodes, joins them with
// redis-cli --cluster create and waits until every node reports
// cluster_state:ok and all 16384 slots assigned. It calls Require first.
// The nodes are killed at cleanup.
func StartCluster(t testing.TB, opts ...ClusterOption) *Cluster {
	t.Helper()
	Require(t)
	cfg := clusterConfig{fullCoverage: true}
	for _, o := range opts {
		o(&cfg)
	}
	coverage := []string{"--cluster-require-full-coverage", map[bool]string{true: "yes", false: "no"}[cfg.fullCoverage]}
	cli, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	root := t.TempDir()
	c := &Cluster{}
	for i := range 3 {
		dir := filepath.Join(root, fmt.Sprintf("node-%d", i+1))
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatalf("redistest: %v", err)
		}
		conf := filepath.Join(root, fmt.Sprintf("nodes-%d.conf", i+1))
		c.nodes = append(c.nodes, startServer(t, dir, conf, coverage...))
	}

	args := append([]string{"--cluster", "create"}, c.Addrs()...)
	args = append(args, "--cluster-replicas", "0", "--cluster-yes")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, cli, args...)
	cmd.SysProcAttr = sysProcAttr()
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("redistest: redis-cli %s: %v\n%s%s", strings.Join(args, " "), err, out, c.logs())
	}
	c.WaitReady(t)
	return c
}

// waitReady polls until every node reports cluster_state:ok and its
// CLUSTER SLOTS covers every slot.
func (c *Cluster) waitReady() error {
	deadline := time.Now().Add(clusterTimeout)
	for {
		err := c.check()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready within %v: %v", clusterTimeout, err)
		}
		time.Sleep(pollInterval)
	}
}

func (c *Cluster) check() error {
	for _, n := range c.nodes {
		info, err := probeString(n.Addr(), probeTimeout, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %v", n.Addr(), err)
		}
		if st := infoField(info, "cluster_state"); st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", n.Addr(), st)
		}
		slots, err := probe(n.Addr(), probeTimeout, "CLUSTER", "SLOTS")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %v", n.Addr(), err)
		}
		covered, err := slotsCovered(slots)
		if err != nil {
			return fmt.Errorf("%s: %v", n.Addr(), err)
		}
		if covered != slotCount {
			return fmt.Errorf("%s: CLUSTER SLOTS covers %d of %d slots", n.Addr(), covered, slotCount)
		}
	}
	return nil
}

// logs returns every node's log output, for failure messages.
func (c *Cluster) logs() string {
	var b strings.Builder
	for _, n := range c.nodes {
		fmt.Fprintf(&b, "\n--- %s (%s):\n%s", n.Addr(), n.logPath, readLog(n.logPath, 0))
	}
	return b.String()
}

// Nodes returns the cluster's nodes, each a master, in the order of Addrs.
// Kill, Stop, Pause and Restart act on one node. A restarted node keeps its
// cluster identity (its nodes.conf): a restarted master rejoins with its
// slots, empty, and refuses queries with CLUSTERDOWN for about 2s while
// Redis lets the cluster reconfigure it (CLUSTER_WRITABLE_DELAY).
func (c *Cluster) Nodes() []*Server { return c.nodes }

// WaitFailed waits until every other running node flags n as failed (fail,
// not just fail?, in CLUSTER NODES): the cluster has declared the failure.
// It returns how long it waited and fails the test after 4 node timeouts.
func (c *Cluster) WaitFailed(t testing.TB, n *Server) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		err := c.failed(n)
		if err == nil {
			return time.Since(start)
		}
		if time.Since(start) > 4*nodeTimeout {
			t.Fatalf("redistest: %s not marked failed within %v: %v%s", n.Addr(), 4*nodeTimeout, err, c.logs())
		}
		time.Sleep(pollInterval)
	}
}

func (c *Cluster) failed(n *Server) error {
	for _, o := range c.nodes {
		if o == n || !o.running() {
			continue
		}
		out, err := probeString(o.Addr(), probeTimeout, "CLUSTER", "NODES")
		if err != nil {
			return fmt.Errorf("%s: CLUSTER NODES: %v", o.Addr(), err)
		}
		flags, ok := nodeFlags(out, n.port)
		if !ok {
			return fmt.Errorf("%s does not list %s", o.Addr(), n.Addr())
		}
		if !slicesContain(flags, "fail") {
			return fmt.Errorf("%s flags %s %q", o.Addr(), n.Addr(), flags)
		}
	}
	return nil
}

// nodeFlags returns the flags a CLUSTER NODES reply gives the node on port.
// A line is "<id> <ip:port@cport[,hostname]> <flags,...> ...".
func nodeFlags(nodes string, port int) ([]string, bool) {
	want := ":" + strconv.Itoa(port) + "@"
	for line := range strings.Lines(nodes) {
		f := strings.Fields(line)
		if len(f) >= 3 && strings.Contains(f[1], want) {
			return strings.Split(f[2], ","), true
		}
	}
	return nil, false
}

func slicesContain(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// WaitReady waits until every node reports cluster_state:ok and its
// CLUSTER SLOTS covers every slot, as StartCluster does, and fails the test
// after 10s.
func (c *Cluster) WaitReady(t testing.TB) {
	t.Helper()
	if err := c.waitReady(); err != nil {
		t.Fatalf("redistest: cluster %v: %v%s", c.Addrs(), err, c.logs())
	}
}

// Addrs returns the nodes' addresses, "127.0.0.1:port".
func (c *Cluster) Addrs() []string {
	addrs := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		addrs[i] = n.Addr()
	}
	return addrs
}

// Client returns a go-redis cluster client seeded with every node, closed
// at t's cleanup.
func (c *Cluster) Client(t testing.TB) *redis.ClusterClient {
	t.Helper()
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs()})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// Stop sends SIGTERM to every node and waits for them to exit. It is
// idempotent.
func (c *Cluster) Stop() {
	var wg sync.WaitGroup
	for _, n := range c.nodes {
		wg.Go(n.Stop)
	}
	wg.Wait()
}

// StartMini starts a miniredis server on 127.0.0.1, closed at cleanup.
func StartMini(t testing.TB) *miniredis.Miniredis {
	t.Helper()
	return miniredis.RunT(t)
}

// Standalone returns a client for a fresh redis-server when Available, with
// kind "redis-server". Otherwise it fails the test when RLKIT_REQUIRE_REDIS=1
// and else returns a client for a fresh miniredis, with kind "miniredis".
// The client and the server are closed at cleanup.
func Standalone(t testing.TB) (client redis.UniversalClient, kind string) {
	t.Helper()
	if Available() {
		return StartServer(t).Client(t), "redis-server"
	}
	if required() {
		Require(t) // fails with the install hint
	}
	m := StartMini(t)
	c := redis.NewClient(&redis.Options{Addr: m.Addr()})
	t.Cleanup(func() { _ = c.Close() })
	return c, "miniredis"
}

// freePort returns a loopback port that is free now, and whose cluster bus
// port is free too when bus is set.
func freePort(bus bool) (int, error) {
	for range 100 {
		p := minPort + rand.IntN(maxPort-minPort)
		if portFree(p) && (!bus || portFree(p+busOffset)) {
			return p, nil
		}
	}
	return 0, errors.New("no free loopback port found")
}

func portFree(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// readLog returns the log file from offset on, at most its last 8 KiB.
func readLog(path string, offset int64) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read log: %v)", err)
	}
	if offset > int64(len(b)) {
		offset = int64(len(b))
	}
	b = b[offset:]
	const max = 8 << 10
	if len(b) > max {
		b = append([]byte("...\n"), b[len(b)-max:]...)
	}
	if len(b) == 0 {
		return "(no output)"
	}
	return string(b)
}

func quoteArgs(args []string) []string {
	q := make([]string, len(args))
	for i, a := range args {
		if a == "" || strings.ContainsAny(a, " \t\"'") {
			a = strconv.Quote(a)
		}
		q[i] = a
	}
	return q
}

// BlackHole starts a loopback server that accepts connections and never
// answers, a Redis that hangs, and returns its address and the count of
// connections it accepted. It closes them all at t.Cleanup.
func BlackHole(t testing.TB) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int64)
	var mu sync.Mutex
	var open []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			mu.Lock()
			open = append(open, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		mu.Lock()
		for _, c := range open {
			_ = c.Close()
		}
		mu.Unlock()
	})
	return ln.Addr().String(), conns
}
