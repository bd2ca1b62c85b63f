package core_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

const concurrentYAML = `rate_limit:
  enabled: true
  rules:
    - name: reports
      paths: ["/reports"]
      concurrent: 2
    - name: search
      paths: ["/search"]
      limit: "3/minute"
      concurrent: 1
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      count: failures
      concurrent: 1
    - name: watch
      paths: ["/watch"]
      concurrent: 1
      mode: shadow
    - name: both
      paths: ["/both"]
      limit: "100/minute"
  default: "100/minute"
`

// slotsOf returns the store.Concurrency of the rule named rule, for
// memstore.Store.InFlight.
func slotsOf(t *testing.T, cfg *core.Config, rule string) *store.Concurrency {
	t.Helper()
	r := cfg.Rule(rule)
	if r == nil || r.Concurrent() == 0 {
		t.Fatalf("no concurrency limit on rule %q", rule)
	}
	return &store.Concurrency{Name: r.Name, Limit: r.Concurrent(), Lease: time.Minute}
}

// concLimiter is a limiter over concurrentYAML on a memory store of a
// manual clock, with its events recorded.
type concLimiter struct {
	*core.Limiter
	cfg    *core.Config
	mem    *memstore.Store
	clock  *store.ManualClock
	mu     sync.Mutex
	events []core.Event
}

func newConcLimiter(t *testing.T, yaml string, opts ...core.Option) *concLimiter {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	c := &concLimiter{cfg: cfg, clock: store.NewManualClock(time.Unix(1_700_000_040, 0))}
	c.mem = memstore.New(memstore.WithClock(c.clock))
	opts = append([]core.Option{core.WithStore(c.mem), core.WithClock(c.clock), core.WithObserver(func(e core.Event) {
		c.mu.Lock()
		c.events = append(c.events, e)
		c.mu.Unlock()
	})}, opts...)
	c.Limiter = core.NewLimiter(cfg, opts...)
	return c
}

func (c *concLimiter) drain() []core.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	e := c.events
	c.events = nil
	return e
}

func (c *concLimiter) inFlight(t *testing.T, rule, identity string) int64 {
	return c.mem.InFlight(c.Key(identity), slotsOf(t, c.cfg, rule))
}

// TestConcurrentDecide: a rule of concurrent 2 admits two requests of
// one identity in flight; the third is refused with 429, Retry-After 1,
// the rule's body and no rate-limit header; a completed request gives
// its slot back, once.
func TestConcurrentDecide(t *testing.T) {
	c := newConcLimiter(t, concurrentYAML)
	ctx := context.Background()
	d1 := c.Decide(ctx, "GET", "/reports", "alice", false)
	d2 := c.Decide(ctx, "GET", "/reports", "alice", false)
	if !d1.Allowed || !d2.Allowed || !d1.Deferred() || !d2.Deferred() {
		t.Fatalf("first two: allowed %v %v, deferred %v %v; want allowed and deferred", d1.Allowed, d2.Allowed, d1.Deferred(), d2.Deferred())
	}
	h := http.Header{}
	d1.SetHeaders(h)
	if len(h) != 0 {
		t.Fatalf("headers of an admitted request under a rule with no limit: %v, want none", h)
	}
	d3 := c.Decide(ctx, "GET", "/reports", "alice", false)
	if d3.Allowed || !d3.ConcurrencyDenied || d3.Deferred() || d3.Status() != 429 || d3.RetryAfterSeconds() != 1 ||
		string(d3.Body()) != `{"detail": "Rate limit exceeded for 'reports' requests"}` {
		t.Fatalf("third: %+v status %d retry %d body %s; want refused, ConcurrencyDenied, 429, 1, the rule's body", d3, d3.Status(), d3.RetryAfterSeconds(), d3.Body())
	}
	w := httptest.NewRecorder()
	d3.WriteDenied(w)
	if got := w.Header(); len(got) != 3 || got.Get("Retry-After") != "1" || got.Get("Content-Type") != "application/json" || got.Get("Content-Length") != "56" {
		t.Fatalf("refusal's headers: %v; want Retry-After 1, Content-Type and Content-Length only", got)
	}
	if d := c.Decide(ctx, "GET", "/reports", "bob", false); !d.Allowed {
		t.Fatal("another identity was refused")
	}
	events := c.drain()
	if len(events) != 4 || events[2].Outcome != core.OutcomeConcurrencyDenied || events[2].Allowed || events[2].Rule != "reports" ||
		events[2].Cost != 1 || events[2].Key != "alice" || events[0].Outcome != core.OutcomeAllowed || !events[0].Allowed {
		t.Fatalf("events: %+v", events)
	}
	// The refused request holds nothing: completing it frees nothing.
	c.Complete(ctx, &d3, 200)
	if n := c.inFlight(t, "reports", "alice"); n != 2 {
		t.Fatalf("in flight after completing the refused request: %d, want 2", n)
	}
	copyOf1 := d1
	c.Complete(ctx, &d1, 200)
	c.Complete(ctx, &d1, 200)
	c.Complete(ctx, &copyOf1, 200) // a copy of a completed Decision
	if n := c.inFlight(t, "reports", "alice"); n != 1 {
		t.Fatalf("in flight after completing one request (three times): %d, want 1", n)
	}
	if d1.Deferred() {
		t.Fatal("a completed Decision is still deferred")
	}
	d4 := c.Decide(ctx, "GET", "/reports", "alice", false)
	if !d4.Allowed {
		t.Fatal("refused once a slot was given back")
	}
	if d := c.Decide(ctx, "GET", "/reports", "alice", false); d.Allowed {
		t.Fatal("a third request admitted")
	}
	if len(c.drain()) != 2 {
		t.Fatal("Complete of a rule with no limit reported an event")
	}
}

// TestConcurrentNothingLeaks: under limits and a concurrency limit, a
// request refused by the limits holds no slot, and one refused for lack
// of a slot consumes nothing of the limits.
func TestConcurrentNothingLeaks(t *testing.T) {
	c := newConcLimiter(t, concurrentYAML)
	ctx := context.Background()
	search := c.cfg.Rule("search").Policy
	d1 := c.Decide(ctx, "GET", "/search", "alice", false)
	if !d1.Allowed || d1.Result.Remaining != 2 {
		t.Fatalf("first: allowed %v remaining %d, want true 2", d1.Allowed, d1.Result.Remaining)
	}
	for range 3 {
		d := c.Decide(ctx, "GET", "/search", "alice", false)
		if d.Allowed || !d.ConcurrencyDenied {
			t.Fatalf("while one is in flight: %+v, want refused for lack of a slot", d)
		}
		h := http.Header{}
		d.SetLimitHeaders(h)
		if len(h) != 1 || h.Get("Retry-After") != "1" {
			t.Fatalf("headers of the refusal: %v, want Retry-After: 1 alone", h)
		}
	}
	if r, _ := c.mem.Peek(ctx, c.Key("alice"), search, 1); r.Remaining != 1 {
		t.Fatalf("limit's remaining after three refusals for lack of a slot: %d once one more is taken, want 1 (nothing consumed)", r.Remaining)
	}
	c.Complete(ctx, &d1, 200)
	for i := range 2 {
		d := c.Decide(ctx, "GET", "/search", "alice", false)
		if !d.Allowed {
			t.Fatalf("request %d after the slot came back: refused", i)
		}
		c.Complete(ctx, &d, 200)
	}
	// The limit is spent: refused by it, and no slot is left taken.
	d := c.Decide(ctx, "GET", "/search", "alice", false)
	if d.Allowed || d.ConcurrencyDenied || d.Deferred() || d.Result.RetryAfter == 0 {
		t.Fatalf("over the limit: %+v, want refused by the limit", d)
	}
	if n := c.inFlight(t, "search", "alice"); n != 0 {
		t.Fatalf("in flight after a refusal by the limit: %d, want 0", n)
	}
	c.drain()
	// Counted by outcome: a refusal by the check gives the slot back too.
	ok := c.Decide(ctx, "POST", "/login", "bob", false)
	c.Complete(ctx, &ok, 401)
	ok = c.Decide(ctx, "POST", "/login", "bob", false)
	c.Complete(ctx, &ok, 401)
	if d := c.Decide(ctx, "POST", "/login", "bob", false); d.Allowed || d.ConcurrencyDenied {
		t.Fatalf("login over its limit: %+v, want refused by the limit", d)
	}
	if n := c.inFlight(t, "login", "bob"); n != 0 {
		t.Fatalf("login in flight after a refusal by the check: %d, want 0", n)
	}
}

// TestConcurrentContextEnd: a request whose context ends before it is
// completed gives its slot back then; the Complete that follows gives
// back nothing more.
func TestConcurrentContextEnd(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := newConcLimiter(t, concurrentYAML)
		ctx, cancel := context.WithCancel(context.Background())
		gone := c.Decide(ctx, "GET", "/reports", "alice", false)
		stays := c.Decide(context.Background(), "GET", "/reports", "alice", false)
		if !gone.Allowed || !stays.Allowed {
			t.Fatal("refused")
		}
		cancel()
		synctest.Wait()
		if n := c.inFlight(t, "reports", "alice"); n != 1 {
			t.Fatalf("in flight once a client went away: %d, want 1", n)
		}
		c.Complete(context.Background(), &gone, 200)
		if n := c.inFlight(t, "reports", "alice"); n != 1 {
			t.Fatalf("in flight after completing the request whose client went away: %d, want 1", n)
		}
		// Completed first, the request's context ending later frees nothing.
		ctx2, cancel2 := context.WithCancel(context.Background())
		done := c.Decide(ctx2, "GET", "/reports", "alice", false)
		c.Complete(ctx2, &done, 200)
		cancel2()
		synctest.Wait()
		if n := c.inFlight(t, "reports", "alice"); n != 1 {
			t.Fatalf("in flight after a completed request's context ended: %d, want 1", n)
		}
	})
}

// TestConcurrentShadow: a rule in shadow mode takes slots and reports
// the request it would refuse, refusing none.
func TestConcurrentShadow(t *testing.T) {
	c := newConcLimiter(t, concurrentYAML)
	ctx := context.Background()
	d1 := c.Decide(ctx, "GET", "/watch", "alice", false)
	d2 := c.Decide(ctx, "GET", "/watch", "alice", false)
	if !d1.Allowed || d1.ShadowDenied || !d2.Allowed || !d2.ShadowDenied || d2.ConcurrencyDenied {
		t.Fatalf("shadow: %+v, %+v; want both allowed, the second ShadowDenied", d1, d2)
	}
	var ev []core.Event // the default limit, enforced, counts too
	for _, e := range c.drain() {
		if e.Rule == "watch" {
			ev = append(ev, e)
		}
	}
	if len(ev) != 2 || ev[0].Outcome != core.OutcomeAllowed || ev[1].Outcome != core.OutcomeShadowDenied || !ev[1].Allowed {
		t.Fatalf("events: %+v", ev)
	}
	c.Complete(ctx, &d2, 200) // held nothing
	if n := c.inFlight(t, "watch", "alice"); n != 1 {
		t.Fatalf("in flight: %d, want 1", n)
	}
	c.Complete(ctx, &d1, 200)
	if n := c.inFlight(t, "watch", "alice"); n != 0 {
		t.Fatalf("in flight: %d, want 0", n)
	}
}

// failingSlots is a memory store whose slots fail.
type failingSlots struct{ *memstore.Store }

var errSlots = errors.New("slots down")

func (failingSlots) Acquire(context.Context, string, *store.Concurrency) (uint64, bool, error) {
	return 0, false, errSlots
}

// TestConcurrentStoreFails: a store that fails to take a slot passes the
// request (fail-open) or refuses it with 503 (fail-closed).
func TestConcurrentStoreFails(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(concurrentYAML), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	for _, open := range []bool{true, false} {
		var events []core.Event
		l := core.NewLimiter(cfg, core.WithStore(failingSlots{memstore.New()}), core.WithFailOpen(open), core.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))),
			core.WithObserver(func(e core.Event) { events = append(events, e) }))
		d := l.Decide(context.Background(), "GET", "/reports", "alice", false)
		if d.Allowed != open || !errors.Is(d.Err, errSlots) || d.Deferred() || !open && d.Status() != 503 {
			t.Fatalf("fail-open %v: %+v", open, d)
		}
		if len(events) != 1 || events[0].Outcome != core.OutcomeStoreError || events[0].Allowed != open {
			t.Fatalf("fail-open %v: events %+v", open, events)
		}
		// With limits, fail-open lets the limits decide.
		d = l.Decide(context.Background(), "GET", "/search", "alice", false)
		if d.Allowed != open || open && (d.Err != nil || d.Result.Remaining != 2) || d.Deferred() {
			t.Fatalf("fail-open %v, with limits: %+v", open, d)
		}
	}
	if !strings.Contains(logs.String(), "slots down") {
		t.Fatalf("log: %s", logs.String())
	}
}

// TestConcurrentNeedsTheStore: a configuration with a concurrency limit
// cannot run on a store without slots: NewLimiter panics, SetConfig and
// ReloadFile refuse it and keep the running configuration.
func TestConcurrentNeedsTheStore(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(concurrentYAML), "c.yaml")
	if err != nil {
		t.Fatal(err)
	}
	func() {
		defer func() {
			msg, _ := recover().(string)
			if !strings.Contains(msg, `core.NewLimiter: rule "reports" sets concurrent, and the store bounds no requests in flight (it is no store.ConcurrencyStore): core_test.plainStore`) {
				t.Fatalf("panic: %q", msg)
			}
		}()
		core.NewLimiter(cfg, core.WithStore(plainStore{memstore.New()}))
	}()
	var logs bytes.Buffer
	l := core.NewLimiter(nil, core.WithStore(plainStore{memstore.New()}), core.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	l.SetConfig(cfg)
	if l.Config() != nil || l.ReloadStats().Failures != 1 || !strings.Contains(logs.String(), "sets concurrent") {
		t.Fatalf("SetConfig: config %v, stats %+v, log %s", l.Config(), l.ReloadStats(), logs.String())
	}
	file := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(file, []byte(concurrentYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := l.ReloadFile(file); err == nil || !strings.Contains(err.Error(), `rule "reports" sets concurrent`) || l.Config() != nil {
		t.Fatalf("ReloadFile: %v, config %v", err, l.Config())
	}
	// A configuration without one runs.
	plain, _ := core.ParseConfig([]byte(outcomeYAML), "o.yaml")
	l.SetConfig(plain)
	if l.Config() != plain {
		t.Fatal("a configuration without concurrency limits was refused")
	}
}

// TestConcurrentReset: Reset of a rule with a concurrency limit alone
// clears nothing and frees no slot.
func TestConcurrentReset(t *testing.T) {
	c := newConcLimiter(t, concurrentYAML)
	ctx := context.Background()
	c.Decide(ctx, "GET", "/reports", "alice", false)
	if cleared, err := c.Reset(ctx, "alice", "reports"); cleared || err != nil {
		t.Fatalf("Reset: %v, %v; want false, nil", cleared, err)
	}
	if n := c.inFlight(t, "reports", "alice"); n != 1 {
		t.Fatalf("in flight after Reset: %d, want 1", n)
	}
}

// TestConcurrentExactUnderLoad: goroutines deciding and completing
// requests of one identity never hold more than the limit at once, and
// every slot comes back.
func TestConcurrentExactUnderLoad(t *testing.T) {
	c := newConcLimiter(t, concurrentYAML)
	ctx := context.Background()
	var (
		mu            sync.Mutex
		held, most    int
		admitted, out int
		wg            sync.WaitGroup
	)
	for range 32 {
		wg.Go(func() {
			for range 50 {
				d := c.Decide(ctx, "GET", "/reports", "alice", false)
				mu.Lock()
				if d.Allowed {
					held++
					admitted++
					most = max(most, held)
				} else {
					out++
				}
				mu.Unlock()
				if d.Allowed {
					mu.Lock()
					held--
					mu.Unlock()
					c.Complete(ctx, &d, 200)
				}
			}
		})
	}
	wg.Wait()
	if most > 2 || admitted == 0 || admitted+out != 32*50 {
		t.Fatalf("at most %d held at once, %d admitted, %d refused; want at most 2", most, admitted, out)
	}
	if n := c.inFlight(t, "reports", "alice"); n != 0 {
		t.Fatalf("in flight at the end: %d, want 0", n)
	}
}

// TestConcurrentShadowBeside: a rule in shadow mode with a concurrency
// limit beside an enforced rule takes a slot only for a request the
// enforced rule lets through; under a file in shadow mode, the shadow
// rule alone decides nothing, and its slots go back on Complete.
func TestConcurrentShadowBeside(t *testing.T) {
	c := newConcLimiter(t, `rate_limit:
  enabled: true
  rules:
    - name: tight
      paths: ["/x"]
      limit: "1/minute"
    - name: watch
      paths: ["/x"]
      limit: "100/minute"
      concurrent: 1
      mode: shadow
`)
	ctx := context.Background()
	d1 := c.Decide(ctx, "GET", "/x", "alice", false) // admitted: both count, the shadow rule takes its slot
	d2 := c.Decide(ctx, "GET", "/x", "alice", false) // refused by tight: the shadow rule takes no slot
	if !d1.Allowed || d1.ShadowDenied || d2.Allowed || d2.ShadowDenied || d2.Deferred() {
		t.Fatalf("d1 %+v\nd2 %+v", d1, d2)
	}
	if n := c.inFlight(t, "watch", "alice"); n != 1 {
		t.Fatalf("shadow slots held: %d, want 1", n)
	}
	ev := c.drain()
	if len(ev) != 4 || ev[1].Rule != "watch" || ev[1].Outcome != core.OutcomeAllowed || ev[3].Rule != "watch" || ev[3].Outcome != core.OutcomeAllowed || ev[3].Cost != 1 {
		t.Fatalf("events: %+v", ev)
	}
	c.Complete(ctx, &d1, 200)
	if n := c.inFlight(t, "watch", "alice"); n != 0 {
		t.Fatalf("shadow slots held after Complete: %d, want 0", n)
	}

	// A file in shadow mode: the rule answers, headers only with
	// WithShadowHeaders; its would-be refusal is reported.
	s := newConcLimiter(t, `rate_limit:
  enabled: true
  mode: shadow
  rules:
    - name: watch
      paths: ["/x"]
      limit: "100/minute"
      concurrent: 1
`)
	a := s.Decide(ctx, "GET", "/x", "bob", false)
	b := s.Decide(ctx, "GET", "/x", "bob", false)
	if !a.Allowed || a.ShadowDenied || !b.Allowed || !b.ShadowDenied || a.Rule == nil || a.Rule.Name != "watch" || !a.Deferred() || b.Deferred() {
		t.Fatalf("a %+v\nb %+v", a, b)
	}
	ev = s.drain()
	if len(ev) != 2 || ev[1].Outcome != core.OutcomeShadowDenied || !ev[1].Allowed || ev[1].Cost != 1 {
		t.Fatalf("events: %+v", ev)
	}
	s.Complete(ctx, &a, 200)
	s.Complete(ctx, &b, 200)
	if n := s.inFlight(t, "watch", "bob"); n != 0 {
		t.Fatalf("slots held after Complete: %d, want 0", n)
	}
}
