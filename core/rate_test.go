package core

import (
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
)

func TestRateConfig(t *testing.T) {
	lim := algo.Limit{Count: 4, Period: 1500 * time.Millisecond, Burst: 1}
	c, err := RateConfig(algo.GCRA, lim)
	if err != nil {
		t.Fatal(err)
	}
	r, cost := c.Match("GET", "/health")
	if r != c.Default() || cost != 1 || c.Exempt("/health") || !c.Enabled() {
		t.Fatalf("Match = %v, %d; want the default rule for every path, nothing exempt", r, cost)
	}
	if p := r.Policy; p.Name != DefaultRuleName || p.Algorithm != algo.GCRA || len(p.Limits) != 1 || p.Limits[0] != lim {
		t.Fatalf("policy %+v, want %v under gcra", p, lim)
	}
	if got := r.policyValue[0]; got != `"default";q=4;w=2` {
		t.Fatalf("RateLimit-Policy %q", got)
	}
	if _, err := RateConfig(algo.GCRA, algo.Limit{Count: 0, Period: time.Second}); err == nil || !strings.Contains(err.Error(), "count 0") {
		t.Fatalf("count 0: %v", err)
	}
}
