package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/internal/redistest"
	"github.com/rlkit/rlkit/worksclient"
	"github.com/rlkit/rlkit/worksclient/worksredis"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m) // the fake API, the relay lanes and the lock all stop
}

const interval = worksclient.DefaultInterval

// check verifies a relay's report: every message arrived once, nothing is
// left, and each key's requests were sent at least minSent apart and
// received with no burst, at least half an interval apart (as received,
// gaps carry loopback and scheduling jitter: a fraction of a millisecond
// on an idle machine, tens of milliseconds on a saturated one). It returns
// what failed.
func check(r *report, perKey int, minSent time.Duration) []string {
	var bad []string
	if r.left != 0 {
		bad = append(bad, "messages left in the outbox")
	}
	for _, a := range apis {
		key := worksclient.APIKey(a.method, a.pathOf(0))
		if n, m := len(r.sent[key]), len(r.arrived[key]); n != perKey || m != perKey {
			bad = append(bad, key+": wrong count")
			continue
		}
		if g, _ := minGap(r.sent[key]); g < minSent {
			bad = append(bad, key+": sent "+g.String()+" apart")
		}
		if g, _ := minGap(r.arrived[key]); g < interval/2 {
			bad = append(bad, key+": received "+g.String()+" apart")
		}
	}
	if n := len(r.arrived["POST /oauth2/v2.0/token"]); n != 1 {
		bad = append(bad, "token fetched more than once")
	}
	return bad
}

// TestRelay relays the default outbox in one process, with no Redis: each
// key's requests leave 250 ms apart. As sent, the instants are taken after
// Wait has returned, on the lane's goroutine, so each carries the moment
// between the pacer's start and the send, which a scheduler can stretch
// for one request and not the next: the gaps are checked against the
// interval less 10 ms. (The pacer's own start instants, which are exactly
// an interval apart, are checked by worksclient's tests; they are not
// visible from here.) On a loaded machine a run may still miss; the test
// tries three times.
func TestRelay(t *testing.T) {
	cfg := config{interval: interval, perKey: 4, owner: "test"}
	for attempt := 1; attempt <= 3; attempt++ {
		var out bytes.Buffer
		r, err := relayOutbox(t.Context(), cfg, nil, &out)
		if err != nil {
			t.Fatal(err)
		}
		r.print(&out)
		t.Logf("run %d:\n%s", attempt, out.String())
		bad := check(r, cfg.perKey, interval-10*time.Millisecond)
		// Three lanes of four: three intervals, not nine.
		if r.elapsed > 4*interval+500*time.Millisecond {
			bad = append(bad, "relayed in "+r.elapsed.String()+": the APIs waited on each other")
		}
		if len(bad) == 0 {
			return
		}
		t.Logf("run %d: %s", attempt, strings.Join(bad, "; "))
	}
	t.Fatal("three runs missed")
}

// TestRun runs the program as main does and checks what it prints.
func TestRun(t *testing.T) {
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"-messages", "2", "-interval", "100ms"}, &out, &errOut); err != nil {
		t.Fatalf("run: %v\n%s", err, errOut.String())
	}
	for _, want := range []string{
		"leader lock: none",
		"relaying 6 messages over 3 APIs, paced at 100ms per API in this process",
		"PATCH /scim/v2/Users/{id}", "PATCH /v1.0/users/{id}", "POST /v1.0/users/{id}/alias-emails/{id}", "POST /oauth2/v2.0/token",
		"0 message(s) left in the outbox",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRelayRedis relays as the leader in Redis, paced through Redis, and
// releases the lock when done. Through Redis the spacing is exact on the
// server's clock (worksclient's tests check it there); here, sent
// requests must show no burst, as the time a start takes to come back
// from Redis varies.
func TestRelayRedis(t *testing.T) {
	s := redistest.StartServer(t)
	c := s.Client(t)
	cfg := config{redisURL: "redis://" + s.Addr() + "/0", interval: interval, perKey: 3, owner: "relay-1"}
	for attempt := 1; attempt <= 3; attempt++ {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), []string{"-redis", cfg.redisURL, "-messages", "3", "-owner", cfg.owner}, &out, &errOut); err != nil {
			t.Fatalf("run: %v\n%s", err, errOut.String())
		}
		if !strings.Contains(out.String(), "leader lock: baron:worksmobile:relay:leader (TTL 30s) as relay-1") ||
			!strings.Contains(out.String(), "leader: relaying") || !strings.Contains(out.String(), "in Redis") {
			t.Fatalf("output:\n%s", out.String())
		}
		if n := c.Exists(t.Context(), worksredis.LeaderKey).Val(); n != 0 {
			t.Fatal("the lock was not released")
		}
		rdb := redis.NewClient(&redis.Options{Addr: s.Addr()})
		r, err := relayOutbox(t.Context(), cfg, rdb, &out)
		rdb.Close()
		if err != nil {
			t.Fatal(err)
		}
		bad := check(r, cfg.perKey, interval/2)
		if len(bad) == 0 {
			return
		}
		t.Logf("run %d: %s\n%s", attempt, strings.Join(bad, "; "), out.String())
	}
	t.Fatal("three runs missed")
}

// TestRelayStops: a relay whose context ends stops, and what it did not
// send stays in the outbox.
func TestRelayStops(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 3*interval/2)
	defer cancel()
	var out bytes.Buffer
	r, err := relayOutbox(ctx, config{interval: interval, perKey: 4}, nil, &out)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("relayOutbox = %v, want %v", err, context.DeadlineExceeded)
	}
	delivered := 0
	for _, a := range apis {
		delivered += len(r.arrived[worksclient.APIKey(a.method, a.pathOf(0))])
	}
	// Each lane sent at 0 and 250ms, two of four, unless a slow machine
	// delayed it: some were sent, some not, and none both.
	// (A message cut off in flight may count twice: at least once.)
	if delivered == 0 || r.left == 0 || delivered+r.left < 12 {
		t.Errorf("%d messages delivered and %d left, want some of each, 12 in all", delivered, r.left)
	}
}

func TestFlags(t *testing.T) {
	for _, args := range [][]string{
		{"-interval", "0s"}, {"-messages", "0"}, {"-messages", "101"}, {"extra"}, {"-nope"}, {"-redis", "mysql://x"},
	} {
		var out, errOut bytes.Buffer
		if err := run(t.Context(), args, &out, &errOut); !errors.Is(err, demo.ErrUsage) || errOut.Len() == 0 {
			t.Errorf("run(%q) = %v, stderr %q; want a usage error", args, err, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"-h"}, &out, &errOut); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("run(-h) = %v, want %v", err, flag.ErrHelp)
	}
}
