package redisstore

import (
	"context"
	"net"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/store"
)

// dialLog remembers, per node, how the last dial to it ended. go-redis
// dials on a goroutine of its own and retries there, and a caller whose
// deadline ends meanwhile sees only the deadline; the log lets the store
// name the cause (NodeError.LastDial). Dials are rare (connections are
// pooled), so one mutex serves.
type dialLog struct {
	clock store.Clock
	mu    sync.Mutex
	m     map[string]*dialEntry // node name or address → its last dial
}

type dialEntry struct {
	// client is the node client last given the hook for this address
	// (ClusterClient and Ring nodes), so that each gets it once.
	client *redis.Client
	err    error // the last dial's error; nil after a dial succeeded
	at     int64 // when it failed, on the store's clock
}

func (l *dialLog) init(clock store.Clock) {
	l.clock = clock
	l.m = make(map[string]*dialEntry)
}

// entry returns name's entry, adding it; l.mu must be held. The log is
// bounded like the nodes: a cluster whose addresses keep changing starts
// it afresh.
func (l *dialLog) entry(name string) *dialEntry {
	e := l.m[name]
	if e == nil {
		if len(l.m) >= maxNodes {
			clear(l.m)
		}
		e = &dialEntry{}
		l.m[name] = e
	}
	return e
}

// record notes how a dial to name ended.
func (l *dialLog) record(name string, err error) {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		if e := l.m[name]; e != nil {
			e.err = nil
		}
		return
	}
	e := l.entry(name)
	e.err, e.at = err, now
}

// latest returns the error of the latest failed dial, at or after since,
// among names, skipping those whose last dial succeeded.
func (l *dialLog) latest(names []string, since int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var last *dialEntry
	for _, name := range names {
		if e := l.m[name]; e != nil && e.err != nil && e.at >= since && (last == nil || e.at > last.at) {
			last = e
		}
	}
	if last == nil {
		return nil
	}
	return last.err
}

// hook gives the node client c a hook that records its dials under the
// address dialled, unless c already has it.
func (l *dialLog) hook(c *redis.Client) {
	l.mu.Lock()
	e := l.entry(c.Options().Addr)
	hooked := e.client == c
	e.client = c
	l.mu.Unlock()
	if !hooked {
		c.AddHook(&dialHook{log: l})
	}
}

// dialHook is a go-redis hook that records in log how each dial ended,
// under name, or, when name is "", under the address dialled. It leaves
// commands alone.
type dialHook struct {
	log  *dialLog
	name string
}

func (h *dialHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		name := h.name
		if name == "" {
			name = addr
		}
		h.log.record(name, err)
		return conn, err
	}
}

func (h *dialHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *dialHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
