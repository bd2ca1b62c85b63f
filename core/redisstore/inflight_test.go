package redisstore_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestInFlightKeys: the slots of a key under a concurrency limit are one
// sorted set, rl:{<key>}:<name>:inflight (escaped as counters' keys are),
// whose members are the leases held, scored with the instant each ends,
// with the longest lease's TTL; it goes with its last slot. Each Acquire
// and each Release is one EVALSHA.
func TestInFlightKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rc := client(t, srv.Addr())
	cmds := countCommands(rc)
	ctx := context.Background()
	s := newStore(t, rc)
	c := &store.Concurrency{Name: "a:b}", Limit: 2, Lease: 20 * time.Second}
	warm, _, err := s.Acquire(ctx, "warm", c) // loads the scripts once
	if err != nil || s.Release(ctx, "warm", c, warm) != nil {
		t.Fatal(err)
	}
	cmds.take()
	const key = "rl:{bob%7D}:a%3Ab%7D:inflight"
	var leases []uint64
	for i, want := range []bool{true, true, false} {
		lease, ok, err := s.Acquire(ctx, "bob}", c)
		if err != nil || ok != want {
			t.Fatalf("Acquire %d: %v, %v; want %v", i, ok, err, want)
		}
		if got := cmds.take(); len(got) != 1 || got["evalsha"] != 1 {
			t.Fatalf("Acquire %d sent %v, want exactly one evalsha", i, got)
		}
		if ok {
			leases = append(leases, lease)
		}
	}
	now, err := rc.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	members, err := rc.ZRangeWithScores(ctx, key, 0, -1).Result()
	if err != nil || len(members) != 2 {
		t.Fatalf("ZRANGE %s: %v, %v; want the two leases", key, members, err)
	}
	for _, m := range members {
		end := time.UnixMicro(int64(m.Score))
		if d := end.Sub(now); d <= 19*time.Second || d > 20*time.Second {
			t.Fatalf("lease %v ends %v from the server's now, want within (19s, 20s]", m.Member, d)
		}
	}
	if ttl, err := rc.PTTL(ctx, key).Result(); err != nil || ttl <= 19*time.Second || ttl > 20*time.Second {
		t.Fatalf("PTTL %s = %v, %v; want the lease, 20s", key, ttl, err)
	}
	cmds.take() // the test's own commands
	for i, l := range leases {
		if err := s.Release(ctx, "bob}", c, l); err != nil {
			t.Fatal(err)
		}
		if got := cmds.take(); len(got) != 1 || got["evalsha"] != 1 {
			t.Fatalf("Release %d sent %v, want exactly one evalsha", i, got)
		}
	}
	if n, err := rc.Exists(ctx, key).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after every slot went back: %d, %v; want 0", key, n, err)
	}
}

// TestInFlightLeaseEnds: a slot never released comes back when its
// lease ends, on the server's clock, and not before.
func TestInFlightLeaseEnds(t *testing.T) {
	t.Parallel()
	c, _ := redistest.Standalone(t)
	s := newStore(t, c)
	ctx := context.Background()
	conc := &store.Concurrency{Name: "lease-" + t.Name(), Limit: 1, Lease: time.Second}
	took := time.Now()
	if _, ok, err := s.Acquire(ctx, "k", conc); !ok || err != nil {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	if _, ok, err := s.Acquire(ctx, "k", conc); ok || err != nil {
		t.Fatalf("second Acquire within the lease: %v, %v; want refused", ok, err)
	}
	back := waitAdmitted(t, func() bool {
		_, ok, err := s.Acquire(ctx, "k", conc)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}, 5*time.Second)
	if d := back.Sub(took); d < 900*time.Millisecond {
		t.Fatalf("the slot came back %v after it was taken, before its lease of 1s ended", d)
	}
	// A lease that ended goes while others keep the set alive: with one
	// slot of two held and never released, requests that come and go
	// every 20ms (each raising the set's TTL) get both slots once it ends.
	two := &store.Concurrency{Name: "lease2-" + t.Name(), Limit: 2, Lease: time.Second}
	if _, ok, err := s.Acquire(ctx, "k", two); !ok || err != nil {
		t.Fatalf("Acquire: %v, %v", ok, err)
	}
	waitAdmitted(t, func() bool {
		var leases []uint64
		for range 2 {
			lease, ok, err := s.Acquire(ctx, "k", two)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				leases = append(leases, lease)
			}
		}
		for _, l := range leases {
			if err := s.Release(ctx, "k", two, l); err != nil {
				t.Fatal(err)
			}
		}
		return len(leases) == 2
	}, 5*time.Second)
}

// waitAdmitted calls try every 20ms until it reports true, and returns
// when; it fails t past within.
func waitAdmitted(t *testing.T, try func() bool, within time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(within)
	for !try() {
		if time.Now().After(deadline) {
			t.Fatalf("not admitted within %v", within)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return time.Now()
}

// leaseHolderEnv, when set to a Redis address, makes the test binary the
// process TestFaultLeasesOfKilledProcess kills (see TestMain).
const leaseHolderEnv = "RLKIT_TEST_LEASE_HOLDER"

// leaseConfig bounds /api to 2 requests of one identity in flight, with
// leases of 2s.
const leaseConfig = `
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      concurrent: 2
      lease: 2s
`

// leaseLimiter is a limiter over leaseConfig counting in the Redis at
// addr.
func leaseLimiter(addr string) (*core.Limiter, error) {
	cfg, err := core.ParseConfig([]byte(leaseConfig), "lease.yaml")
	if err != nil {
		return nil, err
	}
	s, err := redisstore.New(redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true}), redisstore.WithTimeout(redistest.StoreTimeout))
	if err != nil {
		return nil, err
	}
	return core.NewLimiter(cfg, core.WithStore(s)), nil
}

// holdLeases is the process TestFaultLeasesOfKilledProcess kills: it
// takes both of alice's slots under the rule, says "held", and waits to
// be killed, never giving them back.
func holdLeases(addr string) {
	lim, err := leaseLimiter(addr)
	if err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
	for range 2 {
		if d := lim.Decide(context.Background(), "GET", "/api", "alice", false); !d.Allowed || !d.Deferred() {
			fmt.Printf("refused: %+v\n", d)
			os.Exit(1)
		}
	}
	fmt.Println("held")
	select {}
}

// TestFaultLeasesOfKilledProcess: a process that holds both of an
// identity's slots is SIGKILLed; its slots stay taken (a third request is
// refused) until their lease (2s) ends, then come back: within the lease
// and a margin of the moment they were taken.
func TestFaultLeasesOfKilledProcess(t *testing.T) {
	srv := redistest.StartServer(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), leaseHolderEnv+"="+srv.Addr())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	started := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "held" {
		t.Fatalf("the holder said %q, %v; want held", line, err)
	}
	lim, err := leaseLimiter(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lim.Store().(*redisstore.Store).Close() })
	decide := func() core.Decision {
		return lim.Decide(context.Background(), "GET", "/api", "alice", false)
	}
	if err := cmd.Process.Kill(); err != nil { // SIGKILL
		t.Fatal(err)
	}
	_ = cmd.Wait()
	if d := decide(); d.Allowed || !d.ConcurrencyDenied {
		t.Fatalf("right after the holder was killed: %+v; want refused, its slots held until their lease ends", d)
	}
	var d core.Decision
	back := waitAdmitted(t, func() bool { d = decide(); return d.Allowed }, 6*time.Second)
	if took := back.Sub(started); took > 2*time.Second+3*time.Second {
		t.Fatalf("the slots came back %v after the holder started, want within the lease (2s) and a margin", took)
	}
	// Both came back: one more, and no third.
	d2 := decide()
	if d3 := decide(); !d2.Allowed || d3.Allowed || !d3.ConcurrencyDenied {
		t.Fatalf("after the leases ended: %v, %v; want one more admitted, then refused", d2.Allowed, d3.Allowed)
	}
	lim.Complete(context.Background(), &d, 200)
	lim.Complete(context.Background(), &d2, 200)
	rc := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	defer rc.Close()
	if n, err := rc.Exists(context.Background(), "rl:{alice}:api:inflight").Result(); err != nil || n != 0 {
		t.Fatalf("slots left after every request completed: %d, %v", n, err)
	}
}
