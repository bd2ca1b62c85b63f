package core_test

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
)

// waitYAML is one rule, search, of the given limit, algorithm (and
// burst), wait and wait_queue lines.
const waitYAML = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: %q
      algorithm: %s
%s`

func waitConfig(t testing.TB, limit, algorithm, more string) *core.Config {
	t.Helper()
	cfg, err := core.ParseConfig(fmt.Appendf(nil, waitYAML, limit, algorithm, more), "wait.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// bubbleClock reads time.Now: in a testing/synctest bubble, the bubble's
// fake time, whose timers (the limiter's, on a clock that makes none)
// fire as it moves.
type bubbleClock struct{}

func (bubbleClock) Now() int64 { return time.Now().UnixNano() }

// heldEvents records Observer events as "outcome key allowed cost
// waited".
type heldEvents struct {
	mu  sync.Mutex
	got []string
}

func (e *heldEvents) observe(ev core.Event) {
	e.mu.Lock()
	e.got = append(e.got, fmt.Sprintf("%v %s %v %d %v", ev.Outcome, ev.Key, ev.Allowed, ev.Cost, ev.Waited))
	e.mu.Unlock()
}

func (e *heldEvents) take() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := strings.Join(e.got, "; ")
	e.got = nil
	return out
}

// waitLimiter is a limiter of cfg on clock, counting in a recording
// memory store on clock too, with its events recorded.
func waitLimiter(t *testing.T, cfg *core.Config, clock store.Clock) (*core.Limiter, *recStore, *heldEvents) {
	t.Helper()
	st := newRecStore(t, clock)
	ev := &heldEvents{}
	return core.NewLimiter(cfg, core.WithStore(st), core.WithClock(clock), core.WithObserver(ev.observe)), st, ev
}

// outcome is one request's Decision and when it was decided, after the
// start of the test.
type outcome struct {
	name string
	d    core.Decision
	at   time.Duration
}

// arrive starts a request of identity named name, in a goroutine, and
// waits (synctest.Wait) until it is decided or held, so that requests
// arrive in the order of the calls. The outcome goes to out.
func arrive(ctx context.Context, l *core.Limiter, identity, name string, begin time.Time, out chan<- outcome) {
	go func() {
		d := l.Decide(ctx, "GET", "/api/search", identity, false)
		out <- outcome{name, d, time.Since(begin)}
	}()
	synctest.Wait()
}

func (o outcome) String() string {
	return fmt.Sprintf("%s: allowed %v at +%v, waited %v, retry %v", o.name, o.d.Allowed, o.at, o.d.Waited, o.d.Result.RetryAfter)
}

// TestWaitFirstComeFirstServed: at 1/second (gcra) with wait: 2s, four
// requests at once: the first is admitted, the second held 1s, the third
// 2s, the fourth, whose wait the queue ahead of it would make 3s, refused
// at once with Retry-After 3s; each asks the store as said, and nothing
// of the held ones is counted until they are admitted.
func TestWaitFirstComeFirstServed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, st, ev := waitLimiter(t, waitConfig(t, "1/second", "gcra", "      wait: 2s\n"), bubbleClock{})
		begin := time.Now()
		out := make(chan outcome, 4)
		for _, name := range []string{"a", "b", "c", "d"} {
			arrive(context.Background(), l, "alice", name, begin, out)
		}
		want := []string{
			"a: allowed true at +0s, waited 0s, retry 0s",
			"d: allowed false at +0s, waited 0s, retry 3s",
			"b: allowed true at +1s, waited 1s, retry 0s",
			"c: allowed true at +2s, waited 2s, retry 0s",
		}
		for i, w := range want {
			if got := (<-out).String(); got != w {
				t.Errorf("decision %d: got %q, want %q", i, got, w)
			}
		}
		// a takes; b is denied and held; c, behind b, peeks at the cost of
		// both; d at the capacity (1), the rest worked out. At +1s b takes,
		// c (now the head) is denied; at +2s c takes.
		wantCalls := "alice search 1; alice search 1; peek alice search 1; peek alice search 1; alice search 1; alice search 1; alice search 1"
		if got := st.calls(); got != wantCalls {
			t.Errorf("store calls:\n got %s\nwant %s", got, wantCalls)
		}
		wantEvents := "allowed alice true 1 0s; denied alice false 1 0s; waited alice true 1 1s; waited alice true 1 2s"
		if got := ev.take(); got != wantEvents {
			t.Errorf("events:\n got %s\nwant %s", got, wantEvents)
		}
	})
}

// TestWaitWindowEstimate: under a fixed window of 2 a second with wait:
// 1s, the requests queued behind the first held one are admitted in the
// same next window, and the one that would need the window after is
// refused at once, Retry-After 2s (its whole wait).
func TestWaitWindowEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _, _ := waitLimiter(t, waitConfig(t, "2/second", "fixed_window", "      wait: 1s\n"), bubbleClock{})
		begin := time.Now() // the start of a second: a window
		out := make(chan outcome, 5)
		for _, name := range []string{"a", "b", "c", "d", "e"} {
			arrive(context.Background(), l, "alice", name, begin, out)
		}
		want := []string{
			"a: allowed true at +0s, waited 0s, retry 0s",
			"b: allowed true at +0s, waited 0s, retry 0s",
			"e: allowed false at +0s, waited 0s, retry 2s",
			"c: allowed true at +1s, waited 1s, retry 0s",
			"d: allowed true at +1s, waited 1s, retry 0s",
		}
		// c and d are admitted at the same instant, one after the other:
		// which of them reports first is up to the scheduler, so outcomes
		// of one instant are compared in the order of their names.
		got := make([]outcome, len(want))
		for i := range got {
			got[i] = <-out
		}
		slices.SortStableFunc(got, func(x, y outcome) int {
			return cmp.Or(cmp.Compare(x.at, y.at), strings.Compare(x.name, y.name))
		})
		for i, w := range want {
			if g := got[i].String(); g != w {
				t.Errorf("decision %d: got %q, want %q", i, g, w)
			}
		}
	})
}

// TestWaitRefusedAtOnce: a denial whose Retry-After passes the wait is
// the rule's ordinary 429, decided at once.
func TestWaitRefusedAtOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, st, ev := waitLimiter(t, waitConfig(t, "1/minute", "fixed_window", "      wait: 2s\n"), bubbleClock{})
		begin := time.Now()
		out := make(chan outcome, 2)
		arrive(context.Background(), l, "alice", "a", begin, out)
		arrive(context.Background(), l, "alice", "b", begin, out)
		<-out
		if got, want := (<-out).String(), "b: allowed false at +0s, waited 0s, retry 1m0s"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if got, want := st.calls(), "alice search 1; alice search 1"; got != want {
			t.Errorf("store calls: got %s, want %s", got, want)
		}
		if got, want := ev.take(), "allowed alice true 1 0s; denied alice false 1 0s"; got != want {
			t.Errorf("events: got %s, want %s", got, want)
		}
	})
}

// TestWaitQueueFull: with wait_queue: 1, a request arriving while one is
// held is refused at once, Retry-After what the queue would have made its
// wait.
func TestWaitQueueFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _, ev := waitLimiter(t, waitConfig(t, "1/second", "fixed_window", "      wait: 5s\n      wait_queue: 1\n"), bubbleClock{})
		begin := time.Now()
		out := make(chan outcome, 4)
		for _, name := range []string{"a", "b", "c"} {
			arrive(context.Background(), l, "alice", name, begin, out)
		}
		arrive(context.Background(), l, "bob", "bob", begin, out) // a queue per key
		want := []string{
			"a: allowed true at +0s, waited 0s, retry 0s",
			"c: allowed false at +0s, waited 0s, retry 2s",
			"bob: allowed true at +0s, waited 0s, retry 0s",
			"b: allowed true at +1s, waited 1s, retry 0s",
		}
		for i, w := range want {
			if got := (<-out).String(); got != w {
				t.Errorf("decision %d: got %q, want %q", i, got, w)
			}
		}
		if got, want := ev.take(), "allowed alice true 1 0s; denied alice false 1 0s; allowed bob true 1 0s; waited alice true 1 1s"; got != want {
			t.Errorf("events:\n got %s\nwant %s", got, want)
		}
	})
}

// TestWaitClientGone: a held request whose context ends leaves the queue
// at once, refused, having consumed nothing: the one behind it is
// admitted when the first's room comes, as if it had never come.
func TestWaitClientGone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, st, ev := waitLimiter(t, waitConfig(t, "1/second", "gcra", "      wait: 3s\n"), bubbleClock{})
		begin := time.Now()
		out := make(chan outcome, 3)
		arrive(context.Background(), l, "alice", "a", begin, out)
		ctx, cancel := context.WithCancel(context.Background())
		arrive(ctx, l, "alice", "b", begin, out)
		arrive(context.Background(), l, "alice", "c", begin, out)
		<-out // a
		st.calls()
		ev.take()
		time.Sleep(500 * time.Millisecond)
		cancel()
		if got, want := (<-out).String(), "b: allowed false at +500ms, waited 500ms, retry 1s"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		if got, want := (<-out).String(), "c: allowed true at +1s, waited 1s, retry 0s"; got != want {
			t.Errorf("got %q, want %q", got, want)
		}
		// b asked nothing more after it was denied; c, the head once b
		// left, took at +500ms (denied) and at +1s.
		if got, want := st.calls(), "alice search 1; alice search 1"; got != want {
			t.Errorf("store calls after a: got %s, want %s", got, want)
		}
		if got, want := ev.take(), "denied alice false 1 500ms; waited alice true 1 1s"; got != want {
			t.Errorf("events: got %s, want %s", got, want)
		}
	})
}

// TestWaitOtherServerTakesTheRoom: the store is shared (another limiter
// on it stands for another server); the held request asks it again when
// its Retry-After is over, and when the other took the room first, waits
// the new Retry-After if it is within its deadline, else is refused.
func TestWaitOtherServerTakesTheRoom(t *testing.T) {
	for _, tt := range []struct {
		name    string
		takes   int // the other server's takes, one a second from +1s
		allowed bool
	}{
		{"waits again", 1, true},
		{"refused past its deadline", 2, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				t0 := time.Unix(1_700_000_000, 0)
				ours := store.NewManualClock(t0)   // the limiter's: its timers
				stores := store.NewManualClock(t0) // the store's, moved apart
				cfg := waitConfig(t, "1/second", "gcra", "      wait: 2s\n")
				st := newRecStore(t, stores)
				l := core.NewLimiter(cfg, core.WithStore(st), core.WithClock(ours))
				other := core.NewLimiter(cfg, core.WithStore(st), core.WithClock(stores))
				ctx := context.Background()
				if d := l.Decide(ctx, "GET", "/api/search", "alice", false); !d.Allowed {
					t.Fatal("the first request was refused")
				}
				done := make(chan core.Decision, 1)
				go func() { done <- l.Decide(ctx, "GET", "/api/search", "alice", false) }()
				synctest.Wait() // held: a timer of 1s
				for i := range 2 {
					stores.Advance(time.Second)
					if i < tt.takes {
						if d := other.Decide(ctx, "GET", "/api/search", "alice", false); !d.Allowed {
							t.Fatalf("the other server's take %d was refused", i+1)
						}
					}
					if ours.Timers() != 1 {
						t.Fatalf("second %d: %d timers, want 1 (the held request's)", i+1, ours.Timers())
					}
					ours.Advance(time.Second)
					synctest.Wait()
				}
				d := <-done
				if d.Allowed != tt.allowed || d.Waited != 2*time.Second || d.Allowed == (d.Result.RetryAfter != 0) {
					t.Errorf("got allowed %v, waited %v, retry after %v; want allowed %v, waited 2s", d.Allowed, d.Waited, d.Result.RetryAfter, tt.allowed)
				}
				if ours.Timers() != 0 {
					t.Errorf("%d timers left", ours.Timers())
				}
			})
		})
	}
}

// TestWaitManyKeysFIFO: 8 keys, 25 requests each arriving in rounds (one
// per key each round), at 10 a second with a burst of 1 (one each 100ms)
// and wait: 3s: every request is admitted, request i of a key exactly
// i×100ms after the start, having waited that long: first come, first
// served per key, each key's queue apart from the others'.
func TestWaitManyKeysFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := waitConfig(t, "10/second", "gcra\n      burst: 1", "      wait: 3s\n      wait_queue: 30\n")
		l, _, _ := waitLimiter(t, cfg, bubbleClock{})
		begin := time.Now()
		const keys, rounds = 8, 25
		out := make(chan outcome, keys*rounds)
		for i := range rounds {
			for k := range keys {
				go func() {
					d := l.Decide(context.Background(), "GET", "/api/search", fmt.Sprint("user", k), false)
					out <- outcome{fmt.Sprint(k, "/", i), d, time.Since(begin)}
				}()
			}
			synctest.Wait()
		}
		for range keys * rounds {
			o := <-out
			var k, i int
			fmt.Sscanf(o.name, "%d/%d", &k, &i)
			want := time.Duration(i) * 100 * time.Millisecond
			if !o.d.Allowed || o.at != want || o.d.Waited != want {
				t.Errorf("%s: got allowed %v at +%v, waited %v; want allowed at +%v, waited that long", o.name, o.d.Allowed, o.at, o.d.Waited, want)
			}
		}
	})
}

// TestWaitConfig: what wait and wait_queue accept, and their errors,
// each naming the file, line, rule, field and value.
func TestWaitConfig(t *testing.T) {
	rule := func(lines ...string) string {
		return "rate_limit:\n  enabled: true\n  rules:\n    - name: search\n      paths: [/s]\n      limit: 1/second\n" +
			strings.Join(lines, "\n") + "\n"
	}
	for _, tt := range []struct {
		doc       string
		wait      time.Duration
		wantError string
	}{
		{rule("      wait: 2s"), 2 * time.Second, ""},
		{rule("      wait: 500ms", "      wait_queue: 1"), 500 * time.Millisecond, ""},
		{rule("      wait: 1min", "      wait_queue: 1000"), time.Minute, ""},
		{rule("      wait: 1m30s"), 0, `rate-limit config w.yaml:7: rule "search": field "wait": value "1m30s": at most 1m0s: a request is held no longer`},
		{rule("      wait: 0s"), 0, `rate-limit config w.yaml:7: rule "search": field "wait": value "0s": want a positive duration such as 500ms, 2s or 1m`},
		{rule("      wait: -1s"), 0, `rate-limit config w.yaml:7: rule "search": field "wait": value "-1s": want a positive duration such as 500ms, 2s or 1m`},
		{rule("      wait: soon"), 0, `rate-limit config w.yaml:7: rule "search": field "wait": value "soon": want a duration such as 500ms, 2s or 1m`},
		{rule("      wait: [2s]"), 0, `rate-limit config w.yaml:7: rule "search": field "wait": want a string`},
		{rule("      count: failures", "      wait: 2s"), 0, `rate-limit config w.yaml:8: rule "search": field "wait": value "2s": a rule that counts failures decides after the handler; wait applies to rules that count all requests`},
		{rule("      algorithm: gcra", "      cost: response", "      wait: 2s"), 0, `rate-limit config w.yaml:9: rule "search": field "wait": value "2s": a rule charged by response (cost: response) admits while its caller has a unit left and charges after the handler; wait applies to rules that count before it`},
		{rule("      mode: shadow", "      wait: 2s"), 0, `rate-limit config w.yaml:8: rule "search": field "wait": value "2s": a rule in shadow mode refuses nothing, so no request would wait`},
		{strings.Replace(rule("      wait: 2s"), "enabled: true", "enabled: true\n  mode: shadow", 1), 0, `rate-limit config w.yaml:8: rule "search": field "wait": value "2s": a rule in shadow mode refuses nothing, so no request would wait`},
		{rule("      wait_queue: 5"), 0, `rate-limit config w.yaml:7: rule "search": field "wait_queue": value "5": wait_queue needs wait: it bounds the requests held by the rule's wait`},
		{rule("      wait: 2s", "      wait_queue: 0"), 0, `rate-limit config w.yaml:8: rule "search": field "wait_queue": value "0": want 1 to 1000 requests`},
		{rule("      wait: 2s", "      wait_queue: 1001"), 0, `rate-limit config w.yaml:8: rule "search": field "wait_queue": value "1001": want 1 to 1000 requests`},
		{rule("      wait: 2s", "      wait_queue: many"), 0, `rate-limit config w.yaml:8: rule "search": field "wait_queue": value "many": want an integer`},
	} {
		cfg, err := core.ParseConfig([]byte(tt.doc), "w.yaml")
		switch {
		case tt.wantError == "" && err != nil:
			t.Errorf("%s: %v", tt.doc, err)
		case tt.wantError == "" && cfg.Rule("search").Wait() != tt.wait:
			t.Errorf("%s: wait %v, want %v", tt.doc, cfg.Rule("search").Wait(), tt.wait)
		case tt.wantError != "" && (err == nil || err.Error() != tt.wantError):
			t.Errorf("%s:\n got %v\nwant %s", tt.doc, err, tt.wantError)
		}
	}
	// In code, WaitQueue 0 is the default; a negative one an error.
	spec := core.Spec{Enabled: true, Rules: []core.RuleSpec{{Name: "s", Paths: []string{"/s"}, Limit: []string{"1/s"}, Wait: "1s", WaitQueue: -1}}}
	if _, err := core.NewConfig(spec); err == nil || err.Error() != `rate-limit config: rule "s": field "wait_queue": value "-1": want 1 to 1000 requests` {
		t.Errorf("WaitQueue -1: got %v", err)
	}
	spec.Rules[0].WaitQueue = 0
	if cfg, err := core.NewConfig(spec); err != nil || cfg.Rule("s").Wait() != time.Second {
		t.Errorf("WaitQueue 0: got %v", err)
	}
}

// TestWaitPlans: a plan's variant of a rule waits as the rule does.
func TestWaitPlans(t *testing.T) {
	cfg := waitConfig(t, "1/second", "gcra", "      wait: 2s\n  tiers:\n    pro:\n      rules:\n        search: 2/second\n")
	if got := cfg.PlanRule("pro", "search").Wait(); got != 2*time.Second {
		t.Errorf("the pro plan's search waits %v, want 2s", got)
	}
}

// TestWaitNoQueueJumping: a request that arrives when the room a held
// request waits for has come, before the held one has taken it, queues
// behind it instead of taking it (the store's clock is moved apart from
// the limiter's, whose timers hold the held request back).
func TestWaitNoQueueJumping(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Unix(1_700_000_000, 0)
		ours := store.NewManualClock(t0)   // the limiter's: its timers
		stores := store.NewManualClock(t0) // the store's
		st := newRecStore(t, stores)
		l := core.NewLimiter(waitConfig(t, "1/second", "gcra", "      wait: 3s\n"), core.WithStore(st), core.WithClock(ours))
		out := make(chan outcome, 3)
		for _, name := range []string{"a", "b"} {
			arrive(context.Background(), l, "alice", name, time.Now(), out)
		}
		<-out // a
		// b's room is there in the store; b sleeps on.
		stores.Advance(time.Second)
		arrive(context.Background(), l, "alice", "c", time.Now(), out)
		select {
		case o := <-out:
			t.Fatalf("%v, while b waits for the room", o)
		default:
		}
		ours.Advance(time.Second)
		synctest.Wait()
		if o := <-out; o.name != "b" || !o.d.Allowed || o.d.Waited != time.Second {
			t.Fatalf("got %v, want b admitted after 1s", o)
		}
		stores.Advance(time.Second)
		ours.Advance(time.Second)
		synctest.Wait()
		// c came when the limiter's clock read t0: it waited 2s by it.
		if o := <-out; o.name != "c" || !o.d.Allowed || o.d.Waited != 2*time.Second {
			t.Fatalf("got %v, want c admitted after 2s", o)
		}
	})
}

// TestWaitClientGoneBehind: a request held behind another whose context
// ends leaves the queue at once, refused, and the one behind it moves up:
// it is admitted a second after the first, not two.
func TestWaitClientGoneBehind(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, st, _ := waitLimiter(t, waitConfig(t, "1/second", "gcra", "      wait: 3s\n"), bubbleClock{})
		begin := time.Now()
		out := make(chan outcome, 4)
		ctx, cancel := context.WithCancel(context.Background())
		arrive(context.Background(), l, "alice", "a", begin, out)
		arrive(context.Background(), l, "alice", "b", begin, out)
		arrive(ctx, l, "alice", "c", begin, out)
		arrive(context.Background(), l, "alice", "d", begin, out)
		<-out // a
		st.calls()
		time.Sleep(500 * time.Millisecond)
		cancel()
		want := []string{
			"c: allowed false at +500ms, waited 500ms, retry 2s",
			"b: allowed true at +1s, waited 1s, retry 0s",
			"d: allowed true at +2s, waited 2s, retry 0s",
		}
		for i, w := range want {
			if got := (<-out).String(); got != w {
				t.Errorf("decision %d: got %q, want %q", i, got, w)
			}
		}
		// b takes at +1s; d, the head then, at +1s (denied) and +2s.
		if got, want := st.calls(), "alice search 1; alice search 1; alice search 1"; got != want {
			t.Errorf("store calls after a: got %s, want %s", got, want)
		}
	})
}

// TestWaitBucketEstimate: under a token bucket of 2 a second (a token
// each 500ms) with wait: 700ms, once two requests have emptied it, the
// third is held 500ms; the fourth, which needs the bucket to hold two
// tokens (the third's and its own: 1s), is refused at once, Retry-After
// 1s.
func TestWaitBucketEstimate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, _, _ := waitLimiter(t, waitConfig(t, "2/second", "token_bucket", "      wait: 700ms\n"), bubbleClock{})
		begin := time.Now()
		out := make(chan outcome, 4)
		for _, name := range []string{"a", "b", "c", "d"} {
			arrive(context.Background(), l, "alice", name, begin, out)
		}
		want := []string{
			"a: allowed true at +0s, waited 0s, retry 0s",
			"b: allowed true at +0s, waited 0s, retry 0s",
			"d: allowed false at +0s, waited 0s, retry 1s",
			"c: allowed true at +500ms, waited 500ms, retry 0s",
		}
		for i, w := range want {
			if got := (<-out).String(); got != w {
				t.Errorf("decision %d: got %q, want %q", i, got, w)
			}
		}
	})
}

// TestWaitQueueFullWithRoom: a request refused by a full queue while the
// room the held one waits for has come (and more: a bucket of 3, at 2 a
// second) gets a refusal that shows nothing remaining, the room being
// the held request's, and Retry-After 1 (it would have been admitted
// with it).
func TestWaitQueueFullWithRoom(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		t0 := time.Unix(1_700_000_000, 0)
		ours, stores := store.NewManualClock(t0), store.NewManualClock(t0)
		cfg := waitConfig(t, "2/second", "gcra\n      burst: 3", "      wait: 3s\n      wait_queue: 1\n")
		l := core.NewLimiter(cfg, core.WithStore(newRecStore(t, stores)), core.WithClock(ours))
		out := make(chan outcome, 4)
		for _, name := range []string{"a", "b", "c", "d"} {
			arrive(context.Background(), l, "alice", name, time.Now(), out)
		}
		for range 3 {
			<-out
		}
		stores.Advance(1500 * time.Millisecond) // 3 tokens: d's, and 2 more
		d := l.Decide(context.Background(), "GET", "/api/search", "alice", false)
		if d.Allowed || d.Status() != 429 || d.Result.Remaining != 0 || d.Result.Limits[0].Remaining != 0 || d.RetryAfterSeconds() != 1 {
			t.Errorf("got allowed %v, status %d, remaining %d (%d), Retry-After %d; want a 429, nothing remaining, 1",
				d.Allowed, d.Status(), d.Result.Remaining, d.Result.Limits[0].Remaining, d.RetryAfterSeconds())
		}
		ours.Advance(500 * time.Millisecond)
		if o := <-out; o.name != "d" || !o.d.Allowed {
			t.Errorf("got %v, want d admitted", o)
		}
	})
}
