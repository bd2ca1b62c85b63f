package redisstore_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestPenaltyGCRAPeekRedis pins what a rule's penalty (core.PenaltySpec)
// relies on, on a real redis-server: a Take at cost 0 of a GCRA policy of
// 1 per ban, burst 1, consumes nothing and creates no key; it gives
// Remaining 1 when there is no ban, and Remaining 0 and ResetAfter the
// rest of the ban while there is one.
func TestPenaltyGCRAPeekRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	c := client(t, srv.Addr())
	s := newStore(t, c)
	ctx := context.Background()
	ban := &store.Policy{Name: "login!ban", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 1, Period: 15 * time.Minute, Burst: 1}}}
	keys := func() int64 {
		n, err := c.DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for range 2 {
		r, err := s.Take(ctx, "alice", ban, 0)
		if err != nil || !r.Allowed || r.Remaining != 1 || r.ResetAfter != 0 || keys() != 0 {
			t.Fatalf("peek with no ban: %+v, %v, %d keys; want allowed, remaining 1, no key", r, err, keys())
		}
	}
	r, err := s.Take(ctx, "alice", ban, 1)
	if err != nil || !r.Allowed || r.Remaining != 0 || keys() != 1 {
		t.Fatalf("setting the ban: %+v, %v, %d keys", r, err, keys())
	}
	for range 2 {
		r, err = s.Take(ctx, "alice", ban, 0)
		// The server's clock runs: the rest is at most the ban, and
		// generously more than the ban less 10s.
		if err != nil || !r.Allowed || r.Remaining != 0 || r.ResetAfter > 15*time.Minute || r.ResetAfter < 15*time.Minute-10*time.Second {
			t.Fatalf("peek while banned: %+v, %v; want allowed, remaining 0, reset about 15m", r, err)
		}
	}
	r, err = s.Take(ctx, "alice", ban, 1)
	if err != nil || r.Allowed || r.RetryAfter < 15*time.Minute-10*time.Second {
		t.Fatalf("setting it again: %+v, %v; want denied, retry about 15m", r, err)
	}
	if cleared, err := s.Reset(ctx, "alice", ban); err != nil || !cleared {
		t.Fatalf("Reset: %v, %v", cleared, err)
	}
	if r, err = s.Take(ctx, "alice", ban, 0); err != nil || r.Remaining != 1 {
		t.Fatalf("peek after Reset: %+v, %v", r, err)
	}
}

// TestPenaltySharedRedis checks that two limiters on one redis-server
// (two replicas) share a rule's penalty: denials on one ban the caller on
// the other, and a Reset on either lifts the ban on both.
func TestPenaltySharedRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/hour"
      penalty: {after: 3, within: 1h, ban: 15m}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := core.NewLimiter(cfg, core.WithStore(newStore(t, client(t, srv.Addr()))))
	var outcomes []core.Outcome // b's
	b := core.NewLimiter(cfg, core.WithStore(newStore(t, client(t, srv.Addr()))), core.WithObserver(func(e core.Event) { outcomes = append(outcomes, e.Outcome) }))
	ctx := context.Background()
	decide := func(l *core.Limiter, id string) core.Decision {
		return l.Decide(ctx, "POST", "/login", id, false)
	}
	// Two admitted (one on each), then three denials, split between the
	// replicas: the third sets the ban.
	for i, l := range []*core.Limiter{a, b, a, b} {
		if d := decide(l, "alice"); d.Penalty || d.Allowed != (i < 2) || d.Err != nil {
			t.Fatalf("request %d: allowed %v, penalty %v, err %v", i, d.Allowed, d.Penalty, d.Err)
		}
	}
	d := decide(a, "alice")
	if d.Allowed || !d.Penalty || d.Status() != 429 || d.Result.RetryAfter < 15*time.Minute-10*time.Second {
		t.Fatalf("third denial: allowed %v, penalty %v, status %d, retry %v; want the ban", d.Allowed, d.Penalty, d.Status(), d.Result.RetryAfter)
	}
	// The other replica refuses alice under the ban, without counting,
	// and only alice.
	outcomes = nil
	if d := decide(b, "alice"); d.Allowed || !d.Penalty || d.Result.RetryAfter < 15*time.Minute-10*time.Second || len(outcomes) != 1 || outcomes[0] != core.OutcomePenalized {
		t.Fatalf("other replica: allowed %v, penalty %v, retry %v, outcomes %v; want the ban, penalized", d.Allowed, d.Penalty, d.Result.RetryAfter, outcomes)
	}
	if d := decide(b, "bob"); !d.Allowed {
		t.Fatalf("bob is refused")
	}
	// A Reset on one replica lifts the ban on both. (Replica a's deny
	// cache still holds alice's denial under the rule itself until the
	// retry-after Redis gave, as for any Reset made elsewhere.)
	if cleared, err := b.Reset(ctx, "alice", "login"); err != nil || !cleared {
		t.Fatalf("Reset: %v, %v", cleared, err)
	}
	if d := decide(b, "alice"); !d.Allowed || d.Penalty {
		t.Fatalf("after Reset, replica b: allowed %v, penalty %v", d.Allowed, d.Penalty)
	}
	if d := decide(a, "alice"); d.Penalty || d.Status() != 429 || d.Result.RetryAfter > time.Hour {
		t.Fatalf("after Reset, replica a: penalty %v, status %d, retry %v; want the rule's own denial", d.Penalty, d.Status(), d.Result.RetryAfter)
	}
}

// miniClock is a store.ManualClock that also sets a miniredis server's
// clock, so that the scripts, the deny cache and the limiter read one
// time.
type miniClock struct {
	*store.ManualClock
	m *miniredis.Miniredis
}

func newMiniClock(t *testing.T) (*miniClock, *redis.Client) {
	m := redistest.StartMini(t)
	c := &miniClock{store.NewManualClock(time.Unix(1_700_000_040, 0)), m} // the start of a minute
	m.SetTime(c.Time())
	return c, client(t, m.Addr())
}

func (c *miniClock) Advance(d time.Duration) {
	c.ManualClock.Advance(d)
	c.m.SetTime(c.Time())
}

// TestPenaltyRetryAfterNeverEarlyRedis runs the penalty's waits through
// the Redis store's scripts (in miniredis, on the test's clock): under a
// ban shorter than the rule's window, banned requests are told the rule's
// wait, and a client that waits it is admitted then; under a ban longer
// than the rule's wait, the ban's rest.
func TestPenaltyRetryAfterNeverEarlyRedis(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		ban   string
		steps []struct {
			adv   time.Duration
			retry int64 // 0: admitted
		}
	}{
		{"5s", []struct {
			adv   time.Duration
			retry int64
		}{{24 * time.Second, 36}, {0, 36}, {2 * time.Second, 34}, {2*time.Second + 999*time.Millisecond, 32}, {31*time.Second + time.Millisecond, 0}}},
		{"50s", []struct {
			adv   time.Duration
			retry int64
		}{{24 * time.Second, 50}, {2 * time.Second, 48}, {48 * time.Second, 0}}},
		{"15m", []struct {
			adv   time.Duration
			retry int64
		}{{24 * time.Second, 900}, {time.Minute, 840}, {14*time.Minute - time.Second, 1}, {time.Second, 0}}},
	} {
		t.Run("ban "+c.ban, func(t *testing.T) {
			t.Parallel()
			clock, rc := newMiniClock(t)
			cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      penalty: {after: 1, within: 1m, ban: `+c.ban+`}
`), "p.yaml")
			if err != nil {
				t.Fatal(err)
			}
			l := core.NewLimiter(cfg, core.WithStore(newStore(t, rc, redisstore.WithClock(clock))), core.WithClock(clock))
			ctx := context.Background()
			for range 2 {
				if d := l.Decide(ctx, "POST", "/login", "alice", false); !d.Allowed || d.Err != nil {
					t.Fatalf("admitted request: allowed %v, err %v", d.Allowed, d.Err)
				}
			}
			for i, s := range c.steps {
				clock.Advance(s.adv)
				d := l.Decide(ctx, "POST", "/login", "alice", false)
				var buf [64]byte
				_, rl, _ := d.LimitHeader(1, buf[:0]) // RateLimit
				if d.Err != nil || d.Allowed != (s.retry == 0) || d.Penalty == d.Allowed || d.RetryAfterSeconds() != s.retry ||
					!d.Allowed && string(rl) != `"login";r=0;t=`+strconv.FormatInt(s.retry, 10) {
					t.Errorf("step %d: allowed %v, penalty %v, Retry-After %d, RateLimit %s, err %v; want Retry-After %d",
						i, d.Allowed, d.Penalty, d.RetryAfterSeconds(), rl, d.Err, s.retry)
				}
			}
		})
	}
}

// TestPenaltyRuleWaitRedis checks, on a real redis-server, that a banned
// request under a ban shorter than the rule's wait is told the rule's
// wait (GCRA at 2 per hour: half an hour), and that the rule's Peek that
// finds it is answered by the deny cache, which holds the denial that set
// the ban: one round trip, the ban's check.
func TestPenaltyRuleWaitRedis(t *testing.T) {
	t.Parallel()
	rc := client(t, redistest.StartServer(t).Addr())
	cmds := countCommands(rc)
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      algorithm: gcra
      limit: "2/hour"
      penalty: {after: 1, within: 1h, ban: 3s}
`), "p.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(newStore(t, rc)))
	ctx := context.Background()
	for i := range 3 {
		d := l.Decide(ctx, "POST", "/login", "alice", false)
		if d.Err != nil || d.Allowed != (i < 2) || d.Penalty != (i == 2) {
			t.Fatalf("request %d: allowed %v, penalty %v, err %v", i, d.Allowed, d.Penalty, d.Err)
		}
		if i == 2 && (d.RetryAfterSeconds() < 1790 || d.RetryAfterSeconds() > 1800) {
			t.Fatalf("the denial that set the ban: Retry-After %d, want about 1800", d.RetryAfterSeconds())
		}
	}
	cmds.take()
	d := l.Decide(ctx, "POST", "/login", "alice", false)
	if d.Err != nil || d.Allowed || !d.Penalty || d.RetryAfterSeconds() < 1790 || d.RetryAfterSeconds() > 1800 {
		t.Fatalf("banned: allowed %v, penalty %v, Retry-After %d, err %v; want the rule's wait, about 1800", d.Allowed, d.Penalty, d.RetryAfterSeconds(), d.Err)
	}
	if n := cmds.take(); n["evalsha"] != 1 || len(n) != 1 {
		t.Fatalf("banned request's commands: %v, want one evalsha", n)
	}
}
