package grpcrl_test

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// stackConfig stacks a limit over every method of test.Echo on Say's own
// limit and the default one.
const stackConfig = `
rate_limit:
  enabled: true
  rules:
    - name: global
      stack: true
      paths: ["/test.Echo/**"]
      limit: "4/minute"
    - name: say
      paths: ["/test.Echo/Say"]
      limit: "2/minute"
  default: "10/minute"
  exempt_paths: ["/test.Echo/Ping"]
`

// multiSpy is a memory store that records each Take ("key rule cost")
// and each take of a TakeAll ("takeall key rule cost").
type multiSpy struct {
	*memstore.Store
	mu    sync.Mutex
	calls []string
}

func (s *multiSpy) record(prefix, key string, p *store.Policy, cost int64) {
	s.mu.Lock()
	s.calls = append(s.calls, prefix+key+" "+p.Name+" "+strconv.FormatInt(cost, 10))
	s.mu.Unlock()
}

func (s *multiSpy) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	s.record("", key, p, cost)
	return s.Store.Take(ctx, key, p, cost)
}

func (s *multiSpy) TakeAll(ctx context.Context, takes []store.Take, results []store.Result) (bool, error) {
	for _, t := range takes {
		s.record("takeall ", t.Key, t.Policy, t.Cost)
	}
	return s.Store.TakeAll(ctx, takes, results)
}

// drain returns and forgets the calls recorded.
func (s *multiSpy) drain() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.calls
	s.calls = nil
	return c
}

// TestStacked: a call counts under the rule of its method (or the
// default) and the rule stacked over the whole service, in one TakeAll;
// the metadata lists both rules' limits, the most restrictive decides; a
// call either rule refuses ends with ResourceExhausted naming the
// refusing rule (the rule that applies of two with one wait), its
// RetryInfo and retry-after, and consumes from neither; an exempt method
// counts under none. Legacy metadata is the deciding rule's.
func TestStacked(t *testing.T) {
	clock := store.NewManualClock(start)
	spy := &multiSpy{Store: memAt(t, clock)}
	var (
		mu     sync.Mutex
		events []string
	)
	observe := func(e core.Event) {
		mu.Lock()
		events = append(events, fmt.Sprintf("%s:%s allowed=%t cost=%d", e.Rule, e.Outcome, e.Allowed, e.Cost))
		mu.Unlock()
	}
	drainEvents := func() []string {
		mu.Lock()
		defer mu.Unlock()
		e := events
		events = nil
		return e
	}
	cfg := config(t, stackConfig)
	lim := core.NewLimiter(cfg, core.WithStore(spy), core.WithObserver(observe))
	conn, e := serve(t, lim)
	key := lim.Key("127.0.0.1") // the peer's
	takeAll := func(rule string) []string {
		return []string{"takeall " + key + " " + rule + " 1", "takeall " + key + " global 1"}
	}
	md := func(rule string, q, r, t int, global ...int) map[string]string {
		return map[string]string{
			"ratelimit-policy": fmt.Sprintf(`"%s";q=%d;w=60, "global";q=4;w=60`, rule, q),
			"ratelimit":        fmt.Sprintf(`"%s";r=%d;t=%d, "global";r=%d;t=%d`, rule, r, t, global[0], global[1]),
		}
	}
	refused := func(m map[string]string, retry string) map[string]string {
		m["retry-after"] = retry
		return m
	}
	check := func(what string, calls, evs []string) {
		t.Helper()
		if got := spy.drain(); !slices.Equal(got, calls) {
			t.Errorf("%s: store calls %q, want %q", what, got, calls)
		}
		if got := drainEvents(); !slices.Equal(got, evs) {
			t.Errorf("%s: events %q, want %q", what, got, evs)
		}
	}

	checkOK(t, "say 1", say(t, conn, "hi"), md("say", 2, 1, 60, 3, 60))
	check("say 1", takeAll("say"), []string{"say:allowed allowed=true cost=1", "global:allowed allowed=true cost=1"})
	checkOK(t, "say 2", say(t, conn, "hi"), md("say", 2, 0, 60, 2, 60))
	check("say 2", takeAll("say"), []string{"say:allowed allowed=true cost=1", "global:allowed allowed=true cost=1"})
	// Refused by say: global keeps its 2.
	checkExhausted(t, "say 3", say(t, conn, "hi"), "say", time.Minute, refused(md("say", 2, 0, 60, 2, 60), "60"))
	check("say 3", takeAll("say"), []string{"say:denied allowed=false cost=1", "global:allowed allowed=false cost=0"})
	// The default and global: global decides with fewer left, for a
	// unary call and a stream.
	checkOK(t, "other 1", invoke(t, conn, "/test.Echo/Other", "hi"), md("default", 10, 9, 60, 1, 60))
	check("other 1", takeAll("default"), []string{"default:allowed allowed=true cost=1", "global:allowed allowed=true cost=1"})
	checkOK(t, "watch", watch(t, conn, []string{"a", "b"}), md("default", 10, 8, 60, 0, 60))
	check("watch", takeAll("default"), []string{"default:allowed allowed=true cost=1", "global:allowed allowed=true cost=1"})
	// Refused by global: the default keeps its 8.
	checkExhausted(t, "other 2", invoke(t, conn, "/test.Echo/Other", "hi"), "global", time.Minute, refused(md("default", 10, 8, 60, 0, 60), "60"))
	check("other 2", takeAll("default"), []string{"default:allowed allowed=false cost=0", "global:denied allowed=false cost=1"})
	checkExhausted(t, "watch refused", watch(t, conn, []string{"a"}), "global", time.Minute, refused(md("default", 10, 8, 60, 0, 60), "60"))
	check("watch refused", takeAll("default"), []string{"default:allowed allowed=false cost=0", "global:denied allowed=false cost=1"})
	// Exempt: no rule counts it, global neither.
	checkOK(t, "ping", invoke(t, conn, "/test.Echo/Ping", "hi"), map[string]string{})
	check("ping", nil, []string{":exempt allowed=true cost=0"})
	clock.Advance(30 * time.Second)
	// Both refuse with one wait: say, the rule that applies, is named.
	checkExhausted(t, "say 4", say(t, conn, "hi"), "say", 30*time.Second, refused(md("say", 2, 0, 30, 0, 30), "30"))
	check("say 4", takeAll("say"), []string{"say:denied allowed=false cost=1", "global:denied allowed=false cost=1"})
	if got := e.served.Load(); got != 5 {
		t.Errorf("handler ran %d times, want 5 (say 2, other 1, watch 1, ping 1)", got)
	}
	// What the refusals left: say 0 and global 0 of their 2 and 4; the
	// default 2 of its 10 spent.
	ctx := context.Background()
	for _, c := range []struct {
		rule      string
		allowed   bool
		remaining int64
	}{{"say", false, 0}, {"global", false, 0}, {"default", true, 7}} {
		res, err := spy.Peek(ctx, key, cfg.Rule(c.rule).Policy, 1)
		if err != nil || res.Allowed != c.allowed || res.Remaining != c.remaining {
			t.Errorf("%s: peek of 1: allowed %v, remaining %d, %v; want %v, %d", c.rule, res.Allowed, res.Remaining, err, c.allowed, c.remaining)
		}
	}
}

// TestStackedLegacy: legacy metadata is the deciding rule's alone.
func TestStackedLegacy(t *testing.T) {
	clock := store.NewManualClock(start)
	conn, _ := serve(t, config(t, stackConfig), core.WithStore(memAt(t, clock)), core.WithHeaders(core.HeadersLegacy))
	legacy := func(limit, remaining, reset int) map[string]string {
		return map[string]string{"x-ratelimit-limit": strconv.Itoa(limit), "x-ratelimit-remaining": strconv.Itoa(remaining), "x-ratelimit-reset": strconv.Itoa(reset)}
	}
	checkOK(t, "say 1", say(t, conn, "hi"), legacy(2, 1, 60))                          // say 1, global 3
	checkOK(t, "other 1", invoke(t, conn, "/test.Echo/Other", "hi"), legacy(4, 2, 60)) // default 9, global 2
	checkOK(t, "say 2", say(t, conn, "hi"), legacy(2, 0, 60))                          // say 0, global 1
	checkOK(t, "other 2", invoke(t, conn, "/test.Echo/Other", "hi"), legacy(4, 0, 60)) // default 8, global 0
	want := legacy(4, 0, 60)
	want["retry-after"] = "60"
	checkExhausted(t, "other 3", invoke(t, conn, "/test.Echo/Other", "hi"), "global", time.Minute, want)
}
