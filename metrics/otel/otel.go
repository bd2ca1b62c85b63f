package otel

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/metrics/internal/rlmetrics"
)

const (
	// MaxRules is the most distinct rule attribute values a Metrics keeps;
	// events of any further rule are counted under OtherRule.
	MaxRules = rlmetrics.MaxRules
	// OtherRule is the rule attribute of the events past MaxRules, and of
	// a rule name that is not UTF-8. No configured rule can have this name
	// (rule names are letters, digits, '_', '.' and '-').
	OtherRule = rlmetrics.OtherRule
	// MaxErrorKinds is the most distinct store error kinds a Metrics
	// keeps; further kinds are counted as "other".
	MaxErrorKinds = rlmetrics.MaxErrorKinds
)

// ScopeName is the instrumentation scope of the Meter New takes from its
// MeterProvider.
const ScopeName = "github.com/rlkit/rlkit/metrics/otel"

// DefaultBuckets are the store duration histogram's explicit bucket
// boundaries, in seconds: 10 µs to 1 s, from an in-process store's call
// to a slow Redis round trip.
var DefaultBuckets = rlmetrics.DefaultBuckets()

// Attribute keys.
const (
	keyRule    = attribute.Key("rlkit.rule")
	keyOutcome = attribute.Key("rlkit.outcome")
	keyKind    = attribute.Key("error.type")
	keyStore   = attribute.Key("rlkit.store")
	keyNode    = attribute.Key("rlkit.node")
	keyBreaker = attribute.Key("rlkit.breaker.state")
	keyResult  = attribute.Key("rlkit.reload.result")
)

// An Option configures New.
type Option func(*options)

type options struct {
	buckets []float64
	attrs   []attribute.KeyValue
}

// WithBuckets sets the store duration histogram's explicit bucket
// boundaries, in seconds, increasing (New fails otherwise); none means the
// default. A View of the MeterProvider can still change them. Default:
// DefaultBuckets (10 µs to 1 s).
func WithBuckets(b []float64) Option { return func(o *options) { o.buckets = b } }

// WithAttributes adds attributes with fixed values to every measurement:
// to tell several limiters apart on one MeterProvider, say
// attribute.String("limiter", "api"). Default: none.
func WithAttributes(kv ...attribute.KeyValue) Option {
	return func(o *options) { o.attrs = append(o.attrs, kv...) }
}

// Metrics records a Limiter's decisions with OpenTelemetry instruments.
// Give its Observe method to core.WithObserver, and the Limiter to Watch
// for the store's and the configuration's figures. Its methods are safe
// for concurrent use. The zero value is not usable: call New.
//
// Two Metrics on one MeterProvider share its instruments (the SDK returns
// the same instrument for the same name): their decisions add up unless
// WithAttributes tells them apart.
type Metrics struct {
	decisions metric.Int64Counter
	duration  metric.Float64Histogram
	errors    metric.Int64Counter

	rules *rlmetrics.Rules[*ruleOptions]     // by rule name
	kinds *rlmetrics.Set[[]metric.AddOption] // store errors by kind
	attrs []attribute.KeyValue               // WithAttributes

	keys, maxKeys, evictions, denyCacheHits, breaker metric.Int64Observable
	reloads, lastSuccess                             metric.Int64Observable
	lastSuccessTime                                  metric.Float64Observable
	reg                                              metric.Registration
	watched                                          rlmetrics.Watched
}

// ruleOptions are one rule's measurement options, made once: the
// attribute set of each outcome, and of the rule alone.
type ruleOptions struct {
	outcomes [core.NumOutcomes][]metric.AddOption
	record   []metric.RecordOption
}

// A Source is what Watch reads when the MeterProvider collects;
// *core.Limiter is one. Its store's figures are reported when the store is
// a store.StatsStore, and its reload counts when it has a method
// ReloadStats() core.ReloadStats.
type Source interface {
	Store() store.Store
}

// New returns Metrics recording with instruments of mp's Meter named
// ScopeName; it registers a callback for the figures Watch reads. It
// fails when mp is nil or an instrument cannot be made, and never panics.
func New(mp metric.MeterProvider, opts ...Option) (*Metrics, error) {
	if mp == nil {
		return nil, errors.New("otel: New: nil MeterProvider")
	}
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	buckets := slices.Clone(o.buckets)
	if len(buckets) == 0 {
		buckets = DefaultBuckets
	}
	for i, b := range buckets {
		if math.IsNaN(b) || math.IsInf(b, 0) || (i > 0 && !(b > buckets[i-1])) {
			return nil, fmt.Errorf("otel: WithBuckets: bucket %v at %d: the boundaries must be finite and increase", b, i)
		}
	}
	meter := mp.Meter(ScopeName)
	m := &Metrics{attrs: slices.Clone(o.attrs)}
	var errs []error
	check := func(err error) { errs = append(errs, err) }
	var err error
	m.decisions, err = meter.Int64Counter("rlkit.decisions", metric.WithUnit("{request}"),
		metric.WithDescription("Requests the rate limiter decided, by the rule they counted under and outcome (allowed, denied, shadow_denied, bypassed, exempt, store_error, banned, penalized, overshoot, waited, concurrency_denied); a request a shadow rule counts beside an enforced one is counted under each."))
	check(err)
	m.duration, err = meter.Float64Histogram("rlkit.store.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of the rate limiter's store calls, by rule."),
		metric.WithExplicitBucketBoundaries(buckets...))
	check(err)
	m.errors, err = meter.Int64Counter("rlkit.store.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Failed rate limiter store calls, by kind of error."))
	check(err)
	m.keys, err = meter.Int64ObservableUpDownCounter("rlkit.store.key.count", metric.WithUnit("{key}"),
		metric.WithDescription("Keys the rate limiter's store holds."))
	check(err)
	m.maxKeys, err = meter.Int64ObservableGauge("rlkit.store.key.limit", metric.WithUnit("{key}"),
		metric.WithDescription("The most keys the rate limiter's store holds."))
	check(err)
	m.evictions, err = meter.Int64ObservableCounter("rlkit.store.evictions", metric.WithUnit("{key}"),
		metric.WithDescription("Keys the rate limiter's store dropped to make room before they expired."))
	check(err)
	m.denyCacheHits, err = meter.Int64ObservableCounter("rlkit.store.deny_cache.hits", metric.WithUnit("{request}"),
		metric.WithDescription("Denials answered from the rate limiter store's local deny cache, without a round trip."))
	check(err)
	m.breaker, err = meter.Int64ObservableGauge("rlkit.store.breaker.state", metric.WithUnit("1"),
		metric.WithDescription("State of the circuit breaker of each store node: 1 for the current state (closed, open, half_open), 0 for the others."))
	check(err)
	m.reloads, err = meter.Int64ObservableCounter("rlkit.config.reloads", metric.WithUnit("{reload}"),
		metric.WithDescription("Rate limiter configuration reloads, by result (success: swapped in; failure: refused, the running configuration kept)."))
	check(err)
	m.lastSuccess, err = meter.Int64ObservableGauge("rlkit.config.last_reload.success", metric.WithUnit("1"),
		metric.WithDescription("Whether the last configuration reload attempt succeeded (1, also before any attempt) or failed (0)."))
	check(err)
	m.lastSuccessTime, err = meter.Float64ObservableGauge("rlkit.config.last_reload.success_timestamp", metric.WithUnit("s"),
		metric.WithDescription("Unix time of the last successful configuration reload."))
	check(err)
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("otel: New: %w", err)
	}
	m.reg, err = meter.RegisterCallback(m.observe, m.keys, m.maxKeys, m.evictions, m.denyCacheHits, m.breaker, m.reloads, m.lastSuccess, m.lastSuccessTime)
	if err != nil {
		return nil, fmt.Errorf("otel: New: %w", err)
	}
	m.rules = rlmetrics.NewRules(&m.watched, func(rule string) *ruleOptions {
		ro := &ruleOptions{record: []metric.RecordOption{metric.WithAttributeSet(m.set(keyRule.String(rule)))}}
		for o := range ro.outcomes {
			ro.outcomes[o] = []metric.AddOption{metric.WithAttributeSet(m.set(keyRule.String(rule), keyOutcome.String(core.Outcome(o).String())))}
		}
		return ro
	})
	m.kinds = rlmetrics.NewSet(MaxErrorKinds, rlmetrics.OtherKind, func(kind string) []metric.AddOption {
		return []metric.AddOption{metric.WithAttributeSet(m.set(keyKind.String(kind)))}
	})
	return m, nil
}

// set returns the attribute set of kv and WithAttributes.
func (m *Metrics) set(kv ...attribute.KeyValue) attribute.Set {
	return attribute.NewSet(append(slices.Clone(m.attrs), kv...)...)
}

// Observe records one decision: the core.Observer to pass to
// core.WithObserver. The store duration is recorded when the store was
// asked (ev.Latency > 0). Once a rule has been seen, Observe takes no lock
// and makes no attribute set. An event whose Outcome core does not define
// is not recorded.
func (m *Metrics) Observe(ev core.Event) {
	if int(ev.Outcome) >= core.NumOutcomes {
		return
	}
	ctx := context.Background()
	ro := m.rules.Get(ev.Rule)
	m.decisions.Add(ctx, 1, ro.outcomes[ev.Outcome]...)
	if ev.Latency > 0 {
		m.duration.Record(ctx, ev.Latency.Seconds(), ro.record...)
	}
	if ev.Err != nil {
		m.errors.Add(ctx, 1, m.kinds.Get(store.ErrorKind(ev.Err))...)
	}
}

// Watch makes every collection report src's store figures (keys, max keys,
// evictions, deny-cache hits, breaker states) and its configuration
// reloads, read at that moment, and makes Observe find the rules of its
// configuration by identity (see the package doc); Watch(nil) stops it.
// A Metrics watches one Source at a time: a later Watch replaces the
// earlier one (for several limiters, make one Metrics each, WithAttributes
// telling them apart).
func (m *Metrics) Watch(src Source) { m.watched.Watch(src) }

// Close unregisters the callback that reports what Watch reads. The
// decision instruments stay with the MeterProvider.
func (m *Metrics) Close() error { return m.reg.Unregister() }

// breakerStates are the states of the breaker gauge, one point each.
var breakerStates = [...]store.BreakerState{store.BreakerClosed, store.BreakerOpen, store.BreakerHalfOpen}

// observe is the callback: what the watched Source says now.
func (m *Metrics) observe(_ context.Context, o metric.Observer) error {
	snap := m.watched.Read()
	if snap.HasStore {
		st := snap.Store
		store := keyStore.String(st.Store)
		with := metric.WithAttributeSet(m.set(store))
		if st.Keys >= 0 {
			o.ObserveInt64(m.keys, st.Keys, with)
		}
		if st.MaxKeys > 0 {
			o.ObserveInt64(m.maxKeys, st.MaxKeys, with)
		}
		o.ObserveInt64(m.evictions, clamp(st.Evictions), with)
		o.ObserveInt64(m.denyCacheHits, clamp(st.DenyCacheHits), with)
		for _, n := range st.Nodes {
			for _, s := range breakerStates {
				var v int64
				if n.Breaker == s {
					v = 1
				}
				o.ObserveInt64(m.breaker, v, metric.WithAttributeSet(m.set(store, keyNode.String(n.Node), keyBreaker.String(s.String()))))
			}
		}
	}
	if snap.HasReload {
		r := snap.Reload
		o.ObserveInt64(m.reloads, clamp(r.Reloads), metric.WithAttributeSet(m.set(keyResult.String("success"))))
		o.ObserveInt64(m.reloads, clamp(r.Failures), metric.WithAttributeSet(m.set(keyResult.String("failure"))))
		with := metric.WithAttributeSet(m.set())
		ok := int64(1)
		if r.LastError != nil {
			ok = 0
		}
		o.ObserveInt64(m.lastSuccess, ok, with)
		if r.LastReload != 0 {
			o.ObserveFloat64(m.lastSuccessTime, float64(r.LastReload)/1e9, with)
		}
	}
	return nil
}

// clamp converts a count to the int64 OpenTelemetry records.
func clamp(n uint64) int64 { return int64(min(n, math.MaxInt64)) }
