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

// sent is one EVALSHA or EVAL a client sent.
type sent struct {
	node string
	sha  string // the EVALSHA's SHA-1; "" for an EVAL
	keys []string
}

// recorder records the scripts calls of one or more clients and holds the
// first hold EVALSHA of each node until open is closed (or the call's
// context ends): the calls in flight while the test queues decisions
// behind them. fail, when set, answers a batch instead of the server.
type recorder struct {
	mu   sync.Mutex
	sent []sent
	held map[string]int
	hold int
	open chan struct{}
	fail error
	// stubborn: held calls wait for open even past their context's end.
	stubborn bool
}

func newRecorder(hold int) *recorder {
	r := &recorder{held: map[string]int{}, hold: hold, open: make(chan struct{})}
	if hold == 0 {
		close(r.open)
	}
	return r
}

// hook returns the hook of the client of node.
func (r *recorder) hook(node string) redis.Hook { return recHook{r, node} }

type recHook struct {
	r    *recorder
	node string
}

func (h recHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h recHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (h recHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		name := cmd.Name()
		if name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		args := cmd.Args()
		s := sent{node: h.node}
		if name == "evalsha" {
			s.sha = args[1].(string)
		}
		nk := int(args[2].(int64))
		if s.sha == redisstore.BatchSHA {
			// ARGV: per decision, algorithm, m, key, m arguments.
			for a := args[3+nk:]; len(a) > 0; a = a[3+int(a[1].(int64)):] {
				s.keys = append(s.keys, a[2].(string))
			}
		} else {
			for _, k := range args[3 : 3+nk] {
				s.keys = append(s.keys, k.(string))
			}
		}
		r := h.r
		r.mu.Lock()
		r.sent = append(r.sent, s)
		wait := name == "evalsha" && r.held[h.node] < r.hold
		if wait {
			r.held[h.node]++
		}
		fail, stubborn := r.fail, r.stubborn
		r.mu.Unlock()
		if wait && stubborn {
			<-r.open
		} else if wait {
			select {
			case <-r.open:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		if fail != nil && s.sha == redisstore.BatchSHA {
			cmd.SetErr(fail)
			return fail
		}
		return next(ctx, cmd)
	}
}

// take returns what was sent since the last call.
func (r *recorder) take() []sent {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.sent
	r.sent = nil
	return s
}

// batches returns the batch calls among s.
func batches(s []sent) []sent {
	var out []sent
	for _, x := range s {
		if x.sha == redisstore.BatchSHA {
			out = append(out, x)
		}
	}
	return out
}

// waitQueued waits until n decisions wait in s's queues.
func waitQueued(t *testing.T, s *redisstore.Store, n int) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for redisstore.Queued(s) != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d decisions queued, want %d", redisstore.Queued(s), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// loadScripts loads every script of the store into c, so that no call
// meets NOSCRIPT.
func loadScripts(t *testing.T, c redis.UniversalClient) {
	t.Helper()
	ctx := context.Background()
	load := func(ctx context.Context, c *redis.Client) error {
		for _, src := range redisstore.ScriptSources() {
			if err := c.ScriptLoad(ctx, src).Err(); err != nil {
				return err
			}
		}
		return nil
	}
	var err error
	switch c := c.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(ctx, load)
	case *redis.Client:
		err = load(ctx, c)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// recordedClient returns a client of addr whose scripts r records.
func recordedClient(t *testing.T, addr string, r *recorder) *redis.Client {
	c := client(t, addr)
	loadScripts(t, c)
	c.AddHook(r.hook(addr))
	return c
}

// TestBatchForms: while the store's lanes to a node are in flight, the
// decisions that arrive queue, and go out in batches of at most the
// configured size, each decision applied once.
func TestBatchForms(t *testing.T) {
	t.Parallel()
	rec := newRecorder(redisstore.Lanes())
	c := recordedClient(t, redistest.StartServer(t).Addr(), rec)
	s := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithBatch(16))
	p := policy("forms", algo.GCRA, "1/hour")
	ctx := context.Background()
	const n = 64
	var wg sync.WaitGroup
	results := make([]store.Result, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() { results[i], errs[i] = s.Take(ctx, fmt.Sprint("u", i), p, 1) })
	}
	queued := n - redisstore.Lanes()
	waitQueued(t, s, queued)
	close(rec.open)
	wg.Wait()
	for i := range n {
		if errs[i] != nil || !results[i].Allowed || results[i].Remaining != 0 {
			t.Fatalf("decision %d: %+v, %v; want allowed, 0 left", i, results[i], errs[i])
		}
	}
	got := rec.take()
	bs := batches(got)
	want := redisstore.Lanes() + (queued+15)/16
	if len(got) != want || len(bs) != (queued+15)/16 {
		t.Fatalf("%d decisions sent %d calls (%d batches), want %d calls: %d alone, then the %d queued in batches of at most 16",
			n, len(got), len(bs), want, redisstore.Lanes(), queued)
	}
	seen := map[string]bool{}
	for _, b := range bs {
		if len(b.keys) > 16 {
			t.Fatalf("a batch of %d decisions, want at most 16", len(b.keys))
		}
		for _, k := range b.keys {
			seen[k] = true
		}
	}
	if len(seen) != queued {
		t.Fatalf("the batches carried %d distinct keys, want the %d queued", len(seen), queued)
	}
	// Each decision was applied exactly once: every key is now over its limit.
	for i := range n {
		if r, err := s.Take(ctx, fmt.Sprint("u", i), p, 1); err != nil || r.Allowed {
			t.Fatalf("second take of u%d: %+v, %v; want denied", i, r, err)
		}
	}
}

// TestBatchIdle: a decision that finds no call in flight goes out at once,
// alone, as the decision script: one command, no batch.
func TestBatchIdle(t *testing.T) {
	t.Parallel()
	rec := newRecorder(0)
	c := recordedClient(t, redistest.StartServer(t).Addr(), rec)
	s := newStore(t, c, redisstore.WithDenyCache(false))
	p := policy("idle", algo.SlidingWindow, "5/hour", "10/day")
	for i := range 5 {
		if r, err := s.Take(context.Background(), "u", p, 1); err != nil || !r.Allowed || r.Remaining != 4-int64(i) {
			t.Fatalf("take %d: %+v, %v", i, r, err)
		}
		got := rec.take()
		if len(got) != 1 || got[0].sha == redisstore.BatchSHA || got[0].sha == "" || redisstore.Queued(s) != 0 {
			t.Fatalf("take %d sent %+v, want one EVALSHA of the decision script", i, got)
		}
	}
}

// TestBatchCancel: a queued decision whose caller's context ends returns
// at once with the context's error, and is never sent; one whose store
// timeout passes while queued returns a timeout.
func TestBatchCancel(t *testing.T) {
	t.Parallel()
	rec := newRecorder(redisstore.Lanes())
	c := recordedClient(t, redistest.StartServer(t).Addr(), rec)
	s := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithBreaker(0, time.Second))
	p := policy("cancel", algo.FixedWindow, "1/hour")
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range redisstore.Lanes() {
		wg.Go(func() {
			if r, err := s.Take(ctx, fmt.Sprint("lane", i), p, 1); err != nil || !r.Allowed {
				t.Errorf("lane %d: %+v, %v", i, r, err)
			}
		})
	}
	waitQueued(t, s, 0)
	for rec.heldCount() < redisstore.Lanes() {
		time.Sleep(time.Millisecond)
	}
	cctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := s.Take(cctx, "cancelled", p, 1)
		done <- err
	}()
	waitQueued(t, s, 1)
	cancel()
	err := <-done // while the lanes are still held: it did not wait for them
	var ne *redisstore.NodeError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &ne) || store.ErrorKind(err) != "canceled" {
		t.Fatalf("cancelled while queued: %v (kind %q); want a NodeError wrapping context.Canceled", err, store.ErrorKind(err))
	}
	// A caller's deadline ends its wait too.
	dctx, dcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer dcancel()
	if _, err := s.Take(dctx, "deadline", p, 1); !errors.Is(err, context.DeadlineExceeded) || store.ErrorKind(err) != "timeout" {
		t.Fatalf("deadline while queued: %v (kind %q); want a timeout", err, store.ErrorKind(err))
	}
	close(rec.open)
	wg.Wait()
	if got := batches(rec.take()); len(got) != 0 {
		t.Fatalf("sent batches %+v; the decisions that gave up must not be sent", got)
	}
	for _, k := range []string{"cancelled", "deadline"} {
		if r, err := s.Take(ctx, k, p, 1); err != nil || !r.Allowed || r.Remaining != 0 {
			t.Fatalf("%s after giving up: %+v, %v; want the whole quota (allowed, 0 left)", k, r, err)
		}
	}
}

func (r *recorder) heldCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, h := range r.held {
		n += h
	}
	return n
}

// TestBatchStoreTimeout: a decision queued past the store's timeout
// returns a timeout NodeError, though the calls ahead of it have not
// returned.
func TestBatchStoreTimeout(t *testing.T) {
	t.Parallel()
	rec := newRecorder(redisstore.Lanes())
	rec.stubborn = true
	c := recordedClient(t, redistest.StartServer(t).Addr(), rec)
	s := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithTimeout(200*time.Millisecond), redisstore.WithBreaker(0, time.Second))
	p := policy("timeout", algo.FixedWindow, "1/hour")
	ctx := context.Background()
	var wg sync.WaitGroup
	for i := range redisstore.Lanes() {
		wg.Go(func() { _, _ = s.Take(ctx, fmt.Sprint("lane", i), p, 1) })
	}
	for rec.heldCount() < redisstore.Lanes() {
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	done := make(chan error, 1)
	go func() {
		_, err := s.Take(ctx, "queued", p, 1)
		done <- err
	}()
	var err error
	select {
	case err = <-done:
	case <-time.After(30 * time.Second):
		close(rec.open)
		t.Fatal("a decision queued behind calls that do not return waited past the store's timeout")
	}
	var ne *redisstore.NodeError
	if !errors.As(err, &ne) || !errors.Is(err, context.DeadlineExceeded) || store.ErrorKind(err) != "timeout" {
		t.Fatalf("queued past the timeout: %v (kind %q); want a timeout NodeError", err, store.ErrorKind(err))
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("queued call returned after %v, want about the 200ms timeout", d)
	}
	close(rec.open)
	wg.Wait()
}

// TestBatchMixed: one batch carries decisions of every algorithm, of one
// limit and of several, Takes and Peeks, and two decisions on one key;
// each is answered as it would be alone.
func TestBatchMixed(t *testing.T) {
	t.Parallel()
	rec := newRecorder(redisstore.Lanes())
	c := recordedClient(t, redistest.StartServer(t).Addr(), rec)
	s := newStore(t, c, redisstore.WithDenyCache(false))
	ctx := context.Background()
	type call struct {
		key  string
		p    *store.Policy
		peek bool
		cost int64
	}
	var calls []call
	for _, a := range algorithms {
		for _, limits := range [][]string{{"3/minute"}, {"3/minute", "10/hour", "20/day"}} {
			p := policy(fmt.Sprintf("mixed-%v-%d", a, len(limits)), a, limits...)
			calls = append(calls,
				call{key: "take", p: p, cost: 2},
				call{key: "peek", p: p, peek: true, cost: 3},
				call{key: "over", p: p, cost: 4},
				call{key: "pair", p: p, cost: 2},
				call{key: "pair", p: p, cost: 2})
		}
	}
	var wg sync.WaitGroup
	for i := range redisstore.Lanes() {
		wg.Go(func() { _, _ = s.Take(ctx, fmt.Sprint("lane", i), policy("lane", algo.GCRA, "9/hour"), 1) })
	}
	for rec.heldCount() < redisstore.Lanes() {
		time.Sleep(time.Millisecond)
	}
	results := make([]store.Result, len(calls))
	errs := make([]error, len(calls))
	for i, cl := range calls {
		wg.Go(func() {
			if cl.peek {
				results[i], errs[i] = s.Peek(ctx, cl.key, cl.p, cl.cost)
			} else {
				results[i], errs[i] = s.Take(ctx, cl.key, cl.p, cl.cost)
			}
		})
	}
	waitQueued(t, s, len(calls))
	close(rec.open)
	wg.Wait()
	if bs := batches(rec.take()); len(bs) != 1 || len(bs[0].keys) != len(calls) {
		t.Fatalf("sent %d batches, want one of the %d decisions", len(bs), len(calls))
	}
	for i := 0; i < len(calls); i += 5 {
		p := calls[i].p
		check := func(j int, allowed bool, remaining int64) {
			t.Helper()
			if errs[j] != nil || results[j].Allowed != allowed || results[j].Remaining != remaining || results[j].Limit != p.Limits[0] {
				t.Fatalf("%s %s cost %d: %+v, %v; want allowed %v, %d left", p.Name, calls[j].key, calls[j].cost, results[j], errs[j], allowed, remaining)
			}
		}
		check(i, true, 1)    // take 2 of 3
		check(i+1, true, 0)  // peek 3 of 3
		check(i+2, false, 3) // 4 of 3: never admitted, nothing taken
		// Of two takes of 2 on one key, exactly one is admitted.
		if a, b := results[i+3], results[i+4]; errs[i+3] != nil || errs[i+4] != nil || a.Allowed == b.Allowed || a.Remaining+b.Remaining != 1+1 {
			t.Fatalf("%s pair: %+v %v, %+v %v; want one admitted (1 left) and one denied (1 left)", p.Name, a, errs[i+3], b, errs[i+4])
		}
		// The peek and the denial took nothing: the key has its whole quota.
		for _, k := range []string{"peek", "over"} {
			if r, err := s.Peek(ctx, k, p, 3); err != nil || !r.Allowed || r.Remaining != 0 {
				t.Fatalf("%s %s after the batch: %+v, %v; want its whole quota", p.Name, k, r, err)
			}
		}
	}
}

// TestBatchCluster: decisions on keys of all three masters queue per
// master and go out as one batch per master, whose keys (of several hash
// slots) all belong to it; each decision is applied once.
func TestBatchCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t)
	rec := newRecorder(redisstore.Lanes())
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	cc.OnNewNode(func(c *redis.Client) { c.AddHook(rec.hook(c.Options().Addr)) })
	loadScripts(t, cc)
	s := newStore(t, cc, redisstore.WithDenyCache(false))
	p := policy("cluster", algo.TokenBucket, "1/hour")
	ctx := context.Background()
	// Lanes keys on each master hold its lanes; then the others queue.
	perNode := map[string][]string{}
	for i := 0; len(perNode) < 3 || minLen(perNode) < 20; i++ {
		k := fmt.Sprint("user", i)
		m, err := cc.MasterForKey(ctx, "rl:{"+k+"}:x")
		if err != nil {
			t.Fatal(err)
		}
		perNode[m.Options().Addr] = append(perNode[m.Options().Addr], k)
	}
	var wg sync.WaitGroup
	var users []string
	for _, ks := range perNode {
		for _, k := range ks[:redisstore.Lanes()] {
			wg.Go(func() {
				if r, err := s.Take(ctx, k, p, 1); err != nil || !r.Allowed {
					t.Errorf("%s: %+v, %v", k, r, err)
				}
			})
		}
		users = append(users, ks[redisstore.Lanes():20]...)
	}
	for rec.heldCount() < 3*redisstore.Lanes() {
		time.Sleep(time.Millisecond)
	}
	var failed atomic.Int64
	for _, k := range users {
		wg.Go(func() {
			if r, err := s.Take(ctx, k, p, 1); err != nil || !r.Allowed {
				t.Errorf("%s: %+v, %v", k, r, err)
				failed.Add(1)
			}
		})
	}
	waitQueued(t, s, len(users))
	close(rec.open)
	wg.Wait()
	all := rec.take()
	bs := batches(all)
	if len(all) != 3*redisstore.Lanes()+len(bs) {
		t.Fatalf("sent %d script calls, %d of them batches; want only the %d held in flight and the batches", len(all), len(bs), 3*redisstore.Lanes())
	}
	nodes := map[string]bool{}
	for _, b := range bs {
		slots := map[int64]bool{}
		for _, k := range b.keys {
			m, err := cc.MasterForKey(ctx, k)
			if err != nil || m.Options().Addr != b.node {
				t.Fatalf("a batch to %s carries %s, of master %v (%v)", b.node, k, m.Options().Addr, err)
			}
			slots[slotOf(t, cc, k)] = true
		}
		if len(slots) < 2 {
			t.Fatalf("a batch to %s of %d keys spans %d hash slot; want several", b.node, len(b.keys), len(slots))
		}
		nodes[b.node] = true
	}
	if len(bs) != 3 || len(nodes) != 3 {
		t.Fatalf("sent %d batches to %d masters, want one to each of the 3", len(bs), len(nodes))
	}
	for _, k := range users {
		if r, err := s.Take(ctx, k, p, 1); err != nil || r.Allowed {
			t.Fatalf("second take of %s: %+v, %v; want denied", k, r, err)
		}
	}
}

func minLen(m map[string][]string) int {
	n := -1
	for _, v := range m {
		if n < 0 || len(v) < n {
			n = len(v)
		}
	}
	return n
}

func slotOf(t *testing.T, cc *redis.ClusterClient, key string) int64 {
	n, err := cc.ClusterKeySlot(context.Background(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// redisErr is an error reply, as go-redis returns it.
type redisErr string

func (e redisErr) Error() string { return string(e) }
func (redisErr) RedisError()     {}

// TestBatchFallback: a batch the server refuses is sent again decision by
// decision. A redirection (slots moving) keeps batching on; a server that
// does not know the batch script's shebang flag turns it off.
func TestBatchFallback(t *testing.T) {
	t.Parallel()
	addr := redistest.StartServer(t).Addr()
	for _, tc := range []struct {
		err   error
		keeps bool
	}{
		{redisErr("MOVED 3999 127.0.0.1:6381"), true},
		{redisErr("ERR Unexpected flag in script shebang: allow-cross-slot-keys"), false},
		{redisErr("ERR Error compiling script (new function): user_script:1: unexpected symbol near '#'"), false},
	} {
		t.Run(tc.err.Error()[:5], func(t *testing.T) {
			rec := newRecorder(redisstore.Lanes())
			rec.fail = tc.err
			c := recordedClient(t, addr, rec)
			s := newStore(t, c, redisstore.WithDenyCache(false))
			p := policy("fallback-"+t.Name(), algo.FixedWindow, "1/hour", "5/day")
			ctx := context.Background()
			var wg sync.WaitGroup
			const n = 12
			var admitted atomic.Int64
			for i := range n {
				wg.Go(func() {
					r, err := s.Take(ctx, fmt.Sprint("k", i%(n/2)), p, 1)
					if err != nil {
						t.Errorf("take %d: %v", i, err)
					}
					if r.Allowed {
						admitted.Add(1)
					}
				})
			}
			waitQueued(t, s, n-redisstore.Lanes())
			close(rec.open)
			wg.Wait()
			if admitted.Load() != n/2 {
				t.Fatalf("admitted %d of %d takes on %d keys of limit 1, want %d", admitted.Load(), n, n/2, n/2)
			}
			got := rec.take()
			if bs := batches(got); len(bs) != 1 || len(got) != n+1 {
				t.Fatalf("sent %d calls, %d batches; want the refused batch, then each decision alone (%d)", len(got), len(bs), n+1)
			}
			if redisstore.Batching(s) != tc.keeps {
				t.Fatalf("batching on: %v, want %v", redisstore.Batching(s), tc.keeps)
			}
		})
	}
}

// TestBatchShared: four stores with their own clients, 256 goroutines over
// eight users of one policy, every algorithm, on one server and on a
// Cluster: each user admits exactly its limit, and batches formed.
func TestBatchShared(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	cl := redistest.StartCluster(t)
	for _, target := range []string{"redis-server", "cluster"} {
		for _, a := range algorithms {
			t.Run(fmt.Sprintf("%s/%v", target, a), func(t *testing.T) {
				const users, limit = 8, 40
				rec := newRecorder(0)
				var stores [4]*redisstore.Store
				for i := range stores {
					var c redis.UniversalClient
					if target == "cluster" {
						cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
						t.Cleanup(func() { _ = cc.Close() })
						cc.OnNewNode(func(c *redis.Client) { c.AddHook(rec.hook(c.Options().Addr)) })
						c = cc
					} else {
						c = recordedClient(t, srv.Addr(), rec)
					}
					stores[i] = newStore(t, c, redisstore.WithDenyCache(false))
				}
				p := policy(fmt.Sprintf("shared-%d", time.Now().UnixNano()), a, fmt.Sprintf("%d/hour", limit), "1000/day")
				var admitted [users]atomic.Int64
				var failed atomic.Int64
				var wg sync.WaitGroup
				start := make(chan struct{})
				for g := range 256 {
					wg.Go(func() {
						<-start
						for i := range 4 {
							u := (g + i) % users
							r, err := stores[g%4].Take(context.Background(), fmt.Sprint("u", u), p, 1)
							switch {
							case err != nil:
								failed.Add(1)
							case r.Allowed:
								admitted[u].Add(1)
							}
						}
					})
				}
				close(start)
				wg.Wait()
				for u := range users {
					if admitted[u].Load() != limit || failed.Load() != 0 {
						t.Fatalf("user %d: admitted %d, failed %d; want exactly %d", u, admitted[u].Load(), failed.Load(), limit)
					}
				}
				if len(batches(rec.take())) == 0 {
					t.Fatal("1,024 decisions from 256 goroutines formed no batch")
				}
			})
		}
	}
}

// TestBatchMiniredis: miniredis does not know script shebangs; the store's
// first batch fails to compile there, is sent again decision by decision,
// and the store stops batching.
func TestBatchMiniredis(t *testing.T) {
	t.Parallel()
	rec := newRecorder(redisstore.Lanes())
	addr := redistest.StartMini(t).Addr()
	c := client(t, addr)
	c.AddHook(rec.hook(addr))
	s := newStore(t, c, redisstore.WithDenyCache(false))
	p := policy("mini", algo.SlidingWindow, "2/hour")
	ctx := context.Background()
	const n = 10
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			r, err := s.Take(ctx, fmt.Sprint("k", i%5), p, 1)
			if err != nil {
				t.Errorf("take %d: %v", i, err)
			}
			if r.Allowed {
				admitted.Add(1)
			}
		})
	}
	waitQueued(t, s, n-redisstore.Lanes())
	close(rec.open)
	wg.Wait()
	if admitted.Load() != n || redisstore.Batching(s) {
		t.Fatalf("admitted %d of %d, batching %v; want all admitted and batching off", admitted.Load(), n, redisstore.Batching(s))
	}
	if bs := batches(rec.take()); len(bs) != 1 {
		t.Fatalf("sent %d batches, want the one refused", len(bs))
	}
}
