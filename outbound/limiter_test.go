package outbound

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func mustNew(t testing.TB, cfg *core.Config, clk Clock, opts ...Option) *Limiter {
	t.Helper()
	l, err := New(cfg, nil, append([]Option{WithClock(clk)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func mustRate(t testing.TB, count int64, period time.Duration, burst int64) *core.Config {
	t.Helper()
	cfg, err := Rate(count, period, burst)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

func mustParse(t testing.TB, yaml string) *core.Config {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// queued returns the requests in line under key (heads included).
func (l *Limiter) queued(key string) int {
	sh := l.shard(key)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ks := sh.keys[key]
	if ks == nil {
		return 0
	}
	n := 0
	for _, q := range ks.queues {
		if q.busy {
			n++
		}
		for w := q.head; w != nil; w = w.next {
			n++
		}
	}
	return n
}

// states returns the keys the Limiter holds state for.
func (l *Limiter) states() int {
	n := 0
	for i := range l.shards {
		sh := &l.shards[i]
		sh.mu.Lock()
		n += len(sh.keys)
		sh.mu.Unlock()
	}
	return n
}

type start struct {
	i   int
	at  time.Time
	err error
}

// goWait starts Wait for request i in a goroutine, waits until it is in
// line (the queue under key holds inLine requests), and returns where its
// start (or error) is reported.
func goWait(t *testing.T, ctx context.Context, l *Limiter, clk Clock, key string, i, inLine int, out chan<- start) {
	t.Helper()
	goWaitOn(t, ctx, l, clk, "/x", key, i, inLine, out)
}

// goWaitOn is goWait for a GET of path. A Wait still waiting when the
// test ends is cancelled then (out must have room for its report).
func goWaitOn(t *testing.T, ctx context.Context, l *Limiter, clk Clock, path, key string, i, inLine int, out chan<- start) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	finished := make(chan struct{})
	t.Cleanup(func() { cancel(); <-finished })
	go func() {
		defer close(finished)
		err := l.Wait(ctx, "GET", path, key)
		out <- start{i, clk.Now(), err}
	}()
	eventually(t, func() (int, bool) { n := l.queued(key); return n, n == inLine })
}

func TestWaitSpacesStartsExactlyInOrder(t *testing.T) {
	clk := newFakeClock()
	l := mustNew(t, mustRate(t, 240, time.Minute, 0), clk)
	ctx := context.Background()
	if err := l.Wait(ctx, "GET", "/x", "k"); err != nil {
		t.Fatal(err)
	}
	const n = 8
	starts := make(chan start, n)
	for i := 1; i < n; i++ {
		goWait(t, ctx, l, clk, "k", i, i, starts)
	}
	for i := 1; i < n; i++ {
		if d := clk.waitTimers(t, 1); d != 250*time.Millisecond {
			t.Fatalf("request %d: timer %v, want 250ms", i, d)
		}
		clk.Advance(250 * time.Millisecond)
		s := <-starts
		if s.err != nil || s.i != i || !s.at.Equal(t0.Add(time.Duration(i)*250*time.Millisecond)) {
			t.Fatalf("start %d: got request %d at %v (err %v), want request %d at +%v", i, s.i, s.at.Sub(t0), s.err, i, time.Duration(i)*250*time.Millisecond)
		}
	}
	if n := l.queued("k"); n != 0 {
		t.Fatalf("queue holds %d after all started, want 0", n)
	}
}

func TestWaitBurst(t *testing.T) {
	clk := newFakeClock()
	l := mustNew(t, mustRate(t, 10, time.Second, 3), clk)
	ctx := context.Background()
	for i := range 3 {
		if err := l.Wait(ctx, "GET", "/x", "k"); err != nil {
			t.Fatalf("start %d of the burst: %v", i, err)
		}
	}
	starts := make(chan start, 2)
	goWait(t, ctx, l, clk, "k", 3, 1, starts)
	if d := clk.waitTimers(t, 1); d != 100*time.Millisecond {
		t.Fatalf("4th request waits %v, want 100ms", d)
	}
	clk.Advance(100 * time.Millisecond)
	if s := <-starts; s.err != nil || !s.at.Equal(t0.Add(100*time.Millisecond)) {
		t.Fatalf("4th start at %v (err %v), want +100ms", s.at.Sub(t0), s.err)
	}
}

func TestWaitCancelReturnsAtOnceAndTakesNoSlot(t *testing.T) {
	clk := newFakeClock()
	l := mustNew(t, mustRate(t, 240, time.Minute, 0), clk)
	bg := context.Background()
	if err := l.Wait(bg, "GET", "/x", "k"); err != nil {
		t.Fatal(err)
	}
	starts := make(chan start, 4)
	ctx1, cancel1 := context.WithCancel(bg)
	ctx2, cancel2 := context.WithCancel(bg)
	goWait(t, ctx1, l, clk, "k", 1, 1, starts) // the head, asleep on the store's RetryAfter
	clk.waitTimers(t, 1)
	goWait(t, ctx2, l, clk, "k", 2, 2, starts)
	goWait(t, bg, l, clk, "k", 3, 3, starts)

	cancel2() // behind the head
	if s := <-starts; s.i != 2 || !errors.Is(s.err, context.Canceled) || !s.at.Equal(t0) {
		t.Fatalf("cancelled waiter: got %+v, want request 2 with context.Canceled at once", s)
	}
	cancel1() // the head: request 3 becomes the head at once and takes its slot
	if s := <-starts; s.i != 1 || !errors.Is(s.err, context.Canceled) || !s.at.Equal(t0) {
		t.Fatalf("cancelled head: got %+v, want request 1 with context.Canceled at once", s)
	}
	if d := clk.waitTimers(t, 1); d != 250*time.Millisecond {
		t.Fatalf("new head waits %v, want 250ms (the cancelled head's slot)", d)
	}
	clk.Advance(250 * time.Millisecond)
	if s := <-starts; s.i != 3 || s.err != nil || !s.at.Equal(t0.Add(250*time.Millisecond)) {
		t.Fatalf("got %+v, want request 3 started at +250ms", s)
	}
	// A context done on entry fails even on a free key.
	done, cancel := context.WithCancel(bg)
	cancel()
	if err := l.Wait(done, "GET", "/x", "free"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait with a done context: %v, want context.Canceled", err)
	}
	if n := l.queued("k") + l.queued("free"); n != 0 {
		t.Fatalf("%d left in line, want 0", n)
	}
}

func TestWaitKeysDoNotWaitOnEachOther(t *testing.T) {
	clk := newFakeClock()
	l := mustNew(t, mustRate(t, 1, time.Hour, 0), clk)
	ctx := context.Background()
	if err := l.Wait(ctx, "GET", "/x", "a"); err != nil {
		t.Fatal(err)
	}
	starts := make(chan start, 1)
	goWait(t, ctx, l, clk, "a", 1, 1, starts) // blocked for an hour
	for i := range 100 {
		if err := l.Wait(ctx, "GET", "/x", fmt.Sprintf("b%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := clk.pending(); n != 1 {
		t.Fatalf("%d timers, want 1 (only key a waits)", n)
	}
}

func TestWaitQueuesPerRule(t *testing.T) {
	clk := newFakeClock()
	cfg := mustParse(t, `
rate_limit:
  enabled: true
  algorithm: gcra
  rules:
    - name: slow
      paths: ["/slow"]
      limit: "1/hour"
      burst: 1
  default: "1000/second"
  exempt_paths: ["/health"]
`)
	l := mustNew(t, cfg, clk)
	ctx := context.Background()
	if err := l.Wait(ctx, "GET", "/slow", "k"); err != nil {
		t.Fatal(err)
	}
	starts := make(chan start, 1)
	go func() {
		err := l.Wait(ctx, "GET", "/slow", "k")
		starts <- start{1, clk.Now(), err}
	}()
	clk.waitTimers(t, 1)
	for _, p := range []string{"/fast", "/health", "/other"} {
		if err := l.Wait(ctx, "GET", p, "k"); err != nil {
			t.Fatalf("%s under the same key: %v", p, err)
		}
	}
	clk.Advance(time.Hour)
	if s := <-starts; s.err != nil || !s.at.Equal(t0.Add(time.Hour)) {
		t.Fatalf("second /slow: %+v, want a start at +1h", s)
	}
}

func TestWaitExemptAndDisabledStartAtOnce(t *testing.T) {
	clk := newFakeClock()
	cfg := mustParse(t, `
rate_limit:
  enabled: true
  default: "1/hour"
  exempt_paths: ["/health"]
`)
	l := mustNew(t, cfg, clk)
	ctx := context.Background()
	// Another key has spent its hour and waits: exempt requests under it
	// do not queue behind.
	if err := l.Wait(ctx, "GET", "/x", "busy"); err != nil {
		t.Fatal(err)
	}
	waiting := make(chan start, 1)
	goWait(t, ctx, l, clk, "busy", 1, 1, waiting)
	clk.waitTimers(t, 1)
	for _, key := range []string{"k", "busy"} {
		for i := range 5 {
			if err := l.Wait(ctx, "GET", "/health", key); err != nil {
				t.Fatalf("exempt %d under %s: %v", i, key, err)
			}
		}
	}
	off := mustNew(t, nil, clk)
	for i := range 5 {
		if err := off.Wait(ctx, "GET", "/x", "k"); err != nil {
			t.Fatalf("disabled %d: %v", i, err)
		}
	}
	if n, _ := clk.pending(); n != 1 {
		t.Fatalf("%d timers, want 1 (the waiter under busy)", n)
	}
	// Nothing was counted: the one request of the hour is still there.
	if err := l.Wait(ctx, "GET", "/x", "k"); err != nil {
		t.Fatal(err)
	}
}

func TestWaitShadowRuleNeverWaits(t *testing.T) {
	clk := newFakeClock()
	var shadowDenied int
	var mu sync.Mutex
	cfg := mustParse(t, `
rate_limit:
  enabled: true
  mode: shadow
  default: "2/hour"
`)
	l := mustNew(t, cfg, clk, WithCoreOptions(core.WithObserver(func(e core.Event) {
		if e.Outcome == core.OutcomeShadowDenied {
			mu.Lock()
			shadowDenied++
			mu.Unlock()
		}
	})))
	for i := range 5 {
		if err := l.Wait(context.Background(), "GET", "/x", "k"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if shadowDenied != 3 {
		t.Fatalf("shadow denials %d, want 3 (counted, never waited)", shadowDenied)
	}
}

// failingStore fails every call.
type failingStore struct{ calls int }

var errDown = errors.New("store down")

func (s *failingStore) Take(context.Context, string, *store.Policy, int64) (store.Result, error) {
	s.calls++
	return store.Result{}, errDown
}
func (s *failingStore) Peek(context.Context, string, *store.Policy, int64) (store.Result, error) {
	return store.Result{}, errDown
}
func (s *failingStore) Reset(context.Context, string, *store.Policy) (bool, error) {
	return false, errDown
}

func TestWaitStoreErrors(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		failure string
		wantErr bool
	}{{"open", false}, {"closed", true}} {
		cfg := mustParse(t, "rate_limit:\n  enabled: true\n  failure: "+tc.failure+"\n")
		st := &failingStore{}
		l, err := New(cfg, st, WithClock(newFakeClock()))
		if err != nil {
			t.Fatal(err)
		}
		err = l.Wait(ctx, "GET", "/x", "k")
		if tc.wantErr != (err != nil) || (tc.wantErr && !errors.Is(err, errDown)) {
			t.Fatalf("failure %s: Wait = %v, want error %v wrapping the store's", tc.failure, err, tc.wantErr)
		}
		if st.calls != 1 {
			t.Fatalf("failure %s: %d store calls, want 1", tc.failure, st.calls)
		}
		if n := l.queued("k"); n != 0 {
			t.Fatalf("failure %s: %d left in line", tc.failure, n)
		}
	}
}

func TestWaitCostNeverAdmitted(t *testing.T) {
	clk := newFakeClock()
	cfg := mustParse(t, `
rate_limit:
  enabled: true
  rules:
    - name: batch
      paths: ["/batch", "/one"]
      limit: "10/second"
      weights:
        "/batch": 5
`)
	// Core refuses such a weight at load; a policy swapped into the rule
	// afterwards (the Policy field is exported) can still make one.
	cfg.Rule("batch").Policy = &store.Policy{Name: "batch", Limits: []algo.Limit{{Count: 2, Period: time.Second}}}
	l := mustNew(t, cfg, clk)
	// A request of the rule waits (cost 1, the 3rd in the second): the
	// one that can never pass does not queue behind it.
	bg := context.Background()
	for range 2 {
		if err := l.Wait(bg, "GET", "/one", "k"); err != nil {
			t.Fatal(err)
		}
	}
	waiting := make(chan start, 1)
	goWaitOn(t, bg, l, clk, "/one", "k", 1, 1, waiting)
	clk.waitTimers(t, 1)
	ctx, cancel := context.WithTimeout(bg, 5*time.Second)
	defer cancel()
	err := l.Wait(ctx, "POST", "/batch", "k")
	if !errors.Is(err, ErrNeverAdmitted) || !strings.Contains(err.Error(), `rule "batch": cost 5, capacity 2`) {
		t.Fatalf("Wait = %v, want ErrNeverAdmitted naming the rule, cost and capacity", err)
	}
	if n, _ := clk.pending(); n != 1 || l.queued("k") != 1 {
		t.Fatalf("a request that can never pass waited (%d timers, %d in line; want the other's 1 and 1)", n, l.queued("k"))
	}
}

func TestNewRejectsCountByOutcome(t *testing.T) {
	cfg := mustParse(t, `
rate_limit:
  enabled: true
  rules:
    - name: logins
      paths: ["/login"]
      limit: "5/minute"
      count: failures
`)
	_, err := New(cfg, nil)
	if err == nil || !strings.Contains(err.Error(), `rule "logins"`) {
		t.Fatalf("New = %v, want an error naming rule \"logins\"", err)
	}
	l := mustNew(t, mustRate(t, 1, time.Second, 0), newFakeClock())
	if err := l.SetConfig(cfg); err == nil || !strings.Contains(err.Error(), `rule "logins"`) {
		t.Fatalf("SetConfig = %v, want an error naming rule \"logins\"", err)
	}
	if l.Core().Config().Rule("logins") != nil {
		t.Fatal("SetConfig swapped in a refused configuration")
	}
}

// TestNewRejectsWait: a rule's wait is refused, naming the rule: Wait
// waits for the room itself.
func TestNewRejectsWait(t *testing.T) {
	cfg := mustParse(t, `
rate_limit:
  enabled: true
  rules:
    - name: users
      paths: ["/users"]
      limit: "5/second"
      wait: 2s
`)
	if _, err := New(cfg, nil); err == nil || !strings.Contains(err.Error(), `rule "users" has wait: 2s`) {
		t.Fatalf("New = %v, want an error naming rule \"users\" and its wait", err)
	}
	l := mustNew(t, mustRate(t, 1, time.Second, 0), newFakeClock())
	if err := l.SetConfig(cfg); err == nil || l.Core().Config().Rule("users") != nil {
		t.Fatalf("SetConfig = %v, or swapped in a refused configuration", err)
	}
}

func TestDelayHoldsTheKey(t *testing.T) {
	clk := newFakeClock()
	l := mustNew(t, nil, clk)
	ctx := context.Background()
	if err := l.Delay(ctx, "k", 2*time.Second); err != nil {
		t.Fatal(err)
	}
	_ = l.Delay(ctx, "k", time.Second) // shorter: changes nothing
	_ = l.Delay(ctx, "k", -time.Second)
	starts := make(chan start, 1)
	goWait(t, ctx, l, clk, "k", 1, 1, starts)
	if d := clk.waitTimers(t, 1); d != 2*time.Second {
		t.Fatalf("hold %v, want 2s", d)
	}
	clk.Advance(2 * time.Second)
	if s := <-starts; s.err != nil || !s.at.Equal(t0.Add(2*time.Second)) {
		t.Fatalf("start %+v, want +2s", s)
	}
	// Not capped: the program asked for it (what upstreams say is capped
	// by ReadSignal and Observe); and a hold past the end of time holds.
	_ = l.Delay(ctx, "k", 100*time.Hour)
	goWait(t, ctx, l, clk, "k", 2, 1, starts)
	if d := clk.waitTimers(t, 1); d != 100*time.Hour {
		t.Fatalf("hold %v, want 100h", d)
	}
	clk.Advance(100 * time.Hour)
	<-starts
	_ = l.Delay(ctx, "forever", time.Duration(math.MaxInt64))
	goWait(t, ctx, l, clk, "forever", 3, 1, starts)
	if d := clk.waitTimers(t, 1); d < 100*365*24*time.Hour {
		t.Fatalf("hold %v, want past the end of time", d)
	}
}

func TestObserveHolds(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		s    Signal
		want time.Duration
	}{
		{"retry-after", Signal{RetryAfter: 3 * time.Second}, 3 * time.Second},
		{"remaining 0 until reset", Signal{HasRemaining: true, Remaining: 0, Reset: 7 * time.Second}, 7 * time.Second},
		{"the later of the two", Signal{RetryAfter: 2 * time.Second, HasRemaining: true, Reset: 5 * time.Second}, 5 * time.Second},
		{"capped", Signal{RetryAfter: time.Hour}, MaxHold},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			l := mustNew(t, nil, clk)
			l.Observe(ctx, "k", tc.s)
			starts := make(chan start, 1)
			goWait(t, ctx, l, clk, "k", 1, 1, starts)
			if d := clk.waitTimers(t, 1); d != tc.want {
				t.Fatalf("hold %v, want %v", d, tc.want)
			}
			clk.Advance(tc.want)
			if s := <-starts; s.err != nil || !s.at.Equal(t0.Add(tc.want)) {
				t.Fatalf("start %+v", s)
			}
		})
	}
	// Remaining 0 with no reset, or a count with no reset: nothing to go by.
	clk := newFakeClock()
	l := mustNew(t, nil, clk)
	l.Observe(ctx, "k", Signal{HasRemaining: true})
	l.Observe(ctx, "k", Signal{HasRemaining: true, Remaining: 1})
	for range 3 {
		if err := l.Wait(ctx, "GET", "/", "k"); err != nil {
			t.Fatal(err)
		}
	}
	if n, _ := clk.pending(); n != 0 {
		t.Fatalf("%d timers, want 0", n)
	}
}

// tryWait reports whether a Wait under key starts at once; when it does
// not, it cancels it.
func tryWait(t *testing.T, l *Limiter, clk *fakeClock, key string) bool {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- l.Wait(ctx, "GET", "/", key) }()
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return true
		default:
		}
		if n, _ := clk.pending(); n > 0 {
			cancel()
			if err := <-done; !errors.Is(err, context.Canceled) {
				t.Fatalf("cancelled Wait: %v", err)
			}
			return false
		}
		time.Sleep(time.Millisecond)
	}
}

func TestObserveBudget(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	l := mustNew(t, nil, clk)
	// Four requests start before anything is known.
	for range 4 {
		if err := l.Wait(ctx, "GET", "/", "k"); err != nil {
			t.Fatal(err)
		}
	}
	// The first answer says 4 remain; three others are still in flight,
	// and the upstream may not have counted them: one more may start.
	l.Observe(ctx, "k", Signal{HasRemaining: true, Remaining: 4, Reset: time.Second})
	if !tryWait(t, l, clk, "k") {
		t.Fatal("the one start the budget allows did not happen")
	}
	if tryWait(t, l, clk, "k") {
		t.Fatal("a start beyond the budget")
	}
	// Answers of the same window: the lower count wins, never raises.
	l.Observe(ctx, "k", Signal{HasRemaining: true, Remaining: 9, Reset: 900 * time.Millisecond})
	if tryWait(t, l, clk, "k") {
		t.Fatal("an answer of the same window raised the budget")
	}
	clk.Advance(500 * time.Millisecond)
	// An older window's answer (its reset earlier) does not raise it either.
	l.Observe(ctx, "k", Signal{HasRemaining: true, Remaining: 9, Reset: 100 * time.Millisecond})
	if tryWait(t, l, clk, "k") {
		t.Fatal("an older window's answer raised the budget")
	}
	// The window resets: starts are free again.
	clk.Advance(500 * time.Millisecond)
	if !tryWait(t, l, clk, "k") {
		t.Fatal("no start after the reset")
	}
	// A newer window's answer replaces the budget: 3 remain, and of the
	// 6 requests started, 5 are answered with it: 1 in flight, 2 may start.
	l.Observe(ctx, "k", Signal{})
	l.Observe(ctx, "k", Signal{HasRemaining: true, Remaining: 3, Reset: 2 * time.Second})
	for i := range 2 {
		if !tryWait(t, l, clk, "k") {
			t.Fatalf("start %d of the new window's budget did not happen", i)
		}
	}
	if tryWait(t, l, clk, "k") {
		t.Fatal("a start beyond the new window's budget")
	}
}

// TestObserveBudgetConcurrent runs goroutines against a simulated upstream
// counting 5 per fixed window of 1 s, which answers each request with its
// remaining count 10 ms after it starts: the Limiter, told only those
// answers, never lets more than 5 start in a window, with 4 workers and
// with 16 (more than the window's count: without the probe, all 16 would
// start at each reset, before any answer). One request and its answer come
// first: before any answer, nothing limits the key (its first contact).
// In a synctest bubble, on SystemClock: time moves only when every
// goroutine waits, so the answers come exactly 10 ms after their starts.
func TestObserveBudgetConcurrent(t *testing.T) {
	for _, workers := range []int64{4, 16} {
		t.Run(fmt.Sprintf("%d workers", workers), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testObserveBudgetConcurrent(t, workers) })
		})
	}
}

func testObserveBudgetConcurrent(t *testing.T, workers int64) {
	ctx := context.Background()
	l, err := New(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	var mu sync.Mutex
	counts := map[int64]int64{} // window → requests the upstream saw
	upstream := func() Signal {
		mu.Lock()
		defer mu.Unlock()
		now := time.Since(begin)
		w := int64(now / time.Second)
		counts[w]++
		reset := time.Duration(w+1)*time.Second - now
		return Signal{HasRemaining: true, Remaining: max(5-counts[w], 0), Reset: reset}
	}
	request := func() bool {
		if err := l.Wait(ctx, "GET", "/", "k"); err != nil {
			t.Error(err)
			return false
		}
		s := upstream()
		time.Sleep(10 * time.Millisecond) // the answer's way back
		l.Observe(ctx, "k", s)
		return true
	}
	request()
	const each = 15
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				if !request() {
					return
				}
			}
		})
	}
	wg.Wait()
	total := int64(0)
	for w, n := range counts {
		if n > 5 {
			t.Errorf("window %d: %d requests, limit 5", w, n)
		}
		total += n
	}
	if total != 1+workers*each {
		t.Fatalf("%d requests, want %d", total, 1+workers*each)
	}
}

// TestObserveProbe: once an upstream has reported a remaining count under
// a key, a key with no budget in force starts one request (the probe) and
// holds the others until an answer is observed, whose count then applies;
// when no answer comes, the others start a second after the probe; a
// request waiting for the probe leaves at once when its context ends; and
// a key whose upstream never reported a count never probes.
func TestObserveProbe(t *testing.T) {
	bg := context.Background()
	clk := newFakeClock()
	l := mustNew(t, nil, clk)
	mustStart := func(i int) {
		t.Helper()
		if err := l.Wait(bg, "GET", "/", "k"); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	// expect takes the reports of the requests ids (in any order: they
	// start at one instant), which must all have started at t0+at.
	expect := func(starts <-chan start, at time.Duration, ids ...int) {
		t.Helper()
		want := map[int]bool{}
		for _, i := range ids {
			want[i] = true
		}
		for range ids {
			select {
			case s := <-starts:
				if !want[s.i] || s.err != nil || !s.at.Equal(t0.Add(at)) {
					t.Fatalf("got request %d at +%v (err %v), want one of %v started at +%v", s.i, s.at.Sub(t0), s.err, ids, at)
				}
				delete(want, s.i)
			case <-time.After(10 * time.Second): // real time: it never started
				t.Fatalf("requests %v did not start (want starts at +%v)", want, at)
			}
		}
	}
	// The upstream reports a count: 1 more in the window of 1 s.
	mustStart(0)
	l.Observe(bg, "k", Signal{HasRemaining: true, Remaining: 1, Reset: time.Second})
	mustStart(1)
	l.Observe(bg, "k", Signal{HasRemaining: true, Remaining: 0, Reset: time.Second})
	clk.Advance(time.Second) // the window has reset: no budget in force

	// Request 2 is the probe; 3 and 4 wait for its answer, at most 1 s.
	mustStart(2)
	starts := make(chan start, 16)
	goWait(t, bg, l, clk, "k", 3, 1, starts)
	goWait(t, bg, l, clk, "k", 4, 2, starts)
	if d := clk.waitTimers(t, 1); d != time.Second {
		t.Fatalf("requests behind the probe wait %v, want 1s (the cap)", d)
	}
	// Its answer: 2 remain in a window of 3 s. Both start at once, on no
	// timer; the next waits for the window's reset.
	l.Observe(bg, "k", Signal{HasRemaining: true, Remaining: 2, Reset: 3 * time.Second})
	expect(starts, time.Second, 3, 4)
	goWait(t, bg, l, clk, "k", 5, 1, starts)
	if d := clk.waitTimers(t, 1); d != 3*time.Second {
		t.Fatalf("request 5 waits %v, want 3s (the budget's window)", d)
	}
	clk.Advance(3 * time.Second) // request 5 is the next probe
	expect(starts, 4*time.Second, 5)

	// No answer comes for probe 5: 6 and 7 start a second after it.
	goWait(t, bg, l, clk, "k", 6, 1, starts)
	goWait(t, bg, l, clk, "k", 7, 2, starts)
	if d := clk.waitTimers(t, 1); d != time.Second {
		t.Fatalf("requests behind the probe wait %v, want 1s", d)
	}
	clk.Advance(500 * time.Millisecond)
	if n := l.queued("k"); n != 2 {
		t.Fatalf("%d in line half-way to the cap, want 2", n)
	}
	clk.Advance(500 * time.Millisecond)
	expect(starts, 5*time.Second, 6, 7)
	mustStart(8) // and any other, until the next answer
	// An answer without a count (here: no response) ends the probe's wait
	// and the probing: the key's requests start freely until an answer
	// reports a count again.
	l.Observe(bg, "k", Signal{})
	mustStart(9)
	mustStart(10)
	for range 6 { // the answers of 3, 4, 6, 7, 9 and 10, without a count
		l.Observe(bg, "k", Signal{})
	}
	// A count again: 1 more until +6s; then request 12, waiting for the
	// window's reset, is the probe, and 13 waits for its answer, leaving
	// at once when its context ends.
	l.Observe(bg, "k", Signal{HasRemaining: true, Remaining: 1, Reset: time.Second})
	mustStart(11)
	goWait(t, bg, l, clk, "k", 12, 1, starts)
	if d := clk.waitTimers(t, 1); d != time.Second {
		t.Fatalf("request 12 waits %v, want 1s (the window's reset)", d)
	}
	clk.Advance(time.Second)
	expect(starts, 6*time.Second, 12)
	ctx, cancel := context.WithCancel(bg)
	goWait(t, ctx, l, clk, "k", 13, 1, starts)
	clk.waitTimers(t, 1)
	cancel()
	select {
	case s := <-starts:
		if s.i != 13 || !errors.Is(s.err, context.Canceled) || !s.at.Equal(t0.Add(6*time.Second)) {
			t.Fatalf("got %+v, want request 13 with context.Canceled at once", s)
		}
	case <-time.After(10 * time.Second): // real time
		t.Fatal("request 13 still waits for the probe after its context ended")
	}
	if n, _ := clk.pending(); n != 0 || l.queued("k") != 0 {
		t.Fatalf("%d timers and %d in line after the cancel, want 0 and 0", n, l.queued("k"))
	}
	// Probe 12's answer says 0 remain until a reset in 2 s: the request
	// waiting for it then waits for that hold, and is the next probe.
	goWait(t, bg, l, clk, "k", 14, 1, starts)
	clk.waitTimers(t, 1)
	l.Observe(bg, "k", Signal{HasRemaining: true, Remaining: 0, Reset: 2 * time.Second})
	eventually(t, func() (time.Duration, bool) { // the cap's timer gone, the hold's set
		n, d := clk.pending()
		return d, n == 1 && d == 2*time.Second
	})
	if n := l.queued("k"); n != 1 {
		t.Fatalf("%d in line, want request 14", n)
	}
	clk.Advance(2 * time.Second)
	expect(starts, 8*time.Second, 14)

	// A key whose upstream sent only a Retry-After never probes: after
	// the hold, every request waiting starts at once.
	l.Observe(bg, "quiet", Signal{RetryAfter: time.Second})
	for i := range 3 {
		goWait(t, bg, l, clk, "quiet", 20+i, i+1, starts)
	}
	clk.Advance(time.Second)
	expect(starts, 9*time.Second, 20, 21, 22)
}

// TestObserveProbeUndone: a probe that does not start after all (here its
// own rule's limit denies it) stops holding the key's other requests: a
// request under another rule becomes the probe at once.
func TestObserveProbeUndone(t *testing.T) {
	clk := newFakeClock()
	cfg := mustParse(t, `
rate_limit:
  enabled: true
  algorithm: gcra
  rules:
    - name: slow
      paths: ["/slow"]
      limit: "1/hour"
      burst: 1
  default: "1000/second"
`)
	l := mustNew(t, cfg, clk)
	bg := context.Background()
	if err := l.Wait(bg, "GET", "/slow", "k"); err != nil {
		t.Fatal(err)
	}
	l.Observe(bg, "k", Signal{HasRemaining: true, Remaining: 5, Reset: time.Second})
	clk.Advance(time.Second) // no budget in force: the next request probes
	starts := make(chan start, 2)
	goWaitOn(t, bg, l, clk, "/slow", "k", 1, 1, starts) // the probe, denied by its rule for the hour
	if d := clk.waitTimers(t, 1); d != time.Hour-time.Second {
		t.Fatalf("the /slow request waits %v, want 59m59s (its rule)", d)
	}
	done := make(chan error, 1)
	go func() { done <- l.Wait(bg, "GET", "/fast", "k") }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second): // real time: it waits on the fake clock
		t.Fatal("a request under another rule waits for a probe that never started")
	}
}

func TestMemoryBoundedWithManyKeys(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	l := mustNew(t, mustRate(t, 10, time.Second, 0), clk)
	// Observed requests leave nothing behind.
	for i := range 20_000 {
		key := fmt.Sprintf("k%d", i)
		if err := l.Wait(ctx, "GET", "/", key); err != nil {
			t.Fatal(err)
		}
		l.Observe(ctx, key, Signal{})
	}
	if n := l.states(); n != 0 {
		t.Fatalf("%d key states after observed requests, want 0", n)
	}
	// Requests never observed are forgotten a minute later.
	for i := range 20_000 {
		_ = l.Wait(ctx, "GET", "/", fmt.Sprintf("a%d", i))
	}
	clk.Advance(2 * time.Minute)
	for i := range 20_000 {
		_ = l.Wait(ctx, "GET", "/", fmt.Sprintf("b%d", i))
	}
	if n := l.states(); n > 2*20_000 || n < 20_000 {
		t.Fatalf("%d key states, want between 20000 and 40000 (the live ones, at most twice)", n)
	}
	if n := l.states(); n >= 40_000 {
		t.Fatalf("nothing swept: %d", n)
	}
}

func TestWaitAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocations differ under the race detector")
	}
	l := mustNew(t, mustRate(t, 1_000_000_000, time.Second, 1_000_000), SystemClock, WithClock(nil))
	ctx := context.Background()
	_ = l.Wait(ctx, "GET", "/x", "k")
	if n := testing.AllocsPerRun(1000, func() { _ = l.Wait(ctx, "GET", "/x", "k") }); n != 0 {
		t.Fatalf("Wait on a free key: %v allocations, want 0", n)
	}
	s := Signal{HasRemaining: true, Remaining: 1 << 40, Reset: time.Minute}
	if n := testing.AllocsPerRun(1000, func() { l.Observe(ctx, "k", s) }); n != 0 {
		t.Fatalf("Observe: %v allocations, want 0", n)
	}
	h := map[string]string{"ratelimit": `"default";r=4;t=1`, "retry-after": "1", "x-ratelimit-reset": "1700000000"}
	get := func(k string) string { return h[k] }
	if n := testing.AllocsPerRun(1000, func() { _ = ReadSignal(get, t0) }); n != 0 {
		t.Fatalf("ReadSignal: %v allocations, want 0", n)
	}
}

var _ store.Store = (*memstore.Store)(nil)

// TestObserveForgetsRequestsNeverObserved: requests a caller never
// reports (no Observe) stop counting as in flight within a minute, so they
// do not shrink a later budget for good.
func TestObserveForgetsRequestsNeverObserved(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	l := mustNew(t, nil, clk)
	for range 3 {
		if err := l.Wait(ctx, "GET", "/", "k"); err != nil {
			t.Fatal(err)
		}
	}
	clk.Advance(30 * time.Second)
	if err := l.Wait(ctx, "GET", "/", "k"); err != nil {
		t.Fatal(err)
	}
	// 30 s on: all four still count. The answer of the latest leaves 3
	// in flight: 5 remaining allow 2 starts.
	l.Observe(ctx, "k", Signal{HasRemaining: true, Remaining: 5, Reset: 10 * time.Second})
	for i := range 2 {
		if !tryWait(t, l, clk, "k") {
			t.Fatalf("start %d of 2", i)
		}
	}
	if tryWait(t, l, clk, "k") {
		t.Fatal("a third start: the requests in flight were not counted")
	}
	// Over a minute after the first three, their answers never came: only
	// the three starts of 30 s ago count, one of them answered now (the
	// first answer was counted against the oldest): 5 remain, 2 in
	// flight, 3 may start.
	clk.Advance(35 * time.Second)
	l.Observe(ctx, "k", Signal{HasRemaining: true, Remaining: 5, Reset: 10 * time.Second})
	for i := range 3 {
		if !tryWait(t, l, clk, "k") {
			t.Fatalf("start %d of 3: old requests never observed still count", i)
		}
	}
	if tryWait(t, l, clk, "k") {
		t.Fatal("a fourth start")
	}
}

func TestWaitBannedKey(t *testing.T) {
	cfg := mustParse(t, `
rate_limit:
  enabled: true
  exempt_paths: ["/health"]
  ban:
    networks: ["198.51.100.0/24"]
`)
	l := mustNew(t, cfg, newFakeClock())
	for _, path := range []string{"/x", "/health"} {
		if err := l.Wait(context.Background(), "GET", path, "198.51.100.7"); !errors.Is(err, ErrBanned) {
			t.Fatalf("%s: Wait = %v, want ErrBanned", path, err)
		}
	}
	if err := l.Wait(context.Background(), "GET", "/x", "203.0.113.1"); err != nil {
		t.Fatalf("a key outside the ban list: %v", err)
	}
	if n := l.queued("198.51.100.7"); n != 0 {
		t.Fatalf("%d left in line", n)
	}
}

// TestSpikeOfBudgetsSwept: the state of a spike of keys, each given a
// budget for 10 minutes, goes once their budgets have ended, within a
// minute of later requests, though the table never doubles again.
func TestSpikeOfBudgetsSwept(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	l := mustNew(t, mustRate(t, 10, time.Second, 0), clk)
	for i := range 20_000 {
		l.Observe(ctx, fmt.Sprintf("spike%d", i), Signal{HasRemaining: true, Remaining: 5, Reset: 10 * time.Minute})
	}
	if n := l.states(); n != 20_000 {
		t.Fatalf("%d key states during the budgets, want 20000", n)
	}
	clk.Advance(11 * time.Minute)
	for i := range 2_000 { // a little later traffic, observed, on fresh keys
		key := fmt.Sprintf("later%d", i)
		if err := l.Wait(ctx, "GET", "/", key); err != nil {
			t.Fatal(err)
		}
		l.Observe(ctx, key, Signal{})
	}
	if n := l.states(); n != 0 {
		t.Fatalf("%d key states left after the budgets ended, want 0", n)
	}
}
