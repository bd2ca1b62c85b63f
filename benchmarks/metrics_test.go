package benchmarks

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/metrics/otel"
	"github.com/rlkit/rlkit/metrics/prom"
)

// BenchmarkMetrics measures what the metrics packages add to a decision:
// core.Limiter.Decide on one existing key ("user-42", rule "search", a
// quota no run reaches, memstore with the system clock), one goroutine.
//
//   - decide-none: no observer, the baseline.
//   - decide-noop: an observer that does nothing: what core itself adds
//     when an observer is set (it builds and passes the event; it does not
//     time the memory store's calls, a store.LocalStore).
//   - decide-none-timed, decide-noop-timed, decide-prom-timed: the same on
//     the memory store behind a wrapper that is not a store.LocalStore, so
//     that core times its calls (two clock reads, one call in 16 by
//     default), as it does a Redis store's.
//   - decide-prom: metrics/prom's Observe (a Prometheus registry of its
//     own; nothing scrapes it during the run).
//   - decide-otel: metrics/otel's Observe, recording into the
//     OpenTelemetry SDK (a ManualReader that nothing reads).
//   - observe-prom, observe-otel: Observe alone, on the event such a
//     decision makes (rule "search", allowed, no latency: the memory
//     store's calls are not timed, see store.LocalStore).
//
// The metrics watch a limiter of the configuration (Watch(lim), as a
// program does), so they find its rules by identity.
//   - interleaved: the seven decide limiters in turn, blocks of 256
//     decisions each, in an order shuffled every round, timed block by
//     block (see interleave); one op is one decision of each. It
//     reports what each observer adds to a decision (noop-added-ns,
//     prom-added-ns, otel-added-ns, and the -timed ones: its time per
//     decision minus that of the limiter without one on the same kind
//     of store), measured a few microseconds apart, so that
//     the load of a shared machine, which changes over seconds, weighs
//     on both sides alike; the rows above, a second each, one after the
//     other, differ by more than that.
func BenchmarkMetrics(b *testing.B) {
	pm, err := prom.New(prom.WithRegisterer(prometheus.NewRegistry()))
	if err != nil {
		b.Fatal(err)
	}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
	defer mp.Shutdown(context.Background())
	om, err := otel.New(mp)
	if err != nil {
		b.Fatal(err)
	}
	cfg, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{
		{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}},
	}})
	if err != nil {
		b.Fatal(err)
	}
	variants := []struct {
		name     string
		observer core.Observer
		timed    bool // the store is not a store.LocalStore: core times its calls
	}{
		{"none", nil, false},
		{"noop", func(core.Event) {}, false},
		{"prom", pm.Observe, false},
		{"otel", om.Observe, false},
		{"none-timed", nil, true},
		{"noop-timed", func(core.Event) {}, true},
		{"prom-timed", pm.Observe, true},
	}
	ctx := context.Background()
	// Every limiter has the same configuration, which the metrics watch
	// (as a program does: Watch(lim)): its rules are found by identity.
	newLimiter := func(b *testing.B, o core.Observer, timed bool) *core.Limiter {
		var opts []core.Option
		if o != nil {
			opts = append(opts, core.WithObserver(o))
		}
		var st store.Store = memstore.New(memstore.WithMaxKeys(maxKeys))
		if timed {
			st = remoteLike{st}
		}
		lim := core.NewLimiter(cfg, append(opts, core.WithStore(st))...)
		pm.Watch(lim)
		om.Watch(lim)
		d := lim.Decide(ctx, "GET", "/api/search", "user-42", false)
		mustAllow(b, d.Allowed, d.Err)
		return lim
	}
	for _, v := range variants {
		b.Run("decide-"+v.name, func(b *testing.B) {
			lim := newLimiter(b, v.observer, v.timed)
			var d core.Decision
			settle()
			b.ReportAllocs()
			for b.Loop() {
				d = lim.Decide(ctx, "GET", "/api/search", "user-42", false)
			}
			mustAllow(b, d.Allowed, d.Err)
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		lims := make([]*core.Limiter, len(variants))
		for i, v := range variants {
			lims[i] = newLimiter(b, v.observer, v.timed)
		}
		var d core.Decision
		serve := make([]func(), len(lims))
		for i, lim := range lims {
			serve[i] = func() { d = lim.Decide(ctx, "GET", "/api/search", "user-42", false) }
		}
		spent, n := interleave(b, serve)
		mustAllow(b, d.Allowed, d.Err)
		// What each observer adds: against the limiter without one on
		// the same kind of store.
		base := map[bool]time.Duration{}
		for i, v := range variants {
			if v.observer == nil {
				base[v.timed] = spent[i]
			}
		}
		for i, v := range variants {
			if v.observer != nil {
				b.ReportMetric(float64(spent[i]-base[v.timed])/float64(n), v.name+"-added-ns")
			}
		}
	})
	ev := core.Event{Rule: cfg.Rules()[0].Name, Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1}
	for _, bc := range []struct {
		name    string
		observe core.Observer
	}{
		{"observe-prom", pm.Observe},
		{"observe-otel", om.Observe},
	} {
		b.Run(bc.name, func(b *testing.B) {
			bc.observe(ev)
			settle()
			b.ReportAllocs()
			for b.Loop() {
				bc.observe(ev)
			}
		})
	}
}

// remoteLike is a store that is not a store.LocalStore, so that the
// limiter times its calls as it does a Redis store's.
type remoteLike struct{ store.Store }
