package redisstore

import (
	"context"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxNodes bounds the nodes the store keeps a breaker for. Nodes come from
// the client's view of the servers (a Cluster's masters, a Ring's shards),
// never from keys, so a flood of keys cannot add any; the bound only stops
// a cluster whose addresses keep changing from growing the set forever.
const maxNodes = 1024

// NodeError is a failure of one Redis node: a Cluster master (the one that
// owns the key's hash slot), a Ring shard, or the server of a Client. Its
// text names the node. Err is the failure: ErrCircuitOpen while the node's
// circuit is open, else what go-redis or Redis returned.
type NodeError struct {
	// Node is the node's address as the client knows it (host:port; for a
	// Sentinel-managed Client, go-redis's "FailoverClient"). When a
	// ClusterClient cannot tell which master owns the key (its slot map is
	// not loaded) or a Ring has no shard up, it is "cluster" or "ring" and
	// the addresses the client was given.
	Node string
	Err  error
}

func (e *NodeError) Error() string {
	return "redisstore: node " + e.Node + ": " + strings.TrimPrefix(e.Err.Error(), "redisstore: ")
}

func (e *NodeError) Unwrap() error { return e.Err }

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
}

func (ns *nodes) init(client redis.UniversalClient) {
	empty := map[string]*node{}
	ns.m.Store(&empty)
	switch c := client.(type) {
	case *redis.Client:
		ns.single = newNode(c.Options().Addr, ns.threshold, ns.cooldown)
	case *redis.ClusterClient:
		ns.cluster = c
		ns.unmapped = newNode(strings.TrimSpace("cluster "+strings.Join(c.Options().Addrs, ",")), ns.threshold, ns.cooldown)
	case *redis.Ring:
		ns.ring = c
		addrs := slices.Sorted(maps.Values(c.Options().Addrs))
		ns.unmapped = newNode(strings.TrimSpace("ring "+strings.Join(addrs, ",")), ns.threshold, ns.cooldown)
	default:
		ns.single = newNode("redis", ns.threshold, ns.cooldown)
	}
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
	return ns.get(c.Options().Addr), nil
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
