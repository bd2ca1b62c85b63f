package redisstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// fakeCluster is a ClusterClient over two masters, A (slots 0–8191) and B
// (8192–16383), whose connections its dialer sends to two miniredis
// servers, or holds: a cluster whose nodes die and come back on command,
// without a redis-server.
type fakeCluster struct {
	client  *redis.ClusterClient
	servers [2]*miniredis.Miniredis
	dials   [2]atomic.Int64 // dials to the node
	hold    [2]chan struct{}
	holding [2]atomic.Bool // a dial to the node waits for hold to close
	dialing chan int       // receives the node of every dial held
	// unreachable fails every load of the slot map; slotLoads counts them.
	unreachable atomic.Bool
	slotLoads   atomic.Int64
	nodeAddrs   [2]string
	serverAddr  [2]string
}

const nodeA, nodeB = 0, 1

func newFakeCluster(t *testing.T) *fakeCluster {
	f := &fakeCluster{
		nodeAddrs: [2]string{"node-a.test:6379", "node-b.test:6379"},
		dialing:   make(chan int, 10),
	}
	for i := range f.servers {
		f.servers[i] = redistest.StartMini(t)
		f.serverAddr[i] = f.servers[i].Addr()
		f.hold[i] = make(chan struct{})
	}
	f.client = redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			f.slotLoads.Add(1)
			if f.unreachable.Load() {
				return nil, errors.New("no seed answers (test)")
			}
			return []redis.ClusterSlot{
				{Start: 0, End: 8191, Nodes: []redis.ClusterNode{{Addr: f.nodeAddrs[nodeA]}}},
				{Start: 8192, End: 16383, Nodes: []redis.ClusterNode{{Addr: f.nodeAddrs[nodeB]}}},
			}, nil
		},
		Dialer:                f.dial,
		ContextTimeoutEnabled: true,
		MaxRedirects:          -1, // one attempt per call: dials are counted exactly
		DialerRetries:         1,
	})
	t.Cleanup(func() { _ = f.client.Close() })
	return f
}

func (f *fakeCluster) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	i := map[string]int{f.nodeAddrs[nodeA]: nodeA, f.nodeAddrs[nodeB]: nodeB}[addr]
	f.dials[i].Add(1)
	if f.holding[i].Load() {
		f.dialing <- i
		select {
		case <-f.hold[i]:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var d net.Dialer
	return d.DialContext(ctx, network, f.serverAddr[i])
}

// users returns n user names whose keys live on node i.
func (f *fakeCluster) users(t *testing.T, i, n int) []string {
	var users []string
	for j := 0; len(users) < n; j++ {
		u := "u" + strconv.Itoa(j)
		c, err := f.client.MasterForKey(context.Background(), "{"+u+"}")
		if err != nil {
			t.Fatal(err)
		}
		if c.Options().Addr == f.nodeAddrs[i] {
			users = append(users, u)
		}
	}
	return users
}

func testPolicy(t *testing.T, name, limit string) *store.Policy {
	l, err := algo.ParseLimit(limit)
	if err != nil {
		t.Fatal(err)
	}
	return &store.Policy{Name: name, Algorithm: algo.FixedWindow, Limits: []algo.Limit{l}}
}

// nodeOf returns the node a store error names, and whether it wraps
// ErrCircuitOpen.
func nodeOf(t *testing.T, err error) (string, bool) {
	t.Helper()
	ne, ok := errors.AsType[*NodeError](err)
	if !ok {
		t.Fatalf("error %v (%T) is not a *NodeError", err, err)
	}
	if !strings.Contains(err.Error(), "node "+ne.Node+": ") {
		t.Fatalf("error text %q does not name node %s", err, ne.Node)
	}
	return ne.Node, errors.Is(err, ErrCircuitOpen)
}

// TestBreakerPerNode: in a cluster of two masters, A failing opens only
// A's circuit; B's keys keep being counted exactly, before, while and
// after A's circuit is open; each node probes on its own.
func TestBreakerPerNode(t *testing.T) {
	f := newFakeCluster(t)
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	// The timeout is long: a held dial ends when the test releases it.
	s, err := New(f.client, WithBreaker(3, time.Second), WithClock(clock), WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	p := testPolicy(t, "api", "5/hour")
	onA, onB := f.users(t, nodeA, 3), f.users(t, nodeB, 4)
	a, b := f.nodeAddrs[nodeA], f.nodeAddrs[nodeB]

	// counts takes n times for user and checks that the first 5 are
	// admitted and the rest denied, counted from already admitted.
	counts := func(user string, already, n int) {
		t.Helper()
		for i := range n {
			r, err := s.Take(ctx, user, p, 1)
			if err != nil || r.Allowed != (already+i < 5) {
				t.Fatalf("take %d for %s (on B): allowed %v, err %v; want allowed %v", already+i+1, user, r.Allowed, err, already+i < 5)
			}
		}
	}

	counts(onB[0], 0, 2)
	counts(onA[0], 0, 1)

	f.servers[nodeA].Close() // the listener and every connection
	for i := range 3 {
		_, err := s.Take(ctx, onA[0], p, 1)
		if node, open := nodeOf(t, err); node != a || open {
			t.Fatalf("failure %d of A: %v; want a failure of node %s, circuit closed", i+1, err, a)
		}
	}
	dials := f.dials[nodeA].Load()
	for _, u := range onA {
		_, err := s.Take(ctx, u, p, 1)
		if node, open := nodeOf(t, err); node != a || !open {
			t.Fatalf("A after 3 failures: %v; want ErrCircuitOpen naming %s", err, a)
		}
	}
	if got := f.dials[nodeA].Load(); got != dials {
		t.Fatalf("%d dials to A with its circuit open, want none", got-dials)
	}
	// B is not affected: its users are counted exactly.
	counts(onB[0], 2, 5)
	counts(onB[1], 0, 6)

	// After the cool-down A gets one probe; it fails and A opens again.
	clock.Advance(time.Second)
	if _, err := s.Take(ctx, onA[1], p, 1); err == nil {
		t.Fatal("A's probe succeeded while A is down")
	} else if node, open := nodeOf(t, err); node != a || open {
		t.Fatalf("A's probe: %v; want a failure of node %s", err, a)
	}
	if got := f.dials[nodeA].Load(); got != dials+1 {
		t.Fatalf("A's probe dialed %d times, want once", got-dials)
	}
	if _, err := s.Take(ctx, onA[1], p, 1); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("A after a failed probe: %v, want ErrCircuitOpen", err)
	}
	counts(onB[2], 0, 6)

	// Both down, both open; after the cool-down each node probes, and a
	// probe of A in flight does not hold B's back.
	f.servers[nodeB].Close()
	for range 3 {
		_, err := s.Take(ctx, onB[3], p, 1)
		if node, open := nodeOf(t, err); node != b || open {
			t.Fatalf("B down: %v, want a failure of node %s", err, b)
		}
	}
	if _, err := s.Take(ctx, onB[3], p, 1); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("B after 3 failures: %v, want ErrCircuitOpen", err)
	}
	clock.Advance(time.Second)
	for _, m := range f.servers {
		if err := m.Restart(); err != nil { // same address, same data
			t.Fatal(err)
		}
	}
	f.holding[nodeA].Store(true)
	probed := make(chan error, 1)
	go func() {
		_, err := s.Take(ctx, onA[2], p, 1)
		probed <- err
	}()
	if i := <-f.dialing; i != nodeA {
		t.Fatalf("dial to node %d held, want A", i)
	}
	if _, err := s.Take(ctx, onA[1], p, 1); !errors.Is(err, ErrCircuitOpen) {
		t.Fatalf("A while its probe is in flight: %v, want ErrCircuitOpen", err)
	}
	if r, err := s.Take(ctx, onB[0], p, 0); err != nil || !r.Allowed {
		t.Fatalf("B's probe while A's is in flight: %+v, %v; want it through", r, err)
	}
	counts(onB[3], 0, 6) // B closed again
	f.holding[nodeA].Store(false)
	close(f.hold[nodeA])
	if err := <-probed; err != nil {
		t.Fatalf("A's probe: %v", err)
	}
	// A closed: its user counts on (A's Redis kept its data).
	r, err := s.Take(ctx, onA[0], p, 1)
	if err != nil || !r.Allowed || r.Remaining != 3 {
		t.Fatalf("A after its probe succeeded: %+v, %v; want admitted, 3 remaining", r, err)
	}
	if n := s.nodes.len(); n != 2 {
		t.Fatalf("%d nodes have a breaker, want 2", n)
	}
}

// TestBreakerNodesBounded: a flood of keys adds no breaker beyond the
// nodes that serve them, and the set of nodes stays bounded even when
// addresses keep changing, keeping the nodes whose breaker has tripped.
func TestBreakerNodesBounded(t *testing.T) {
	f := newFakeCluster(t)
	s, err := New(f.client, WithDenyCache(false), WithTimeout(redistest.StoreTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	p := testPolicy(t, "flood", "5/hour")
	for i := range 500 {
		if _, err := s.Take(context.Background(), fmt.Sprintf("flood-%d", i), p, 1); err != nil {
			t.Fatal(err)
		}
	}
	if n := s.nodes.len(); n != 2 {
		t.Fatalf("500 keys over 2 masters made %d breakers, want 2", n)
	}

	ns := &nodes{threshold: 1, cooldown: int64(time.Second)}
	ns.init(f.client, store.SystemClock)
	tripped := ns.get("tripped:1")
	tripped.br.failure(0, false)
	for i := range 5 * maxNodes {
		ns.get("churn:" + strconv.Itoa(i))
		if n := ns.len(); n > maxNodes {
			t.Fatalf("%d nodes after %d addresses, want at most %d", n, i+1, maxNodes)
		}
	}
	if ns.get("tripped:1") != tripped {
		t.Fatal("the node with an open circuit was forgotten")
	}
}

// TestNodeError: the error names the node and unwraps to the cause.
func TestNodeError(t *testing.T) {
	cause := errors.New("dial tcp 10.0.0.7:6379: connect: connection refused")
	err := error(&NodeError{Node: "10.0.0.7:6379", Err: cause})
	if got, want := err.Error(), "redisstore: node 10.0.0.7:6379: dial tcp 10.0.0.7:6379: connect: connection refused"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, cause) {
		t.Fatal("NodeError does not unwrap to its cause")
	}
	dial := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")}
	err = &NodeError{Node: "10.0.0.7:6379", Err: context.DeadlineExceeded, LastDial: dial}
	if got, want := err.Error(), "redisstore: node 10.0.0.7:6379: context deadline exceeded: last dial error: dial tcp: connect: connection refused"; got != want {
		t.Fatalf("Error() = %q, want %q", got, want)
	}
	if op, ok := errors.AsType[*net.OpError](err); !ok || op != dial || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("NodeError with LastDial: errors.As finds %v, errors.Is(DeadlineExceeded) %v; want both", op, errors.Is(err, context.DeadlineExceeded))
	}
	open := newNode("10.0.0.7:6379", 5, int64(time.Second)).openErr
	if got, want := open.Error(), "redisstore: node 10.0.0.7:6379: circuit open after consecutive Redis failures"; got != want || !errors.Is(open, ErrCircuitOpen) {
		t.Fatalf("open circuit: %q (Is ErrCircuitOpen: %v), want %q", got, errors.Is(open, ErrCircuitOpen), want)
	}
}

// TestLocateAllocs: finding a key's node costs no allocation, for a
// ClusterClient (once its slot map is loaded), a Ring and a Client.
func TestLocateAllocs(t *testing.T) {
	ctx := context.Background()
	f := newFakeCluster(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "127.0.0.1:1", "b": "127.0.0.1:2"}, HeartbeatFrequency: time.Hour})
	t.Cleanup(func() { _ = ring.Close() })
	single := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	t.Cleanup(func() { _ = single.Close() })
	for name, c := range map[string]redis.UniversalClient{"cluster": f.client, "ring": ring, "client": single} {
		ns := &nodes{threshold: 5, cooldown: int64(time.Second)}
		ns.init(c, store.SystemClock)
		if ns.cluster != nil {
			ns.mapped.Store(true)
			if _, err := f.client.MasterForKey(ctx, "warm"); err != nil { // loads the slot map
				t.Fatal(err)
			}
		}
		keys := []string{"rl:{alice}:api@1", "rl:{bob}:api@1", "rl:{carol}:api@1"}
		for _, k := range keys { // every node known
			if _, err := ns.locate(ctx, k, 0, time.Second); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			if _, err := ns.locate(ctx, keys[i%len(keys)], 0, time.Second); err != nil {
				t.Fatal(err)
			}
			i++
		})
		if allocs != 0 {
			t.Errorf("%s: locate allocates %v times, want 0", name, allocs)
		}
	}
}

// BenchmarkLocate measures finding a key's node, the cost per-node
// failure accounting adds to a decision: for a ClusterClient, MasterForKey
// (CRC16 of the hash tag, a lookup in the cached slot map) and the lookup
// of the node's breaker; for a Ring, GetShardClientForKey; for a Client,
// nothing.
func BenchmarkLocate(b *testing.B) {
	ctx := context.Background()
	cluster := redis.NewClusterClient(&redis.ClusterOptions{
		ClusterSlots: func(context.Context) ([]redis.ClusterSlot, error) {
			return []redis.ClusterSlot{
				{Start: 0, End: 5460, Nodes: []redis.ClusterNode{{Addr: "10.0.0.1:6379"}}},
				{Start: 5461, End: 10922, Nodes: []redis.ClusterNode{{Addr: "10.0.0.2:6379"}}},
				{Start: 10923, End: 16383, Nodes: []redis.ClusterNode{{Addr: "10.0.0.3:6379"}}},
			}, nil
		},
	})
	defer cluster.Close()
	// No heartbeat within the benchmark: the shards stay up, unreached.
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": "10.0.0.1:6379", "b": "10.0.0.2:6379", "c": "10.0.0.3:6379"}, HeartbeatFrequency: time.Hour})
	defer ring.Close()
	single := redis.NewClient(&redis.Options{Addr: "10.0.0.1:6379"})
	defer single.Close()
	key := "rl:{user:12345678}:api@00000000deadbeef"
	for _, c := range []struct {
		name   string
		client redis.UniversalClient
	}{{"cluster", cluster}, {"ring", ring}, {"client", single}} {
		ns := &nodes{threshold: 5, cooldown: int64(time.Second)}
		ns.init(c.client, store.SystemClock)
		if _, err := cluster.MasterForKey(ctx, key); err != nil {
			b.Fatal(err)
		}
		ns.mapped.Store(true)
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := ns.locate(ctx, key, 0, time.Second); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestBreakerPerShard: with a Ring, a dead shard opens only its own
// circuit, named by its address; the other shard's keys are counted.
func TestBreakerPerShard(t *testing.T) {
	a, b := redistest.StartMini(t), redistest.StartMini(t)
	// No heartbeat within the test: the ring keeps both shards, as it
	// does until its heartbeat sees one down.
	ring := redis.NewRing(&redis.RingOptions{
		Addrs:              map[string]string{"a": a.Addr(), "b": b.Addr()},
		HeartbeatFrequency: time.Hour,
		MaxRetries:         -1,
	})
	t.Cleanup(func() { _ = ring.Close() })
	s, err := New(ring, WithBreaker(2, time.Second), WithClock(store.NewManualClock(time.Unix(1_700_000_000, 0))), WithTimeout(redistest.StoreTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	p := testPolicy(t, "api", "3/hour")
	var onA, onB []string
	for j := 0; len(onA) < 2 || len(onB) < 1; j++ {
		u := "u" + strconv.Itoa(j)
		c, err := ring.GetShardClientForKey("{" + u + "}")
		if err != nil {
			t.Fatal(err)
		}
		if c.Options().Addr == a.Addr() {
			onA = append(onA, u)
		} else {
			onB = append(onB, u)
		}
	}
	deadAddr := a.Addr()
	a.Close()
	for i := range 3 {
		_, err := s.Take(ctx, onA[i%2], p, 1)
		if node, open := nodeOf(t, err); node != deadAddr || open != (i == 2) {
			t.Fatalf("take %d on the dead shard: %v; want a failure of %s, the circuit open after 2", i+1, err, deadAddr)
		}
	}
	for i := range 5 {
		if r, err := s.Take(ctx, onB[0], p, 1); err != nil || r.Allowed != (i < 3) {
			t.Fatalf("take %d on the live shard: %+v, %v", i+1, r, err)
		}
	}
}

// TestBreakerUnmapped: while a ClusterClient cannot load its slot map,
// the store cannot tell the key's master; its failures count against the
// cluster as a whole (named "cluster" and its seeds), whose circuit, when
// open, stops the loads too. Once the map loads, accounting is per master.
func TestBreakerUnmapped(t *testing.T) {
	f := newFakeCluster(t)
	f.unreachable.Store(true)
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	s, err := New(f.client, WithBreaker(2, time.Second), WithClock(clock), WithTimeout(redistest.StoreTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	p := testPolicy(t, "api", "5/hour")
	for i := range 3 {
		_, err := s.Take(ctx, "u", p, 1)
		if node, open := nodeOf(t, err); node != "cluster" || open != (i == 2) {
			t.Fatalf("take %d without a slot map: %v; want a failure of the cluster, the circuit open after 2", i+1, err)
		}
	}
	if got := f.slotLoads.Load(); got != 2 {
		t.Fatalf("%d loads of the slot map, want 2 (none with the circuit open)", got)
	}
	f.unreachable.Store(false)
	clock.Advance(time.Second)
	if r, err := s.Take(ctx, "u", p, 1); err != nil || !r.Allowed || r.Remaining != 4 {
		t.Fatalf("once the slot map loads: %+v, %v", r, err)
	}
	if n := s.nodes.len(); n != 1 {
		t.Fatalf("%d masters have a breaker, want 1 (the key's)", n)
	}
}
