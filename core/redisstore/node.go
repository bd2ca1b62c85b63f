package redisstore

import (
	"context"
	"errors"
	"io"
	"maps"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/store"
)

// maxNodes bounds the nodes the store keeps a breaker for. Nodes come from
// the client's view of the servers (a Cluster's masters, a Ring's shards),
// never from keys, so a flood of keys cannot add any; the bound only stops
// a cluster whose addresses keep changing from growing the set forever.
const maxNodes = 1024

// NodeError is a failure of one Redis node: a Cluster master (the one that
// owns the key's hash slot), a Ring shard, or the server of a Client. Its
// text names the node and, when known, the failed dial behind a timeout:
//
//	redisstore: node 10.0.0.7:6379: context deadline exceeded: last dial error: dial tcp 10.0.0.7:6379: connect: connection refused
//
// errors.Is and errors.As see both Err and LastDial.
type NodeError struct {
	// Node is the node's address as the client knows it (host:port; for a
	// Sentinel-managed Client, go-redis's "FailoverClient"). When a
	// ClusterClient cannot tell which master owns the key (its slot map is
	// not loaded) or a Ring has no shard up, it is "cluster" or "ring" and
	// the addresses the client was given.
	Node string
	// Err is the failure: ErrCircuitOpen while the node's circuit is open,
	// else what go-redis or Redis returned.
	Err error
	// LastDial is set when the call ended at a deadline (Err is
	// context.DeadlineExceeded, redis.ErrPoolTimeout, or the store's own
	// timeout for a client that ignores deadlines) while go-redis's dials
	// to the node were failing: the error of the last dial (a
	// *net.OpError, such as a refused connection), when it failed no
	// earlier than one timeout before the call began and no dial to the
	// node has succeeded since. go-redis dials in the background, and its
	// caller sees only the deadline. For a ClusterClient that has not
	// loaded its slot map, it is the latest failed dial to a seed address.
	LastDial error
}

func (e *NodeError) Error() string {
	msg := "redisstore: node " + e.Node + ": " + strings.TrimPrefix(e.Err.Error(), "redisstore: ")
	if e.LastDial != nil {
		msg += ": last dial error: " + e.LastDial.Error()
	}
	return msg
}

// Unwrap returns Err and, when set, LastDial.
func (e *NodeError) Unwrap() []error {
	if e.LastDial == nil {
		return []error{e.Err}
	}
	return []error{e.Err, e.LastDial}
}

// StoreErrorKind classifies the failure for a metric label (see
// store.ErrorKind): "circuit_open" (ErrCircuitOpen); with LastDial,
// "connection_refused" when the dial was refused, else "connection";
// otherwise "closed" (ErrClosed), "pool_timeout" (redis.ErrPoolTimeout,
// redis.ErrPoolExhausted: go-redis waited PoolTimeout for a connection; a
// wait that the store's deadline ended is a "timeout"), "timeout" (the
// store's deadline or the caller's, or a dial, read or write that timed
// out), "canceled" (the caller's context), "connection_refused", "redis"
// (an error reply: LOADING, CLUSTERDOWN, READONLY, a script error, …),
// "connection" (any other network error, a connection closed or reset)
// and "other".
func (e *NodeError) StoreErrorKind() string {
	switch {
	case errors.Is(e.Err, ErrCircuitOpen):
		return "circuit_open"
	case e.LastDial != nil && errors.Is(e.LastDial, syscall.ECONNREFUSED):
		return "connection_refused"
	case e.LastDial != nil:
		return "connection"
	}
	return errorKind(e.Err)
}

// errorKind is StoreErrorKind for an error of go-redis or Redis.
func errorKind(err error) string {
	var ne net.Error
	switch {
	case errors.Is(err, ErrClosed):
		return "closed"
	case errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted):
		return "pool_timeout"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, errTimeout),
		errors.As(err, &ne) && ne.Timeout():
		return "timeout"
	case errors.Is(err, context.Canceled):
		return "canceled"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection_refused"
	}
	if _, ok := errors.AsType[redis.Error](err); ok {
		return "redis"
	}
	if errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "connection"
	}
	return "other"
}

// node is one Redis node as the store accounts for failures: its address,
// its breaker, and the error its open circuit returns (made once, so that
// failing fast allocates nothing).
type node struct {
	addr    string
	br      breaker
	openErr error
	// answered counts the calls the node answered, so that a call that
	// timed out waiting can tell whether the node answered others
	// meanwhile.
	answered atomic.Uint64
	// hooked is the node client (of a ClusterClient or a Ring) last given
	// the dial hook, so that locate hooks each client once.
	hooked atomic.Pointer[redis.Client]
	// q holds the decisions waiting for a batch to the node.
	q queue
}

func newNode(addr string, threshold, cooldown int64) *node {
	n := &node{addr: addr, openErr: &NodeError{Node: addr, Err: ErrCircuitOpen}}
	n.br.threshold, n.br.cooldown = threshold, cooldown
	return n
}

// nodes holds the store's nodes and finds the one that serves a key: for
// a ClusterClient, the master that owns the key's hash slot in the
// client's cached slot map (MasterForKey: a CRC16 of the hash tag and a
// lookup, no round trip once the map is loaded); for a Ring, the shard the
// key hashes to; for a Client (standalone or Sentinel) and any other
// client, the one node.
type nodes struct {
	threshold, cooldown int64

	single  *node // a Client, or a client of unknown type
	cluster *redis.ClusterClient
	ring    *redis.Ring
	// unmapped stands for the cluster (or ring) while the client cannot
	// name the key's node: before a ClusterClient has loaded its slot map,
	// or when no Ring shard is up.
	unmapped *node
	// mapped is set once a ClusterClient's slot map is known to be loaded:
	// MasterForKey then never needs a round trip (go-redis replaces the
	// map, in the background, but never drops it).
	mapped atomic.Bool

	mu sync.Mutex                       // held to add a node
	m  atomic.Pointer[map[string]*node] // address → node, copied on write

	dials dialLog
}

// init sets up the nodes of client and hooks its dials: a Client's (or
// another client's) under the one node's name; a ClusterClient's and a
// Ring's per node client, under the address dialled, for each node
// client go-redis makes from now on (OnNewNode) and, in locate, for
// those it made before.
func (ns *nodes) init(client redis.UniversalClient, clock store.Clock) {
	empty := map[string]*node{}
	ns.m.Store(&empty)
	ns.dials.init(clock)
	switch c := client.(type) {
	case *redis.Client:
		ns.single = newNode(c.Options().Addr, ns.threshold, ns.cooldown)
	case *redis.ClusterClient:
		ns.cluster = c
		ns.unmapped = newNode(strings.TrimSpace("cluster "+strings.Join(c.Options().Addrs, ",")), ns.threshold, ns.cooldown)
		c.OnNewNode(ns.dials.hook)
	case *redis.Ring:
		ns.ring = c
		addrs := slices.Sorted(maps.Values(c.Options().Addrs))
		ns.unmapped = newNode(strings.TrimSpace("ring "+strings.Join(addrs, ",")), ns.threshold, ns.cooldown)
		c.OnNewNode(ns.dials.hook)
	default:
		ns.single = newNode("redis", ns.threshold, ns.cooldown)
	}
	if ns.single != nil {
		client.AddHook(&dialHook{log: &ns.dials, name: ns.single.addr})
	}
}

// lastDial returns the error of the last dial to n's node when it failed
// at or after since and no dial has succeeded after it: for the cluster
// before its slot map is loaded, the latest such dial to a seed address.
func (ns *nodes) lastDial(n *node, since int64) error {
	if n == ns.unmapped && ns.cluster != nil {
		return ns.dials.latest(ns.cluster.Options().Addrs, since)
	}
	return ns.dials.latest([]string{n.addr}, since)
}

// stats returns the state of every node's breaker at now (see
// Store.Stats).
func (ns *nodes) stats(now int64) []store.NodeStats {
	if ns.single != nil {
		return []store.NodeStats{{Node: ns.single.addr, Breaker: ns.single.br.state(now)}}
	}
	m := *ns.m.Load()
	out := make([]store.NodeStats, 0, len(m)+1)
	for _, addr := range slices.Sorted(maps.Keys(m)) {
		out = append(out, store.NodeStats{Node: addr, Breaker: m[addr].br.state(now)})
	}
	if ns.cluster != nil && !ns.mapped.Load() || ns.unmapped.br.tripped() {
		out = append(out, store.NodeStats{Node: ns.unmapped.addr, Breaker: ns.unmapped.br.state(now)})
	}
	return out
}

// locate returns the node that serves key, and an error when it could not
// be found, which counts as a failure of the node returned. Only before a
// ClusterClient has its slot map can it make a round trip (to load the
// map), bounded by timeout; and not while that is failing fast.
func (ns *nodes) locate(ctx context.Context, key string, now int64, timeout time.Duration) (*node, error) {
	var c *redis.Client
	var err error
	switch {
	case ns.single != nil:
		return ns.single, nil
	case ns.cluster != nil && ns.mapped.Load():
		c, err = ns.cluster.MasterForKey(ctx, key)
	case ns.cluster != nil:
		if ns.unmapped.br.open(now) {
			return ns.unmapped, nil
		}
		mctx, cancel := context.WithTimeout(ctx, timeout)
		c, err = ns.cluster.MasterForKey(mctx, key)
		cancel()
		if err == nil {
			ns.mapped.Store(true)
		}
	default:
		c, err = ns.ring.GetShardClientForKey(key)
	}
	if err != nil {
		return ns.unmapped, err
	}
	n := ns.get(c.Options().Addr)
	if n.hooked.Load() != c {
		ns.dials.hook(c)
		n.hooked.Store(c)
	}
	return n, nil
}

// get returns the node of addr, adding it when it is new.
func (ns *nodes) get(addr string) *node {
	if n := (*ns.m.Load())[addr]; n != nil {
		return n
	}
	ns.mu.Lock()
	defer ns.mu.Unlock()
	old := *ns.m.Load()
	if n := old[addr]; n != nil {
		return n
	}
	m := make(map[string]*node, min(len(old)+1, maxNodes))
	for a, n := range old {
		// When full, forget the nodes whose breaker has nothing to
		// remember: they start again as they are.
		if len(old) < maxNodes-1 || n.br.tripped() {
			m[a] = n
		}
	}
	if len(m) >= maxNodes {
		clear(m)
	}
	n := newNode(addr, ns.threshold, ns.cooldown)
	m[addr] = n
	ns.m.Store(&m)
	return n
}

// len reports how many nodes have a breaker, for tests.
func (ns *nodes) len() int { return len(*ns.m.Load()) }
