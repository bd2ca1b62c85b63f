package core_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/memstore"
)

// BenchmarkFlow measures the shared request flow of the adapters on an
// allowed request, by its parts: Decide with a key, with the client IP, by
// route, for a path with several spellings (escaped, unclean), with a
// secret identity (hashed), under rules keyed by the client IP and by
// user and a path parameter (RuleSpec.Key), Limiter.Decide, and writing
// the headers.
func BenchmarkFlow(b *testing.B) {
	cfg, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	type req struct{ user, addr string }
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New()))
	f := &core.Flow[*req]{
		Limiter:  lim,
		Key:      func(r *req) (string, error) { return r.user, nil },
		ClientIP: func(r *req) string { var ip clientip.Config; return ip.ClientIP(r.addr, nil) },
	}
	ctx := context.Background()
	run := func(name string, r *req, path core.Path, route string) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, err := f.Decide(ctx, r, "GET", path, route); err != nil || !d.Allowed || d.Rule.Name != "search" {
					b.Fatal(d, err)
				}
			}
		})
	}
	run("Decide/key", &req{user: "alice"}, "/api/search", "")
	run("Decide/ip", &req{addr: "192.0.2.1:1234"}, "/api/search", "")
	run("Decide/key-route", &req{user: "alice"}, "/api/search", "/api/search")
	run("Decide/key-spelled", &req{user: "alice"}, "/api/x/..//s%65arch/", "")
	// A secret identity (HeaderKey's): its keyed hash is the store key.
	run("Decide/key-secret", &req{user: core.SecretIdentity("X-Api-Key", "sk_live_0123456789abcdef")}, "/api/search", "")
	// Rules with keys of their own (RuleSpec.Key): the key built per
	// request, and a parameter read from the path.
	keyed, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules: []core.RuleSpec{
			{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}, Key: "ip"},
			{Name: "kb", Paths: []string{"/api/kb/{kb}/search"}, Limit: []string{"2000000000/hour"}, Key: "user+param:kb"},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	plain := f.Limiter
	f.Limiter = core.NewLimiter(keyed, core.WithStore(memstore.New()))
	run("Decide/key-ip", &req{user: "alice", addr: "192.0.2.1:1234"}, "/api/search", "")
	f.Limiter = core.NewLimiter(keyed, core.WithStore(memstore.New()))
	kb := &req{user: "alice", addr: "192.0.2.1:1234"}
	b.Run("Decide/key-user-param", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if d, err := f.Decide(ctx, kb, "GET", "/api/kb/kb-01/search", ""); err != nil || !d.Allowed || d.Key != "u:alice|p:kb-01" {
				b.Fatal(d, err)
			}
		}
	})
	f.Limiter = plain
	b.Run("Limiter.Decide", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lim.Decide(ctx, "GET", "/api/search", "alice", false)
		}
	})
	d, _ := f.Decide(ctx, &req{user: "alice"}, "GET", "/api/search", "")
	b.Run("SetHeaders", func(b *testing.B) {
		h := make(http.Header)
		b.ReportAllocs()
		for b.Loop() {
			clear(h)
			d.SetHeaders(h)
		}
	})
	b.Run("Header", func(b *testing.B) {
		var buf [128]byte
		n := 0
		b.ReportAllocs()
		for b.Loop() {
			for i := 0; ; i++ {
				_, v, ok := d.Header(i, buf[:0])
				if !ok {
					break
				}
				n += len(v)
			}
		}
		if n == 0 {
			b.Fatal("no headers")
		}
	})
}

// BenchmarkFlowPlans measures what plans and per-customer limits add to an
// allowed request: the baseline (a configuration with plans, no resolver),
// a request on a plan, on a plan the configuration lacks, and one whose
// limits a LimitProvider gave (a cache hit) or did not give (a cached
// negative answer), and a request on a plan cached by WithLimitCache (a
// hit: the resolver not called).
func BenchmarkFlowPlans(b *testing.B) {
	cfg, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}}},
		Tiers: []core.TierSpec{
			{Name: "free", Rules: []core.TierRuleSpec{{Rule: "search", Limit: []string{"1000000000/hour"}}}},
			{Name: "pro", Rules: []core.TierRuleSpec{{Rule: "search", Limit: []string{"2000000000/hour"}}}},
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	type req struct{ user, plan string }
	quotas := core.LimitProviderFunc(func(_ context.Context, key, rule string) ([]algo.Limit, bool, error) {
		if key == "custom" {
			return []algo.Limit{{Count: 2_000_000_000, Period: time.Hour}}, true, nil
		}
		return nil, false, nil
	})
	ctx := context.Background()
	run := func(name string, lim *core.Limiter, plan func(*req) string, r *req, wantPlan string) {
		f := &core.Flow[*req]{
			Limiter: lim,
			Key:     func(r *req) (string, error) { return r.user, nil },
			Plan:    plan,
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, err := f.Decide(ctx, r, "GET", "/api/search", ""); err != nil || !d.Allowed || d.Rule.Plan() != wantPlan {
					b.Fatal(d, err)
				}
			}
		})
	}
	plan := func(r *req) string { return r.plan }
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New()))
	run("Decide/no-resolver", lim, nil, &req{user: "alice"}, "")
	run("Decide/plan", lim, plan, &req{user: "alice", plan: "pro"}, "pro")
	run("Decide/unknown-plan", lim, plan, &req{user: "alice", plan: "gold"}, "")
	withProvider := core.NewLimiter(cfg, core.WithStore(memstore.New()), core.WithLimitProvider(quotas))
	run("Decide/provider-hit", withProvider, plan, &req{user: "custom", plan: "pro"}, core.CustomPlan)
	run("Decide/provider-negative", withProvider, plan, &req{user: "alice", plan: "pro"}, "pro")
	cached := core.NewLimiter(cfg, core.WithStore(memstore.New()), core.WithLimitCache(0, 0))
	run("Decide/plan-cached", cached, plan, &req{user: "alice", plan: "pro"}, "pro")
}
