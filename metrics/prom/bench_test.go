package prom_test

import (
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
)

// BenchmarkObserve measures Observe alone on an existing rule: an allowed
// decision with a store latency (one counter, one histogram bucket and
// its sum). watched: the rule's name is the watched limiter's own (as in
// its events), found by identity; unwatched: the same name found by
// hashing; untimed: watched, on an event without a latency (the store not
// timed): one counter. The cost within a Limiter's decision, clock reads included, is
// measured by benchmarks/ (BenchmarkMetrics).
func BenchmarkObserve(b *testing.B) {
	cfg, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{
		{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"10/second"}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		watch   bool
		rule    string
		latency time.Duration
	}{
		{"watched", true, cfg.Rules()[0].Name, 80 * time.Nanosecond},
		{"unwatched", false, strings.Clone("search"), 80 * time.Nanosecond},
		{"untimed", true, cfg.Rules()[0].Name, 0},
	} {
		b.Run(bc.name, func(b *testing.B) {
			m, _ := newMetrics(b)
			if bc.watch {
				m.Watch(core.NewLimiter(cfg, core.WithStore(memstore.New())))
			}
			ev := core.Event{Rule: bc.rule, Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1, Latency: bc.latency}
			m.Observe(ev)
			b.ReportAllocs()
			for b.Loop() {
				m.Observe(ev)
			}
		})
	}
}
