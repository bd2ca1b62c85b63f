package otel_test

import (
	"context"
	"fmt"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	rlotel "github.com/rlkit/rlkit/metrics/otel"
)

func Example() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	// A ManualReader collects on demand; a program gives New its own
	// MeterProvider (otel.GetMeterProvider()), read by an OTLP or
	// Prometheus exporter.
	reader := sdkmetric.NewManualReader()
	provider := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer provider.Shutdown(context.Background())
	m, err := rlotel.New(provider)
	if err != nil {
		panic(err)
	}
	defer m.Close()

	clock := store.NewManualClock(time.Unix(1_700_000_040, 0)) // the start of a minute
	st := memstore.New(memstore.WithClock(clock))
	defer st.Close()
	lim := core.NewLimiter(cfg, core.WithStore(st), core.WithObserver(m.Observe))
	m.Watch(lim) // the store's keys and the reloads, read at each collection
	for range 3 {
		lim.Decide(context.Background(), "GET", "/api/search", "alice", false)
	}

	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		panic(err)
	}
	for _, sm := range rm.ScopeMetrics {
		for _, mt := range sm.Metrics {
			switch mt.Name {
			case "rlkit.decisions", "rlkit.store.key.count":
				for _, p := range mt.Data.(metricdata.Sum[int64]).DataPoints { // in no set order
					fmt.Println(mt.Name, attrs(p.Attributes), p.Value)
				}
			}
		}
	}
	// Unordered output:
	// rlkit.decisions rlkit.outcome=allowed rlkit.rule=search 2
	// rlkit.decisions rlkit.outcome=denied rlkit.rule=search 1
	// rlkit.store.key.count rlkit.store=memory 1
}

// attrs formats an attribute set as "key=value ...", in key order.
func attrs(s attribute.Set) string {
	var out string
	for i, kv := range s.ToSlice() {
		if i > 0 {
			out += " "
		}
		out += string(kv.Key) + "=" + kv.Value.Emit()
	}
	return out
}
