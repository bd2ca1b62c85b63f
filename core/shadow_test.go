package core

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

const shadowYAML = `rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
      mode: shadow
    - name: upload
      paths: ["/api/upload"]
      limit: "2/minute"
  default: "2/minute"
`

func TestShadowConfig(t *testing.T) {
	c, err := ParseConfig([]byte(shadowYAML), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Rule("search").Shadow() || c.Rule("upload").Shadow() || c.Default().Shadow() {
		t.Errorf("shadow: search %v, upload %v, default %v; want true, false, false",
			c.Rule("search").Shadow(), c.Rule("upload").Shadow(), c.Default().Shadow())
	}
	// The file's mode is every rule's that names none, and the default's.
	c, err = ParseConfig([]byte(strings.Replace(shadowYAML, "  enabled: true\n", "  enabled: true\n  mode: shadow\n", 1)), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !c.Rule("search").Shadow() || !c.Rule("upload").Shadow() || !c.Default().Shadow() {
		t.Errorf("file in shadow: search %v, upload %v, default %v; want all true",
			c.Rule("search").Shadow(), c.Rule("upload").Shadow(), c.Default().Shadow())
	}
	c, err = ParseConfig([]byte(strings.Replace(shadowYAML, `limit: "2/minute"
  default`, `limit: "2/minute"
      mode: enforce
  default`, 1)+"  mode: shadow\n"), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c.Rule("upload").Shadow() || !c.Default().Shadow() {
		t.Errorf("mode: enforce under a shadow file: upload %v, default %v; want false, true", c.Rule("upload").Shadow(), c.Default().Shadow())
	}
	// Bad modes are named, with their line, file-wide and per rule.
	_, err = ParseConfig([]byte(strings.Replace(shadowYAML, "mode: shadow", "mode: dry-run", 1)+"  mode: Shadow\n"), "s.yaml")
	want := `rate-limit config s.yaml:7: rule "search": field "mode": value "dry-run": want enforce or shadow` + "\n" +
		`rate-limit config s.yaml:12: field "mode": value "Shadow": want enforce or shadow`
	if err == nil || err.Error() != want {
		t.Errorf("bad modes: got %v, want\n%s", err, want)
	}
	if _, err := NewConfig(Spec{Enabled: true, Mode: "off"}); err == nil || err.Error() != `rate-limit config: field "mode": value "off": want enforce or shadow` {
		t.Errorf("NewConfig with mode off: got %v", err)
	}
}

// outcomesOf lists the rule and outcome of each event.
func outcomesOf(events []Event) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.Rule+":"+e.Outcome.String())
	}
	return out
}

func TestShadowDecisions(t *testing.T) {
	// search is in shadow mode; the default limit (enforced) still counts
	// its requests, as it did before search was added.
	cfg, err := ParseConfig([]byte(strings.Replace(shadowYAML, `default: "2/minute"`, `default: "100/minute"`, 1)), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	var logs syncBuffer
	var events []Event
	store := newFakeStore()
	l := NewLimiter(cfg, WithStore(store), WithClock(clock), WithObserver(func(e Event) { events = append(events, e) }),
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))))

	for i := range 5 {
		d := l.Decide(t.Context(), "GET", "/api/search", "alice", false)
		if !d.Allowed || d.ShadowDenied != (i >= 2) || d.Rule.Name != "default" || d.Key != "alice" {
			t.Fatalf("request %d: Allowed %v, ShadowDenied %v, rule %s, key %q; want true, %v, default, alice", i, d.Allowed, d.ShadowDenied, d.Rule.Name, d.Key, i >= 2)
		}
		h := http.Header{}
		d.SetHeaders(h)
		if got, want := h.Get("RateLimit"), `"default";r=`+strconv.Itoa(99-i)+`;t=60`; got != want || len(h) != 2 {
			t.Errorf("request %d: headers %v, want the default's only (RateLimit %s)", i, h, want)
		}
	}
	want := []string{"default:allowed", "search:allowed", "default:allowed", "search:allowed"}
	for range 3 {
		want = append(want, "default:allowed", "search:shadow_denied")
	}
	if got := outcomesOf(events); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if e := events[len(events)-1]; e.Cost != 1 || !e.Allowed || e.Key != "alice" || e.Err != nil {
		t.Errorf("shadow denial event %+v, want cost 1, allowed, key alice", e)
	}
	// One line per rule per interval, with the count held back.
	wantLog := `level=WARN msg="rlkit: shadow rule would deny" rule=search key=alice cost=1 limit=2/minute retry_after=1m0s suppressed=0` + "\n"
	if logs.String() != wantLog {
		t.Errorf("log:\n%s\nwant:\n%s", logs.String(), wantLog)
	}
	clock.Advance(10 * time.Second)
	l.Decide(t.Context(), "GET", "/api/search", "alice", false)
	if got := strings.Count(logs.String(), "suppressed=2"); got != 1 {
		t.Errorf("after the interval: log:\n%s\nwant a line with suppressed=2", logs.String())
	}

	// An enforced rule still denies.
	for range 2 {
		l.Decide(t.Context(), "GET", "/api/upload", "alice", false)
	}
	if d := l.Decide(t.Context(), "GET", "/api/upload", "alice", false); d.Allowed || d.ShadowDenied {
		t.Errorf("enforced rule over its limit: Allowed %v, ShadowDenied %v; want false, false", d.Allowed, d.ShadowDenied)
	}
}

// TestShadowBeforeEnforced tries a stricter limit on a path an enforced
// rule already counts: the shadow rule comes first, the enforced rule
// still applies (no "already matched" error), and both count.
func TestShadowBeforeEnforced(t *testing.T) {
	cfg, err := ParseConfig([]byte(`rate_limit:
  enabled: true
  rules:
    - name: search-new
      paths: ["/api/search"]
      limit: "1/minute"
      mode: shadow
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
    - name: search-newer
      paths: ["/api/*"]
      limit: "1/hour"
      mode: shadow
`), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	l := NewLimiter(cfg, WithStore(newFakeStore()), WithLogger(discard), WithObserver(func(e Event) { events = append(events, e) }))
	var got []string
	for range 3 {
		d := l.Decide(t.Context(), "GET", "/api/search", "alice", false)
		got = append(got, d.Rule.Name+" "+strconv.FormatBool(d.Allowed)+" "+strconv.FormatBool(d.ShadowDenied))
	}
	if want := []string{"search true false", "search true true", "search false true"}; !slices.Equal(got, want) {
		t.Errorf("decisions %v, want %v", got, want)
	}
	// The first shadow rule of the request's spellings counts it, alone.
	want := []string{"search:allowed", "search-new:allowed", "search:allowed", "search-new:shadow_denied", "search:denied", "search-new:shadow_denied"}
	if got := outcomesOf(events); !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	// A shadow rule is still refused behind an earlier shadow rule.
	_, err = ParseConfig([]byte(`rate_limit:
  enabled: true
  rules:
    - name: a
      paths: ["/api/*"]
      limit: "1/minute"
      mode: shadow
    - name: b
      paths: ["/api/search"]
      limit: "2/minute"
      mode: shadow
`), "s.yaml")
	if err == nil || !strings.Contains(err.Error(), `rule "b": field "paths": value "/api/search": already matched by rule "a"`) {
		t.Errorf("a shadow rule behind a shadow rule: got %v", err)
	}
}

// TestShadowFile puts the whole file in shadow mode: nothing is enforced,
// no header is written unless WithShadowHeaders.
func TestShadowFile(t *testing.T) {
	cfg, err := ParseConfig([]byte(strings.Replace(shadowYAML, "  enabled: true\n", "  enabled: true\n  mode: shadow\n  failure: closed\n", 1)), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := NewLimiter(cfg, WithStore(newFakeStore()), WithLogger(discard))
	for i := range 4 {
		for _, path := range []Path{"/api/search", "/api/upload", "/other"} {
			d := l.Decide(t.Context(), "GET", path, "alice", false)
			h := http.Header{}
			d.SetHeaders(h)
			if !d.Allowed || d.ShadowDenied != (i >= 2) || !d.Rule.Shadow() || len(h) != 0 {
				t.Fatalf("%s, request %d: Allowed %v, ShadowDenied %v, rule %s, headers %v; want true, %v, a shadow rule, none",
					path, i, d.Allowed, d.ShadowDenied, d.Rule.Name, h, i >= 2)
			}
		}
	}
	l = NewLimiter(cfg, WithStore(newFakeStore()), WithShadowHeaders(true), WithLogger(discard))
	d := l.Decide(t.Context(), "GET", "/api/search", "alice", false)
	h := http.Header{}
	d.SetHeaders(h)
	if got := h.Get("RateLimit"); got != `"search";r=1;t=60` {
		t.Errorf("WithShadowHeaders: RateLimit %q, want %q", got, `"search";r=1;t=60`)
	}
	// A store failure denies nothing in shadow mode, even fail-closed.
	fl := NewLimiter(cfg, WithStore(&failStore{}), WithLogger(discard))
	if d := fl.Decide(t.Context(), "GET", "/api/search", "alice", false); !d.Allowed || !errors.Is(d.Err, errStoreDown) {
		t.Errorf("shadow file, store down, fail closed: Allowed %v, Err %v; want true, %v", d.Allowed, d.Err, errStoreDown)
	}
}

// TestShadowLogPerRule: each shadow rule has its own log interval, and
// each limiter its own (two limiters may share a Config).
func TestShadowLogPerRule(t *testing.T) {
	cfg, err := ParseConfig([]byte(strings.Replace(shadowYAML, `limit: "2/minute"
  default`, `limit: "2/minute"
      mode: shadow
  default`, 1)), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	count := func(l *Limiter) {
		for range 3 {
			l.Decide(t.Context(), "GET", "/api/search", "alice", false)
			l.Decide(t.Context(), "GET", "/api/upload", "bob", false)
		}
	}
	var a, b syncBuffer
	count(NewLimiter(cfg, WithStore(newFakeStore()), WithLogger(slog.New(slog.NewTextHandler(&a, nil)))))
	count(NewLimiter(cfg, WithStore(newFakeStore()), WithLogger(slog.New(slog.NewTextHandler(&b, nil)))))
	for name, logs := range map[string]string{"first": a.String(), "second": b.String()} {
		if strings.Count(logs, "shadow rule would deny") != 2 || !strings.Contains(logs, "rule=search key=alice") || !strings.Contains(logs, "rule=upload key=bob") {
			t.Errorf("%s limiter's log:\n%s\nwant one line for search and one for upload", name, logs)
		}
	}
}

func TestShadowStoreFailure(t *testing.T) {
	cfg, err := ParseConfig([]byte(strings.Replace(shadowYAML, "  enabled: true\n", "  enabled: true\n  failure: closed\n", 1)), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	l := NewLimiter(cfg, WithStore(&failStore{}), WithLogger(discard), WithObserver(func(e Event) { events = append(events, e) }))
	// Fail-closed denies by the enforced rule (default here); the shadow
	// rule's failure is only reported.
	if d := l.Decide(t.Context(), "GET", "/api/search", "alice", false); d.Allowed || !errors.Is(d.Err, errStoreDown) || d.ShadowDenied || d.Rule.Name != "default" {
		t.Errorf("store down, fail closed: Allowed %v, Err %v, ShadowDenied %v, rule %s; want false, %v, false, default", d.Allowed, d.Err, d.ShadowDenied, d.Rule.Name, errStoreDown)
	}
	if got, want := outcomesOf(events), []string{"default:store_error", "search:store_error"}; !slices.Equal(got, want) || events[0].Allowed || !events[1].Allowed {
		t.Errorf("events %+v, want the default's store error (denied) and search's (allowed)", events)
	}
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}

// TestPenaltyShadowOvershootNoStore: PenaltySpec says "A rule in shadow
// mode denies nothing, so its penalty does nothing (no store call) until
// the rule is enforced". A rule in shadow mode that counts by outcome
// and is the only rule of its path is the Decision's Rule (its count
// waits in d.waits, slot 0 of Complete; here the file is in shadow mode,
// so no enforced rule or default applies): Complete's overshoot path must
// not count denials nor set a ban for it, or a reload that enforces the
// rule finds callers banned by what the shadow rule only observed.
func TestPenaltyShadowOvershootNoStore(t *testing.T) {
	const yaml = `rate_limit:
  enabled: true
  mode: shadow
  rules:
    - name: login
      paths: ["/login"]
      limit: "1/minute"
      count: failures
      penalty: {after: 1, within: 1m, ban: 15m}
`
	st := newFakeStore()
	lim := NewLimiter(parseTiers(t, yaml), WithStore(st), WithClock(store.NewManualClock(time.Unix(1_700_000_000, 0))))
	ctx := context.Background()
	// Two guesses in flight together: both pass the Peek, both fail.
	d1 := lim.Decide(ctx, "POST", "/login", "1.2.3.4", false)
	d2 := lim.Decide(ctx, "POST", "/login", "1.2.3.4", false)
	if !d1.Deferred() || !d2.Deferred() || d1.Rule == nil || !d1.Rule.shadow {
		t.Fatalf("decisions: deferred %v %v, rule %v; want both deferred under the shadow rule", d1.Deferred(), d2.Deferred(), d1.Rule)
	}
	lim.Complete(ctx, &d1, 401)
	lim.Complete(ctx, &d2, 401) // overshoot
	for _, c := range st.calls {
		if strings.Contains(c.policy.Name, "!") {
			t.Errorf("shadow rule's penalty: a store call on %s (peek %v), want none", c.policy.Name, c.peek)
		}
	}
	// The rule is enforced by a reload (its penalty unchanged): the
	// caller must not be under a ban the shadow rule set.
	cfg := parseTiers(t, strings.Replace(yaml, "  mode: shadow\n", "", 1))
	lim.SetConfig(cfg)
	var d Decision
	if r := cfg.Rule("login"); lim.penalized(ctx, cfg, r, 1, d1.Key, &d) || d.Penalty {
		t.Errorf("after the rule is enforced: under a ban (penalty %v, retry after %v); want none: the shadow rule banned no one", d.Penalty, d.Result.RetryAfter)
	}
}
