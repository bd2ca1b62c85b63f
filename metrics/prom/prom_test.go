package prom_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/metrics/internal/rlmetricstest"
	"github.com/rlkit/rlkit/metrics/prom"
)

// newMetrics returns Metrics registered in a registry of their own.
func newMetrics(t testing.TB, opts ...prom.Option) (*prom.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	m, err := prom.New(append([]prom.Option{prom.WithRegisterer(reg)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// compare gathers reg and compares the named metric families with want
// (Prometheus text format, without its HELP and TYPE lines: they are
// added from the registry's own).
func compare(t *testing.T, reg *prometheus.Registry, want string, names ...string) {
	t.Helper()
	if err := testutil.GatherAndCompare(reg, strings.NewReader(withMeta(t, reg, want)), names...); err != nil {
		t.Error(err)
	}
}

// withMeta prefixes the lines of want with the HELP and TYPE lines of
// their families, taken from reg; a line of a family reg does not have is
// an error.
func withMeta(t *testing.T, reg *prometheus.Registry, want string) string {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byFamily := map[string]string{}
	for l := range strings.Lines(want) {
		if strings.TrimSpace(l) == "" {
			continue
		}
		series := strings.FieldsFunc(l, func(r rune) bool { return r == '{' || r == ' ' })
		found := false
		for _, mf := range mfs {
			name := mf.GetName()
			if series[0] == name || series[0] == name+"_bucket" || series[0] == name+"_sum" || series[0] == name+"_count" {
				byFamily[name] += l
				found = true
			}
		}
		if !found {
			t.Errorf("want %s: the registry has no such family", strings.TrimSpace(l))
		}
	}
	var b strings.Builder
	for _, mf := range mfs {
		if lines := byFamily[mf.GetName()]; lines != "" {
			fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n%s", mf.GetName(), mf.GetHelp(), mf.GetName(), strings.ToLower(mf.GetType().String()), lines)
		}
	}
	return b.String()
}

// value returns the value of the counter or gauge name{labels} in reg, and
// whether there is one.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, mt := range mf.GetMetric() {
			if len(mt.GetLabel()) != len(labels) {
				continue
			}
			for _, lp := range mt.GetLabel() {
				if v, ok := labels[lp.GetName()]; !ok || v != lp.GetValue() {
					continue series
				}
			}
			if mt.GetCounter() != nil {
				return mt.GetCounter().GetValue(), true
			}
			return mt.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

func TestObserveDecisions(t *testing.T) {
	m, reg := newMetrics(t)
	for _, ev := range []core.Event{
		{Rule: "search", Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1, Latency: 20 * time.Microsecond},
		{Rule: "search", Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1, Latency: 20 * time.Microsecond},
		{Rule: "search", Outcome: core.OutcomeDenied, Cost: 1, Latency: 300 * time.Microsecond},
		{Rule: "search", Outcome: core.OutcomeShadowDenied, Allowed: true, Cost: 1, Latency: 2 * time.Second},
		{Rule: "upload", Outcome: core.OutcomeStoreError, Allowed: true, Cost: 10, Err: context.DeadlineExceeded, Latency: 5 * time.Millisecond},
		{Rule: "default", Outcome: core.OutcomeBypassed, Allowed: true},
		{Rule: "", Outcome: core.OutcomeExempt, Allowed: true},
		{Rule: "", Outcome: core.OutcomeExempt, Allowed: true},
	} {
		m.Observe(ev)
	}
	compare(t, reg, `
rlkit_decisions_total{outcome="allowed",rule="search"} 2
rlkit_decisions_total{outcome="denied",rule="search"} 1
rlkit_decisions_total{outcome="shadow_denied",rule="search"} 1
rlkit_decisions_total{outcome="store_error",rule="upload"} 1
rlkit_decisions_total{outcome="bypassed",rule="default"} 1
rlkit_decisions_total{outcome="exempt",rule=""} 2
rlkit_store_errors_total{kind="timeout"} 1
`, "rlkit_decisions_total", "rlkit_store_errors_total")

	// The histogram sees only the events whose store was asked (Latency >
	// 0): none for "default" and the exempt path.
	compare(t, reg, `
rlkit_store_duration_seconds_bucket{rule="search",le="1e-05"} 0
rlkit_store_duration_seconds_bucket{rule="search",le="2.5e-05"} 2
rlkit_store_duration_seconds_bucket{rule="search",le="5e-05"} 2
rlkit_store_duration_seconds_bucket{rule="search",le="0.0001"} 2
rlkit_store_duration_seconds_bucket{rule="search",le="0.00025"} 2
rlkit_store_duration_seconds_bucket{rule="search",le="0.0005"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.001"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.0025"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.005"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.01"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.025"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.05"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.1"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.25"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="0.5"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="1"} 3
rlkit_store_duration_seconds_bucket{rule="search",le="+Inf"} 4
rlkit_store_duration_seconds_sum{rule="search"} 2.00034
rlkit_store_duration_seconds_count{rule="search"} 4
rlkit_store_duration_seconds_bucket{rule="upload",le="1e-05"} 0
rlkit_store_duration_seconds_bucket{rule="upload",le="2.5e-05"} 0
rlkit_store_duration_seconds_bucket{rule="upload",le="5e-05"} 0
rlkit_store_duration_seconds_bucket{rule="upload",le="0.0001"} 0
rlkit_store_duration_seconds_bucket{rule="upload",le="0.00025"} 0
rlkit_store_duration_seconds_bucket{rule="upload",le="0.0005"} 0
rlkit_store_duration_seconds_bucket{rule="upload",le="0.001"} 0
rlkit_store_duration_seconds_bucket{rule="upload",le="0.0025"} 0
rlkit_store_duration_seconds_bucket{rule="upload",le="0.005"} 1
rlkit_store_duration_seconds_bucket{rule="upload",le="0.01"} 1
rlkit_store_duration_seconds_bucket{rule="upload",le="0.025"} 1
rlkit_store_duration_seconds_bucket{rule="upload",le="0.05"} 1
rlkit_store_duration_seconds_bucket{rule="upload",le="0.1"} 1
rlkit_store_duration_seconds_bucket{rule="upload",le="0.25"} 1
rlkit_store_duration_seconds_bucket{rule="upload",le="0.5"} 1
rlkit_store_duration_seconds_bucket{rule="upload",le="1"} 1
rlkit_store_duration_seconds_bucket{rule="upload",le="+Inf"} 1
rlkit_store_duration_seconds_sum{rule="upload"} 0.005
rlkit_store_duration_seconds_count{rule="upload"} 1
`, "rlkit_store_duration_seconds")
}

// kindError is a store error that names its kind.
type kindError string

func (e kindError) Error() string          { return "store: " + string(e) }
func (e kindError) StoreErrorKind() string { return string(e) }

func TestStoreErrorKinds(t *testing.T) {
	m, reg := newMetrics(t)
	errs := []error{
		context.DeadlineExceeded,
		fmt.Errorf("take: %w", context.DeadlineExceeded),
		context.Canceled,
		&net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")},
		fmt.Errorf("redis: %w", kindError("breaker_open")),
		errors.New("boom"),
	}
	for _, err := range errs {
		m.Observe(core.Event{Rule: "search", Outcome: core.OutcomeStoreError, Allowed: true, Err: err, Latency: time.Millisecond})
	}
	compare(t, reg, `
rlkit_store_errors_total{kind="breaker_open"} 1
rlkit_store_errors_total{kind="canceled"} 1
rlkit_store_errors_total{kind="connection"} 1
rlkit_store_errors_total{kind="other"} 1
rlkit_store_errors_total{kind="timeout"} 2
`, "rlkit_store_errors_total")
	if got, _ := value(t, reg, "rlkit_decisions_total", map[string]string{"rule": "search", "outcome": "store_error"}); got != 6 {
		t.Errorf("store_error decisions = %v, want 6", got)
	}
}

func TestRuleLabelsBounded(t *testing.T) {
	m, reg := newMetrics(t)
	for i := range prom.MaxRules + 5 {
		rule := "r" + strconv.Itoa(i)
		m.Observe(core.Event{Rule: rule, Outcome: core.OutcomeAllowed, Allowed: true, Latency: time.Microsecond})
		m.Observe(core.Event{Rule: rule, Outcome: core.OutcomeAllowed, Allowed: true})
	}
	// A rule seen before the bound keeps its label; so does "" (exempt)
	// when it came first, but here it comes after: it is past the bound.
	m.Observe(core.Event{Rule: "r0", Outcome: core.OutcomeDenied})
	m.Observe(core.Event{Rule: "", Outcome: core.OutcomeExempt, Allowed: true})
	m.Observe(core.Event{Rule: "\xff", Outcome: core.OutcomeAllowed, Allowed: true}) // not UTF-8
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	rules := map[string]bool{}
	for _, mf := range mfs {
		if mf.GetName() != "rlkit_decisions_total" {
			continue
		}
		for _, mt := range mf.GetMetric() {
			for _, lp := range mt.GetLabel() {
				if lp.GetName() == "rule" {
					rules[lp.GetValue()] = true
				}
			}
		}
	}
	if len(rules) != prom.MaxRules+1 || !rules[prom.OtherRule] || !rules["r999"] || rules["r1000"] {
		t.Errorf("%d rule labels (r999 %v, r1000 %v, %s %v), want %d: the first %d and %s",
			len(rules), rules["r999"], rules["r1000"], prom.OtherRule, rules[prom.OtherRule], prom.MaxRules+1, prom.MaxRules, prom.OtherRule)
	}
	for _, tc := range []struct {
		rule, outcome string
		want          float64
	}{
		{"r0", "allowed", 2}, {"r0", "denied", 1}, {"r999", "allowed", 2},
		{prom.OtherRule, "allowed", 5*2 + 1}, {prom.OtherRule, "exempt", 1},
	} {
		if got, _ := value(t, reg, "rlkit_decisions_total", map[string]string{"rule": tc.rule, "outcome": tc.outcome}); got != tc.want {
			t.Errorf("decisions{rule=%q,outcome=%q} = %v, want %v", tc.rule, tc.outcome, got, tc.want)
		}
	}
	compare(t, reg, `
rlkit_store_duration_seconds_count{rule="(other)"} 5
`, "rlkit_store_duration_seconds_count")
}

func TestErrorKindsBounded(t *testing.T) {
	m, reg := newMetrics(t)
	for i := range prom.MaxErrorKinds + 3 {
		m.Observe(core.Event{Rule: "a", Outcome: core.OutcomeStoreError, Err: kindError("k" + strconv.Itoa(i))})
	}
	m.Observe(core.Event{Rule: "a", Outcome: core.OutcomeStoreError, Err: kindError("k0")})
	var n int
	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "rlkit_store_errors_total" {
			n = len(mf.GetMetric())
		}
	}
	if n != prom.MaxErrorKinds+1 {
		t.Errorf("%d kinds, want %d and other", n, prom.MaxErrorKinds)
	}
	for kind, want := range map[string]float64{"k0": 2, "k31": 1, "other": 3} {
		if got, _ := value(t, reg, "rlkit_store_errors_total", map[string]string{"kind": kind}); got != want {
			t.Errorf("errors{kind=%q} = %v, want %v", kind, got, want)
		}
	}
}

func TestWatchStore(t *testing.T) {
	m, reg := newMetrics(t)
	st := rlmetricstest.NewStatsStore(memstore.New(), store.Stats{Store: "memory", Keys: 5, MaxKeys: 100, Evictions: 7, DenyCacheHits: 3})
	names := []string{"rlkit_store_keys", "rlkit_store_max_keys", "rlkit_store_evictions_total", "rlkit_store_deny_cache_hits_total", "rlkit_store_breaker_state"}
	compare(t, reg, "", names...) // nothing watched: nothing reported
	m.Watch(rlmetricstest.StoreOnly{S: st})
	compare(t, reg, `
rlkit_store_keys{store="memory"} 5
rlkit_store_max_keys{store="memory"} 100
rlkit_store_evictions_total{store="memory"} 7
rlkit_store_deny_cache_hits_total{store="memory"} 3
`, names...)

	// Read at each scrape.
	st.Set(store.Stats{Store: "memory", Keys: 6, MaxKeys: 100, Evictions: 9})
	compare(t, reg, `
rlkit_store_keys{store="memory"} 6
rlkit_store_max_keys{store="memory"} 100
rlkit_store_evictions_total{store="memory"} 9
rlkit_store_deny_cache_hits_total{store="memory"} 0
`, names...)

	// Redis: keys unknown (-1), unbounded (0), one gauge per node and state.
	st.Set(store.Stats{Store: "redis", Keys: -1, DenyCacheHits: 11, Nodes: []store.NodeStats{
		{Node: "10.0.0.1:6379", Breaker: store.BreakerClosed},
		{Node: "10.0.0.2:6379", Breaker: store.BreakerOpen},
		{Node: "10.0.0.3:6379", Breaker: store.BreakerHalfOpen},
	}})
	compare(t, reg, `
rlkit_store_evictions_total{store="redis"} 0
rlkit_store_deny_cache_hits_total{store="redis"} 11
rlkit_store_breaker_state{node="10.0.0.1:6379",state="closed",store="redis"} 1
rlkit_store_breaker_state{node="10.0.0.1:6379",state="open",store="redis"} 0
rlkit_store_breaker_state{node="10.0.0.1:6379",state="half_open",store="redis"} 0
rlkit_store_breaker_state{node="10.0.0.2:6379",state="closed",store="redis"} 0
rlkit_store_breaker_state{node="10.0.0.2:6379",state="open",store="redis"} 1
rlkit_store_breaker_state{node="10.0.0.2:6379",state="half_open",store="redis"} 0
rlkit_store_breaker_state{node="10.0.0.3:6379",state="closed",store="redis"} 0
rlkit_store_breaker_state{node="10.0.0.3:6379",state="open",store="redis"} 0
rlkit_store_breaker_state{node="10.0.0.3:6379",state="half_open",store="redis"} 1
`, names...)

	// A store that reports nothing; then nothing watched.
	m.Watch(rlmetricstest.StoreOnly{S: memstoreWithoutStats{memstore.New()}})
	compare(t, reg, "", names...)
	m.Watch(rlmetricstest.StoreOnly{S: st})
	m.Watch(nil)
	compare(t, reg, "", names...)
}

// TestStoreLabelsUTF8: a store name or node address that is not UTF-8
// (which no label may be) is reported with U+FFFD in its place, never a
// failed scrape or a panic.
func TestStoreLabelsUTF8(t *testing.T) {
	m, reg := newMetrics(t)
	m.Watch(rlmetricstest.StoreOnly{S: rlmetricstest.NewStatsStore(memstore.New(), store.Stats{Store: "re\xffdis", Keys: -1,
		Nodes: []store.NodeStats{{Node: "10.0.0.1:\xff", Breaker: store.BreakerOpen}}})})
	if got, ok := value(t, reg, "rlkit_store_breaker_state", map[string]string{"store": "re\uFFFDdis", "node": "10.0.0.1:\uFFFD", "state": "open"}); !ok || got != 1 {
		t.Errorf("breaker_state{store=re\uFFFDdis, node=10.0.0.1:\uFFFD, state=open} = %v, %v; want 1", got, ok)
	}
}

// memstoreWithoutStats hides any Stats method of its store.
type memstoreWithoutStats struct{ store.Store }

func TestWatchReloads(t *testing.T) {
	m, reg := newMetrics(t)
	names := []string{"rlkit_config_reloads_total", "rlkit_config_last_reload_success", "rlkit_config_last_reload_success_timestamp_seconds"}
	src := &rlmetricstest.Source{S: memstoreWithoutStats{memstore.New()}}
	m.Watch(src)
	// Before any reload: none counted, the running configuration is good,
	// no timestamp.
	compare(t, reg, `
rlkit_config_reloads_total{result="success"} 0
rlkit_config_reloads_total{result="failure"} 0
rlkit_config_last_reload_success 1
`, names...)
	src.R = core.ReloadStats{Reloads: 3, Failures: 2, LastError: errors.New("ratelimit.yaml:3: bad"), LastReload: 1_700_000_000_500_000_000}
	compare(t, reg, `
rlkit_config_reloads_total{result="success"} 3
rlkit_config_reloads_total{result="failure"} 2
rlkit_config_last_reload_success 0
rlkit_config_last_reload_success_timestamp_seconds 1.7000000005e+09
`, names...)
	src.R.LastError = nil
	if got, _ := value(t, reg, "rlkit_config_last_reload_success", nil); got != 1 {
		t.Errorf("last_reload_success = %v after a success, want 1", got)
	}
}

// TestWatchLimiter watches a real Limiter through reloads: the counts,
// the last result and the time of the last success (the limiter's clock).
func TestWatchLimiter(t *testing.T) {
	m, reg := newMetrics(t)
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	lim := core.NewLimiter(nil, core.WithStore(memstore.New()), core.WithClock(clock), core.WithLogger(slog.New(slog.DiscardHandler)))
	m.Watch(lim)
	names := []string{"rlkit_config_reloads_total", "rlkit_config_last_reload_success", "rlkit_config_last_reload_success_timestamp_seconds"}
	compare(t, reg, `
rlkit_config_reloads_total{result="success"} 0
rlkit_config_reloads_total{result="failure"} 0
rlkit_config_last_reload_success 1
`, names...)
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "good.yaml"), filepath.Join(dir, "bad.yaml")
	os.WriteFile(good, []byte("rate_limit:\n  enabled: true\n"), 0o644)
	os.WriteFile(bad, []byte("rate_limit:\n  enabled: maybe\n"), 0o644)
	clock.Advance(90 * time.Second)
	if err := lim.ReloadFile(good); err != nil {
		t.Fatal(err)
	}
	clock.Advance(time.Minute)
	if err := lim.ReloadFile(bad); err == nil {
		t.Fatal("a bad file reloaded")
	}
	compare(t, reg, `
rlkit_config_reloads_total{result="success"} 1
rlkit_config_reloads_total{result="failure"} 1
rlkit_config_last_reload_success 0
rlkit_config_last_reload_success_timestamp_seconds 1.70000009e+09
`, names...)
}

func TestNewRegistration(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := prom.New(prom.WithRegisterer(reg)); err != nil {
		t.Fatal(err)
	}
	_, err := prom.New(prom.WithRegisterer(reg))
	var are prometheus.AlreadyRegisteredError
	if !errors.As(err, &are) {
		t.Errorf("second New = %v, want an AlreadyRegisteredError", err)
	}
	if err == nil || !strings.HasPrefix(err.Error(), "prom: register rlkit metrics: ") {
		t.Errorf("second New's error = %v", err)
	}
	// Const labels tell two Metrics apart in one registry (their names
	// must be the same in both).
	reg2 := prometheus.NewRegistry()
	for _, lim := range []string{"api", "admin"} {
		if _, err := prom.New(prom.WithRegisterer(reg2), prom.WithConstLabels(prometheus.Labels{"limiter": lim})); err != nil {
			t.Errorf("New with const labels limiter=%s: %v", lim, err)
		}
	}
	if _, err := prom.New(prom.WithRegisterer(reg2), prom.WithConstLabels(prometheus.Labels{"limiter": "api"})); err == nil {
		t.Error("New with the const labels of an earlier one succeeded")
	}
	// Another namespace is another set of names.
	m, err := prom.New(prom.WithRegisterer(reg), prom.WithNamespace("edge"))
	if err != nil {
		t.Fatal(err)
	}
	m.Observe(core.Event{Rule: "a", Outcome: core.OutcomeDenied})
	if got, _ := value(t, reg, "edge_decisions_total", map[string]string{"rule": "a", "outcome": "denied"}); got != 1 {
		t.Errorf("edge_decisions_total = %v, want 1", got)
	}
	// Bad options fail New, registered or not.
	for _, tc := range []struct {
		opts []prom.Option
		want string
	}{
		{[]prom.Option{prom.WithRegisterer(prometheus.NewRegistry()), prom.WithNamespace("bad\xffname")}, "prom: register rlkit metrics: "},
		{[]prom.Option{prom.WithRegisterer(nil), prom.WithNamespace("bad\xffname")}, "prom: register rlkit metrics: "},
		{[]prom.Option{prom.WithRegisterer(nil), prom.WithConstLabels(prometheus.Labels{"rule": "x"})}, "prom: register rlkit metrics: "},
		{[]prom.Option{prom.WithRegisterer(nil), prom.WithBuckets([]float64{0.1, 1, 0.5})}, "prom: WithBuckets: bucket 0.5 after 1: the bounds must increase"},
		{[]prom.Option{prom.WithRegisterer(nil), prom.WithBuckets([]float64{0.1, math.NaN()})}, "prom: WithBuckets: bucket NaN after 0.1: the bounds must increase"},
	} {
		m, err := prom.New(tc.opts...)
		if err == nil || m != nil || !strings.HasPrefix(err.Error(), tc.want) {
			t.Errorf("New with bad options = %v, %v; want an error starting %q", m, err, tc.want)
		}
	}
	// Unregistered Metrics are a Collector to register later.
	m, err = prom.New(prom.WithRegisterer(nil))
	if err != nil {
		t.Fatal(err)
	}
	if err := prometheus.NewRegistry().Register(m); err != nil {
		t.Fatal(err)
	}
}

func TestDefaultRegisterer(t *testing.T) {
	m, err := prom.New()
	if err != nil {
		t.Fatal(err)
	}
	defer prometheus.Unregister(m)
	m.Observe(core.Event{Rule: "a", Outcome: core.OutcomeAllowed, Allowed: true})
	if got, _ := value(t, prometheus.DefaultGatherer, "rlkit_decisions_total", map[string]string{"rule": "a", "outcome": "allowed"}); got != 1 {
		t.Errorf("decisions in the default registry = %v, want 1", got)
	}
}

// TestObserveConcurrent has goroutines create and count the same rules at
// once (run with -race): every event is counted exactly once.
func TestObserveConcurrent(t *testing.T) {
	m, reg := newMetrics(t)
	const goroutines, events, rules = 8, 2000, 20
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for i := range events {
				ev := core.Event{Rule: "r" + strconv.Itoa((i+g)%rules), Outcome: core.Outcome(i % core.NumOutcomes), Latency: time.Microsecond}
				if ev.Outcome == core.OutcomeStoreError {
					ev.Err = kindError("k" + strconv.Itoa(i%3))
				}
				m.Observe(ev)
				if i%100 == 0 {
					if _, err := reg.Gather(); err != nil {
						t.Error(err)
					}
				}
			}
		})
	}
	wg.Wait()
	var total float64
	for r := range rules {
		for o := range core.NumOutcomes {
			v, _ := value(t, reg, "rlkit_decisions_total", map[string]string{"rule": "r" + strconv.Itoa(r), "outcome": core.Outcome(o).String()})
			total += v
		}
	}
	if total != goroutines*events {
		t.Errorf("%v decisions counted, want %d", total, goroutines*events)
	}
	var errs float64
	for k := range 3 {
		v, _ := value(t, reg, "rlkit_store_errors_total", map[string]string{"kind": "k" + strconv.Itoa(k)})
		errs += v
	}
	// The events with i%NumOutcomes == OutcomeStoreError.
	perGoroutine := 0
	for i := range events {
		if core.Outcome(i%core.NumOutcomes) == core.OutcomeStoreError {
			perGoroutine++
		}
	}
	if errs != float64(goroutines*perGoroutine) {
		t.Errorf("%v store errors, want %d", errs, goroutines*perGoroutine)
	}
}

// TestObserveAllocs pins the hot path: once a rule has been seen, Observe
// allocates nothing, whether the rule is the watched limiter's (found by
// identity) or not (by hashing). (A store error costs one more allocation,
// in store.ErrorKind's errors.As; a failed store call allocates more.)
func TestObserveAllocs(t *testing.T) {
	cfg, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{
		{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"10/second"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	m, _ := newMetrics(t)
	m.Watch(core.NewLimiter(cfg, core.WithStore(memstore.New())))
	search := cfg.Rules()[0].Name
	evs := []core.Event{
		{Rule: search, Outcome: core.OutcomeAllowed, Allowed: true, Cost: 1, Latency: 80 * time.Nanosecond},
		{Rule: search, Outcome: core.OutcomeDenied, Cost: 1, Latency: 80 * time.Nanosecond},
		{Rule: "search", Outcome: core.OutcomeShadowDenied, Allowed: true, Cost: 1, Latency: 80 * time.Nanosecond},
		{Rule: "", Outcome: core.OutcomeExempt, Allowed: true},
		{Rule: cfg.Default().Name, Outcome: core.OutcomeBypassed, Allowed: true},
		{Rule: "unknown", Outcome: core.OutcomeAllowed, Allowed: true},
	}
	for _, ev := range evs {
		m.Observe(ev)
	}
	for _, ev := range evs {
		if n := testing.AllocsPerRun(1000, func() { m.Observe(ev) }); n != 0 {
			t.Errorf("Observe(%q, %v) allocates %v times, want 0", ev.Rule, ev.Outcome, n)
		}
	}
}

// TestLimiter counts a Limiter's real decisions.
func TestLimiter(t *testing.T) {
	m, reg := newMetrics(t)
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
	ctx := context.Background()
	for range 5 {
		lim.Decide(ctx, "GET", "/api/search", "alice", false)
	}
	for range 3 {
		lim.Decide(ctx, "POST", "/api/upload", "alice", false)
	}
	lim.Decide(ctx, "GET", "/api/search", "root", true)
	lim.Decide(ctx, "GET", "/api/other", "alice", false)
	lim.Decide(ctx, "GET", "/health", "alice", false)
	// The shadow rule counts beside the enforced one, here the default
	// limit: each upload is an event of each (3 + /api/other's 1).
	compare(t, reg, `
rlkit_decisions_total{outcome="allowed",rule="search"} 2
rlkit_decisions_total{outcome="denied",rule="search"} 3
rlkit_decisions_total{outcome="bypassed",rule="search"} 1
rlkit_decisions_total{outcome="allowed",rule="upload"} 1
rlkit_decisions_total{outcome="shadow_denied",rule="upload"} 2
rlkit_decisions_total{outcome="allowed",rule="default"} 4
rlkit_decisions_total{outcome="exempt",rule=""} 1
`, "rlkit_decisions_total")
	// The manual clock does not move during a store call: no latency, no
	// histogram observation.
	compare(t, reg, "", "rlkit_store_duration_seconds")
}
