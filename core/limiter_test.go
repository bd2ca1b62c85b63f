package core

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"log/slog"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/store"
)

// takeCall is one call a fakeStore received.
type takeCall struct {
	key    string
	policy *store.Policy
	cost   int64
	peek   bool // a Peek, not a Take
}

// fakeStore counts units per (key, policy) with no windows: every limit of
// a policy admits while its total stays within Count. Denials consume
// nothing. It records every call and, when clock is set, advances it by
// latency inside Take.
type fakeStore struct {
	mu      sync.Mutex
	used    map[string]int64
	calls   []takeCall
	resets  []takeCall
	clock   *store.ManualClock
	latency time.Duration
}

var _ store.Store = (*fakeStore)(nil)

func newFakeStore() *fakeStore { return &fakeStore{used: map[string]int64{}} }

func (s *fakeStore) Take(_ context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.decide(key, p, cost, false), nil
}

// Peek is Take that consumes nothing, recorded as a peek.
func (s *fakeStore) Peek(_ context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.decide(key, p, cost, true), nil
}

func (s *fakeStore) decide(key string, p *store.Policy, cost int64, peek bool) store.Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, takeCall{key, p, cost, peek})
	if s.clock != nil {
		s.clock.Advance(s.latency)
	}
	id := key + "\x00" + p.Name
	used := s.used[id]
	r := store.Result{Allowed: true, Remaining: -1}
	for i, l := range p.Limits {
		rem := l.Count - used
		if used+cost > l.Count {
			if r.Allowed || l.Period > r.RetryAfter {
				r.Limit, r.Remaining, r.ResetAfter, r.RetryAfter = l, rem, l.Period, l.Period
			}
			r.Allowed = false
		} else if r.Allowed && (r.Remaining < 0 || rem-cost < r.Remaining) {
			r.Limit, r.Remaining, r.ResetAfter = l, rem-cost, l.Period
		}
		r.Limits[i] = store.LimitState{Remaining: rem, ResetAfter: l.Period}
	}
	if r.Allowed {
		if !peek {
			s.used[id] = used + cost
		}
		for i, l := range p.Limits {
			r.Limits[i].Remaining = l.Count - used - cost
		}
	}
	return r
}

func (s *fakeStore) Reset(_ context.Context, key string, p *store.Policy) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.resets = append(s.resets, takeCall{key: key, policy: p})
	cleared := s.used[key+"\x00"+p.Name] > 0
	delete(s.used, key+"\x00"+p.Name)
	return cleared, nil
}

func (s *fakeStore) numCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.calls)
}

func (s *fakeStore) lastCall(t *testing.T) takeCall {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		t.Fatal("the store was never called")
	}
	return s.calls[len(s.calls)-1]
}

var errStoreDown = errors.New("store down")

// failStore fails every call.
type failStore struct {
	mu    sync.Mutex
	calls int
}

func (s *failStore) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.Take(ctx, key, p, cost)
}

func (s *failStore) Take(context.Context, string, *store.Policy, int64) (store.Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	// A failing store may leave garbage in its Result: Decide must drop it.
	return store.Result{Allowed: true, Remaining: 42}, errStoreDown
}

func (s *failStore) Reset(context.Context, string, *store.Policy) (bool, error) {
	return false, errStoreDown
}

// discard is a logger that drops everything.
var discard = slog.New(slog.DiscardHandler)

func TestLimiterDisabled(t *testing.T) {
	disabled := mustParse(t, "rate_limit:\n  enabled: false\n  rules: [{name: a, paths: [/a], limit: 1/s}]\n")
	var nilConfig *Config
	for name, cfg := range map[string]*Config{"enabled: false": disabled, "nil": nilConfig, "zero": {}} {
		st := newFakeStore()
		l := NewLimiter(cfg, WithStore(st), WithLogger(discard))
		for range 3 {
			d := l.Decide(t.Context(), "GET", "/a", "user", false)
			if !d.Allowed || d.Rule != nil || d.Err != nil || d.Cost != 0 {
				t.Errorf("%s: Decide = %+v, want Allowed with no Rule", name, d)
			}
			h := httptest.NewRecorder().Header()
			d.SetHeaders(h)
			if len(h) != 0 {
				t.Errorf("%s: SetHeaders wrote %v, want nothing", name, h)
			}
		}
		if n := st.numCalls(); n != 0 {
			t.Errorf("%s: the store was called %d times, want 0", name, n)
		}
	}
}

func TestLimiterCounts(t *testing.T) {
	st := newFakeStore()
	l := NewLimiter(loadExample(t), WithStore(st))
	if l.Config() == nil || l.Store() != st {
		t.Fatalf("Config(), Store() = %v, %v; want the limiter's", l.Config(), l.Store())
	}
	// reindex allows 2 a minute.
	for i, want := range []bool{true, true, false, false} {
		d := l.Decide(t.Context(), "POST", "/api/kb/kb-01/reindex", "alice", false)
		if d.Allowed != want {
			t.Errorf("request %d: Allowed = %v, want %v", i, d.Allowed, want)
		}
		if d.Rule == nil || d.Rule.Name != "reindex" || d.Cost != 1 || d.Err != nil {
			t.Errorf("request %d: Rule, Cost, Err = %v, %d, %v; want reindex, 1, nil", i, d.Rule, d.Cost, d.Err)
		}
		if !want && (d.Status() != 429 || d.Result.RetryAfter != time.Minute) {
			t.Errorf("request %d: Status, RetryAfter = %d, %v; want 429, 1m", i, d.Status(), d.Result.RetryAfter)
		}
	}
	// Another user and another rule have their own counts.
	if d := l.Decide(t.Context(), "POST", "/api/kb/kb-01/reindex", "bob", false); !d.Allowed {
		t.Errorf("bob: Allowed = false, want true")
	}
	if d := l.Decide(t.Context(), "GET", "/api/search", "alice", false); !d.Allowed || d.Rule.Name != "search" {
		t.Errorf("alice on search: Allowed, Rule = %v, %v; want true, search", d.Allowed, d.Rule)
	}
	c := st.lastCall(t)
	if c.key != "alice" || c.policy != l.Config().Rules()[0].Policy || c.cost != 1 {
		t.Errorf("last store call = %+v, want key alice, the search policy, cost 1", c)
	}
	// An unmatched path counts against the default rule.
	d := l.Decide(t.Context(), "GET", "/elsewhere", "alice", false)
	if d.Rule != l.Config().Default() || st.lastCall(t).policy != l.Config().Default().Policy {
		t.Errorf("unmatched path: Rule = %v, want the default rule", d.Rule)
	}
}

func TestLimiterExempt(t *testing.T) {
	st := newFakeStore()
	cfg := mustParse(t, yamlLines(
		"rate_limit:",
		"  enabled: true",
		"  default: 1/day",
		"  exempt_paths: [/health, /static/*]",
	))
	l := NewLimiter(cfg, WithStore(st))
	// Put alice over every limit.
	l.Decide(t.Context(), "GET", "/x", "alice", false)
	if d := l.Decide(t.Context(), "GET", "/x", "alice", false); d.Allowed {
		t.Fatalf("alice is not over the limit")
	}
	before := st.numCalls()
	for _, p := range []Path{"/health", "/static/app.js"} {
		d := l.Decide(t.Context(), "GET", p, "alice", false)
		if !d.Allowed || d.Rule != nil || d.Cost != 0 {
			t.Errorf("exempt %q: Decide = %+v, want Allowed with no Rule", p, d)
		}
	}
	if got := st.numCalls(); got != before {
		t.Errorf("exempt paths called the store %d times, want 0", got-before)
	}
	// Other spellings are counted: alice is over the limit.
	for _, p := range []Path{"/healthz", "/health/", "/health%2F", "/static/a%2Fb", "/x/../health"} {
		d := l.Decide(t.Context(), "GET", p, "alice", false)
		if d.Allowed || d.Rule != cfg.Default() {
			t.Errorf("%q: Decide = %+v, want denied under the default rule", p, d)
		}
	}
}

func TestLimiterBypass(t *testing.T) {
	st := newFakeStore()
	l := NewLimiter(mustParse(t, "rate_limit:\n  enabled: true\n  default: 1/day\n"), WithStore(st))
	l.Decide(t.Context(), "GET", "/x", "root", false)
	before := st.numCalls()
	for range 5 {
		d := l.Decide(t.Context(), "GET", "/x", "root", true)
		if !d.Allowed || d.Rule != nil {
			t.Errorf("bypass: Decide = %+v, want Allowed with no Rule", d)
		}
	}
	if got := st.numCalls(); got != before {
		t.Errorf("bypass called the store %d times, want 0", got-before)
	}
	// Bypass did not consume anything either: the user is still just over.
	if d := l.Decide(t.Context(), "GET", "/x", "root", false); d.Allowed {
		t.Errorf("after bypass: Allowed = true, want false (1/day used)")
	}
}

func TestLimiterCost(t *testing.T) {
	st := newFakeStore()
	l := NewLimiter(loadExample(t), WithStore(st))
	tests := []struct {
		path Path
		cost int64
	}{
		{"/api/kb/kb-01/docs/upload/batch", 10},
		{"/api/kb/kb-01/docs/upload", 1},
		{"/api/kb/kb-02/docs/upload/batch/", 10},
	}
	for _, tt := range tests {
		d := l.Decide(t.Context(), "POST", tt.path, "alice", false)
		c := st.lastCall(t)
		if c.cost != tt.cost || d.Cost != tt.cost {
			t.Errorf("%s: store cost %d, Decision.Cost %d; want %d", tt.path, c.cost, d.Cost, tt.cost)
		}
		if c.policy != d.Rule.Policy || d.Rule.Name != "upload" {
			t.Errorf("%s: store got policy %q, rule %q; want upload", tt.path, c.policy.Name, d.Rule.Name)
		}
	}
	// 30/minute: 21 used, a batch of 10 no longer fits, a single does.
	if d := l.Decide(t.Context(), "POST", "/api/kb/kb-01/docs/upload/batch", "alice", false); d.Allowed {
		t.Errorf("batch at 21/30: Allowed = true, want false")
	}
	if d := l.Decide(t.Context(), "POST", "/api/kb/kb-01/docs/upload", "alice", false); !d.Allowed || d.Result.Remaining != 8 {
		t.Errorf("single at 21/30: Allowed, Remaining = %v, %d; want true, 8", d.Allowed, d.Result.Remaining)
	}
}

func TestBoundKey(t *testing.T) {
	digest := func(s string) string {
		sum := sha256.Sum256([]byte(s))
		return "sha256:" + hex.EncodeToString(sum[:])
	}
	at := strings.Repeat("k", store.MaxKeyLen)
	over := strings.Repeat("k", store.MaxKeyLen+1)
	tests := []struct{ in, want string }{
		{"", ""},
		{"alice", "alice"},
		{"10.0.0.1", "10.0.0.1"},
		{"{user}:x", "{user}:x"},
		{at, at},
		{over, digest(over)},
		{strings.Repeat("é", 100), digest(strings.Repeat("é", 100))}, // 200 bytes
		{strings.Repeat("é", 64), strings.Repeat("é", 64)},           // 128 bytes
		{"sha256:abc", digest("sha256:abc")},                         // looks like a digest
		{"sha256", "sha256"},
		{"SHA256:abc", "SHA256:abc"},
	}
	for _, tt := range tests {
		if got := store.BoundKey(tt.in); got != tt.want {
			t.Errorf("BoundKey(%.20q… %d bytes) = %.30q, want %.30q", tt.in, len(tt.in), got, tt.want)
		}
	}
	if got := store.BoundKey(over); len(got) != len("sha256:")+64 {
		t.Errorf("len(BoundKey(long)) = %d, want %d", len(got), len("sha256:")+64)
	}
	a := strings.Repeat("x", 500) + "a"
	b := strings.Repeat("x", 500) + "b"
	if store.BoundKey(a) == store.BoundKey(b) {
		t.Errorf("two long keys differing in their last byte share %q", store.BoundKey(a))
	}
	// A short key that spells a long key's digest must not share its
	// counters.
	if store.BoundKey(digest(over)) == store.BoundKey(over) {
		t.Errorf("BoundKey(%q) = BoundKey(a %d-byte key): distinct keys collide", digest(over), len(over))
	}
}

func TestLimiterBoundsKeys(t *testing.T) {
	st := newFakeStore()
	l := NewLimiter(loadExample(t), WithStore(st))
	long := strings.Repeat("u", 4096)
	l.Decide(t.Context(), "GET", "/api/search", long, false)
	if got := st.lastCall(t).key; got != store.BoundKey(long) || len(got) > store.MaxKeyLen {
		t.Errorf("store key = %.30q (%d bytes), want BoundKey(identity)", got, len(got))
	}
	l.Decide(t.Context(), "GET", "/api/search", "short", false)
	if got := st.lastCall(t).key; got != "short" {
		t.Errorf("store key = %q, want %q", got, "short")
	}
}

func TestLimiterFailOpen(t *testing.T) {
	st := &failStore{}
	l := NewLimiter(loadExample(t), WithStore(st), WithLogger(discard))
	d := l.Decide(t.Context(), "GET", "/api/search", "alice", false)
	if !d.Allowed {
		t.Errorf("fail-open: Allowed = false, want true")
	}
	if !errors.Is(d.Err, errStoreDown) {
		t.Errorf("fail-open: Err = %v, want %v", d.Err, errStoreDown)
	}
	if d.Rule == nil || d.Rule.Name != "search" || d.Cost != 1 {
		t.Errorf("fail-open: Rule, Cost = %v, %d; want search, 1", d.Rule, d.Cost)
	}
	if d.Result != (store.Result{}) {
		t.Errorf("fail-open: Result = %+v, want the zero Result", d.Result)
	}
	if got := d.Status(); got != 200 {
		t.Errorf("fail-open: Status() = %d, want 200", got)
	}
	rec := httptest.NewRecorder()
	d.SetHeaders(rec.Header())
	if len(rec.Header()) != 0 {
		t.Errorf("fail-open: SetHeaders wrote %v, want no headers", rec.Header())
	}
	if name, _, ok := d.Header(0, nil); ok {
		t.Errorf("fail-open: Header(0) = %q, want no headers", name)
	}
	if st.calls != 1 {
		t.Errorf("store called %d times, want 1", st.calls)
	}
	// WithFailOpen(true) overrides failure: closed.
	closed := mustParse(t, "rate_limit:\n  enabled: true\n  failure: closed\n")
	if d := NewLimiter(closed, WithStore(st), WithLogger(discard), WithFailOpen(true)).Decide(t.Context(), "GET", "/x", "a", false); !d.Allowed {
		t.Errorf("WithFailOpen(true) over failure: closed: Allowed = false, want true")
	}
}

func TestLimiterFailClosed(t *testing.T) {
	limiters := map[string]*Limiter{
		"WithFailOpen(false)": NewLimiter(loadExample(t), WithStore(&failStore{}), WithLogger(discard), WithFailOpen(false)),
		"failure: closed": NewLimiter(mustParse(t, yamlLines(
			"rate_limit:",
			"  enabled: true",
			"  failure: closed",
			"  rules: [{name: search, paths: [/api/search], limit: 10/second}]",
		)), WithStore(&failStore{}), WithLogger(discard)),
	}
	for name, l := range limiters {
		for _, style := range []HeaderStyle{HeadersDraft, HeadersLegacy, HeadersNone} {
			l.style = style
			d := l.Decide(t.Context(), "GET", "/api/search", "alice", false)
			if d.Allowed || !errors.Is(d.Err, errStoreDown) {
				t.Errorf("%s: Allowed, Err = %v, %v; want false, %v", name, d.Allowed, d.Err, errStoreDown)
			}
			if got := d.Status(); got != 503 {
				t.Errorf("%s: Status() = %d, want 503", name, got)
			}
			rec := httptest.NewRecorder()
			d.WriteDenied(rec)
			res := rec.Result()
			if res.StatusCode != 503 {
				t.Errorf("%s: status %d, want 503", name, res.StatusCode)
			}
			const body = `{"detail": "Rate limiter unavailable"}`
			if got := rec.Body.String(); got != body {
				t.Errorf("%s: body %q, want %q", name, got, body)
			}
			want := map[string]string{
				"Retry-After":    "1",
				"Content-Type":   "application/json",
				"Content-Length": "38",
			}
			checkHeaders(t, name+" "+style.String(), res.Header, want)
		}
	}
}

// jsonLogger logs JSON lines into buf without the time.
func jsonLogger(buf *bytes.Buffer) *slog.Logger {
	return slog.New(slog.NewJSONHandler(buf, &slog.HandlerOptions{
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			if len(groups) == 0 && a.Key == slog.TimeKey {
				return slog.Attr{}
			}
			return a
		},
	}))
}

func TestLimiterWarnings(t *testing.T) {
	var buf bytes.Buffer
	clock := store.NewManualClock(time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC))
	l := NewLimiter(loadExample(t), WithStore(&failStore{}), WithLogger(jsonLogger(&buf)), WithClock(clock), WithWarnInterval(10*time.Second))
	fail := func(n int) {
		for range n {
			l.Decide(t.Context(), "GET", "/api/search", "alice", false)
		}
	}
	line := func(suppressed string) string {
		return `{"level":"WARN","msg":"rlkit: rate-limit store failed","rule":"search","error":"store down","failure_policy":"open: requests pass","suppressed":` + suppressed + "}\n"
	}
	steps := []struct {
		advance  time.Duration
		failures int
		want     string // what is logged
	}{
		{0, 5, line("0")},
		{10 * time.Second, 1, line("4")},
		{9999 * time.Millisecond, 3, ""},
		{time.Millisecond, 1, line("3")},
		{time.Minute, 1, line("0")},
	}
	for i, s := range steps {
		clock.Advance(s.advance)
		buf.Reset()
		fail(s.failures)
		if got := buf.String(); got != s.want {
			t.Errorf("step %d: logged\n%q\nwant\n%q", i, got, s.want)
		}
	}

	// Fail-closed says so in the warning.
	buf.Reset()
	closed := NewLimiter(loadExample(t), WithStore(&failStore{}), WithLogger(jsonLogger(&buf)), WithClock(clock), WithFailOpen(false))
	closed.Decide(t.Context(), "POST", "/mcp", "alice", false)
	want := `{"level":"WARN","msg":"rlkit: rate-limit store failed","rule":"mcp","error":"store down","failure_policy":"closed: requests get 503","suppressed":0}` + "\n"
	if got := buf.String(); got != want {
		t.Errorf("fail-closed warning:\n got %q\nwant %q", got, want)
	}
}

func TestLimiterWarningsConcurrent(t *testing.T) {
	// Many failing requests at one instant from many goroutines log exactly
	// one line; the next interval's line counts all the others.
	var buf syncBuffer
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	l := NewLimiter(loadExample(t), WithStore(&failStore{}), WithLogger(slog.New(slog.NewTextHandler(&buf, nil))), WithClock(clock))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				l.Decide(t.Context(), "GET", "/api/search", "alice", false)
			}
		})
	}
	wg.Wait()
	if n := strings.Count(buf.String(), "\n"); n != 1 {
		t.Fatalf("%d lines logged, want 1:\n%s", n, buf.String())
	}
	clock.Advance(10 * time.Second)
	l.Decide(t.Context(), "GET", "/api/search", "alice", false)
	if !strings.HasSuffix(buf.String(), " suppressed=399\n") {
		t.Errorf("second line = %q, want suppressed=399", buf.String())
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

func TestLimiterObserver(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st := newFakeStore()
	st.clock, st.latency = clock, 3*time.Millisecond
	var events []Event
	obs := func(e Event) { events = append(events, e) }
	l := NewLimiter(loadExample(t), WithStore(st), WithObserver(obs), WithClock(clock), WithLatencySampling(1))

	l.Decide(t.Context(), "POST", "/api/kb/k/reindex", "alice", false)
	l.Decide(t.Context(), "POST", "/api/kb/k/reindex", "alice", false)
	l.Decide(t.Context(), "POST", "/api/kb/k/reindex", "alice", false) // denied
	l.Decide(t.Context(), "GET", "/health", "alice", false)            // exempt
	l.Decide(t.Context(), "GET", "/api/search", "root", true)          // bypass
	l.Decide(t.Context(), "POST", "/api/kb/k/docs/upload/batch", "alice", false)

	want := []Event{
		{Rule: "reindex", Key: "alice", Outcome: OutcomeAllowed, Allowed: true, Cost: 1, Latency: 3 * time.Millisecond},
		{Rule: "reindex", Key: "alice", Outcome: OutcomeAllowed, Allowed: true, Cost: 1, Latency: 3 * time.Millisecond},
		{Rule: "reindex", Key: "alice", Outcome: OutcomeDenied, Allowed: false, Cost: 1, Latency: 3 * time.Millisecond},
		{Outcome: OutcomeExempt, Allowed: true},
		{Rule: "search", Outcome: OutcomeBypassed, Allowed: true},
		{Rule: "upload", Key: "alice", Outcome: OutcomeAllowed, Allowed: true, Cost: 10, Latency: 3 * time.Millisecond},
	}
	if len(events) != len(want) {
		t.Fatalf("%d events, want %d: %+v", len(events), len(want), events)
	}
	for i := range want {
		if events[i] != want[i] {
			t.Errorf("event %d = %+v, want %+v", i, events[i], want[i])
		}
	}

	// Failures are observed with their error.
	events = nil
	fl := NewLimiter(loadExample(t), WithStore(&failStore{}), WithObserver(obs), WithClock(clock), WithLogger(discard))
	fl.Decide(t.Context(), "GET", "/mcp", "alice", false)
	if len(events) != 1 {
		t.Fatalf("%d events, want 1", len(events))
	}
	if e := events[0]; e.Rule != "mcp" || e.Outcome != OutcomeStoreError || !e.Allowed || e.Cost != 1 || !errors.Is(e.Err, errStoreDown) || e.Latency != 0 {
		t.Errorf("failure event = %+v, want {mcp true 1 %v 0s}", e, errStoreDown)
	}

	// A disabled limiter observes nothing.
	events = nil
	NewLimiter(nil, WithStore(st), WithObserver(obs)).Decide(t.Context(), "GET", "/api/search", "alice", false)
	if len(events) != 0 {
		t.Errorf("disabled: %d events, want 0", len(events))
	}
}

// TestLatencySampling: by default one store call in 16, at random, is
// timed; WithLatencySampling(1) times each.
func TestLatencySampling(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	cfg := mustParse(t, "rate_limit:\n  enabled: true\n  default: \"1000000/hour\"\n")
	for _, tc := range []struct {
		opts     []Option
		min, max int
	}{
		{nil, 700, 1300}, // 16,000 calls / 16, binomial: 1,000 ± 9 sd
		{[]Option{WithLatencySampling(1)}, 16_000, 16_000},
		{[]Option{WithLatencySampling(3)}, 3_600, 4_400}, // rounded up to 4: 4,000 ± 55 sd
	} {
		st := newFakeStore()
		st.clock, st.latency = clock, time.Microsecond
		timed := 0
		l := NewLimiter(cfg, append(tc.opts, WithStore(st), WithClock(clock), WithObserver(func(e Event) {
			if e.Latency > 0 {
				timed++
			}
		}))...)
		for range 16_000 {
			l.Decide(t.Context(), "GET", "/x", "alice", false)
		}
		if timed < tc.min || timed > tc.max {
			t.Errorf("%d options: %d of 16,000 calls timed, want %d to %d", len(tc.opts), timed, tc.min, tc.max)
		}
	}
}

func TestLimiterReset(t *testing.T) {
	st := newFakeStore()
	l := NewLimiter(loadExample(t), WithStore(st))
	for range 2 {
		l.Decide(t.Context(), "POST", "/api/kb/k/reindex", "alice", false)
	}
	if d := l.Decide(t.Context(), "POST", "/api/kb/k/reindex", "alice", false); d.Allowed {
		t.Fatalf("alice is not over the reindex limit")
	}
	ok, err := l.Reset(t.Context(), "alice", "reindex")
	if !ok || err != nil {
		t.Fatalf("Reset(alice, reindex) = %v, %v; want true, nil", ok, err)
	}
	if got := st.resets[0]; got.key != "alice" || got.policy != l.Config().Rules()[2].Policy {
		t.Errorf("store.Reset got key %q, policy %q; want alice, reindex", got.key, got.policy.Name)
	}
	if d := l.Decide(t.Context(), "POST", "/api/kb/k/reindex", "alice", false); !d.Allowed {
		t.Errorf("after Reset: Allowed = false, want true")
	}

	// Nothing counted under default: nothing cleared, and it says so.
	ok, err = l.Reset(t.Context(), "alice", "default")
	if ok || err != nil || st.resets[1].policy != l.Config().Default().Policy {
		t.Errorf("Reset(alice, default) with nothing counted = %v, %v; want false, nil on the default policy", ok, err)
	}
	long := strings.Repeat("z", 300)
	l.Decide(t.Context(), "GET", "/api/search", long, false)
	if ok, _ := l.Reset(t.Context(), long, "search"); !ok || st.resets[2].key != store.BoundKey(long) {
		t.Errorf("Reset of a long identity = %v, used key %.20q; want true, BoundKey(identity)", ok, st.resets[2].key)
	}
	if ok, err := l.Reset(t.Context(), "alice", "nope"); ok || !errors.Is(err, ErrUnknownRule) || err.Error() != `rate-limit reset: rule "nope": no such rule` {
		t.Errorf("Reset(alice, nope) = %v, %v; want false, ErrUnknownRule", ok, err)
	}
	if len(st.resets) != 3 {
		t.Errorf("store.Reset called %d times, want 3", len(st.resets))
	}
	if ok, err := NewLimiter(nil, WithStore(st)).Reset(t.Context(), "alice", "default"); ok || !errors.Is(err, ErrUnknownRule) {
		t.Errorf("nil config: Reset = %v, %v; want false, ErrUnknownRule", ok, err)
	}
	fl := NewLimiter(loadExample(t), WithStore(&failStore{}))
	if ok, err := fl.Reset(t.Context(), "alice", "search"); ok || !errors.Is(err, errStoreDown) {
		t.Errorf("failing store: Reset = %v, %v; want false, %v", ok, err, errStoreDown)
	}
}

func TestLimiterWithHeaders(t *testing.T) {
	st := newFakeStore()
	cfg := mustParse(t, "rate_limit:\n  enabled: true\n  headers: none\n")
	d := NewLimiter(cfg, WithStore(st)).Decide(t.Context(), "GET", "/x", "a", false)
	h := httptest.NewRecorder().Header()
	d.SetHeaders(h)
	if len(h) != 0 {
		t.Errorf("headers: none: SetHeaders wrote %v", h)
	}
	d = NewLimiter(cfg, WithStore(st), WithHeaders(HeadersLegacy)).Decide(t.Context(), "GET", "/x", "a", false)
	d.SetHeaders(h)
	checkHeaders(t, "WithHeaders(legacy)", h, map[string]string{
		"X-Ratelimit-Limit":     "120",
		"X-Ratelimit-Remaining": "118",
		"X-Ratelimit-Reset":     "60",
	})
}

func TestLimiterConcurrent(t *testing.T) {
	st := newFakeStore()
	l := NewLimiter(loadExample(t), WithStore(st), WithObserver(func(Event) {}))
	var wg sync.WaitGroup
	allowed := make([]int, 8)
	for g := range allowed {
		wg.Go(func() {
			for range 100 {
				if l.Decide(t.Context(), "GET", "/mcp", "shared", false).Allowed {
					allowed[g]++
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for _, n := range allowed {
		total += n
	}
	if total != 300 {
		t.Errorf("%d requests allowed under 300/minute, want 300", total)
	}
}

// ctxStore is a fakeStore that, like the Redis store, refuses a call whose
// context has ended.
type ctxStore struct{ *fakeStore }

func (s ctxStore) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	if err := ctx.Err(); err != nil {
		return store.Result{}, err
	}
	return s.fakeStore.Peek(ctx, key, p, cost)
}

func (s ctxStore) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	if err := ctx.Err(); err != nil {
		return store.Result{}, err
	}
	return s.fakeStore.Take(ctx, key, p, cost)
}

// TestLimiterCancelledContext: a request whose context has ended (net/http
// cancels it when the client closes its write side, though the client may
// still read the answer) is counted like any other, not failed open: a
// client cannot pass uncounted by cancelling. No warning is logged.
func TestLimiterCancelledContext(t *testing.T) {
	st := ctxStore{newFakeStore()}
	var logged strings.Builder
	l := NewLimiter(loadExample(t), WithStore(st), WithLogger(slog.New(slog.NewTextHandler(&logged, nil))))
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	for i, want := range []bool{true, true, false, false} {
		d := l.Decide(ctx, "POST", "/api/kb/kb-01/reindex", "alice", false)
		if d.Allowed != want || d.Err != nil {
			t.Errorf("request %d with a cancelled context: Allowed, Err = %v, %v; want %v, nil", i, d.Allowed, d.Err, want)
		}
	}
	if n := st.numCalls(); n != 4 {
		t.Errorf("%d counted calls, want 4", n)
	}
	if logged.Len() != 0 {
		t.Errorf("logged %q, want nothing", logged.String())
	}
}

// TestWithStoreNil: WithStore(nil) panics at once, naming the mistake: a
// store variable left unset must not make each replica count apart, in
// memory, without a word.
func TestWithStoreNil(t *testing.T) {
	defer func() {
		if r, _ := recover().(string); !strings.Contains(r, "core.WithStore: nil store") {
			t.Errorf("WithStore(nil): recovered %q, want a panic naming core.WithStore", r)
		}
	}()
	WithStore(nil)
}

// TestNilOptionSkipped: a nil Option configures nothing.
func TestNilOptionSkipped(t *testing.T) {
	st := newFakeStore()
	l := NewLimiter(loadExample(t), nil, WithStore(st), nil)
	if l.Store() != st {
		t.Errorf("Store() = %v, want the store given", l.Store())
	}
}

// TestClientIPCopies: the limiter keeps its own copy of the client-IP
// configuration: changing the caller's after WithClientIP, or the copy
// ClientIP returns, changes nothing of the limiter's.
func TestClientIPCopies(t *testing.T) {
	proxies := []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")}
	opt := WithClientIP(clientip.Config{TrustedProxies: proxies})
	proxies[0] = netip.MustParsePrefix("0.0.0.0/0")
	l := NewLimiter(nil, opt)
	got := l.ClientIP()
	if len(got.TrustedProxies) != 1 || got.TrustedProxies[0] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Fatalf("ClientIP().TrustedProxies = %v, want [10.0.0.0/8]: the option kept the caller's slice", got.TrustedProxies)
	}
	got.TrustedProxies[0] = netip.MustParsePrefix("0.0.0.0/0")
	if again := l.ClientIP(); again.TrustedProxies[0] != netip.MustParsePrefix("10.0.0.0/8") {
		t.Errorf("ClientIP().TrustedProxies = %v after the copy was changed, want [10.0.0.0/8]", again.TrustedProxies)
	}
}
