package core_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// slotWaitYAML has a rule that bounds requests in flight only, with a
// wait (export: one at a time, held up to 2s, three waiting at most),
// and one with a limit too (search: 1 a second, two in flight).
const slotWaitYAML = `rate_limit:
  enabled: true
  rules:
    - name: export
      paths: ["/export"]
      concurrent: 1
      wait: 2s
      wait_queue: 3
    - name: search
      paths: ["/search"]
      limit: "1/second"
      algorithm: gcra
      concurrent: 2
      wait: %s
`

// countedSlots is a memory store that counts its Acquires.
type countedSlots struct {
	*memstore.Store
	acquires atomic.Int64
}

func (s *countedSlots) Acquire(ctx context.Context, key string, c *store.Concurrency) (uint64, bool, error) {
	s.acquires.Add(1)
	return s.Store.Acquire(ctx, key, c)
}

// newSlotWaitLimiter is newConcLimiter over slotWaitYAML (search's wait
// searchWait), its store counting Acquires.
func newSlotWaitLimiter(t *testing.T, searchWait string) (*concLimiter, *countedSlots) {
	t.Helper()
	cfg, err := core.ParseConfig(fmt.Appendf(nil, slotWaitYAML, searchWait), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := &concLimiter{cfg: cfg, clock: store.NewManualClock(time.Unix(1_700_000_040, 0))}
	c.mem = memstore.New(memstore.WithClock(c.clock))
	st := &countedSlots{Store: c.mem}
	c.Limiter = core.NewLimiter(cfg, core.WithStore(st), core.WithClock(c.clock), core.WithObserver(func(e core.Event) {
		c.mu.Lock()
		c.events = append(c.events, e)
		c.mu.Unlock()
	}))
	return c, st
}

// slotDecided is a request's Decision, named.
type slotDecided struct {
	name string
	d    core.Decision
}

func (o slotDecided) String() string {
	d := o.d
	if d.Allowed {
		return fmt.Sprintf("%s: allowed, waited %v", o.name, d.Waited)
	}
	return fmt.Sprintf("%s: refused %d, Retry-After %d, concurrency denied %v, waited %v", o.name, d.Status(), d.RetryAfterSeconds(), d.ConcurrencyDenied, d.Waited)
}

// arrive starts a request of identity to path named name, in a
// goroutine, and waits until it is decided or held; its Decision goes to
// out.
func (c *concLimiter) arrive(ctx context.Context, path core.Path, identity, name string, out chan<- slotDecided) {
	go func() { out <- slotDecided{name, c.Decide(ctx, "GET", path, identity, false)} }()
	synctest.Wait()
}

// next is the next request decided, which must be want; none may be
// waiting to be read after it.
func next(t *testing.T, out <-chan slotDecided, want string) core.Decision {
	t.Helper()
	synctest.Wait()
	var got slotDecided
	select {
	case got = <-out:
	default:
		t.Fatalf("no request decided, want %q", want)
	}
	if got.String() != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	none(t, out)
	return got.d
}

// none checks that no request was decided.
func none(t *testing.T, out <-chan slotDecided) {
	t.Helper()
	synctest.Wait()
	select {
	case got := <-out:
		t.Fatalf("decided: %q, want none", got)
	default:
	}
}

// eventLines is the events since the last drain, each "outcome key
// allowed waited".
func (c *concLimiter) eventLines() string {
	var out []string
	for _, e := range c.drain() {
		out = append(out, fmt.Sprintf("%v %s %v %v", e.Outcome, e.Key, e.Allowed, e.Waited))
	}
	return strings.Join(out, "; ")
}

// TestSlotWaitFirstComeFirstServed: under concurrent: 1 and wait: 2s,
// three requests that find the slot taken are held, and served one at a
// time in the order they came, each as soon as the request ahead gives
// the slot back; nothing asks the memory store while no slot comes back
// (a release wakes the head), and another identity has a queue of its
// own.
func TestSlotWaitFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st := newSlotWaitLimiter(t, "2s")
		ctx := context.Background()
		a := c.Decide(ctx, "GET", "/export", "alice", false)
		if !a.Allowed || a.Waited != 0 {
			t.Fatalf("first: %+v, want admitted at once", a)
		}
		out := make(chan slotDecided, 3)
		for _, name := range []string{"b", "c", "d"} {
			c.arrive(ctx, "/export", "alice", name, out)
		}
		none(t, out)
		if bob := c.Decide(ctx, "GET", "/export", "bob", false); !bob.Allowed || bob.Waited != 0 {
			t.Fatalf("bob: %+v, want admitted at once", bob)
		}
		// a, bob: one each; b: refused, then asked again at the head.
		if n := st.acquires.Load(); n != 4 {
			t.Fatalf("Acquires: %d, want 4", n)
		}
		c.clock.Advance(time.Second)
		none(t, out)
		if n := st.acquires.Load(); n != 4 {
			t.Fatalf("Acquires while no slot came back: %d, want still 4", n)
		}
		c.Complete(ctx, &a, 200)
		b := next(t, out, "b: allowed, waited 1s")
		if !b.Deferred() {
			t.Fatal("b holds no slot")
		}
		// b takes the slot; c, the head then, is refused and waits.
		if n := st.acquires.Load(); n != 6 {
			t.Fatalf("Acquires: %d, want 6", n)
		}
		c.clock.Advance(250 * time.Millisecond)
		c.Complete(ctx, &b, 200)
		cd := next(t, out, "c: allowed, waited 1.25s")
		c.Complete(ctx, &cd, 200)
		d := next(t, out, "d: allowed, waited 1.25s")
		if n := c.inFlight(t, "export", "alice"); n != 1 {
			t.Fatalf("in flight: %d, want 1", n)
		}
		c.Complete(ctx, &d, 200)
		if n := c.inFlight(t, "export", "alice"); n != 0 {
			t.Fatalf("in flight at the end: %d, want 0", n)
		}
		want := "allowed alice true 0s; allowed bob true 0s; waited alice true 1s; waited alice true 1.25s; waited alice true 1.25s"
		if got := c.eventLines(); got != want {
			t.Fatalf("events:\n got %s\nwant %s", got, want)
		}
	})
}

// TestSlotWaitTimesOut: a request held for a slot that does not come
// back within the wait is refused then as without one (429, Retry-After
// 1, ConcurrencyDenied), having taken nothing; the queue is left empty.
func TestSlotWaitTimesOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newSlotWaitLimiter(t, "2s")
		ctx := context.Background()
		a := c.Decide(ctx, "GET", "/export", "alice", false)
		out := make(chan slotDecided, 1)
		c.arrive(ctx, "/export", "alice", "b", out)
		c.clock.Advance(2*time.Second - time.Nanosecond)
		none(t, out)
		c.clock.Advance(time.Nanosecond)
		b := next(t, out, "b: refused 429, Retry-After 1, concurrency denied true, waited 2s")
		if b.Deferred() {
			t.Fatal("the refused request holds a slot")
		}
		if n := c.inFlight(t, "export", "alice"); n != 1 {
			t.Fatalf("in flight: %d, want 1", n)
		}
		c.Complete(ctx, &a, 200)
		if d := c.Decide(ctx, "GET", "/export", "alice", false); !d.Allowed || d.Waited != 0 {
			t.Fatalf("after: %+v, want admitted at once", d)
		}
		want := "allowed alice true 0s; concurrency_denied alice false 2s; allowed alice true 0s"
		if got := c.eventLines(); got != want {
			t.Fatalf("events:\n got %s\nwant %s", got, want)
		}
	})
}

// TestSlotWaitQueueFull: with wait_queue: 3, a fourth request that finds
// the slot taken is refused at once, without asking the store, and the
// held ones are served.
func TestSlotWaitQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, st := newSlotWaitLimiter(t, "2s")
		ctx := context.Background()
		a := c.Decide(ctx, "GET", "/export", "alice", false)
		out := make(chan slotDecided, 4)
		for _, name := range []string{"b", "c", "d"} {
			c.arrive(ctx, "/export", "alice", name, out)
		}
		asked := st.acquires.Load()
		c.arrive(ctx, "/export", "alice", "e", out)
		next(t, out, "e: refused 429, Retry-After 1, concurrency denied true, waited 0s")
		if n := st.acquires.Load(); n != asked {
			t.Fatalf("Acquires of the request refused by a full queue: %d, want 0", n-asked)
		}
		c.drain()
		c.Complete(ctx, &a, 200)
		b := next(t, out, "b: allowed, waited 0s")
		c.Complete(ctx, &b, 200)
		cd := next(t, out, "c: allowed, waited 0s")
		c.Complete(ctx, &cd, 200)
		d := next(t, out, "d: allowed, waited 0s")
		c.Complete(ctx, &d, 200)
		if got, want := c.eventLines(), "waited alice true 0s; waited alice true 0s; waited alice true 0s"; got != want {
			t.Fatalf("events: got %s, want %s", got, want)
		}
	})
}

// TestSlotWaitClientGone: a request held for a slot whose context ends,
// at the head of the queue or behind, leaves at once, refused, taking no
// slot; the slot given back goes to the next one still waiting.
func TestSlotWaitClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newSlotWaitLimiter(t, "2s")
		ctx := context.Background()
		a := c.Decide(ctx, "GET", "/export", "alice", false)
		out := make(chan slotDecided, 3)
		ctxB, cancelB := context.WithCancel(ctx)
		c.arrive(ctxB, "/export", "alice", "b", out)
		c.arrive(ctx, "/export", "alice", "c", out)
		ctxD, cancelD := context.WithCancel(ctx)
		c.arrive(ctxD, "/export", "alice", "d", out)
		c.clock.Advance(500 * time.Millisecond)
		cancelB() // the head
		next(t, out, "b: refused 429, Retry-After 1, concurrency denied true, waited 500ms")
		cancelD() // behind c
		next(t, out, "d: refused 429, Retry-After 1, concurrency denied true, waited 500ms")
		if n := c.inFlight(t, "export", "alice"); n != 1 {
			t.Fatalf("in flight once two waiters left: %d, want 1", n)
		}
		c.clock.Advance(500 * time.Millisecond)
		c.Complete(ctx, &a, 200)
		cd := next(t, out, "c: allowed, waited 1s")
		if n := c.inFlight(t, "export", "alice"); n != 1 {
			t.Fatalf("in flight: %d, want 1 (c's)", n)
		}
		c.Complete(ctx, &cd, 200)
		want := "allowed alice true 0s; concurrency_denied alice false 500ms; concurrency_denied alice false 500ms; waited alice true 1s"
		if got := c.eventLines(); got != want {
			t.Fatalf("events:\n got %s\nwant %s", got, want)
		}
	})
}

// TestSlotWaitWokenByContextEnd: a slot given back because the request
// holding it ended (its client went away, no Complete) wakes the request
// waiting for it, as one given back by Complete does.
func TestSlotWaitWokenByContextEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newSlotWaitLimiter(t, "2s")
		ctxA, cancelA := context.WithCancel(context.Background())
		a := c.Decide(ctxA, "GET", "/export", "alice", false)
		if !a.Allowed {
			t.Fatal("first refused")
		}
		out := make(chan slotDecided, 1)
		c.arrive(context.Background(), "/export", "alice", "b", out)
		c.clock.Advance(time.Second)
		none(t, out)
		cancelA()
		b := next(t, out, "b: allowed, waited 1s")
		c.Complete(context.Background(), &b, 200)
		if n := c.inFlight(t, "export", "alice"); n != 0 {
			t.Fatalf("in flight: %d, want 0", n)
		}
	})
}

// TestSlotWaitThenLimit: under a limit too, a request held for a slot
// asks the limit once it has one, within the same wait, counted from
// when it arrived: search admits 1 a second (gcra) and 2 in flight. a is
// admitted at +0s; x, which takes the second slot, waits for the limit
// until +1s; b, arriving behind x, waits for a slot; a gives its slot
// back at +1.2s, when the limit would admit b at +2s: with wait: 2500ms
// b is held until then and admitted, having waited 2s; with wait: 1500ms
// it is refused at once by the limit (its Retry-After), giving the slot
// back.
func TestSlotWaitThenLimit(t *testing.T) {
	for _, tt := range []struct {
		wait    string
		refused bool
	}{{"2500ms", false}, {"1500ms", true}} {
		t.Run(tt.wait, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				c, _ := newSlotWaitLimiter(t, tt.wait)
				ctx := context.Background()
				a := c.Decide(ctx, "GET", "/search", "alice", false)
				if !a.Allowed {
					t.Fatal("first refused")
				}
				out := make(chan slotDecided, 2)
				c.arrive(ctx, "/search", "alice", "x", out)
				c.arrive(ctx, "/search", "alice", "b", out)
				c.clock.Advance(time.Second)
				x := next(t, out, "x: allowed, waited 1s")
				c.clock.Advance(200 * time.Millisecond)
				c.drain()
				c.Complete(ctx, &a, 200)
				if tt.refused {
					b := next(t, out, "b: refused 429, Retry-After 1, concurrency denied false, waited 1.2s")
					if b.Result.RetryAfter != 800*time.Millisecond || b.Deferred() {
						t.Fatalf("b: Retry-After %v, deferred %v; want the limit's 800ms, no slot held", b.Result.RetryAfter, b.Deferred())
					}
					if n := c.inFlight(t, "search", "alice"); n != 1 {
						t.Fatalf("in flight: %d, want 1 (x's)", n)
					}
					if got, want := c.eventLines(), "denied alice false 1.2s"; got != want {
						t.Fatalf("events: got %s, want %s", got, want)
					}
					return
				}
				none(t, out)
				c.clock.Advance(800 * time.Millisecond)
				b := next(t, out, "b: allowed, waited 2s")
				if b.Result.Remaining != 0 || !b.Deferred() {
					t.Fatalf("b: remaining %d, deferred %v; want 0, holding a slot", b.Result.Remaining, b.Deferred())
				}
				if got, want := c.eventLines(), "waited alice true 2s"; got != want {
					t.Fatalf("events: got %s, want %s", got, want)
				}
				c.Complete(ctx, &x, 200)
				c.Complete(ctx, &b, 200)
				if n := c.inFlight(t, "search", "alice"); n != 0 {
					t.Fatalf("in flight at the end: %d, want 0", n)
				}
			})
		})
	}
}

// TestSlotWaitNoQueueJumping: a request that arrives while others of its
// key wait for a slot queues behind them even when a slot is free (given
// back where no release wakes them: the store's own Release, as another
// process's would be); the head, which asks again at its deadline, takes
// it then, and the one behind it when it gives it back.
func TestSlotWaitNoQueueJumping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c, _ := newSlotWaitLimiter(t, "2s")
		ctx := context.Background()
		a := c.Decide(ctx, "GET", "/export", "alice", false)
		out := make(chan slotDecided, 2)
		c.arrive(ctx, "/export", "alice", "b", out)
		if err := c.mem.Release(ctx, c.Key("alice"), slotsOf(t, c.cfg, "export"), 0); err != nil {
			t.Fatal(err)
		}
		c.clock.Advance(time.Second)
		c.arrive(ctx, "/export", "alice", "n", out)
		none(t, out)
		c.clock.Advance(time.Second)
		b := next(t, out, "b: allowed, waited 2s")
		c.clock.Advance(500 * time.Millisecond)
		c.Complete(ctx, &b, 200)
		n := next(t, out, "n: allowed, waited 1.5s")
		c.Complete(ctx, &n, 200)
		c.Complete(ctx, &a, 200) // its slot was given back already: nothing more
		if k := c.inFlight(t, "export", "alice"); k != 0 {
			t.Fatalf("in flight at the end: %d, want 0", k)
		}
	})
}
