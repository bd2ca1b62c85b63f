package core

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// stuckProvider is a LimitProvider whose calls ignore their context: they
// return only when release is closed (a database driver without a
// deadline, a call stuck on a dead connection).
type stuckProvider struct {
	release chan struct{}
	calls   atomic.Int64
}

func (p *stuckProvider) Limits(ctx context.Context, key, rule string) ([]algo.Limit, bool, error) {
	p.calls.Add(1)
	<-p.release
	return []algo.Limit{{Count: 100, Period: time.Minute}}, true, nil
}

// TestLimitProviderIgnoresContext: LimitProvider's doc promises that a
// call's context ends after LimitProviderTimeout, and provider.rule's
// comment that a waiter's answer "comes within twice
// LimitProviderTimeout"; a waiter no longer leaves on its own context's
// cancellation. A provider that does not honour its context must then not
// hold its callers (nor every later request of the same caller, which
// waits on the same entry) for good: they count under the rule's limits
// once the bound has passed.
func TestLimitProviderIgnoresContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := &stuckProvider{release: make(chan struct{})}
		defer close(p.release)
		lim := NewLimiter(parseTiers(t, tiersYAML), newFakeStore(), WithLimitProvider(p))
		var asker, waiter atomic.Pointer[Decision]
		go func() {
			d := lim.Decide(context.Background(), "GET", "/api/search", "sub:alice", false)
			asker.Store(&d)
		}()
		synctest.Wait() // the asker is in the provider's call
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() {
			d := lim.Decide(ctx, "GET", "/api/search", "sub:alice", false)
			waiter.Store(&d)
		}()
		synctest.Wait()
		cancel() // the client of the waiting request goes away
		time.Sleep(3 * LimitProviderTimeout)
		synctest.Wait()
		if d := waiter.Load(); d == nil {
			t.Errorf("a request waiting for another's provider call is still waiting after %v (the call ignores its context)", 3*LimitProviderTimeout)
		} else if d.Plan != "" || !d.Allowed {
			t.Errorf("waiter: plan %q, allowed %v; want the rule's limits, allowed", d.Plan, d.Allowed)
		}
		if d := asker.Load(); d == nil {
			t.Errorf("the request that asked the provider is still waiting after %v, past LimitProviderTimeout (the call ignores its context)", 3*LimitProviderTimeout)
		}
	})
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
	lim := NewLimiter(parseTiers(t, yaml), st, WithClock(store.NewManualClock(time.Unix(1_700_000_000, 0))))
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

// TestDecideListsAllocs: Limiter.Decide (through directFlow) reads its
// identity as the client IP of the network lists. An identity that is no
// IP address ("sub:alice", the common case of Decide, and "") must cost
// no allocation under a configuration with networks, as it costs none
// without them: listIP's netip.ParseAddr error is an allocation per
// request.
func TestDecideListsAllocs(t *testing.T) {
	const yaml = `rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "1000000/minute"
  allow:
    networks: ["10.0.0.0/8"]
  ban:
    networks: ["192.0.2.0/24"]
`
	lim := NewLimiter(parseTiers(t, yaml), nopStore{})
	ctx := context.Background()
	for _, id := range []string{"sub:alice", "", "user:42", "203.0.113.9", "10.1.1.1", "192.0.2.1"} {
		if n := testing.AllocsPerRun(100, func() { _ = lim.Decide(ctx, "GET", "/api/search", id, false) }); n != 0 {
			t.Errorf("Decide(%q) with network lists: %v allocations per request, want 0", id, n)
		}
	}
}
