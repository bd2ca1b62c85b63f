package core

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
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

func TestShadowDecisions(t *testing.T) {
	cfg, err := ParseConfig([]byte(shadowYAML), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := NewManualClock(time.Unix(1_700_000_000, 0))
	var logs syncBuffer
	var events []Event
	store := newFakeStore()
	l := NewLimiter(cfg, store, WithClock(clock), WithObserver(func(e Event) { events = append(events, e) }),
		WithLogger(slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{ReplaceAttr: dropTime}))))

	for i := range 5 {
		d := l.Decide(t.Context(), "GET", "/api/search", "alice", false)
		if !d.Allowed || d.ShadowDenied != (i >= 2) || d.Rule.Name != "search" {
			t.Fatalf("request %d: Allowed %v, ShadowDenied %v; want true, %v", i, d.Allowed, d.ShadowDenied, i >= 2)
		}
		h := http.Header{}
		d.SetHeaders(h)
		if len(h) != 0 {
			t.Errorf("request %d: a shadow rule wrote headers %v, want none", i, h)
		}
		if i >= 2 && (d.Result.Allowed || d.Result.RetryAfter != time.Minute) {
			t.Errorf("request %d: Result %+v, want the store's denial", i, d.Result)
		}
	}
	var outcomes []Outcome
	for _, e := range events {
		outcomes = append(outcomes, e.Outcome)
	}
	want := []Outcome{OutcomeAllowed, OutcomeAllowed, OutcomeShadowDenied, OutcomeShadowDenied, OutcomeShadowDenied}
	if !equalOutcomes(outcomes, want) {
		t.Errorf("outcomes %v, want %v", outcomes, want)
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

	// WithShadowHeaders writes the headers the rule would write.
	l = NewLimiter(cfg, newFakeStore(), WithShadowHeaders(true), WithLogger(discard))
	d := l.Decide(t.Context(), "GET", "/api/search", "alice", false)
	h := http.Header{}
	d.SetHeaders(h)
	if got := h.Get("RateLimit"); got != `"search";r=1;t=60` {
		t.Errorf("WithShadowHeaders: RateLimit %q, want %q", got, `"search";r=1;t=60`)
	}
}

func TestShadowStoreFailure(t *testing.T) {
	cfg, err := ParseConfig([]byte(strings.Replace(shadowYAML, "  enabled: true\n", "  enabled: true\n  failure: closed\n", 1)), "s.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var events []Event
	l := NewLimiter(cfg, &failStore{}, WithLogger(discard), WithObserver(func(e Event) { events = append(events, e) }))
	// Fail-closed denies an enforced rule's request, never a shadow rule's.
	if d := l.Decide(t.Context(), "GET", "/api/search", "alice", false); !d.Allowed || !errors.Is(d.Err, errStoreDown) || d.ShadowDenied {
		t.Errorf("shadow rule, store down, fail closed: Allowed %v, Err %v, ShadowDenied %v; want true, %v, false", d.Allowed, d.Err, d.ShadowDenied, errStoreDown)
	}
	if d := l.Decide(t.Context(), "GET", "/api/upload", "alice", false); d.Allowed {
		t.Errorf("enforced rule, store down, fail closed: Allowed true, want false")
	}
	if len(events) != 2 || events[0].Outcome != OutcomeStoreError || !events[0].Allowed || events[1].Outcome != OutcomeStoreError || events[1].Allowed {
		t.Errorf("events %+v, want two store errors, allowed then denied", events)
	}
}

func equalOutcomes(a, b []Outcome) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func dropTime(groups []string, a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey && len(groups) == 0 {
		return slog.Attr{}
	}
	return a
}
