package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// gate numbers the script calls (EVALSHA, EVAL) of a client in the order
// they reach it and holds those it has a gate for: call i waits, before
// going to the server, until gate i opens (held), or until its context
// ends, when it fails with the context's error without reaching the server
// (untilDone).
type gate struct {
	mu        sync.Mutex
	n         int
	held      map[int]chan struct{}
	untilDone map[int]bool
	entered   map[int]chan struct{}
	left      map[int]chan struct{}
	once      sync.Once
	// changed counts the held calls whose command's arguments changed
	// while they were held: the call still owns them.
	changed atomic.Int64
}

func newGate(held []int, untilDone []int) *gate {
	g := &gate{held: map[int]chan struct{}{}, untilDone: map[int]bool{}, entered: map[int]chan struct{}{}, left: map[int]chan struct{}{}}
	for _, i := range held {
		g.held[i] = make(chan struct{})
	}
	for _, i := range untilDone {
		g.untilDone[i] = true
	}
	for _, i := range append(held, untilDone...) {
		g.entered[i], g.left[i] = make(chan struct{}), make(chan struct{})
	}
	return g
}

// open lets call i go on.
func (g *gate) open(i int) { close(g.held[i]) }

// openAll lets every held call go on (once).
func (g *gate) openAll() {
	g.once.Do(func() {
		for i, ch := range g.held {
			select {
			case <-ch:
			default:
				g.open(i)
			}
		}
	})
}

// wait waits until call i has entered (or left) the gate.
func (g *gate) wait(t *testing.T, i int, left bool) {
	t.Helper()
	ch := g.entered[i]
	if left {
		ch = g.left[i]
	}
	select {
	case <-ch:
	case <-time.After(20 * time.Second):
		t.Fatalf("script call %d never reached the gate (left: %v)", i, left)
	}
}

func (g *gate) DialHook(next redis.DialHook) redis.DialHook { return next }
func (g *gate) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
func (g *gate) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name != "evalsha" && name != "eval" {
			return next(ctx, cmd)
		}
		g.mu.Lock()
		g.n++
		i := g.n
		g.mu.Unlock()
		if en := g.entered[i]; en != nil {
			close(en)
			defer close(g.left[i])
		}
		if ch := g.held[i]; ch != nil {
			before := fmt.Sprint(cmd.Args()...)
			<-ch
			if fmt.Sprint(cmd.Args()...) != before {
				g.changed.Add(1)
			}
		}
		if g.untilDone[i] {
			<-ctx.Done()
			cmd.SetErr(ctx.Err())
			return ctx.Err()
		}
		return next(ctx, cmd)
	}
}

// TestFaultBatchArgsAfterTimeout: with a client that ignores context
// deadlines (go-redis's default), a call that the store's timeout ends
// goes on in the background with its command's arguments. The sender of
// batches must not reuse those arguments for its next batch: the call
// still running would send the next batch's decisions a second time (and
// -race sees the write). Here batch A is held in the client past its
// timeout; batch B goes out meanwhile; then A's call goes on: its
// command's arguments must be A's still (go-redis writes them when it has
// a connection, and again on a retry), and B's key must be counted once.
func TestFaultBatchArgsAfterTimeout(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := redis.NewClient(&redis.Options{Addr: srv.Addr()}) // ContextTimeoutEnabled: false
	t.Cleanup(func() { _ = c.Close() })
	loadScripts(t, c)
	g := newGate([]int{1, 2, 3}, nil)
	c.AddHook(g)
	s := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithTimeout(2*time.Second), redisstore.WithBreaker(0, time.Second))
	t.Cleanup(g.openAll) // before the store's Close, which waits for the held calls
	p := policy("argsreuse", algo.FixedWindow, "2/hour")
	ctx := context.Background()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer g.openAll()
	for i := range redisstore.Lanes() {
		wg.Go(func() { _, _ = s.Take(ctx, fmt.Sprint("lane", i), p, 1) })
	}
	g.wait(t, 1, false)
	g.wait(t, 2, false)
	errA := make(chan error, 1)
	go func() {
		_, err := s.Take(ctx, "a", p, 1)
		errA <- err
	}()
	waitQueued(t, s, 1)
	g.open(1) // a lane returns and sends A (call 3, held past its timeout)
	g.wait(t, 3, false)
	// B queues later than A, so that the two do not share one deadline (a
	// grain is at most 10ms), and B's call, which goes out when A's timeout
	// frees the lane, has this long to run.
	time.Sleep(500 * time.Millisecond)
	type res struct {
		r   store.Result
		err error
	}
	resB := make(chan res, 1)
	go func() {
		r, err := s.Take(ctx, "b", p, 1)
		resB <- res{r, err}
	}()
	waitQueued(t, s, 1)
	if err := <-errA; store.ErrorKind(err) != "timeout" {
		t.Fatalf("A, held past the timeout: %v (kind %q), want a timeout", err, store.ErrorKind(err))
	}
	// The sender goes on with B (call 4, not held).
	if b := <-resB; b.err != nil || !b.r.Allowed || b.r.Remaining != 1 {
		t.Fatalf("B: %+v, %v; want allowed, 1 left", b.r, b.err)
	}
	g.openAll() // A's call, still running, goes on
	g.wait(t, 3, true)
	wg.Wait()
	if n := g.changed.Load(); n != 0 {
		t.Errorf("the arguments of %d call(s) still running changed under them (reused for the next batch)", n)
	}
	if err := s.Close(); err != nil { // waits for A's call
		t.Fatal(err)
	}
	check := newStore(t, client(t, srv.Addr()))
	if r, err := check.Peek(ctx, "b", p, 1); err != nil || !r.Allowed || r.Remaining != 0 {
		t.Fatalf("B after A's call went on: %+v, %v; want B counted once (a peek allowed, 0 left after it)", r, err)
	}
}

// TestFaultBatchBreakerCallerGaveUp: nothing counts for the breaker after
// the caller's own context ended (WithBreaker), batched or not. A decision
// whose caller's deadline (shorter than the store's timeout) passes while
// its call hangs must not open the circuit for everyone else.
func TestFaultBatchBreakerCallerGaveUp(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	for _, batch := range []int{1, redisstore.DefaultBatch} {
		t.Run(fmt.Sprint("batch", batch), func(t *testing.T) {
			c := client(t, srv.Addr())
			loadScripts(t, c)
			// Batched: calls 1, 2 hold the lanes, call 3 is the batch of
			// the queued decision. Alone: call 1 is the decision.
			held, hang := []int{1, 2}, []int{3}
			if batch == 1 {
				held, hang = nil, []int{1}
			}
			g := newGate(held, hang)
			c.AddHook(g)
			s := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithBatch(batch),
				redisstore.WithTimeout(2*time.Second), redisstore.WithBreaker(1, time.Hour))
			t.Cleanup(g.openAll)
			p := policy("gaveup", algo.GCRA, "5/hour")
			ctx := context.Background()
			var wg sync.WaitGroup
			defer wg.Wait()
			defer g.openAll()
			if batch > 1 {
				for i := range redisstore.Lanes() {
					wg.Go(func() { _, _ = s.Take(ctx, fmt.Sprint("lane", i), p, 1) })
				}
				g.wait(t, 1, false)
				g.wait(t, 2, false)
			}
			dctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			errA := make(chan error, 1)
			go func() {
				_, err := s.Take(dctx, "a", p, 1)
				errA <- err
			}()
			if batch > 1 {
				waitQueued(t, s, 1)
				g.open(1) // lane 1 returns and sends A; lane 2 answers only after A's call
			}
			g.wait(t, hang[0], false)
			if err := <-errA; store.ErrorKind(err) != "timeout" {
				t.Fatalf("A: %v (kind %q), want a timeout", err, store.ErrorKind(err))
			}
			g.wait(t, hang[0], true) // the call ends at the store's timeout
			g.openAll()
			wg.Wait()
			deadline := time.Now().Add(20 * time.Second)
			for !redisstore.Idle(s) {
				if time.Now().After(deadline) {
					t.Fatal("the store's lanes never ended")
				}
				time.Sleep(time.Millisecond)
			}
			if st := s.Stats(); len(st.Nodes) != 1 || st.Nodes[0].Breaker != store.BreakerClosed {
				t.Fatalf("breaker after a call whose caller gave up: %+v, want closed", st.Nodes)
			}
			if r, err := s.Take(ctx, "b", p, 1); err != nil || !r.Allowed {
				t.Fatalf("a decision after it: %+v, %v; want allowed", r, err)
			}
		})
	}
}

// TestFaultBatchRefusedWhole: a server refuses a script that may write
// as a whole, before it runs (the batch script declares flags), when it is
// out of memory (maxmemory, noeviction), a read-only replica, or cannot
// persist; a decision alone (a script without flags) is refused only at
// its first write. So a batch the server refuses that way must be sent
// again decision by decision: a peek and a denial (which write nothing)
// are answered as they are alone, and batching stays on.
func TestFaultBatchRefusedWhole(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	admin := client(t, srv.Addr())
	ctx := context.Background()
	p := policy("refused", algo.GCRA, "1/hour")
	fill := newStore(t, admin)
	if r, err := fill.Take(ctx, "full", p, 1); err != nil || !r.Allowed {
		t.Fatalf("fill: %+v, %v", r, err)
	}
	rec := newRecorder(redisstore.Lanes())
	c := recordedClient(t, srv.Addr(), rec)
	s := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithBreaker(0, time.Second))
	var wg sync.WaitGroup
	defer wg.Wait()
	defer func() {
		select {
		case <-rec.open:
		default:
			close(rec.open)
		}
	}()
	for i := range redisstore.Lanes() {
		wg.Go(func() { _, _ = s.Peek(ctx, fmt.Sprint("lane", i), p, 1) })
	}
	for rec.heldCount() < redisstore.Lanes() {
		time.Sleep(time.Millisecond)
	}
	if err := admin.ConfigSet(ctx, "maxmemory", "1").Err(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.ConfigSet(context.Background(), "maxmemory", "0").Err() })
	var peek, take, peekFull store.Result
	var errPeek, errTake, errPeekFull error
	wg.Go(func() { peek, errPeek = s.Peek(ctx, "free", p, 1) })
	wg.Go(func() { take, errTake = s.Take(ctx, "full", p, 1) })
	wg.Go(func() { peekFull, errPeekFull = s.Peek(ctx, "full", p, 1) })
	waitQueued(t, s, 3)
	close(rec.open)
	wg.Wait()
	if errPeek != nil || !peek.Allowed || peek.Remaining != 0 {
		t.Errorf("peek of a free key in a refused batch: %+v, %v; want allowed, 0 left, as alone", peek, errPeek)
	}
	if errTake != nil || take.Allowed {
		t.Errorf("take of a full key in a refused batch: %+v, %v; want denied, as alone", take, errTake)
	}
	if errPeekFull != nil || peekFull.Allowed {
		t.Errorf("peek of a full key in a refused batch: %+v, %v; want denied, as alone", peekFull, errPeekFull)
	}
	if len(batches(rec.take())) != 1 {
		t.Errorf("want the one refused batch")
	}
	if !redisstore.Batching(s) {
		t.Errorf("batching off after the server refused a batch for lack of memory")
	}
}

// TestBatchReadOnlyKeepsBatching: the refusal of a script with flags on a
// read-only replica ("Can not run script with write flag", as Redis 7
// words it) or on a server that cannot persist ("Use 'no-writes' flag")
// is transient (a failover, a full disk): the batch is sent again decision
// by decision, and the store must not stop batching for good, as it does
// for a server that does not know the shebang.
func TestBatchReadOnlyKeepsBatching(t *testing.T) {
	t.Parallel()
	addr := redistest.StartServer(t).Addr()
	for _, e := range []redisErr{
		"READONLY Can not run script with write flag on readonly replica",
		"MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. Writable scripts are blocked. Use 'no-writes' flag for read only scripts.",
	} {
		t.Run(string(e)[:8], func(t *testing.T) {
			rec := newRecorder(redisstore.Lanes())
			rec.fail = e
			c := recordedClient(t, addr, rec)
			s := newStore(t, c, redisstore.WithDenyCache(false))
			p := policy("readonly-"+t.Name(), algo.GCRA, "1/hour")
			ctx := context.Background()
			var wg sync.WaitGroup
			const n = 6
			for i := range n {
				wg.Go(func() {
					if r, err := s.Take(ctx, fmt.Sprint("k", i), p, 1); err != nil || !r.Allowed {
						t.Errorf("take %d: %+v, %v", i, r, err)
					}
				})
			}
			waitQueued(t, s, n-redisstore.Lanes())
			close(rec.open)
			wg.Wait()
			if !redisstore.Batching(s) {
				t.Fatalf("batching off for good after %q", e)
			}
		})
	}
}

// TestBatchWrongType: a decision whose key holds a value of another type
// fails alone, with the server's WRONGTYPE as a "redis" error; the other
// decisions of its batch are answered.
func TestBatchWrongType(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	admin := client(t, srv.Addr())
	ctx := context.Background()
	for _, a := range algorithms {
		t.Run(fmt.Sprint(a), func(t *testing.T) {
			p := policy(fmt.Sprint("wrongtype-", a), a, "3/hour")
			// The key a fixed window's decision touches depends on the
			// server's clock: make every key the store could use a hash.
			bad := fmt.Sprint("bad", int(a))
			probe := newStore(t, admin)
			if _, err := probe.Take(ctx, bad, p, 1); err != nil {
				t.Fatal(err)
			}
			keys, err := admin.Keys(ctx, "*{"+bad+"}*").Result()
			if err != nil || len(keys) == 0 {
				t.Fatalf("keys %v, %v", keys, err)
			}
			for _, k := range keys {
				admin.Del(ctx, k)
				admin.HSet(ctx, k, "f", "v")
			}
			rec := newRecorder(redisstore.Lanes())
			c := recordedClient(t, srv.Addr(), rec)
			s := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithBreaker(0, time.Second))
			var wg sync.WaitGroup
			for i := range redisstore.Lanes() {
				wg.Go(func() { _, _ = s.Take(ctx, fmt.Sprint("lane", i), p, 1) })
			}
			for rec.heldCount() < redisstore.Lanes() {
				time.Sleep(time.Millisecond)
			}
			var good1, good2 store.Result
			var errBad, err1, err2 error
			wg.Go(func() { good1, err1 = s.Take(ctx, "good1", p, 1) })
			wg.Go(func() { _, errBad = s.Take(ctx, bad, p, 1) })
			wg.Go(func() { good2, err2 = s.Take(ctx, "good2", p, 1) })
			waitQueued(t, s, 3)
			close(rec.open)
			wg.Wait()
			if err1 != nil || err2 != nil || !good1.Allowed || !good2.Allowed || good1.Remaining != 2 || good2.Remaining != 2 {
				t.Fatalf("the other decisions: %+v %v, %+v %v; want allowed, 2 left", good1, err1, good2, err2)
			}
			var ne *redisstore.NodeError
			if !errors.As(errBad, &ne) || store.ErrorKind(errBad) != "redis" {
				t.Fatalf("the wrong type: %v (kind %q), want a redis NodeError", errBad, store.ErrorKind(errBad))
			}
			if bs := batches(rec.take()); len(bs) != 1 || len(bs[0].keys) != 3 {
				t.Fatalf("want one batch of the three")
			}
		})
	}
}

// TestFaultBatchNoLeak: a paused Redis times out every call and every
// queued decision; once it is back, batches form again; after Close no
// goroutine of the store (senders, calls of a client that ignores
// deadlines) is left.
func TestFaultBatchNoLeak(t *testing.T) {
	for _, bounded := range []bool{true, false} {
		t.Run(fmt.Sprint("bounded=", bounded), func(t *testing.T) {
			srv := redistest.StartServer(t)
			check := leaks(t)
			rc := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: bounded, ReadTimeout: 2 * time.Second})
			s, err := redisstore.New(rc, redisstore.WithTimeout(500*time.Millisecond), redisstore.WithDenyCache(false), redisstore.WithBreaker(0, time.Second))
			if err != nil {
				t.Fatal(err)
			}
			p := policy("leak", algo.TokenBucket, "1000/hour")
			ctx := context.Background()
			if _, err := s.Take(ctx, "warm", p, 1); err != nil {
				t.Fatal(err)
			}
			run := func() (ok, failed int64) {
				var wg sync.WaitGroup
				var nok, nfailed atomic.Int64
				for g := range 64 {
					wg.Go(func() {
						if _, err := s.Take(ctx, fmt.Sprint("u", g%8), p, 1); err != nil {
							if k := store.ErrorKind(err); k != "timeout" && k != "pool_timeout" {
								t.Errorf("while paused: %v (kind %q), want a timeout", err, k)
							}
							nfailed.Add(1)
						} else {
							nok.Add(1)
						}
					})
				}
				wg.Wait()
				return nok.Load(), nfailed.Load()
			}
			srv.Pause()
			if ok, _ := run(); ok != 0 {
				srv.Resume()
				t.Fatalf("%d decisions answered by a paused Redis", ok)
			}
			srv.Resume()
			deadline := time.Now().Add(20 * time.Second)
			for {
				if _, err := s.Take(ctx, "warm", p, 1); err == nil {
					break
				}
				if time.Now().After(deadline) {
					t.Fatal("Redis never answered again")
				}
				time.Sleep(10 * time.Millisecond)
			}
			if ok, failed := run(); failed != 0 {
				t.Fatalf("after Redis came back: %d answered, %d failed", ok, failed)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			if err := rc.Close(); err != nil {
				t.Fatal(err)
			}
			check()
		})
	}
}

// TestFaultBatchClusterPausedNode: one paused master delays only its own
// decisions: while its lanes hang and its queue fills, decisions for the
// other masters are answered at once, batched or not.
func TestFaultBatchClusterPausedNode(t *testing.T) {
	cl := redistest.StartCluster(t)
	cc := clusterClient(t, cl)
	const timeout = 2 * time.Second
	s := newStore(t, cc, redisstore.WithTimeout(timeout), redisstore.WithDenyCache(false), redisstore.WithBreaker(0, time.Second))
	p := policy("paused", algo.GCRA, "1000000/hour")
	ctx := context.Background()
	paused := cl.Nodes()[0]
	var slow, fast []string
	for i := 0; len(slow) < 16 || len(fast) < 16; i++ {
		k := fmt.Sprint("user", i)
		m, err := cc.MasterForKey(ctx, "rl:{"+k+"}:x")
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr == paused.Addr() {
			slow = append(slow, k)
		} else {
			fast = append(fast, k)
		}
	}
	for _, k := range append(slow, fast...) { // every node client dialled
		if _, err := s.Take(ctx, k, p, 1); err != nil {
			t.Fatal(err)
		}
	}
	paused.Pause()
	t.Cleanup(paused.Resume)
	var wg sync.WaitGroup
	var slowErrs atomic.Int64
	for g := range 128 {
		wg.Go(func() {
			if _, err := s.Take(ctx, slow[g%len(slow)], p, 1); err != nil {
				slowErrs.Add(1)
			}
		})
	}
	// The paused node's lanes hang now, and its queue fills.
	var worst atomic.Int64
	var fastErrs atomic.Int64
	for g := range 64 {
		wg.Go(func() {
			for i := range 8 {
				start := time.Now()
				if _, err := s.Take(ctx, fast[(g+i)%len(fast)], p, 1); err != nil {
					fastErrs.Add(1)
				}
				for d := int64(time.Since(start)); ; {
					w := worst.Load()
					if d <= w || worst.CompareAndSwap(w, d) {
						break
					}
				}
			}
		})
	}
	wg.Wait()
	paused.Resume()
	if slowErrs.Load() != 128 {
		t.Fatalf("%d of 128 decisions for the paused master failed, want all", slowErrs.Load())
	}
	// A decision for a healthy master waits for nothing of the paused one:
	// far below the timeout even on a loaded machine.
	if fastErrs.Load() != 0 || time.Duration(worst.Load()) > timeout/2 {
		t.Fatalf("decisions for the other masters: %d failed, the slowest took %v; want none failed, each well below the %v timeout", fastErrs.Load(), time.Duration(worst.Load()), timeout)
	}
}

// TestBatchWrongTypeAllOrNothing: a fixed window's decision over several
// limits whose second limit's key holds another type fails with WRONGTYPE
// and takes nothing from its first limit (all of its limits or none),
// alone and in a batch.
func TestBatchWrongTypeAllOrNothing(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	admin := client(t, srv.Addr())
	ctx := context.Background()
	for _, batched := range []bool{false, true} {
		t.Run(fmt.Sprint("batched=", batched), func(t *testing.T) {
			p := policy(fmt.Sprint("wrongtype2-", batched), algo.FixedWindow, "3/hour", "10/day")
			user := fmt.Sprint("two", batched)
			probe := newStore(t, admin)
			if _, err := probe.Take(ctx, user, p, 1); err != nil {
				t.Fatal(err)
			}
			first, err1 := admin.Keys(ctx, "*{"+user+"}:*").Result()
			if err1 != nil {
				t.Fatal(err1)
			}
			var k1, k2 string
			for _, k := range first {
				if strings.Contains(k, fmt.Sprintf("@%016x:", p.CounterID(1))) {
					k2 = k
				} else {
					k1 = k
				}
			}
			if k1 == "" || k2 == "" {
				t.Fatalf("keys %v", first)
			}
			admin.Del(ctx, k2)
			admin.HSet(ctx, k2, "f", "v")
			rec := newRecorder(0)
			var s *redisstore.Store
			var wg sync.WaitGroup
			if batched {
				rec = newRecorder(redisstore.Lanes())
				s = newStore(t, recordedClient(t, srv.Addr(), rec), redisstore.WithDenyCache(false))
				for i := range redisstore.Lanes() {
					wg.Go(func() { _, _ = s.Take(ctx, fmt.Sprint("lane", i), p, 1) })
				}
				for rec.heldCount() < redisstore.Lanes() {
					time.Sleep(time.Millisecond)
				}
			} else {
				s = newStore(t, recordedClient(t, srv.Addr(), rec), redisstore.WithDenyCache(false), redisstore.WithBatch(1))
			}
			var err error
			wg.Go(func() { _, err = s.Take(ctx, user, p, 1) })
			wg.Go(func() { _, _ = s.Take(ctx, "other", p, 1) })
			if batched {
				waitQueued(t, s, 2)
				close(rec.open)
			}
			wg.Wait()
			if store.ErrorKind(err) != "redis" {
				t.Fatalf("take: %v (kind %q), want the WRONGTYPE error", err, store.ErrorKind(err))
			}
			if got, _ := admin.Get(ctx, k1).Result(); got != "1" {
				t.Fatalf("the first limit's count after the failed take is %q, want 1: a decision takes from all of its limits or none", got)
			}
			if batched && len(batches(rec.take())) != 1 {
				t.Fatal("want one batch")
			}
		})
	}
}
