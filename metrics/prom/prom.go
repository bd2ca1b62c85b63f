package prom

import (
	"fmt"
	"math"
	"slices"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/metrics/internal/rlmetrics"
)

const (
	// MaxRules is the most distinct rule labels a Metrics keeps; events of
	// any further rule are counted under OtherRule.
	MaxRules = rlmetrics.MaxRules
	// OtherRule is the rule label of the events past MaxRules, and of a
	// rule name that is not UTF-8. No configured rule can have this name
	// (rule names are letters, digits, '_', '.' and '-').
	OtherRule = rlmetrics.OtherRule
	// MaxErrorKinds is the most distinct store error kinds a Metrics
	// keeps; further kinds are counted as "other".
	MaxErrorKinds = rlmetrics.MaxErrorKinds
)

// DefaultBuckets are the store duration histogram's upper bounds, in
// seconds: 10 µs to 1 s, from an in-process store's call to a slow Redis
// round trip.
var DefaultBuckets = rlmetrics.DefaultBuckets()

// An Option configures New.
type Option func(*options)

type options struct {
	reg         prometheus.Registerer
	namespace   string
	buckets     []float64
	constLabels prometheus.Labels
}

// WithRegisterer sets where New registers the metrics; nil registers them
// nowhere (register or collect the Metrics yourself: it is a
// prometheus.Collector). Default: prometheus.DefaultRegisterer.
func WithRegisterer(r prometheus.Registerer) Option { return func(o *options) { o.reg = r } }

// WithNamespace sets the prefix of every metric name ("" for none).
// Default: "rlkit".
func WithNamespace(ns string) Option { return func(o *options) { o.namespace = ns } }

// WithBuckets sets the store duration histogram's upper bounds, in
// seconds, increasing (New fails otherwise; a last +Inf is implied and
// may be left out); none means the default. Default: DefaultBuckets (10 µs
// to 1 s).
func WithBuckets(b []float64) Option { return func(o *options) { o.buckets = b } }

// WithConstLabels adds labels with fixed values to every metric: to tell
// several limiters apart in one registry, one Metrics each with the same
// label names, say {"limiter": "api"} and {"limiter": "admin"}. Default:
// none.
func WithConstLabels(l prometheus.Labels) Option { return func(o *options) { o.constLabels = l } }

// Metrics counts a Limiter's decisions for Prometheus. Give its Observe
// method to core.WithObserver, and the Limiter to Watch for the store's and
// the configuration's figures. Metrics is a prometheus.Collector, which
// New registers. Its methods are safe for concurrent use. The zero value
// is not usable: call New.
type Metrics struct {
	rules *rlmetrics.Rules[*ruleSeries]  // by rule name
	kinds *rlmetrics.Set[*atomic.Uint64] // store errors by kind

	bounds   []float64 // the histogram's upper bounds in seconds, without +Inf
	boundsNs []int64   // the same in nanoseconds, rounded down
	descs    descs
	watched  rlmetrics.Watched
}

// ruleSeries are one rule's counters.
type ruleSeries struct {
	outcomes [core.NumOutcomes]atomic.Uint64
	// buckets[i] counts the latencies in (boundsNs[i-1], boundsNs[i]],
	// the last one those above every bound; sumNs adds them up.
	buckets []atomic.Uint64
	sumNs   atomic.Int64
}

// New returns Metrics registered with the Registerer of WithRegisterer
// (prometheus.DefaultRegisterer by default). When the registry already
// holds metrics of these names and const labels (a second New with the
// same options, say), New returns the registry's error and registers
// nothing: a prometheus.AlreadyRegisteredError (found with errors.As) when
// the same metrics are all there. It never panics.
func New(opts ...Option) (*Metrics, error) {
	o := options{reg: prometheus.DefaultRegisterer, namespace: "rlkit"}
	for _, opt := range opts {
		opt(&o)
	}
	bounds := slices.Clone(o.buckets)
	if len(bounds) == 0 {
		bounds = DefaultBuckets
	}
	if math.IsInf(bounds[len(bounds)-1], +1) {
		bounds = bounds[:len(bounds)-1]
	}
	m := &Metrics{bounds: bounds, boundsNs: make([]int64, len(bounds))}
	for i, b := range bounds {
		if i > 0 && !(b > bounds[i-1]) {
			return nil, fmt.Errorf("prom: WithBuckets: bucket %v after %v: the bounds must increase", b, bounds[i-1])
		}
		switch ns := math.Floor(b * 1e9); {
		case math.IsNaN(ns):
			return nil, fmt.Errorf("prom: WithBuckets: bucket %v: not a number", b)
		case ns >= math.MaxInt64:
			m.boundsNs[i] = math.MaxInt64
		case ns <= math.MinInt64:
			m.boundsNs[i] = math.MinInt64
		default:
			m.boundsNs[i] = int64(ns)
		}
	}
	m.descs = newDescs(func(n string) string { return prometheus.BuildFQName(o.namespace, "", n) }, o.constLabels)
	m.rules = rlmetrics.NewRules(&m.watched, func(string) *ruleSeries {
		return &ruleSeries{buckets: make([]atomic.Uint64, len(m.boundsNs)+1)}
	})
	m.kinds = rlmetrics.NewSet(MaxErrorKinds, rlmetrics.OtherKind, func(string) *atomic.Uint64 { return new(atomic.Uint64) })
	if o.reg == nil {
		// Nothing would check the names and labels: check them in a
		// registry of their own, so that a bad option fails now.
		o.reg = prometheus.NewRegistry()
	}
	if err := o.reg.Register(m); err != nil {
		return nil, fmt.Errorf("prom: register rlkit metrics: %w", err)
	}
	return m, nil
}

// Observe counts one decision: the core.Observer to pass to
// core.WithObserver. The store duration is observed when the store was
// asked (ev.Latency > 0). Once a rule has been seen, Observe takes no lock
// and allocates nothing: a lookup (by identity for the rules of the
// watched Limiter) and two or three atomic adds. An event whose Outcome
// core does not define is not counted.
func (m *Metrics) Observe(ev core.Event) {
	if int(ev.Outcome) >= core.NumOutcomes {
		return
	}
	rs := m.rules.Get(ev.Rule)
	rs.outcomes[ev.Outcome].Add(1)
	if ns := int64(ev.Latency); ns > 0 {
		i := 0
		for i < len(m.boundsNs) && ns > m.boundsNs[i] {
			i++
		}
		rs.buckets[i].Add(1)
		rs.sumNs.Add(ns)
	}
	if ev.Err != nil {
		m.kinds.Get(store.ErrorKind(ev.Err)).Add(1)
	}
}
