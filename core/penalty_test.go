package core_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// penaltyYAML: login allows 2 per minute (fixed window); 3 denials within
// a minute ban the caller for 15 minutes.
const penaltyYAML = `
rate_limit:
  enabled: true
  failure: %s
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      penalty: {after: 3, within: 1m, ban: 15m}
`

func penaltyLimiter(t *testing.T, failure string) (*core.Limiter, *recStore, *events, *store.ManualClock) {
	t.Helper()
	cfg, err := core.ParseConfig(fmt.Appendf(nil, penaltyYAML, failure), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0)) // the start of a minute
	st := newRecStore(t, clock)
	ev := &events{}
	return core.NewLimiter(cfg, core.WithStore(st), core.WithObserver(ev.observe), core.WithClock(clock)), st, ev, clock
}

// decision is a Decision as text: status, Penalty, Retry-After and the
// RateLimit header.
func decision(d *core.Decision) string {
	var buf [128]byte
	var hdr []string
	for i := 0; ; i++ {
		name, v, ok := d.Header(i, buf[:0])
		if !ok {
			break
		}
		if name == "Ratelimit" || name == "Retry-After" {
			hdr = append(hdr, name+": "+string(v))
		}
	}
	return fmt.Sprintf("%d penalty=%v %s", d.Status(), d.Penalty, strings.Join(hdr, "; "))
}

func TestPenalty(t *testing.T) {
	l, st, ev, clock := penaltyLimiter(t, "open")
	ctx := context.Background()
	step := func(want, calls, events string) {
		t.Helper()
		d := l.Decide(ctx, "POST", "/login", "alice", false)
		if got := decision(&d); got != want {
			t.Errorf("decision: got %q, want %q", got, want)
		}
		if got := st.calls(); got != calls {
			t.Errorf("store calls: got %q, want %q", got, calls)
		}
		if got := ev.take(); got != events {
			t.Errorf("events: got %q, want %q", got, events)
		}
	}
	const (
		check  = "alice login!ban 0; "
		count  = check + "alice login 1"
		denial = count + "; alice login!denials 1"
	)
	step(`200 penalty=false Ratelimit: "login";r=1;t=60`, count, "allowed login alice true 1")
	step(`200 penalty=false Ratelimit: "login";r=0;t=60`, count, "allowed login alice true 1")
	clock.Advance(10 * time.Second)
	// Two denials: the rule's own 429.
	step(`429 penalty=false Ratelimit: "login";r=0;t=50; Retry-After: 50`, denial, "denied login alice false 1")
	step(`429 penalty=false Ratelimit: "login";r=0;t=50; Retry-After: 50`, denial, "denied login alice false 1")
	clock.Advance(5 * time.Second)
	// The third within a minute sets the ban: 15 minutes from now.
	step(`429 penalty=true Ratelimit: "login";r=0;t=900; Retry-After: 900`, denial+"; alice login!ban 1", "denied login alice false 1")
	// Banned: no counting call, no denial counted.
	clock.Advance(time.Minute)
	for range 3 {
		step(`429 penalty=true Ratelimit: "login";r=0;t=840; Retry-After: 840`, check[:len(check)-2], "penalized login alice false 0")
	}
	// Another identity is not banned.
	if d := l.Decide(ctx, "POST", "/login", "bob", false); !d.Allowed || d.Penalty {
		t.Errorf("bob: %s", decision(&d))
	}
	st.calls()
	ev.take()
	// A second before the ban ends: still banned (the rest of the ban is
	// shorter than the rule's window now: the rule, which would admit the
	// request, is asked too); at its end, counted again.
	clock.Advance(14*time.Minute - time.Second)
	step(`429 penalty=true Ratelimit: "login";r=0;t=1; Retry-After: 1`, check+"peek alice login 1", "penalized login alice false 0")
	clock.Advance(time.Second)
	step(`200 penalty=false Ratelimit: "login";r=1;t=45`, count, "allowed login alice true 1")
}

// TestPenaltyDenialsWithin checks that denials further apart than within
// never set the ban.
func TestPenaltyDenialsWithin(t *testing.T) {
	l, _, _, clock := penaltyLimiter(t, "open")
	ctx := context.Background()
	for i := range 10 {
		for range 2 {
			l.Decide(ctx, "POST", "/login", "alice", false)
		}
		d := l.Decide(ctx, "POST", "/login", "alice", false) // one denial per minute
		if d.Allowed || d.Penalty {
			t.Fatalf("minute %d: %s, want a denial without penalty", i, decision(&d))
		}
		clock.Advance(time.Minute)
	}
}

// TestPenaltyReset checks that Reset of the rule lifts the ban and
// forgets the denials.
func TestPenaltyReset(t *testing.T) {
	l, _, _, _ := penaltyLimiter(t, "open")
	ctx := context.Background()
	for range 5 {
		l.Decide(ctx, "POST", "/login", "alice", false)
	}
	if d := l.Decide(ctx, "POST", "/login", "alice", false); !d.Penalty {
		t.Fatalf("not banned: %s", decision(&d))
	}
	cleared, err := l.Reset(ctx, "alice", "login")
	if err != nil || !cleared {
		t.Fatalf("Reset: %v, %v", cleared, err)
	}
	for i := range 2 {
		if d := l.Decide(ctx, "POST", "/login", "alice", false); !d.Allowed {
			t.Fatalf("request %d after Reset: %s", i, decision(&d))
		}
	}
	// The denials were forgotten too: two more denials set no ban.
	for i := range 2 {
		if d := l.Decide(ctx, "POST", "/login", "alice", false); d.Allowed || d.Penalty {
			t.Fatalf("denial %d after Reset: %s", i, decision(&d))
		}
	}
	// Nothing left to lift: a Reset of the penalty alone would report false.
	if cleared, err := l.Reset(ctx, "nobody", "login"); err != nil || cleared {
		t.Fatalf("Reset of nobody: %v, %v", cleared, err)
	}
}

// TestPenaltyStoreFailure checks that a failing ban check follows the
// failure policy.
func TestPenaltyStoreFailure(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		failure, want, events string
	}{
		// Open: the rule is asked too (and fails too): the request passes.
		{"open", "200 penalty=false ", "store_error login alice true 1"},
		// Closed: 503 at once.
		{"closed", "503 penalty=false Retry-After: 1", "store_error login alice false 1"},
	} {
		l, st, ev, _ := penaltyLimiter(t, c.failure)
		st.fail = true
		d := l.Decide(ctx, "POST", "/login", "alice", false)
		if got := decision(&d); got != c.want || !errors.Is(d.Err, errDown) {
			t.Errorf("%s: got %q (%v), want %q", c.failure, got, d.Err, c.want)
		}
		wantCalls := "alice login!ban 0"
		if c.failure == "open" {
			wantCalls += "; alice login 1"
		}
		if got := st.calls(); got != wantCalls {
			t.Errorf("%s: store calls %q, want %q", c.failure, got, wantCalls)
		}
		if got := ev.take(); got != c.events {
			t.Errorf("%s: events %q, want %q", c.failure, got, c.events)
		}
	}
}

// TestPenaltyShadow checks that the penalty of a rule in shadow mode
// does nothing.
func TestPenaltyShadow(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(strings.Replace(fmt.Sprintf(penaltyYAML, "open"), "  rules:", "  mode: shadow\n  rules:", 1)), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	st := newRecStore(t, store.NewManualClock(time.Unix(1_700_000_040, 0)))
	l := core.NewLimiter(cfg, core.WithStore(st))
	for i := range 10 {
		if d := l.Decide(context.Background(), "POST", "/login", "alice", false); !d.Allowed || d.Penalty {
			t.Fatalf("request %d: %s", i, decision(&d))
		}
	}
	if got := st.calls(); got != strings.TrimSuffix(strings.Repeat("alice login 1; ", 10), "; ") {
		t.Fatalf("store calls: %q", got)
	}
}

// TestPenaltyGCRAPeek pins what the ban relies on, in the memory store: a
// Take at cost 0 of a GCRA policy of 1 per ban, burst 1, consumes nothing
// and creates no key; it gives Remaining 1 when there is no ban, and
// Remaining 0 and ResetAfter the rest of the ban while there is one. (The
// Redis store: TestPenaltyRedis in package redisstore.)
func TestPenaltyGCRAPeek(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st := memstore.New(memstore.WithClock(clock))
	defer st.Close()
	ban := &store.Policy{Name: "login!ban", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 1, Period: 15 * time.Minute, Burst: 1}}}
	ctx := context.Background()
	take := func(cost int64) string {
		r, err := st.Take(ctx, "alice", ban, cost)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("allowed=%v remaining=%d reset=%v retry=%v keys=%d", r.Allowed, r.Remaining, r.ResetAfter, r.RetryAfter, st.Len())
	}
	for _, s := range []struct {
		adv  time.Duration
		cost int64
		want string
	}{
		{0, 0, "allowed=true remaining=1 reset=0s retry=0s keys=0"},
		{0, 0, "allowed=true remaining=1 reset=0s retry=0s keys=0"},
		{0, 1, "allowed=true remaining=0 reset=15m0s retry=0s keys=1"},
		{time.Minute, 0, "allowed=true remaining=0 reset=14m0s retry=0s keys=1"},
		{0, 1, "allowed=false remaining=0 reset=14m0s retry=14m0s keys=1"},
		{14*time.Minute - 1, 0, "allowed=true remaining=0 reset=1ns retry=0s keys=1"},
		{1, 0, "allowed=true remaining=1 reset=0s retry=0s keys=1"},
	} {
		clock.Advance(s.adv)
		if got := take(s.cost); got != s.want {
			t.Errorf("+%v Take(%d): got %s, want %s", s.adv, s.cost, got, s.want)
		}
	}
}

// shortBanYAML: login allows 2 per minute (fixed window); one denial bans
// the caller for %s.
const shortBanYAML = `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      penalty: {after: 1, within: 1m, ban: %s}
`

// TestPenaltyRetryAfterNeverEarly checks that a banned request is told
// the longer of the rest of the ban and the rule's own wait, in
// Retry-After and in the RateLimit header's t, so that a client that
// waits what it is told is admitted then: with a ban shorter than the
// rule's window (5s), the rule's wait, asked with a Peek; with a ban
// longer than the rule's wait at the denial but shorter than its window
// (50s), the ban's rest, Peek and all; with a ban longer than the rule's
// window (15m), the ban's rest, without the Peek while that rest is at
// least the window, with it in the ban's last minute.
func TestPenaltyRetryAfterNeverEarly(t *testing.T) {
	const (
		check  = "alice login!ban 0"
		count  = check + "; alice login 1"
		denial = count + "; alice login!denials 1; alice login!ban 1"
		peek   = check + "; peek alice login 1"
	)
	type step struct {
		adv         time.Duration
		want, calls string
	}
	for _, c := range []struct {
		ban   string
		steps []step
	}{
		{"5s", []step{
			// 24s into the minute: the rule's 36 outlasts the ban's 5.
			{24 * time.Second, `429 penalty=true Ratelimit: "login";r=0;t=36; Retry-After: 36`, denial},
			{0, `429 penalty=true Ratelimit: "login";r=0;t=36; Retry-After: 36`, peek},
			{2 * time.Second, `429 penalty=true Ratelimit: "login";r=0;t=34; Retry-After: 34`, peek},
			{2*time.Second + 999*time.Millisecond, `429 penalty=true Ratelimit: "login";r=0;t=32; Retry-After: 32`, peek}, // 1ms of ban left
			// Waiting what it was told, 36s after the denial: admitted.
			{31*time.Second + time.Millisecond, `200 penalty=false Ratelimit: "login";r=1;t=60`, count},
		}},
		{"50s", []step{
			{24 * time.Second, `429 penalty=true Ratelimit: "login";r=0;t=50; Retry-After: 50`, denial},
			{2 * time.Second, `429 penalty=true Ratelimit: "login";r=0;t=48; Retry-After: 48`, peek},
			{48 * time.Second, `200 penalty=false Ratelimit: "login";r=1;t=46`, count},
		}},
		{"15m", []step{
			{24 * time.Second, `429 penalty=true Ratelimit: "login";r=0;t=900; Retry-After: 900`, denial},
			{time.Minute, `429 penalty=true Ratelimit: "login";r=0;t=840; Retry-After: 840`, check},
			{13 * time.Minute, `429 penalty=true Ratelimit: "login";r=0;t=60; Retry-After: 60`, check},
			{time.Second, `429 penalty=true Ratelimit: "login";r=0;t=59; Retry-After: 59`, peek},
			{59 * time.Second, `200 penalty=false Ratelimit: "login";r=1;t=36`, count},
		}},
	} {
		t.Run("ban "+c.ban, func(t *testing.T) {
			cfg, err := core.ParseConfig(fmt.Appendf(nil, shortBanYAML, c.ban), "p.yaml")
			if err != nil {
				t.Fatal(err)
			}
			clock := store.NewManualClock(time.Unix(1_700_000_040, 0)) // the start of a minute
			st := newRecStore(t, clock)
			l := core.NewLimiter(cfg, core.WithStore(st), core.WithClock(clock))
			for range 2 {
				if d := l.Decide(context.Background(), "POST", "/login", "alice", false); !d.Allowed {
					t.Fatalf("admitted request refused: %s", decision(&d))
				}
			}
			st.calls()
			for i, s := range c.steps {
				clock.Advance(s.adv)
				d := l.Decide(context.Background(), "POST", "/login", "alice", false)
				if got := decision(&d); got != s.want {
					t.Errorf("step %d: got %q, want %q", i, got, s.want)
				}
				if got := st.calls(); got != s.calls {
					t.Errorf("step %d: store calls %q, want %q", i, got, s.calls)
				}
			}
		})
	}
}

// TestPenaltyRetryAfterPeekFails checks that a banned request whose Peek
// of the rule fails is told the longest wait the rule can ask (a fixed
// window's period), never less, and that the failure is logged.
func TestPenaltyRetryAfterPeekFails(t *testing.T) {
	cfg, err := core.ParseConfig(fmt.Appendf(nil, shortBanYAML, "5s"), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0))
	st := newRecStore(t, clock)
	var logs strings.Builder
	l := core.NewLimiter(cfg, core.WithStore(st), core.WithClock(clock), core.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	for range 3 {
		l.Decide(context.Background(), "POST", "/login", "alice", false)
	}
	clock.Advance(2 * time.Second)
	st.failPeek = true
	d := l.Decide(context.Background(), "POST", "/login", "alice", false)
	if got, want := decision(&d), `429 penalty=true Ratelimit: "login";r=0;t=60; Retry-After: 60`; got != want || d.Err != nil {
		t.Errorf("got %q (%v), want %q", got, d.Err, want)
	}
	if !strings.Contains(logs.String(), "rate-limit store failed") || !strings.Contains(logs.String(), "penalty") {
		t.Errorf("logged %q, want the store failure", logs.String())
	}
}
