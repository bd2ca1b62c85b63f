package core_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/memstore"
)

// BenchmarkLists measures what the allow and ban lists and a penalty add
// to an allowed request (Flow.Decide on the memory store): "none" is the
// baseline without lists; "nets" has 10,000 banned IPv4 /24s, 10,000
// allowed IPv6 /48s and four more prefix lengths, and a client in none of
// them; "identities" 10,000 allowed identities and a caller not among
// them; "penalty" a rule with a penalty, whose ban is checked with one
// more store call.
func BenchmarkLists(b *testing.B) {
	rule := core.RuleSpec{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}}
	nets := core.Spec{Enabled: true, Rules: []core.RuleSpec{rule}}
	ids := nets
	for i := range 10000 {
		nets.Ban.Networks = append(nets.Ban.Networks, fmt.Sprintf("100.%d.%d.0/24", i/256, i%256))
		nets.Allow.Networks = append(nets.Allow.Networks, fmt.Sprintf("2001:db8:%x::/48", i))
		ids.Allow.Identities = append(ids.Allow.Identities, "user:"+strconv.Itoa(i))
	}
	nets.Ban.Networks = append(nets.Ban.Networks, "172.16.0.0/12", "192.0.2.128/25", "203.0.113.7", "2001:db9::/32")
	pen := core.Spec{Enabled: true, Rules: []core.RuleSpec{rule}}
	pen.Rules[0].Penalty = &core.PenaltySpec{After: 10, Within: "1m", Ban: "15m"}
	type req struct{ user, addr string }
	for _, c := range []struct {
		name string
		spec core.Spec
		r    req
	}{
		{"none/ip", core.Spec{Enabled: true, Rules: []core.RuleSpec{rule}}, req{addr: "192.0.2.1:1234"}},
		{"nets/ip", nets, req{addr: "192.0.2.1:1234"}},
		{"nets/key", nets, req{user: "alice", addr: "192.0.2.1:1234"}},
		{"none/key", core.Spec{Enabled: true, Rules: []core.RuleSpec{rule}}, req{user: "alice"}},
		{"identities/key", ids, req{user: "alice"}},
		{"penalty/key", pen, req{user: "alice"}},
	} {
		cfg, err := core.NewConfig(c.spec)
		if err != nil {
			b.Fatal(err)
		}
		f := &core.Flow[*req]{
			Limiter:  core.NewLimiter(cfg, core.WithStore(memstore.New())),
			Key:      func(r *req) (string, error) { return r.user, nil },
			ClientIP: func(r *req) string { var ip clientip.Config; return ip.ClientIP(r.addr, nil) },
		}
		ctx := context.Background()
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if d, err := f.Decide(ctx, &c.r, "GET", "/api/search", ""); err != nil || !d.Allowed || d.Rule == nil {
					b.Fatal(d, err)
				}
			}
		})
	}
}
