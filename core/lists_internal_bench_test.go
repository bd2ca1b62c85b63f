package core

import (
	"context"
	"fmt"
	"testing"
)

// BenchmarkListLookup measures the network lists alone: parsing a client
// IP (listIP) and looking it up in ban and allow lists of 10,000 networks
// each (IPv4 /24s and three more lengths; IPv6 /48s and one more), for a
// client in none of them, the worst case: one probe per length.
func BenchmarkListLookup(b *testing.B) {
	spec := Spec{Enabled: true}
	for i := range 10000 {
		spec.Ban.Networks = append(spec.Ban.Networks, fmt.Sprintf("100.%d.%d.0/24", i/256, i%256))
		spec.Allow.Networks = append(spec.Allow.Networks, fmt.Sprintf("2001:db8:%x::/48", i))
	}
	spec.Ban.Networks = append(spec.Ban.Networks, "172.16.0.0/12", "192.0.2.128/25", "203.0.113.7", "2001:db9::/32")
	cfg, err := NewConfig(spec)
	if err != nil {
		b.Fatal(err)
	}
	for _, ip := range []string{"192.0.2.1", "2001:db8:ffff:1::"} {
		b.Run(ip, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				a := listIP(ip)
				if cfg.banned(a) || cfg.allowsIP(a) {
					b.Fatal("listed")
				}
			}
		})
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
	lim := NewLimiter(parseTiers(t, yaml), WithStore(nopStore{}))
	ctx := context.Background()
	for _, id := range []string{"sub:alice", "", "user:42", "203.0.113.9", "10.1.1.1", "192.0.2.1"} {
		if n := testing.AllocsPerRun(100, func() { _ = lim.Decide(ctx, "GET", "/api/search", id, false) }); n != 0 {
			t.Errorf("Decide(%q) with network lists: %v allocations per request, want 0", id, n)
		}
	}
}
