package otel_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/metric/metricdata/metricdatatest"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/metrics/internal/rlmetricstest"
	rlotel "github.com/rlkit/rlkit/metrics/otel"
)

// newMetrics returns Metrics on an SDK MeterProvider read by a
// ManualReader.
func newMetrics(t testing.TB, opts ...rlotel.Option) (*rlotel.Metrics, *sdkmetric.ManualReader) {
	t.Helper()
	rd := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(rd))
	t.Cleanup(func() { mp.Shutdown(context.Background()) })
	m, err := rlotel.New(mp, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return m, rd
}

// collect returns the metrics rd reads now, by name.
func collect(t *testing.T, rd *sdkmetric.ManualReader) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := rd.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != rlotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, rlotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func sum(desc, unit string, monotonic bool, points ...metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{Description: desc, Unit: unit, Data: metricdata.Sum[int64]{
		Temporality: metricdata.CumulativeTemporality, IsMonotonic: monotonic, DataPoints: points,
	}}
}

func gauge(desc, unit string, points ...metricdata.DataPoint[int64]) metricdata.Metrics {
	return metricdata.Metrics{Description: desc, Unit: unit, Data: metricdata.Gauge[int64]{DataPoints: points}}
}

func point(v int64, kv ...attribute.KeyValue) metricdata.DataPoint[int64] {
	return metricdata.DataPoint[int64]{Attributes: attribute.NewSet(kv...), Value: v}
}

// assert compares got[name] with want, whose Name is set here and whose
// Description is taken from got (the tests pin values, not prose).
func assert(t *testing.T, got map[string]metricdata.Metrics, name string, want metricdata.Metrics) {
	t.Helper()
	g, ok := got[name]
	if !ok {
		t.Errorf("no %s", name)
		return
	}
	want.Name = name
	want.Description = g.Description
	metricdatatest.AssertEqual(t, want, g, metricdatatest.IgnoreTimestamp())
}

var (
	rule      = attribute.Key("rlkit.rule").String
	outcome   = attribute.Key("rlkit.outcome").String
	kind      = attribute.Key("error.type").String
	storeKind = attribute.Key("rlkit.store").String
	node      = attribute.Key("rlkit.node").String
	state     = attribute.Key("rlkit.breaker.state").String
	result    = attribute.Key("rlkit.reload.result").String
)

// kindError is a store error that names its kind.
type kindError string

func (e kindError) Error() string          { return "store: " + string(e) }
func (e kindError) StoreErrorKind() string { return string(e) }

func TestObserve(t *testing.T) {
	m, rd := newMetrics(t)
	for _, ev := range []core.Event{
		{Rule: "search", Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1, Latency: 20 * time.Microsecond},
		{Rule: "search", Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1, Latency: 20 * time.Microsecond},
		{Rule: "search", Outcome: core.OutcomeDenied, Cost: 1, Latency: 300 * time.Microsecond},
		{Rule: "search", Outcome: core.OutcomeShadowDenied, Allowed: true, Cost: 1, Latency: 2 * time.Second},
		{Rule: "upload", Outcome: core.OutcomeStoreError, Allowed: true, Cost: 10, Err: context.DeadlineExceeded, Latency: 5 * time.Millisecond},
		{Rule: "upload", Outcome: core.OutcomeStoreError, Allowed: true, Cost: 10, Err: fmt.Errorf("redis: %w", kindError("breaker_open")), Latency: 5 * time.Millisecond},
		{Rule: "default", Outcome: core.OutcomeBypassed, Allowed: true},
		{Rule: "", Outcome: core.OutcomeExempt, Allowed: true},
		{Rule: "", Outcome: core.OutcomeExempt, Allowed: true},
		{Rule: "x", Outcome: core.Outcome(core.NumOutcomes)}, // not an outcome: not recorded
	} {
		m.Observe(ev)
	}
	got := collect(t, rd)
	assert(t, got, "rlkit.decisions", sum("", "{request}", true,
		point(2, rule("search"), outcome("allowed")),
		point(1, rule("search"), outcome("denied")),
		point(1, rule("search"), outcome("shadow_denied")),
		point(2, rule("upload"), outcome("store_error")),
		point(1, rule("default"), outcome("bypassed")),
		point(2, rule(""), outcome("exempt")),
	))
	assert(t, got, "rlkit.store.errors", sum("", "{error}", true,
		point(1, kind("timeout")),
		point(1, kind("breaker_open")),
	))
	bounds := rlotel.DefaultBuckets
	counts := func(lat ...float64) []uint64 {
		c := make([]uint64, len(bounds)+1)
		for _, v := range lat {
			i := 0
			for i < len(bounds) && v > bounds[i] {
				i++
			}
			c[i]++
		}
		return c
	}
	assert(t, got, "rlkit.store.duration", metricdata.Metrics{Unit: "s", Data: metricdata.Histogram[float64]{
		Temporality: metricdata.CumulativeTemporality,
		DataPoints: []metricdata.HistogramDataPoint[float64]{
			{Attributes: attribute.NewSet(rule("search")), Count: 4, Sum: 2.00034, Bounds: bounds,
				BucketCounts: counts(20e-6, 20e-6, 300e-6, 2), Min: metricdata.NewExtrema(20e-6), Max: metricdata.NewExtrema(2.0)},
			{Attributes: attribute.NewSet(rule("upload")), Count: 2, Sum: 0.01, Bounds: bounds,
				BucketCounts: counts(5e-3, 5e-3), Min: metricdata.NewExtrema(5e-3), Max: metricdata.NewExtrema(5e-3)},
		},
	}})
	// The buckets the helper computed are the ones expected.
	if c := counts(20e-6, 20e-6, 300e-6, 2); c[1] != 2 || c[5] != 1 || c[len(bounds)] != 1 {
		t.Errorf("bucket counts %v", c)
	}
	// Nothing watched: no store or reload figures.
	for _, name := range []string{"rlkit.store.key.count", "rlkit.config.reloads", "rlkit.store.breaker.state"} {
		if _, ok := got[name]; ok {
			t.Errorf("%s reported with nothing watched", name)
		}
	}
}

func TestWatch(t *testing.T) {
	m, rd := newMetrics(t)
	st := rlmetricstest.NewStatsStore(memstore.New(), store.Stats{Store: "memory", Keys: 5, MaxKeys: 100, Evictions: 7, DenyCacheHits: 3})
	m.Watch(rlmetricstest.StoreOnly{S: st})
	got := collect(t, rd)
	assert(t, got, "rlkit.store.key.count", sum("", "{key}", false, point(5, storeKind("memory"))))
	assert(t, got, "rlkit.store.key.limit", gauge("", "{key}", point(100, storeKind("memory"))))
	assert(t, got, "rlkit.store.evictions", sum("", "{key}", true, point(7, storeKind("memory"))))
	assert(t, got, "rlkit.store.deny_cache.hits", sum("", "{request}", true, point(3, storeKind("memory"))))
	if _, ok := got["rlkit.config.reloads"]; ok {
		t.Error("reloads reported for a source that counts none")
	}

	st.Set(store.Stats{Store: "redis", Keys: -1, DenyCacheHits: math.MaxUint64, Nodes: []store.NodeStats{
		{Node: "10.0.0.1:6379", Breaker: store.BreakerClosed},
		{Node: "10.0.0.2:6379", Breaker: store.BreakerOpen},
		{Node: "10.0.0.3:6379", Breaker: store.BreakerHalfOpen},
	}})
	src := &rlmetricstest.Source{S: st}
	m.Watch(src)
	got = collect(t, rd)
	if _, ok := got["rlkit.store.key.count"]; ok {
		t.Error("key count reported for a store that cannot tell (-1)")
	}
	if _, ok := got["rlkit.store.key.limit"]; ok {
		t.Error("key limit reported for an unbounded store (0)")
	}
	assert(t, got, "rlkit.store.deny_cache.hits", sum("", "{request}", true, point(math.MaxInt64, storeKind("redis"))))
	var pts []metricdata.DataPoint[int64]
	for i, n := range []string{"10.0.0.1:6379", "10.0.0.2:6379", "10.0.0.3:6379"} {
		for j, s := range []string{"closed", "open", "half_open"} {
			v := int64(0)
			if i == j {
				v = 1
			}
			pts = append(pts, point(v, storeKind("redis"), node(n), state(s)))
		}
	}
	assert(t, got, "rlkit.store.breaker.state", gauge("", "1", pts...))
	assert(t, got, "rlkit.config.reloads", sum("", "{reload}", true, point(0, result("success")), point(0, result("failure"))))
	assert(t, got, "rlkit.config.last_reload.success", gauge("", "1", point(1)))
	if _, ok := got["rlkit.config.last_reload.success_timestamp"]; ok {
		t.Error("reload timestamp reported before any reload")
	}

	src.R = core.ReloadStats{Reloads: 3, Failures: 2, LastError: errors.New("ratelimit.yaml:3: bad"), LastReload: 1_700_000_000_500_000_000}
	got = collect(t, rd)
	assert(t, got, "rlkit.config.reloads", sum("", "{reload}", true, point(3, result("success")), point(2, result("failure"))))
	assert(t, got, "rlkit.config.last_reload.success", gauge("", "1", point(0)))
	assert(t, got, "rlkit.config.last_reload.success_timestamp", metricdata.Metrics{Unit: "s", Data: metricdata.Gauge[float64]{
		DataPoints: []metricdata.DataPoint[float64]{{Attributes: attribute.NewSet(), Value: 1_700_000_000.5}},
	}})

	// A store that reports nothing; nothing watched; the callback gone.
	m.Watch(rlmetricstest.StoreOnly{S: rlmetricstest.NoStats{Store: memstore.New()}})
	if got = collect(t, rd); got["rlkit.store.evictions"].Data != nil && len(got["rlkit.store.evictions"].Data.(metricdata.Sum[int64]).DataPoints) > 0 {
		t.Errorf("evictions reported for a store without stats: %+v", got["rlkit.store.evictions"])
	}
	m.Watch(src)
	m.Watch(nil)
	got = collect(t, rd)
	if d, ok := got["rlkit.config.reloads"]; ok && len(d.Data.(metricdata.Sum[int64]).DataPoints) > 0 {
		t.Errorf("reloads reported after Watch(nil): %+v", d)
	}
	m.Watch(src)
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	got = collect(t, rd)
	if d, ok := got["rlkit.config.reloads"]; ok && len(d.Data.(metricdata.Sum[int64]).DataPoints) > 0 {
		t.Errorf("reloads reported after Close: %+v", d)
	}
}

func TestWithAttributes(t *testing.T) {
	m, rd := newMetrics(t, rlotel.WithAttributes(attribute.String("limiter", "api")), rlotel.WithBuckets([]float64{0.001, 0.01}))
	m.Observe(core.Event{Rule: "a", Outcome: core.OutcomeDenied, Latency: 2 * time.Millisecond})
	m.Watch(&rlmetricstest.Source{S: rlmetricstest.NoStats{Store: memstore.New()}})
	got := collect(t, rd)
	lim := attribute.String("limiter", "api")
	assert(t, got, "rlkit.decisions", sum("", "{request}", true, point(1, lim, rule("a"), outcome("denied"))))
	assert(t, got, "rlkit.config.last_reload.success", gauge("", "1", point(1, lim)))
	h := got["rlkit.store.duration"].Data.(metricdata.Histogram[float64]).DataPoints
	if len(h) != 1 || fmt.Sprint(h[0].Bounds, h[0].BucketCounts) != "[0.001 0.01] [0 1 0]" || h[0].Attributes != attribute.NewSet(lim, rule("a")) {
		t.Errorf("histogram = %+v, want bounds [0.001 0.01], one count in the second bucket, limiter and rule", h)
	}
}

func TestNewErrors(t *testing.T) {
	mp := sdkmetric.NewMeterProvider()
	for _, tc := range []struct {
		opts []rlotel.Option
		want string
	}{
		{[]rlotel.Option{rlotel.WithBuckets([]float64{0.1, 1, 0.5})}, "otel: WithBuckets: bucket 0.5 at 2: the boundaries must be finite and increase"},
		{[]rlotel.Option{rlotel.WithBuckets([]float64{math.NaN()})}, "otel: WithBuckets: bucket NaN at 0: "},
		{[]rlotel.Option{rlotel.WithBuckets([]float64{1, math.Inf(1)})}, "otel: WithBuckets: bucket +Inf at 1: "},
	} {
		m, err := rlotel.New(mp, tc.opts...)
		if err == nil || m != nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New = %v, %v; want an error starting %q", m, err, tc.want)
		}
	}
	if m, err := rlotel.New(nil); err == nil || m != nil || err.Error() != "otel: New: nil MeterProvider" {
		t.Errorf("New(nil) = %v, %v", m, err)
	}
}

func TestRulesBounded(t *testing.T) {
	m, rd := newMetrics(t)
	for i := range rlotel.MaxRules + 5 {
		m.Observe(core.Event{Rule: "r" + strconv.Itoa(i), Outcome: core.OutcomeAllowed, Allowed: true})
	}
	m.Observe(core.Event{Rule: "\xff", Outcome: core.OutcomeAllowed, Allowed: true})
	got := collect(t, rd)
	rules := map[string]int64{}
	for _, p := range got["rlkit.decisions"].Data.(metricdata.Sum[int64]).DataPoints {
		v, _ := p.Attributes.Value("rlkit.rule")
		rules[v.AsString()] += p.Value
	}
	if len(rules) != rlotel.MaxRules+1 || rules[rlotel.OtherRule] != 6 || rules["r999"] != 1 {
		t.Errorf("%d rules, %s: %d, r999: %d; want %d, 6 and 1", len(rules), rlotel.OtherRule, rules[rlotel.OtherRule], rules["r999"], rlotel.MaxRules+1)
	}
}

// TestObserveConcurrent records from several goroutines (run with -race):
// every event is counted once.
func TestObserveConcurrent(t *testing.T) {
	m, rd := newMetrics(t)
	const goroutines, events = 8, 1000
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range events {
				m.Observe(core.Event{Rule: "r" + strconv.Itoa((i+g)%10), Outcome: core.OutcomeAllowed, Allowed: true, Latency: time.Microsecond})
			}
		})
	}
	wg.Wait()
	var n int64
	for _, p := range collect(t, rd)["rlkit.decisions"].Data.(metricdata.Sum[int64]).DataPoints {
		n += p.Value
	}
	if n != goroutines*events {
		t.Errorf("%d decisions, want %d", n, goroutines*events)
	}
}

// TestObserveAllocs: with the SDK, recording on a known rule allocates
// nothing.
func TestObserveAllocs(t *testing.T) {
	m, _ := newMetrics(t)
	ev := core.Event{Rule: "search", Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1, Latency: 80 * time.Nanosecond}
	m.Observe(ev)
	if n := testing.AllocsPerRun(1000, func() { m.Observe(ev) }); n != 0 {
		t.Errorf("Observe allocates %v times, want 0", n)
	}
}

// TestLimiter records a Limiter's real decisions and watches its reloads.
func TestLimiter(t *testing.T) {
	m, rd := newMetrics(t)
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  exempt_paths: ["/health"]
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
    - name: upload
      mode: shadow
      paths: ["/api/upload"]
      limit: "1/minute"
`), "ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock))), core.WithObserver(m.Observe), core.WithClock(clock),
		core.WithLogger(slog.New(slog.DiscardHandler)))
	m.Watch(lim)
	ctx := context.Background()
	for range 5 {
		lim.Decide(ctx, "GET", "/api/search", "alice", false)
	}
	for range 3 {
		lim.Decide(ctx, "POST", "/api/upload", "alice", false)
	}
	lim.Decide(ctx, "GET", "/api/search", "root", true)
	lim.Decide(ctx, "GET", "/health", "alice", false)
	clock.Advance(90 * time.Second)
	lim.SetConfig(cfg)
	got := collect(t, rd)
	assert(t, got, "rlkit.decisions", sum("", "{request}", true,
		point(2, rule("search"), outcome("allowed")),
		point(3, rule("search"), outcome("denied")),
		point(1, rule("search"), outcome("bypassed")),
		point(1, rule("upload"), outcome("allowed")),
		point(2, rule("upload"), outcome("shadow_denied")),
		point(3, rule("default"), outcome("allowed")), // the shadow rule counts beside the default limit
		point(1, rule(""), outcome("exempt")),
	))
	if _, ok := got["rlkit.store.duration"]; ok {
		t.Error("a duration recorded with a clock that did not move")
	}
	assert(t, got, "rlkit.config.reloads", sum("", "{reload}", true, point(1, result("success")), point(0, result("failure"))))
	assert(t, got, "rlkit.config.last_reload.success_timestamp", metricdata.Metrics{Unit: "s", Data: metricdata.Gauge[float64]{
		DataPoints: []metricdata.DataPoint[float64]{{Attributes: attribute.NewSet(), Value: 1_700_000_090}},
	}})
}
