package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// stackCalls returns how many calls of the stack scripts s holds, per
// node.
func stackCalls(s []sent) map[string]int {
	out := map[string]int{}
	for _, x := range s {
		if x.sha == redisstore.StackSHAs[0] || x.sha == redisstore.StackSHAs[1] {
			out[x.node]++
		}
	}
	return out
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

// clusterUsers returns users of c: two of one master whose keys lie in
// different hash slots, and one of each other master.
func clusterUsers(t *testing.T, cc *redis.ClusterClient) (sameNode [2]string, others [2]string) {
	t.Helper()
	ctx := context.Background()
	run := time.Now().UnixNano()
	var first string
	var firstSlot int64
	var other string // the master of others[0]
	for i := 0; sameNode[1] == "" || others[1] == ""; i++ {
		if i > 10_000 {
			t.Fatal("no users of the layout wanted")
		}
		u := fmt.Sprintf("u%d-%d", run, i)
		m, err := cc.MasterForKey(ctx, "{"+u+"}")
		if err != nil {
			t.Fatal(err)
		}
		addr, slot := m.Options().Addr, slotOf(t, cc, "{"+u+"}")
		switch {
		case first == "":
			first, firstSlot, sameNode[0] = addr, slot, u
		case addr == first && slot != firstSlot && sameNode[1] == "":
			sameNode[1] = u
		case addr != first && other == "":
			other, others[0] = addr, u
		case addr != first && addr != other && others[1] == "":
			others[1] = u
		}
	}
	return sameNode, others
}

// stackCluster starts a Cluster and returns it, a client whose node
// clients record their script calls in the recorder returned (then run
// hooks), with the scripts loaded, and users as clusterUsers finds them.
func stackCluster(t *testing.T, hooks ...redis.Hook) (*redistest.Cluster, *redis.ClusterClient, *recorder, [2]string, [2]string) {
	cl := redistest.StartCluster(t)
	rec := newRecorder(0)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	cc.OnNewNode(func(c *redis.Client) {
		c.AddHook(rec.hook(c.Options().Addr))
		for _, h := range hooks {
			c.AddHook(h)
		}
	})
	loadScripts(t, cc)
	same, others := clusterUsers(t, cc)
	return cl, cc, rec, same, others
}

// stackTarget is a Redis to run TakeAll on, with a recorder of its
// script calls.
type stackTarget struct {
	name   string
	client redis.UniversalClient
	rec    *recorder
	// layouts: the users of two takes: of one key, of two keys of one
	// node (in two hash slots on a Cluster), of two nodes.
	layouts map[string][2]string
}

func stackTargets(t *testing.T) []stackTarget {
	srv := redistest.StartServer(t)
	rec := newRecorder(0)
	c := recordedClient(t, srv.Addr(), rec)
	_, cc, crec, same, others := stackCluster(t)
	return []stackTarget{
		{"redis-server", c, rec, map[string][2]string{"one key": {"alice", "alice"}, "one node": {"alice", "bob"}}},
		{"cluster", cc, crec, map[string][2]string{"one key": {same[0], same[0]}, "one node": same, "two nodes": {same[0], others[0]}}},
	}
}

// stackPolicy returns a policy of algorithm a, of calendar days for
// calendarWindow (a value past the algorithms').
func stackPolicy(t *testing.T, name string, a algo.Algorithm, count int64) *store.Policy {
	if a == algo.GCRA+1 {
		l, err := algo.ParseCalendarLimit(fmt.Sprintf("%d/day", count))
		if err != nil {
			t.Fatal(err)
		}
		return &store.Policy{Name: name, Location: time.UTC, Limits: []algo.Limit{l}}
	}
	return policy(name, a, fmt.Sprintf("%d/hour", count))
}

var stackAlgorithms = append(algorithms[:len(algorithms):len(algorithms)], algo.GCRA+1)

func algoName(a algo.Algorithm) string {
	if a == algo.GCRA+1 {
		return "calendar"
	}
	return a.String()
}

// TestTakeAllCounts: two takes (a limit of 4 and one of 2) of one key, of
// two keys of one node (in two hash slots on a Cluster) and of two
// Cluster nodes, under every algorithm: two requests are admitted, each
// consuming from both; the third is denied by the limit of 2, consumes
// nothing, and answers the other take's state as it stands. One node's
// takes are one script call; two nodes', one call each, and a denial
// adds the give-back of the node that admitted.
func TestTakeAllCounts(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tg := range stackTargets(t) {
		for layout, users := range tg.layouts {
			for _, a := range stackAlgorithms {
				t.Run(fmt.Sprintf("%s/%s/%s", tg.name, layout, algoName(a)), func(t *testing.T) {
					s := newStore(t, tg.client, redisstore.WithDenyCache(false))
					run := fmt.Sprint(time.Now().UnixNano())
					g, r := stackPolicy(t, "g"+run, a, 4), stackPolicy(t, "r"+run, a, 2)
					takes := []store.Take{{Key: users[0], Policy: g, Cost: 1}, {Key: users[1], Policy: r, Cost: 1}}
					res := make([]store.Result, 2)
					calls := 1
					if layout == "two nodes" {
						calls = 2
					}
					tg.rec.take()
					for i := range 3 {
						allowed, err := s.TakeAll(ctx, takes, res)
						if err != nil || allowed != (i < 2) {
							t.Fatalf("request %d: allowed %v, %v; want %v", i, allowed, err, i < 2)
						}
						want := calls
						if i == 2 && calls == 2 {
							want = 3 // the give-back
						}
						if got := stackCalls(tg.rec.take()); total(got) != want {
							t.Fatalf("request %d: stack script calls %v, want %d", i, got, want)
						}
						if i < 2 {
							if res[0].Remaining != 3-int64(i) || res[1].Remaining != 1-int64(i) || !res[0].Allowed || !res[1].Allowed {
								t.Fatalf("request %d: %+v, %+v; want %d and %d left", i, res[0], res[1], 3-i, 1-i)
							}
						}
					}
					if !res[0].Allowed || res[0].Remaining != 2 || res[0].RetryAfter != 0 || res[0].Limit != g.Limits[0] {
						t.Fatalf("denied request, its admitted take: %+v; want its state as it stands (2 left)", res[0])
					}
					peek, err := s.Peek(ctx, users[1], r, 1)
					if err != nil || res[1].Allowed || peek.Allowed || res[1].RetryAfter <= 0 || res[1].RetryAfter < peek.RetryAfter || res[1].RetryAfter-peek.RetryAfter > time.Second || res[1].Remaining != 0 {
						t.Fatalf("denied request, its denied take: %+v; want a denial, as a Peek's: %+v (%v)", res[1], peek, err)
					}
					if st, err := s.Peek(ctx, users[0], g, 0); err != nil || st.Remaining != 2 {
						t.Fatalf("after the denial the limit of 4 has %d left (%v); want 2: nothing consumed", st.Remaining, err)
					}
				})
			}
		}
	}
}

// TestTakeAllGiveBack: a denial on one Cluster node gives back, on the
// other, exactly what its take consumed, under every algorithm: the key
// there then admits exactly what it had left.
func TestTakeAllGiveBack(t *testing.T) {
	t.Parallel()
	_, cc, rec, same, others := stackCluster(t)
	ctx := context.Background()
	for _, a := range stackAlgorithms {
		t.Run(algoName(a), func(t *testing.T) {
			s := newStore(t, cc, redisstore.WithDenyCache(false))
			run := fmt.Sprint(time.Now().UnixNano())
			open, full := stackPolicy(t, "open"+run, a, 5), stackPolicy(t, "full"+run, a, 1)
			for _, tk := range []store.Take{{Key: same[0], Policy: open, Cost: 2}, {Key: others[1], Policy: full, Cost: 1}} {
				if r, err := s.Take(ctx, tk.Key, tk.Policy, tk.Cost); err != nil || !r.Allowed {
					t.Fatalf("%+v, %v", r, err)
				}
			}
			rec.take()
			res := make([]store.Result, 2)
			allowed, err := s.TakeAll(ctx, []store.Take{{Key: same[0], Policy: open, Cost: 2}, {Key: others[1], Policy: full, Cost: 1}}, res)
			if err != nil || allowed {
				t.Fatalf("allowed %v, %v; want denied", allowed, err)
			}
			if calls := stackCalls(rec.take()); total(calls) != 3 || len(calls) != 2 {
				t.Fatalf("stack script calls %v; want a take on each node and a give-back", calls)
			}
			if !res[0].Allowed || res[0].Remaining != 3 || res[0].RetryAfter != 0 || res[1].Allowed {
				t.Fatalf("results %+v, %+v; want the first as it stands (3 left), the second denied", res[0], res[1])
			}
			for i := range 4 {
				r, err := s.Take(ctx, same[0], open, 1)
				if err != nil || r.Allowed != (i < 3) {
					t.Fatalf("take %d after the give-back: %+v, %v; want exactly 3 admitted", i, r, err)
				}
			}
		})
	}
}

// TestTakeAllSameCounter: two takes of one key under one policy count it
// twice; when the second is denied neither is consumed, and its denial
// (made after the first take) is not cached for the key alone.
func TestTakeAllSameCounter(t *testing.T) {
	t.Parallel()
	c := client(t, redistest.StartServer(t).Addr())
	s := newStore(t, c)
	ctx := context.Background()
	for _, a := range stackAlgorithms {
		t.Run(algoName(a), func(t *testing.T) {
			p := stackPolicy(t, fmt.Sprint("same", time.Now().UnixNano()), a, 3)
			takes := []store.Take{{Key: "k", Policy: p, Cost: 1}, {Key: "k", Policy: p, Cost: 1}}
			res := make([]store.Result, 2)
			if ok, err := s.TakeAll(ctx, takes, res); err != nil || !ok || res[0].Remaining != 2 || res[1].Remaining != 1 {
				t.Fatalf("first request: %v, %v, %+v, %+v; want admitted, 2 then 1 left", ok, err, res[0], res[1])
			}
			if ok, err := s.TakeAll(ctx, takes, res); err != nil || ok || !res[0].Allowed || res[0].Remaining != 1 || res[1].Allowed {
				t.Fatalf("second request: %v, %v, %+v, %+v; want denied by the second take, 1 left", ok, err, res[0], res[1])
			}
			for i := range 2 {
				if r, err := s.Take(ctx, "k", p, 1); err != nil || r.Allowed != (i == 0) {
					t.Fatalf("take %d after: %+v, %v; want one admitted", i, r, err)
				}
			}
		})
	}
}

// TestTakeAllDenyCache: a denial TakeAll learns is cached for its take's
// key, for TakeAll and Take: a request with a take denied there is
// refused without taking anything, its other takes read at cost 0 for
// their state as it stands (one call, none when every take is denied
// there); Reset clears it.
func TestTakeAllDenyCache(t *testing.T) {
	t.Parallel()
	rec := newRecorder(0)
	c := recordedClient(t, redistest.StartServer(t).Addr(), rec)
	s := newStore(t, c)
	ctx := context.Background()
	open, full := policy("open", algo.GCRA, "5/hour"), policy("full", algo.GCRA, "1/hour")
	takes := []store.Take{{Key: "alice", Policy: open, Cost: 1}, {Key: "bob", Policy: full, Cost: 1}}
	res := make([]store.Result, 2)
	for i := range 4 {
		ok, err := s.TakeAll(ctx, takes, res)
		if err != nil || ok != (i == 0) {
			t.Fatalf("request %d: %v, %v", i, ok, err)
		}
		if got := stackCalls(rec.take()); total(got) != 1 {
			t.Fatalf("request %d: %d stack calls, want 1", i, total(got))
		}
	}
	if !res[0].Allowed || res[0].Remaining != 4 || res[0].RetryAfter != 0 || res[1].Allowed || res[1].RetryAfter <= 0 {
		t.Fatalf("refused from the cache: %+v, %+v; want the other take as it stands (4 left), the denial cached", res[0], res[1])
	}
	if ok, err := s.TakeAll(ctx, takes[1:], res); err != nil || ok || len(rec.take()) != 0 {
		t.Fatalf("TakeAll of the denied take alone: %v, %v; want denied from the cache, no call", ok, err)
	}
	if r, err := s.Take(ctx, "bob", full, 1); err != nil || r.Allowed || len(rec.take()) != 0 {
		t.Fatalf("Take of the denied key: %+v, %v; want denied from the cache", r, err)
	}
	if r, err := s.Peek(ctx, "alice", open, 0); err != nil || r.Remaining != 4 {
		t.Fatalf("alice has %d left (%v); want 4: only the first request consumed", r.Remaining, err)
	}
	if _, err := s.Reset(ctx, "bob", full); err != nil {
		t.Fatal(err)
	}
	rec.take()
	if ok, err := s.TakeAll(ctx, takes, res); err != nil || !ok || total(stackCalls(rec.take())) != 1 {
		t.Fatalf("after Reset: %v, %v; want admitted by Redis", ok, err)
	}
}

// TestTakeAllIncrExpire: with WithIncrExpireKeys, a take of a one-limit
// fixed window counts where Take counts, in the plain INCR+EXPIRE key.
func TestTakeAllIncrExpire(t *testing.T) {
	t.Parallel()
	c := client(t, redistest.StartServer(t).Addr())
	s := newStore(t, c, redisstore.WithIncrExpireKeys(true), redisstore.WithDenyCache(false))
	ctx := context.Background()
	p, other := policy("search", algo.FixedWindow, "3/hour"), policy("other", algo.GCRA, "10/hour")
	res := make([]store.Result, 2)
	steps := []bool{true, false, true} // Take, TakeAll, Take
	for i, alone := range steps {
		var ok bool
		var err error
		if alone {
			var r store.Result
			r, err = s.Take(ctx, "u", p, 1)
			ok = r.Allowed
		} else {
			ok, err = s.TakeAll(ctx, []store.Take{{Key: "u", Policy: p, Cost: 1}, {Key: "u", Policy: other, Cost: 1}}, res)
		}
		if err != nil || !ok {
			t.Fatalf("step %d: %v, %v", i, ok, err)
		}
	}
	if ok, err := s.TakeAll(ctx, []store.Take{{Key: "u", Policy: p, Cost: 1}}, res); err != nil || ok {
		t.Fatalf("fourth request: %v, %v; want denied (3 counted)", ok, err)
	}
	keys, err := c.Keys(ctx, "rl:{u}:search:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v, %v; want the one plain key", keys, err)
	}
	if v, err := c.Get(ctx, keys[0]).Result(); err != nil || v != "3" {
		t.Fatalf("%s holds %q (%v); want 3", keys[0], v, err)
	}
}

// TestTakeAllErrors: bad calls fail with store.ErrBadPolicy, a closed
// store with ErrClosed, and a take that meets an error in Redis fails
// the call without consuming the others.
func TestTakeAllErrors(t *testing.T) {
	t.Parallel()
	c := client(t, redistest.StartServer(t).Addr())
	s := newStore(t, c, redisstore.WithDenyCache(false))
	ctx := context.Background()
	p := policy("p", algo.SlidingWindow, "5/hour")
	tk := store.Take{Key: "u", Policy: p, Cost: 1}
	many := make([]store.Take, store.MaxTakes+1)
	for i := range many {
		many[i] = tk
	}
	bad := &store.Policy{Name: "bad", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 5, Period: time.Nanosecond * 1500}}}
	for _, tc := range []struct {
		name    string
		takes   []store.Take
		results int
	}{
		{"none", nil, 1},
		{"too many", many, len(many)},
		{"too few results", []store.Take{tk, tk}, 1},
		{"no policy", []store.Take{tk, {Key: "u", Cost: 1}}, 2},
		{"bad policy", []store.Take{tk, {Key: "u", Policy: bad, Cost: 1}}, 2},
	} {
		if _, err := s.TakeAll(ctx, tc.takes, make([]store.Result, tc.results)); !errors.Is(err, store.ErrBadPolicy) {
			t.Errorf("%s: %v; want ErrBadPolicy", tc.name, err)
		}
	}
	// The second take's key is not a string: its script fails there and
	// gives the first take back.
	other := policy("q", algo.TokenBucket, "5/hour")
	wrong := store.Take{Key: "w", Policy: other, Cost: 1}
	if err := c.LPush(ctx, wrongKey(t, s, c, wrong), "x").Err(); err != nil {
		t.Fatal(err)
	}
	_, err := s.TakeAll(ctx, []store.Take{tk, wrong}, make([]store.Result, 2))
	if ne, ok := errors.AsType[*redisstore.NodeError](err); !ok || store.ErrorKind(err) != "redis" {
		t.Fatalf("take of a key of another type: %v (%v); want a NodeError of kind redis", err, ne)
	}
	if r, err := s.Peek(ctx, "u", p, 0); err != nil || r.Remaining != 5 {
		t.Fatalf("the first take's key has %d left (%v); want 5: given back", r.Remaining, err)
	}
	st := newStore(t, c)
	_ = st.Close()
	if _, err := st.TakeAll(ctx, []store.Take{tk}, make([]store.Result, 1)); !errors.Is(err, redisstore.ErrClosed) {
		t.Fatalf("closed store: %v", err)
	}
}

// wrongKey returns the key a Take of tk writes: the one key of the new
// keys a Take creates.
func wrongKey(t *testing.T, s *redisstore.Store, c *redis.Client, tk store.Take) string {
	t.Helper()
	ctx := context.Background()
	before, err := c.Keys(ctx, "rl:{"+tk.Key+"}:*").Result()
	if err != nil || len(before) != 0 {
		t.Fatalf("keys %v, %v", before, err)
	}
	if _, err := s.Take(ctx, tk.Key, tk.Policy, 1); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(ctx, "rl:{"+tk.Key+"}:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("keys %v, %v", keys, err)
	}
	if err := c.Del(ctx, keys[0]).Err(); err != nil {
		t.Fatal(err)
	}
	return keys[0]
}

// TestTakeAllNodeStopped: while one of two Cluster nodes is stopped
// (SIGSTOP), every request of takes on both fails within the store's
// timeout, and the other node gives back each take it admitted: nothing
// is admitted, nothing stays consumed there; once the stopped node's
// circuit is open, a request fails without a call. A take that its node
// denies refuses a request, with no error, whatever the stopped node's.
// Once the node is back, its key holds at most what the failed calls
// took (applied once it woke), and the requests admit exactly what is
// left of both.
func TestTakeAllNodeStopped(t *testing.T) {
	t.Parallel()
	cl, cc, rec, same, others := stackCluster(t)
	ctx := context.Background()
	s := newStore(t, cc, redisstore.WithTimeout(300*time.Millisecond), redisstore.WithDenyCache(false),
		redisstore.WithBreaker(5, 3*time.Second))
	pa, pb := policy("a", algo.GCRA, "5/hour"), policy("b", algo.GCRA, "5/hour")
	takes := []store.Take{{Key: same[0], Policy: pa, Cost: 1}, {Key: others[0], Policy: pb, Cost: 1}}
	res := make([]store.Result, 2)
	if ok, err := s.TakeAll(ctx, takes, res); err != nil || !ok {
		t.Fatalf("warm-up: %v, %v", ok, err)
	}
	m, err := cc.MasterForKey(ctx, "{"+others[0]+"}")
	if err != nil {
		t.Fatal(err)
	}
	var stopped *redistest.Server
	for _, n := range cl.Nodes() {
		if n.Addr() == m.Options().Addr {
			stopped = n
		}
	}
	stopped.Pause()
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			stopped.Resume()
		}
	})
	// A take that its node denies denies the request, whatever the
	// stopped node's: the request is refused, not failed.
	pfull := policy("full", algo.GCRA, "1/hour")
	if r, err := s.Take(ctx, same[0], pfull, 1); err != nil || !r.Allowed {
		t.Fatalf("%+v, %v", r, err)
	}
	ok, err := s.TakeAll(ctx, []store.Take{{Key: same[0], Policy: pfull, Cost: 1}, takes[1]}, res)
	if err != nil || ok || res[0].Allowed || res[0].RetryAfter <= 0 || !res[1].Allowed || res[1].Remaining != 5 {
		t.Fatalf("a denial while the other node is stopped: %v, %v, %+v, %+v; want refused, the stopped node's take unread", ok, err, res[0], res[1])
	}
	for i := range 8 {
		ok, err := s.TakeAll(ctx, takes, res)
		ne, isNode := errors.AsType[*redisstore.NodeError](err)
		if ok || !isNode || ne.Node != stopped.Addr() {
			t.Fatalf("request %d with a node stopped: %v, %v; want a NodeError of %s", i, ok, err, stopped.Addr())
		}
	}
	// The stopped node's circuit is open: a request fails at once, with
	// no call to the running node either.
	rec.take()
	if _, err := s.TakeAll(ctx, takes, res); !errors.Is(err, redisstore.ErrCircuitOpen) || total(stackCalls(rec.take())) != 0 {
		t.Fatalf("with the circuit open: %v; want ErrCircuitOpen and no call", err)
	}
	if r, err := s.Peek(ctx, same[0], pa, 0); err != nil || r.Remaining != 4 {
		t.Fatalf("the running node's key has %d left (%v); want 4: every take given back", r.Remaining, err)
	}
	stopped.Resume()
	resumed = true
	var left int64
	for deadline := time.Now().Add(10 * time.Second); ; {
		r, err := s.Peek(ctx, others[0], pb, 0)
		if err == nil {
			left = r.Remaining
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node does not answer after it resumed: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if left > 4 {
		t.Fatalf("the stopped node's key has %d left; want at most 4", left)
	}
	admitted := int64(0)
	for range 6 {
		if ok, err := s.TakeAll(ctx, takes, res); err == nil && ok {
			admitted++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if admitted != left {
		t.Fatalf("admitted %d after the node resumed; want exactly the %d its key had left", admitted, left)
	}
}

// TestTakeAllConcurrent: 64 goroutines send requests of two takes each, a
// shared limit of 20 and one of two limits (10, 15), on one server and
// across three Cluster nodes: exactly 20 are admitted, each take's key
// consumed by exactly its admitted requests. On the Cluster a request
// may be refused while another's takes are held, to be given back: the
// requests then go on, one by one, until every one is denied.
func TestTakeAllConcurrent(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	cl := redistest.StartCluster(t)
	cc := clusterClient(t, cl)
	same, others := clusterUsers(t, cc)
	ctx := context.Background()
	for _, target := range []string{"redis-server", "cluster"} {
		for _, a := range algorithms {
			t.Run(fmt.Sprintf("%s/%v", target, a), func(t *testing.T) {
				var s *redisstore.Store
				users := [3]string{"g", "g", "g"}
				if target == "cluster" {
					s = newStore(t, cc, redisstore.WithDenyCache(false))
					users = [3]string{same[0], others[0], others[1]}
				} else {
					s = newStore(t, client(t, srv.Addr()), redisstore.WithDenyCache(false))
				}
				run := fmt.Sprint(time.Now().UnixNano())
				shared := policy("shared"+run, a, "20/hour")
				routes := [2]*store.Policy{policy("r1"+run, a, "10/hour"), policy("r2"+run, a, "15/hour")}
				var admitted [2]atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				request := func(r int) (bool, error) {
					res := make([]store.Result, 2)
					return s.TakeAll(ctx, []store.Take{{Key: users[0], Policy: shared, Cost: 1}, {Key: users[1+r], Policy: routes[r], Cost: 1}}, res)
				}
				for g := range 64 {
					wg.Go(func() {
						<-start
						for i := range 2 {
							ok, err := request((g + i) % 2)
							if err != nil {
								t.Error(err)
							}
							if ok {
								admitted[(g+i)%2].Add(1)
							}
						}
					})
				}
				close(start)
				wg.Wait()
				// Then one by one, twice: a bucket's give-back with takes
				// between holds back the time it was held (a round trip).
				for range 2 {
					for more := true; more; {
						more = false
						for r := range 2 {
							ok, err := request(r)
							if err != nil {
								t.Fatal(err)
							}
							if ok {
								admitted[r].Add(1)
								more = true
							}
						}
					}
					time.Sleep(100 * time.Millisecond)
				}
				if n := admitted[0].Load() + admitted[1].Load(); n != 20 || admitted[0].Load() > 10 || admitted[1].Load() > 15 {
					t.Fatalf("admitted %d + %d; want 20 in all, at most 10 and 15", admitted[0].Load(), admitted[1].Load())
				}
				if res, err := s.Peek(ctx, users[0], shared, 0); err != nil || res.Remaining != 0 {
					t.Fatalf("the shared limit has %d left (%v); want 0", res.Remaining, err)
				}
				for r, p := range routes {
					if res, err := s.Peek(ctx, users[1+r], p, 0); err != nil || res.Remaining != p.Limits[0].Count-admitted[r].Load() {
						t.Fatalf("route %d has %d left (%v); want %d", r, res.Remaining, err, p.Limits[0].Count-admitted[r].Load())
					}
				}
			})
		}
	}
}

// TestTakeAllSplit: a Cluster node that refuses the stack script of
// several hash slots (a server older than Redis 7.0) gets one call per
// hash slot, with the give-back between them; the store then stops
// sending it (and stops batching).
func TestTakeAllSplit(t *testing.T) {
	t.Parallel()
	_, cc, rec, same, _ := stackCluster(t, refuseCross{})
	s := newStore(t, cc, redisstore.WithDenyCache(false))
	ctx := context.Background()
	p, q := policy("p", algo.FixedWindow, "2/hour"), policy("q", algo.GCRA, "1/hour")
	takes := []store.Take{{Key: same[0], Policy: p, Cost: 1}, {Key: same[1], Policy: q, Cost: 1}}
	res := make([]store.Result, 2)
	rec.take()
	for i, want := range []int{3, 3} { // the refused call, then one per slot; then a denial and a give-back
		ok, err := s.TakeAll(ctx, takes, res)
		if err != nil || ok != (i == 0) {
			t.Fatalf("request %d: %v, %v", i, ok, err)
		}
		if got := rec.take(); total(stackCalls(got)) != want {
			t.Fatalf("request %d: %d stack calls, want %d", i, total(stackCalls(got)), want)
		}
	}
	if redisstore.Batching(s) {
		t.Fatal("the store still batches")
	}
	if r, err := s.Peek(ctx, same[0], p, 0); err != nil || r.Remaining != 1 {
		t.Fatalf("%s has %d left (%v); want 1: the denial gave its take back", same[0], r.Remaining, err)
	}
}

// refuseCross answers the stack script of several hash slots as a server
// older than Redis 7.0 answers its shebang.
type refuseCross struct{}

func (refuseCross) DialHook(next redis.DialHook) redis.DialHook { return next }
func (refuseCross) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (refuseCross) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if args := cmd.Args(); len(args) > 1 && args[1] == redisstore.StackSHAs[1] {
			err := redisErr("ERR Unexpected flag in script shebang: allow-cross-slot-keys")
			cmd.SetErr(err)
			return err
		}
		return next(ctx, cmd)
	}
}

// TestTakeAllDenyCacheCluster: on a Cluster, a denial learned on one
// master after another admitted (and gave back) is cached, so that the
// refused caller costs no round trip, but for at most 250ms: takes held
// by another process may have caused it.
func TestTakeAllDenyCacheCluster(t *testing.T) {
	t.Parallel()
	_, cc, rec, _, others := stackCluster(t)
	s := newStore(t, cc)
	ctx := context.Background()
	run := fmt.Sprint(time.Now().UnixNano())
	// GCRA: a wait of the period whatever the clock, where a window's
	// would end at the next hour.
	open, full := policy("open"+run, algo.GCRA, "5/hour"), policy("full"+run, algo.GCRA, "1/hour")
	takes := []store.Take{{Key: others[0], Policy: open, Cost: 1}, {Key: others[1], Policy: full, Cost: 1}}
	res := make([]store.Result, 2)
	if ok, err := s.TakeAll(ctx, takes, res); err != nil || !ok {
		t.Fatalf("first: %v, %v", ok, err)
	}
	rec.take()
	// Refused by the second master: the first gives back, and the denial
	// is cached.
	if ok, err := s.TakeAll(ctx, takes, res); err != nil || ok || res[1].Allowed || res[1].RetryAfter < time.Minute {
		t.Fatalf("second: %v, %v, %+v; want refused by full", ok, err, res[1])
	}
	rec.take()
	if ok, err := s.TakeAll(ctx, takes, res); err != nil || ok || total(stackCalls(rec.take())) != 1 {
		t.Fatalf("third: %v, %v; want refused from the cache (one read at cost 0 of the other take)", ok, err)
	}
	if r, err := s.Peek(ctx, others[0], open, 0); err != nil || r.Remaining != 4 {
		t.Fatalf("open has %d left (%v); want 4: the refused requests took nothing", r.Remaining, err)
	}
	// Past 250ms the denial is asked again.
	time.Sleep(300 * time.Millisecond)
	rec.take()
	if ok, err := s.TakeAll(ctx, takes, res); err != nil || ok {
		t.Fatalf("after 300ms: %v, %v", ok, err)
	}
	if n := total(stackCalls(rec.take())); n < 2 {
		t.Fatalf("after 300ms: %d stack calls, want the take and its give-back (the denial no longer cached)", n)
	}
}
