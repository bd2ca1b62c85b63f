package core_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

const outcomeYAML = `rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "3/minute"
      count: failures
    - name: export
      paths: ["/export"]
      limit: "2/minute"
      count: successes
    - name: search
      paths: ["/search"]
      limit: "2/minute"
      count: all
  default: "100/minute"
`

// callLog is a store that records each call ("peek key rule cost" or
// "take key rule cost") before passing it on; fail makes every call fail.
type callLog struct {
	store.Store
	mu    sync.Mutex
	calls []string
	fail  error
	// refuseCancelled fails a call whose context has ended, as the Redis
	// store does.
	refuseCancelled bool
}

func (s *callLog) record(ctx context.Context, op, key string, p *store.Policy, cost int64) error {
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("%s %s %s %d", op, key, p.Name, cost))
	s.mu.Unlock()
	if s.refuseCancelled && ctx.Err() != nil {
		return ctx.Err()
	}
	return s.fail
}

func (s *callLog) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	if err := s.record(ctx, "take", key, p, cost); err != nil {
		return store.Result{}, err
	}
	return s.Store.Take(ctx, key, p, cost)
}

func (s *callLog) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	if err := s.record(ctx, "peek", key, p, cost); err != nil {
		return store.Result{}, err
	}
	return s.Store.Peek(ctx, key, p, cost)
}

// Reset records "reset key rule" before passing it on.
func (s *callLog) Reset(ctx context.Context, key string, p *store.Policy) (bool, error) {
	s.mu.Lock()
	s.calls = append(s.calls, fmt.Sprintf("reset %s %s", key, p.Name))
	fail := s.fail
	s.mu.Unlock()
	if fail != nil {
		return false, fail
	}
	return s.Store.Reset(ctx, key, p)
}

func (s *callLog) drain() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

// outcomeEvents records observer events as "rule outcome allowed cost".
type outcomeEvents struct {
	mu   sync.Mutex
	evs  []string
	last core.Event
}

func (e *outcomeEvents) observe(ev core.Event) {
	e.mu.Lock()
	e.evs = append(e.evs, fmt.Sprintf("%s %v %v %d", ev.Rule, ev.Outcome, ev.Allowed, ev.Cost))
	e.last = ev
	e.mu.Unlock()
}

func (e *outcomeEvents) drain() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := e.evs
	e.evs = nil
	return v
}

type outcomeEnv struct {
	t     *testing.T
	lim   *core.Limiter
	store *callLog
	evs   *outcomeEvents
	logs  *bytes.Buffer
	clock *store.ManualClock
}

func newOutcomeEnv(t *testing.T, yaml string, opts ...core.Option) *outcomeEnv {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "o.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0)) // the start of a minute
	e := &outcomeEnv{t: t, store: &callLog{Store: memstore.New(memstore.WithClock(clock))}, evs: &outcomeEvents{}, logs: &bytes.Buffer{}, clock: clock}
	opts = append([]core.Option{core.WithStore(e.store), core.WithObserver(e.evs.observe), core.WithClock(clock), core.WithLogger(slog.New(slog.NewTextHandler(e.logs, nil)))}, opts...)
	e.lim = core.NewLimiter(cfg, opts...)
	return e
}

// request decides a request for path and, when it goes to the handler,
// completes it with status; it checks the store calls and events of
// each phase.
func (e *outcomeEnv) request(path string, status int, want outcomeWant) core.Decision {
	e.t.Helper()
	d := e.lim.Decide(context.Background(), "POST", core.Path(path), "alice", false)
	where := fmt.Sprintf("POST %s answered %d", path, status)
	if d.Allowed != want.allowed || d.Deferred() != want.deferred || d.Status() != want.status {
		e.t.Fatalf("%s: Allowed %v, Deferred %v, Status %d; want %v, %v, %d", where, d.Allowed, d.Deferred(), d.Status(), want.allowed, want.deferred, want.status)
	}
	h := http.Header{}
	d.SetHeaders(h)
	if got := h.Get("RateLimit"); got != want.rateLimit {
		e.t.Fatalf("%s: RateLimit %q, want %q", where, got, want.rateLimit)
	}
	e.check(where+", decided", want.decideCalls, want.decideEvents)
	if d.Allowed {
		e.lim.Complete(context.Background(), &d, status)
	}
	e.check(where+", completed", want.completeCalls, want.completeEvents)
	return d
}

func (e *outcomeEnv) check(where string, calls, evs []string) {
	e.t.Helper()
	if got := e.store.drain(); !slices.Equal(got, calls) {
		e.t.Fatalf("%s: store calls %q, want %q", where, got, calls)
	}
	if got := e.evs.drain(); !slices.Equal(got, evs) {
		e.t.Fatalf("%s: events %q, want %q", where, got, evs)
	}
}

type outcomeWant struct {
	allowed, deferred             bool
	status                        int
	rateLimit                     string
	decideCalls, decideEvents     []string
	completeCalls, completeEvents []string
}

func list(s ...string) []string { return s }

func TestCountByOutcomeConfig(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(outcomeYAML), "o.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for rule, want := range map[string]string{"login": "failures", "export": "successes", "search": "all", "default": "all"} {
		if got := cfg.Rule(rule).Count(); got != want {
			t.Errorf("rule %s: Count %q, want %q", rule, got, want)
		}
	}
	_, err = core.ParseConfig([]byte(strings.Replace(outcomeYAML, "count: failures", "count: errors", 1)), "o.yaml")
	const want = `rate-limit config o.yaml:7: rule "login": field "count": value "errors": want all, failures or successes`
	var ce *core.ConfigError
	if err == nil || err.Error() != want || !errors.As(err, &ce) || ce.Line != 7 || ce.Rule != "login" || ce.Field != "count" || ce.Value != "errors" {
		t.Errorf("bad count: got %v, want %s", err, want)
	}
	_, err = core.ParseConfig([]byte(strings.Replace(outcomeYAML, "count: failures", "count: [failures]", 1)), "o.yaml")
	if want := `rate-limit config o.yaml:7: rule "login": field "count": want a string`; err == nil || err.Error() != want {
		t.Errorf("count as a list: got %v, want %s", err, want)
	}
	_, err = core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{{Name: "a", Paths: []string{"/a"}, Limit: []string{"1/second"}, Count: "Failures"}}})
	if want := `rate-limit config: rule "a": field "count": value "Failures": want all, failures or successes`; err == nil || err.Error() != want {
		t.Errorf("bad count in a Spec: got %v, want %s", err, want)
	}
}

// TestRuleCounts: which statuses each rule of outcomeYAML counts.
func TestRuleCounts(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(outcomeYAML), "o.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rule   string
		status int
		want   bool
	}{
		{"search", 200, true}, {"search", 500, true},
		{"login", 200, false}, {"login", 302, false}, {"login", 399, false},
		{"login", 400, true}, {"login", 401, true}, {"login", 429, true}, {"login", 503, true},
		{"export", 200, true}, {"export", 399, true}, {"export", 400, false}, {"export", 500, false},
	} {
		if got := cfg.Rule(c.rule).Counts(c.status); got != c.want {
			t.Errorf("rule %s: Counts(%d) = %v, want %v", c.rule, c.status, got, c.want)
		}
	}
}

// TestCountFailures: /login counts only failures. Successes pass and are
// never counted; failures are counted after the handler; once three are
// counted, the next request is refused before the handler, success or
// not, until the window ends.
func TestCountFailures(t *testing.T) {
	e := newOutcomeEnv(t, outcomeYAML)
	const take, peek = "take alice login 1", "peek alice login 1"
	for range 5 {
		e.request("/login", 200, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=2;t=60`,
			decideCalls: list(peek), completeEvents: list("login allowed true 0")})
	}
	for i := range 3 {
		e.request("/login", 401, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: fmt.Sprintf(`"login";r=%d;t=60`, 2-i),
			decideCalls: list(peek), completeCalls: list(take), completeEvents: list("login allowed true 1")})
	}
	for _, status := range []int{200, 401} {
		e.request("/login", status, outcomeWant{status: 429, rateLimit: `"login";r=0;t=60`,
			decideCalls: list(peek), decideEvents: list("login denied false 1")})
	}
	e.clock.Advance(time.Minute)
	e.request("/login", 500, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=2;t=60`,
		decideCalls: list(peek), completeCalls: list(take), completeEvents: list("login allowed true 1")})
}

// TestCountSuccesses: /export counts only successes; /search, count: all,
// counts every request before the handler and defers nothing.
func TestCountSuccesses(t *testing.T) {
	e := newOutcomeEnv(t, outcomeYAML)
	for range 3 {
		e.request("/export", 404, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"export";r=1;t=60`,
			decideCalls: list("peek alice export 1"), completeEvents: list("export allowed true 0")})
	}
	for i := range 2 {
		e.request("/export", 201, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: fmt.Sprintf(`"export";r=%d;t=60`, 1-i),
			decideCalls: list("peek alice export 1"), completeCalls: list("take alice export 1"), completeEvents: list("export allowed true 1")})
	}
	e.request("/export", 404, outcomeWant{status: 429, rateLimit: `"export";r=0;t=60`,
		decideCalls: list("peek alice export 1"), decideEvents: list("export denied false 1")})
	e.request("/search", 500, outcomeWant{allowed: true, status: 200, rateLimit: `"search";r=1;t=60`,
		decideCalls: list("take alice search 1"), decideEvents: list("search allowed true 1")})
}

// TestCompleteOnce: Complete counts a deferred Decision once, and does
// nothing for one that is not deferred.
func TestCompleteOnce(t *testing.T) {
	e := newOutcomeEnv(t, outcomeYAML)
	d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false)
	e.lim.Complete(t.Context(), &d, 401)
	e.lim.Complete(t.Context(), &d, 401)
	if d.Deferred() {
		t.Error("a completed Decision is still deferred")
	}
	e.check("completed twice", list("peek alice login 1", "take alice login 1"), list("login allowed true 1"))
	s := e.lim.Decide(t.Context(), "POST", "/search", "alice", false)
	e.lim.Complete(t.Context(), &s, 401)
	var zero core.Decision
	e.lim.Complete(t.Context(), &zero, 401)
	e.check("not deferred", list("take alice search 1"), list("search allowed true 1"))
}

// TestCompleteCancelled: the request's context is cancelled (the client
// went away) by the time the handler answers: the failure is counted all
// the same, under a context that is not cancelled.
// The store is remote (its calls are bounded by a deadline) or in this
// process (a store.LocalStore: no deadline).
func TestCompleteCancelled(t *testing.T) {
	for _, local := range []bool{false, true} {
		e := newOutcomeEnv(t, outcomeYAML)
		e.store.refuseCancelled = true
		if local {
			e.lim = core.NewLimiter(e.lim.Config(), core.WithStore(localLog{e.store}), core.WithObserver(e.evs.observe))
		}
		ctx, cancel := context.WithCancel(t.Context())
		d := e.lim.Decide(ctx, "POST", "/login", "alice", false)
		cancel()
		e.lim.Complete(ctx, &d, 401)
		e.check(fmt.Sprintf("cancelled, local store %v", local), list("peek alice login 1", "take alice login 1"), list("login allowed true 1"))
		if e.logs.Len() != 0 {
			t.Errorf("logged %q, want nothing", e.logs.String())
		}
	}
}

// localLog is a callLog that says it keeps its counters in this process.
type localLog struct{ *callLog }

func (localLog) Local() bool { return true }

// TestCountByOutcomeStoreDown: with fail-open, a request whose Peek fails
// passes, and its failure is still taken after the handler; a Take that
// fails too is reported with its error and logged. With fail-closed the
// Peek's failure is a 503 and nothing is deferred.
func TestCountByOutcomeStoreDown(t *testing.T) {
	down := errors.New("store down")
	e := newOutcomeEnv(t, outcomeYAML, core.WithWarnInterval(0))
	e.store.fail = down
	d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false)
	if !d.Allowed || !d.Deferred() || !errors.Is(d.Err, down) {
		t.Fatalf("fail-open: Allowed %v, Deferred %v, Err %v; want true, true, %v", d.Allowed, d.Deferred(), d.Err, down)
	}
	e.check("decided", list("peek alice login 1"), nil)
	e.lim.Complete(t.Context(), &d, 401)
	got := e.evs.last
	if got.Outcome != core.OutcomeStoreError || !got.Allowed || got.Cost != 1 || !errors.Is(got.Err, down) || got.Rule != "login" {
		t.Errorf("failed Take: event %+v, want store_error, allowed, cost 1, the store's error", got)
	}
	logs := e.logs.String()
	if strings.Count(logs, "rate-limit store failed") != 2 || !strings.Contains(logs, `failure_policy="open: requests pass"`) || !strings.Contains(logs, `failure_policy="served: its outcome is not counted"`) {
		t.Errorf("logged %q, want the Peek's failure (open) and the Take's (not counted)", logs)
	}
	// A success after a failed Peek: no Take; the event is the Peek's error.
	e.check("completed", list("take alice login 1"), list("login store_error true 1"))
	d = e.lim.Decide(t.Context(), "POST", "/login", "alice", false)
	e.lim.Complete(t.Context(), &d, 200)
	if got = e.evs.last; got.Outcome != core.OutcomeStoreError || !got.Allowed || !errors.Is(got.Err, down) {
		t.Errorf("failed Peek, success: event %+v, want store_error with the Peek's error", got)
	}
	e.check("success after a failed peek", list("peek alice login 1"), list("login store_error true 1"))

	closed := newOutcomeEnv(t, outcomeYAML, core.WithFailOpen(false))
	closed.store.fail = down
	closed.request("/login", 401, outcomeWant{status: 503, decideCalls: list("peek alice login 1"), decideEvents: list("login store_error false 1")})
}

// TestCountByOutcomeShadow: a rule in shadow mode that counts failures
// defers its count and reports what it would deny; beside an enforced
// rule that counts every request, both count, each at its moment.
func TestCountByOutcomeShadow(t *testing.T) {
	const yaml = `rate_limit:
  enabled: true
  rules:
    - name: guard
      paths: ["/login"]
      limit: "2/minute"
      count: failures
      mode: shadow
    - name: login
      paths: ["/login"]
      limit: "100/minute"
  default: "100/minute"
`
	e := newOutcomeEnv(t, yaml, core.WithWarnInterval(time.Hour))
	for i := range 2 {
		e.request("/login", 401, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: fmt.Sprintf(`"login";r=%d;t=60`, 99-i),
			decideCalls: list("take alice login 1", "peek alice guard 1"), decideEvents: list("login allowed true 1"),
			completeCalls: list("take alice guard 1"), completeEvents: list("guard allowed true 1")})
	}
	d := e.request("/login", 401, outcomeWant{allowed: true, status: 200, rateLimit: `"login";r=97;t=60`,
		decideCalls: list("take alice login 1", "peek alice guard 1"), decideEvents: list("login allowed true 1", "guard shadow_denied true 1")})
	if !d.ShadowDenied {
		t.Error("the guard would deny: ShadowDenied is false")
	}
	// A rule in shadow mode alone: the Decision is its own, without headers.
	solo := newOutcomeEnv(t, strings.Replace(yaml, `    - name: login
      paths: ["/login"]
      limit: "100/minute"
`, "", 1)+"  mode: shadow\n")
	solo.request("/login", 403, outcomeWant{allowed: true, deferred: true, status: 200,
		decideCalls: list("peek alice guard 1"), completeCalls: list("take alice guard 1"), completeEvents: list("guard allowed true 1")})
	// Refused by the enforced rule: the shadow rule counts nothing.
	tight := newOutcomeEnv(t, strings.Replace(yaml, `limit: "100/minute"
  default`, `limit: "1/minute"
  default`, 1))
	tight.request("/login", 401, outcomeWant{allowed: true, deferred: true, status: 200, rateLimit: `"login";r=0;t=60`,
		decideCalls: list("take alice login 1", "peek alice guard 1"), decideEvents: list("login allowed true 1"),
		completeCalls: list("take alice guard 1"), completeEvents: list("guard allowed true 1")})
	tight.request("/login", 401, outcomeWant{status: 429, rateLimit: `"login";r=0;t=60`,
		decideCalls: list("take alice login 1", "peek alice guard 1"), decideEvents: list("login denied false 1", "guard allowed true 0")})
}

// TestCountByOutcomeOvershoot: the bound on requests in flight. With a
// limit of 3 failures per minute, 2 failures already counted and C
// requests of one identity in the handler at once (all past the check
// before any answers), every one is served: limit + C − 1 failures
// handled in the window, exactly limit counted, C − 1 counts denied
// (reported OutcomeOvershoot, Allowed); the next request is refused before
// the handler.
func TestCountByOutcomeOvershoot(t *testing.T) {
	const limit, c = 3, 8
	e := newOutcomeEnv(t, outcomeYAML)
	for range limit - 1 {
		d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false)
		e.lim.Complete(t.Context(), &d, 401)
	}
	var (
		decided, handled sync.WaitGroup
		release          = make(chan struct{})
		mu               sync.Mutex
		served           int
	)
	decided.Add(c)
	for range c {
		handled.Go(func() {
			d := e.lim.Decide(context.Background(), "POST", "/login", "alice", false)
			decided.Done()
			if !d.Allowed {
				return
			}
			<-release // the handler runs until every request is in
			mu.Lock()
			served++
			mu.Unlock()
			e.lim.Complete(context.Background(), &d, 401)
		})
	}
	decided.Wait()
	close(release)
	handled.Wait()
	counted, overshoot := 0, 0
	for _, ev := range e.evs.drain() {
		switch ev {
		case "login allowed true 1":
			counted++
		case "login overshoot true 1":
			overshoot++
		default:
			t.Errorf("event %q", ev)
		}
	}
	if total := limit - 1 + served; served != c || total != limit+c-1 || counted != limit || overshoot != c-1 {
		t.Errorf("%d in flight: %d served (%d failures handled in the window), %d counted, %d counts denied; want %d, %d, %d, %d",
			c, served, total, counted, overshoot, c, limit+c-1, limit, c-1)
	}
	if d := e.lim.Decide(t.Context(), "POST", "/login", "alice", false); d.Allowed || d.Status() != 429 {
		t.Errorf("after the overshoot: Allowed %v, Status %d; want a 429", d.Allowed, d.Status())
	}
}

// TestDeferredDecideAllocs: deciding a request under a rule counted by
// outcome (a Peek) allocates nothing, as a count does.
func TestDeferredDecideAllocs(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(outcomeYAML), "o.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(memstore.New()))
	for _, path := range []core.Path{"/login", "/search"} {
		if n := testing.AllocsPerRun(100, func() { _ = l.Decide(context.Background(), "POST", path, "alice", false) }); n != 0 {
			t.Errorf("Decide %s: %v allocs, want 0", path, n)
		}
	}
}
