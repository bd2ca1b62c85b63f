package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain checks that the helpers leave no goroutine behind once their
// cleanups have run: packages using them run goleak too.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func TestServerKillRestart(t *testing.T) {
	s := StartServer(t)
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want 127.0.0.1:port", s.Addr())
	}
	c := s.Client(t)
	ctx := context.Background()

	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET: %v", err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET = %q, %v; want %q, nil", got, err, "v")
	}
	if got, err := c.ConfigGet(ctx, "save").Result(); err != nil || got["save"] != "" {
		t.Fatalf(`CONFIG GET save = %v, %v; want "", nil`, got, err)
	}

	s.Kill()
	s.Kill() // idempotent
	failCtx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := c.Ping(failCtx).Err(); err == nil {
		t.Fatal("PING after Kill succeeded, want an error")
	}

	s.Restart(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restart: %v", err)
	}
	if n, err := c.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS k after Restart = %d, %v; want 0, nil (nothing persisted)", n, err)
	}

	s.Stop()
	s.Stop() // idempotent
	s.Restart(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Stop and Restart: %v", err)
	}
}

// TestStartPortTaken checks that a port in use is reported as errPortTaken,
// the error StartServer and StartCluster retry on, and that a server already
// answering on the port is not mistaken for the new one.
func TestStartPortTaken(t *testing.T) {
	t.Run("redis-server", func(t *testing.T) {
		other := StartServer(t)
		s := startServer(t, t.TempDir(), "")
		s.Kill()
		s.port = other.port
		if err := s.start(); !errors.Is(err, errPortTaken) {
			t.Fatalf("start on a port held by another redis-server: got %v, want errPortTaken", err)
		}
	})
	t.Run("cluster bus", func(t *testing.T) {
		Require(t)
		dir := t.TempDir()
		s := startServer(t, dir, filepath.Join(dir, "nodes.conf"))
		s.Kill()
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port+busOffset)))
		if err != nil {
			t.Skipf("cannot hold the bus port: %v", err)
		}
		defer l.Close()
		if err := s.start(); !errors.Is(err, errPortTaken) {
			t.Fatalf("start with the cluster bus port held: got %v, want errPortTaken", err)
		}
	})
}

func TestCluster(t *testing.T) {
	start := time.Now()
	cl := StartCluster(t)
	t.Logf("cluster %v ready in %v", cl.Addrs(), time.Since(start))
	c := cl.Client(t)
	ctx := context.Background()

	slots := map[int64]bool{}
	for i := range 100 {
		key := fmt.Sprintf("key-%d", i)
		if err := c.Set(ctx, key, i, 0).Err(); err != nil {
			t.Fatalf("SET %s: %v", key, err)
		}
		slot, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT %s: %v", key, err)
		}
		slots[slot] = true
	}
	if len(slots) < 90 {
		t.Errorf("100 keys fell in %d slots, want nearly 100 distinct", len(slots))
	}
	for i := range 100 {
		key := fmt.Sprintf("key-%d", i)
		got, err := c.Get(ctx, key).Int()
		if err != nil || got != i {
			t.Fatalf("GET %s = %d, %v; want %d, nil", key, got, err, i)
		}
	}
	// The keys must be spread over all three masters. ForEachMaster runs
	// fn concurrently.
	var masters atomic.Int32
	err := c.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
		n, err := m.DBSize(ctx).Result()
		if err != nil {
			return err
		}
		if n > 0 {
			masters.Add(1)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("DBSIZE on masters: %v", err)
	}
	if got := masters.Load(); got != 3 {
		t.Errorf("keys on %d masters, want 3", got)
	}

	want, err := c.ClusterKeySlot(ctx, "{u}").Result()
	if err != nil {
		t.Fatalf("CLUSTER KEYSLOT {u}: %v", err)
	}
	for _, key := range []string{"rl:{u}:a", "rl:{u}:b", "{u}:window:1"} {
		got, err := c.ClusterKeySlot(ctx, key).Result()
		if err != nil || got != want {
			t.Errorf("CLUSTER KEYSLOT %s = %d, %v; want %d (slot of {u}), nil", key, got, err, want)
		}
	}
	// A multi-key command across a hash tag works in a cluster.
	if err := c.MSet(ctx, "rl:{u}:a", 1, "rl:{u}:b", 2).Err(); err != nil {
		t.Errorf("MSET rl:{u}:a rl:{u}:b: %v", err)
	}

	// Redis's default, unless RequireFullCoverage says otherwise.
	got, err := probe(cl.Addrs()[0], probeTimeout, "CONFIG", "GET", "cluster-require-full-coverage")
	if v, _ := got.([]any); err != nil || len(v) != 2 || v[1] != "yes" {
		t.Errorf("CONFIG GET cluster-require-full-coverage = %v, %v; want yes", got, err)
	}

	cl.Stop()
	cl.Stop() // idempotent
}

// TestClusterNodeRestart: a killed master is declared failed by the
// others; restarted, it keeps its node ID and its slots, and the cluster is
// whole again. The option reaches every node.
func TestClusterNodeRestart(t *testing.T) {
	cl := StartCluster(t, RequireFullCoverage(false))
	nodes := cl.Nodes()
	if len(nodes) != 3 {
		t.Fatalf("%d nodes, want 3", len(nodes))
	}
	for i, n := range nodes {
		if n.Addr() != cl.Addrs()[i] {
			t.Fatalf("Nodes()[%d] is %s, Addrs()[%d] %s", i, n.Addr(), i, cl.Addrs()[i])
		}
		got, err := probe(n.Addr(), probeTimeout, "CONFIG", "GET", "cluster-require-full-coverage")
		if v, _ := got.([]any); err != nil || len(v) != 2 || v[1] != "no" {
			t.Fatalf("%s: CONFIG GET cluster-require-full-coverage = %v, %v; want no", n.Addr(), got, err)
		}
	}
	victim := nodes[0]
	id, err := probeString(victim.Addr(), probeTimeout, "CLUSTER", "MYID")
	if err != nil {
		t.Fatal(err)
	}
	victim.Kill()
	took := cl.WaitFailed(t, victim)
	t.Logf("failure declared %v after the kill", took)
	if took < nodeTimeout {
		t.Errorf("failure declared %v after the kill, before the node timeout %v", took, nodeTimeout)
	}
	victim.Restart(t)
	if got, err := probeString(victim.Addr(), probeTimeout, "CLUSTER", "MYID"); err != nil || got != id {
		t.Fatalf("CLUSTER MYID after Restart = %q, %v; want %q", got, err, id)
	}
	cl.WaitReady(t)
}

// TestPauseResume: a paused server answers nothing; resumed, it answers
// again; Stop ends a paused server at once.
func TestPauseResume(t *testing.T) {
	s := StartServer(t)
	s.Pause()
	if _, err := probe(s.Addr(), 200*time.Millisecond, "PING"); err == nil {
		t.Fatal("a paused server answered PING")
	}
	s.Resume()
	if got, err := probeString(s.Addr(), probeTimeout, "PING"); err != nil || got != "PONG" {
		t.Fatalf("PING after Resume = %q, %v", got, err)
	}
	s.Pause()
	start := time.Now()
	s.Stop()
	if took := time.Since(start); took > stopTimeout/2 {
		t.Fatalf("Stop of a paused server took %v, want it to end at SIGTERM", took)
	}
	s.Pause() // not running: nothing to do
	s.Resume()
}

func TestMini(t *testing.T) {
	m := StartMini(t)
	if !strings.HasPrefix(m.Addr(), "127.0.0.1:") {
		t.Fatalf("Addr() = %q, want 127.0.0.1:port", m.Addr())
	}
	if err := m.Set("k", "v"); err != nil {
		t.Fatal(err)
	}
	m.CheckGet(t, "k", "v")
}

func TestStandalone(t *testing.T) {
	c, kind := Standalone(t)
	want := "miniredis"
	if Available() {
		want = "redis-server"
	}
	if kind != want {
		t.Errorf("kind = %q, want %q", kind, want)
	}
	ctx := context.Background()
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET on %s: %v", kind, err)
	}
	if got, err := c.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("GET on %s = %q, %v; want %q, nil", kind, got, err, "v")
	}
}

// TestMissingRedis runs this package's tests in a child process whose PATH
// holds no redis-server, and checks they skip, or fail when
// RLKIT_REQUIRE_REDIS=1.
func TestMissingRedis(t *testing.T) {
	if os.Getenv("REDISTEST_CHILD") == "1" {
		t.Skip("child process")
	}
	if testing.Short() {
		t.Skip("builds nothing but runs the test binary twice")
	}
	run := func(require string) (string, error) {
		cmd := exec.Command(os.Args[0], "-test.v", "-test.run", "^(TestServerKillRestart|TestCluster|TestStandalone)$")
		cmd.Env = append(os.Environ(), "PATH="+t.TempDir(), "REDISTEST_CHILD=1", requireEnv+"="+require)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	out, err := run("")
	if err != nil {
		t.Fatalf("without redis-server: %v\n%s", err, out)
	}
	for _, want := range []string{"--- SKIP: TestServerKillRestart", "--- SKIP: TestCluster", "--- PASS: TestStandalone", requireEnv} {
		if !strings.Contains(out, want) {
			t.Errorf("without redis-server, output lacks %q:\n%s", want, out)
		}
	}

	out, err = run("1")
	if err == nil {
		t.Fatalf("without redis-server and %s=1: passed, want failure\n%s", requireEnv, out)
	}
	for _, want := range []string{"--- FAIL: TestServerKillRestart", "--- FAIL: TestCluster", "--- FAIL: TestStandalone", "apt-get install redis-server"} {
		if !strings.Contains(out, want) {
			t.Errorf("without redis-server and %s=1, output lacks %q:\n%s", requireEnv, want, out)
		}
	}
}
