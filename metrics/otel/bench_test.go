package otel_test

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
)

// BenchmarkObserve measures Observe alone on an existing rule, recording
// into the OpenTelemetry SDK: an allowed decision with a store latency
// (one counter add, one histogram record). The cost within a Limiter's
// decision is measured by benchmarks/ (BenchmarkMetrics).
func BenchmarkObserve(b *testing.B) {
	m, _ := newMetrics(b)
	ev := core.Event{Rule: "search", Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1, Latency: 80 * time.Nanosecond}
	m.Observe(ev)
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(ev)
	}
}
