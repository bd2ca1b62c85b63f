package redisstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// closedPort returns a loopback address nothing listens on: a dial to it
// is refused.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return addr
}

// refusedText is the text of a dial to addr that was refused.
func refusedText(addr string) string { return "dial tcp " + addr + ": connect: connection refused" }

// checkRefused checks that err is the store's error for a call to node
// that ended at its deadline while the dials to addr were refused: its
// text is exactly prefix + deadline + the dial error, errors.Is finds the
// deadline and ECONNREFUSED, errors.As the *net.OpError of the dial, and
// its kind is connection_refused.
func checkRefused(t *testing.T, err error, node, addr, deadline string, isDeadline ...error) {
	t.Helper()
	want := "redisstore: node " + node + ": " + deadline + ": last dial error: " + refusedText(addr)
	if err == nil || err.Error() != want {
		t.Fatalf("error %q, want %q", err, want)
	}
	found := false
	for _, target := range isDeadline {
		found = found || errors.Is(err, target)
	}
	if !found {
		t.Fatalf("errors.Is(%v, one of %v) = false", err, isDeadline)
	}
	op, ok := errors.AsType[*net.OpError](err)
	if !ok || op.Op != "dial" || op.Addr == nil || op.Addr.String() != addr {
		t.Fatalf("errors.As(%v, *net.OpError) = %v, %+v; want the dial to %s", err, ok, op, addr)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("errors.Is(%v, ECONNREFUSED) = false", err)
	}
	if kind := store.ErrorKind(err); kind != "connection_refused" {
		t.Fatalf("StoreErrorKind = %q, want connection_refused", kind)
	}
}

// TestFaultRefusedConnection: a Redis whose port refuses connections. go-redis
// dials on a goroutine of its own, retrying every 100ms, and the caller
// sees only its deadline; the store's error keeps the dial's error, and so
// does the limiter's warning. For a client that honours context deadlines
// the deadline is context.DeadlineExceeded; for one that does not, the
// store's own timeout (or go-redis's wait for the pool ending at the same
// deadline). The store's timeout (150ms) ends the call before go-redis's
// five dial attempts (400ms) do.
func TestFaultRefusedConnection(t *testing.T) {
	addr := closedPort(t)
	for _, bounded := range []bool{true, false} {
		t.Run(map[bool]string{true: "ContextTimeoutEnabled", false: "goroutine"}[bounded], func(t *testing.T) {
			rc := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: bounded})
			t.Cleanup(func() { _ = rc.Close() })
			st, err := New(rc, WithTimeout(150*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			var logs bytes.Buffer
			lim := core.NewLimiter(hotLimit(t), core.WithStore(st), core.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
			start := time.Now()
			d := lim.Decide(context.Background(), "GET", "/api", "alice", false)
			took := time.Since(start)
			if !d.Allowed {
				t.Fatal("a fail-open limiter denied while Redis refused connections")
			}
			if took > 2*time.Second {
				t.Fatalf("the decision took %v; want about the 150ms timeout", took)
			}
			if bounded {
				checkRefused(t, d.Err, addr, addr, "context deadline exceeded", context.DeadlineExceeded)
			} else {
				deadline := "redis call timed out after 150ms"
				if errors.Is(d.Err, context.DeadlineExceeded) { // go-redis's pool wait ended first
					deadline = "context deadline exceeded"
				}
				checkRefused(t, d.Err, addr, addr, deadline, context.DeadlineExceeded, errTimeout)
			}
			line := `error="` + d.Err.Error() + `"`
			if !strings.Contains(logs.String(), line) || !strings.Contains(line, refusedText(addr)) {
				t.Fatalf("the limiter logged %q; want a warning with %s", logs.String(), line)
			}
		})
	}
}

// TestFaultRefusedCluster: a ClusterClient whose seed refuses connections
// cannot load its slot map; the error names the cluster and the refused
// dial. And once the map is loaded, a master that refuses connections is
// named with its dial error, also when the client had made its node
// clients before the store was created (they get the hook when the store
// first routes to them); the other master counts on.
func TestFaultRefusedCluster(t *testing.T) {
	t.Run("unmapped", func(t *testing.T) {
		seed := closedPort(t)
		cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{seed}, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = cc.Close() })
		st, err := New(cc, WithTimeout(150*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.Close() })
		_, err = st.Take(context.Background(), "alice", testPolicy(t, "api", "5/hour"), 1)
		checkRefused(t, err, "cluster "+seed, seed, "context deadline exceeded", context.DeadlineExceeded)
	})
	for _, early := range []bool{false, true} {
		t.Run(map[bool]string{false: "mapped", true: "mapped/nodes made before New"}[early], func(t *testing.T) {
			// Two masters by name; the dialer sends the live one's dials to
			// a miniredis and the dead one's to a closed port.
			const dead, live = "dead.test:6379", "live.test:6379"
			closed, mini := closedPort(t), redistest.StartMini(t).Addr()
			cc := redis.NewClusterClient(&redis.ClusterOptions{
				ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
					return []redis.ClusterSlot{
						{Start: 0, End: 8191, Nodes: []redis.ClusterNode{{Addr: dead}}},
						{Start: 8192, End: 16383, Nodes: []redis.ClusterNode{{Addr: live}}},
					}, nil
				},
				Dialer: func(ctx context.Context, network, addr string) (net.Conn, error) {
					to := map[string]string{dead: closed, live: mini}[addr]
					return new(net.Dialer).DialContext(ctx, network, to)
				},
				ContextTimeoutEnabled: true,
			})
			t.Cleanup(func() { _ = cc.Close() })
			onDead, onLive := usersOn(t, cc, dead), usersOn(t, cc, live)
			if !early {
				cc = redis.NewClusterClient(cc.Options()) // a client that has made no node yet
				t.Cleanup(func() { _ = cc.Close() })
			}
			st, err := New(cc, WithTimeout(150*time.Millisecond))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = st.Close() })
			// The live master's first take dials, meets NOSCRIPT and, on
			// miniredis, the batch script's refusal, all within the 150ms
			// the dead master's call needs (go-redis's dial attempts take
			// longer). It is made under a policy of its own, again until it
			// succeeds, so that the takes counted below make one call each.
			for i := 1; ; i++ {
				if _, err := st.Take(context.Background(), onLive, testPolicy(t, "warm", "1000/hour"), 1); err == nil {
					break
				} else if i == 20 {
					t.Fatalf("the live master: %v (20 tries)", err)
				}
			}
			p := testPolicy(t, "api", "2/hour")
			_, err = st.Take(context.Background(), onDead, p, 1)
			checkRefused(t, err, dead, closed, "context deadline exceeded", context.DeadlineExceeded)
			for i := range 3 {
				if r, err := st.Take(context.Background(), onLive, p, 1); err != nil || r.Allowed != (i < 2) {
					t.Fatalf("take %d on the live master: %+v, %v", i+1, r, err)
				}
			}
		})
	}
}

// usersOn returns a user whose key lives on the master at addr.
func usersOn(t *testing.T, cc *redis.ClusterClient, addr string) string {
	t.Helper()
	for j := 0; ; j++ {
		u := fmt.Sprintf("u%d", j)
		c, err := cc.MasterForKey(context.Background(), "{"+u+"}")
		if err != nil {
			t.Fatal(err)
		}
		if c.Options().Addr == addr {
			return u
		}
	}
}

func hotLimit(t *testing.T) *core.Config {
	cfg, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "api", Paths: []string{"/api"}, Limit: []string{"100/hour"}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// TestLastDial: which dial error a timed-out call names: the last failed
// dial to its node, when it failed no earlier than one timeout before the
// call began and no dial to the node has succeeded since; and only for a
// call that ended at a deadline without a network error of its own.
func TestLastDial(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	ctx := context.Background()
	p := testPolicy(t, "api", "5/hour")
	const timeout = 100 * time.Millisecond
	lastDial := func(st *Store) error {
		t.Helper()
		_, err := st.Take(ctx, "u", p, 1)
		ne, ok := errors.AsType[*NodeError](err)
		if !ok {
			t.Fatalf("error %v is not a *NodeError", err)
		}
		return ne.LastDial
	}

	// Dials refused: the call names the dialer's very error.
	rc := redis.NewClient(&redis.Options{Addr: "redis.test:6379", ContextTimeoutEnabled: true,
		Dialer: func(context.Context, string, string) (net.Conn, error) { return nil, refused }})
	t.Cleanup(func() { _ = rc.Close() })
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st, err := New(rc, WithTimeout(timeout), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if got := lastDial(st); got != refused {
		t.Fatalf("dials refused: LastDial %v, want %v", got, refused)
	}
	// On the store's clock, a failure one timeout before the call began
	// is named; one older is not; nor one that a successful dial followed.
	ns := &st.nodes
	ns.dials.record("redis.test:6379", refused)
	clock.Advance(timeout)
	if got := ns.lastDial(ns.single, clock.Now()-int64(timeout)); got != refused {
		t.Fatalf("a dial failure one timeout old: LastDial %v, want %v", got, refused)
	}
	if got := ns.lastDial(ns.single, clock.Now()-int64(timeout)+1); got != nil {
		t.Fatalf("a dial failure older than one timeout: LastDial %v, want none", got)
	}
	ns.dials.record("redis.test:6379", nil)
	if got := ns.lastDial(ns.single, 0); got != nil {
		t.Fatalf("after a dial that succeeded: LastDial %v, want none", got)
	}

	// A server that accepts and never answers, after a refused dial: the
	// dial succeeds, the read times out, and the call names no dial.
	hole, _ := redistest.BlackHole(t)
	rc2 := redis.NewClient(&redis.Options{Addr: hole, ContextTimeoutEnabled: true, MaxRetries: -1})
	t.Cleanup(func() { _ = rc2.Close() })
	st2, err := New(rc2, WithTimeout(timeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st2.Close() })
	st2.nodes.dials.record(hole, refused)
	if got := lastDial(st2); got != nil {
		t.Fatalf("a dial that succeeded after a refused one, then a read that timed out: LastDial %v, want none", got)
	}

	for _, err := range []error{io.EOF, replyError("LOADING"), refused, &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}} {
		if waited(err) {
			t.Errorf("waited(%v) = true; want false: it is no wait for a dial", err)
		}
	}
	for _, err := range []error{context.DeadlineExceeded, redis.ErrPoolTimeout, fmt.Errorf("%w after 1s", errTimeout)} {
		if !waited(err) {
			t.Errorf("waited(%v) = false, want true", err)
		}
	}
}

// TestStoreErrorKind: every kind a store error can have.
func TestStoreErrorKind(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ECONNREFUSED}}
	unreachable := &net.OpError{Op: "dial", Net: "tcp", Err: &os.SyscallError{Syscall: "connect", Err: syscall.ENETUNREACH}}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: &os.SyscallError{Syscall: "read", Err: syscall.ECONNRESET}}
	readTimeout := &net.OpError{Op: "read", Net: "tcp", Err: os.ErrDeadlineExceeded}
	node := func(err error) error { return &NodeError{Node: "10.0.0.7:6379", Err: err} }
	for _, tt := range []struct {
		err  error
		want string
	}{
		{newNode("10.0.0.7:6379", 5, int64(time.Second)).openErr, "circuit_open"},
		{ErrCircuitOpen, "circuit_open"},
		{ErrClosed, "closed"},
		{node(ErrClosed), "closed"},
		{&NodeError{Node: "n", Err: context.DeadlineExceeded, LastDial: refused}, "connection_refused"},
		{&NodeError{Node: "n", Err: fmt.Errorf("%w after 1s", errTimeout), LastDial: refused}, "connection_refused"},
		{&NodeError{Node: "n", Err: context.DeadlineExceeded, LastDial: unreachable}, "connection"},
		{node(redis.ErrPoolTimeout), "pool_timeout"},
		{node(redis.ErrPoolExhausted), "pool_timeout"},
		{node(context.DeadlineExceeded), "timeout"},
		{node(fmt.Errorf("%w after 1s", errTimeout)), "timeout"},
		{node(readTimeout), "timeout"},
		{node(context.Canceled), "canceled"},
		{node(refused), "connection_refused"},
		{node(replyError("LOADING Redis is loading the dataset in memory")), "redis"},
		{node(replyError("CLUSTERDOWN The cluster is down")), "redis"},
		{node(reset), "connection"},
		{node(unreachable), "connection"},
		{node(io.EOF), "connection"},
		{node(io.ErrUnexpectedEOF), "connection"},
		{node(errors.New("redis: all ring shards are down")), "other"},
		{fmt.Errorf("redisstore: policy: %w", store.ErrBadPolicy), "other"},
	} {
		if got := store.ErrorKind(tt.err); got != tt.want {
			t.Errorf("StoreErrorKind(%v) = %q, want %q", tt.err, got, tt.want)
		}
	}
}
