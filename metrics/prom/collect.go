package prom

import (
	"strings"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
)

// A Source is what Watch reads at scrape time; *core.Limiter is one. Its
// store's figures are reported when the store is a store.StatsStore, and
// its reload counts when it has a method ReloadStats() core.ReloadStats.
type Source interface {
	Store() store.Store
}

// Watch makes every scrape report src's store figures (keys, max keys,
// evictions, deny-cache hits, breaker states) and its configuration
// reloads, read at that moment, and makes Observe find the rules of its
// configuration by identity (see the package doc); Watch(nil) stops it.
// A Metrics watches one Source at a time: a later Watch replaces the
// earlier one (for several limiters, make one Metrics each, WithConstLabels
// telling them apart).
func (m *Metrics) Watch(src Source) { m.watched.Watch(src) }

// descs describe every metric.
type descs struct {
	decisions, duration, storeErrors                 *prometheus.Desc
	keys, maxKeys, evictions, denyCacheHits, breaker *prometheus.Desc
	reloads, lastSuccess, lastSuccessTime            *prometheus.Desc
}

func newDescs(name func(string) string, constLabels prometheus.Labels) descs {
	desc := func(n, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc(name(n), help, labels, constLabels)
	}
	return descs{
		decisions:       desc("decisions_total", "Requests the rate limiter decided, by the rule they counted under and outcome (allowed, denied, shadow_denied, bypassed, exempt, store_error, banned, penalized, overshoot, waited, concurrency_denied); a request a shadow rule counts beside an enforced one is counted under each.", "rule", "outcome"),
		duration:        desc("store_duration_seconds", "Duration of the rate limiter's store calls, by rule.", "rule"),
		storeErrors:     desc("store_errors_total", "Failed rate limiter store calls, by kind of error.", "kind"),
		keys:            desc("store_keys", "Keys the rate limiter's store holds.", "store"),
		maxKeys:         desc("store_max_keys", "The most keys the rate limiter's store holds.", "store"),
		evictions:       desc("store_evictions_total", "Keys the rate limiter's store dropped to make room before they expired.", "store"),
		denyCacheHits:   desc("store_deny_cache_hits_total", "Denials answered from the rate limiter store's local deny cache, without a round trip.", "store"),
		breaker:         desc("store_breaker_state", "State of the circuit breaker of each store node: 1 for the current state (closed, open, half_open), 0 for the others.", "store", "node", "state"),
		reloads:         desc("config_reloads_total", "Rate limiter configuration reloads, by result (success: swapped in; failure: refused, the running configuration kept).", "result"),
		lastSuccess:     desc("config_last_reload_success", "Whether the last configuration reload attempt succeeded (1, also before any attempt) or failed (0)."),
		lastSuccessTime: desc("config_last_reload_success_timestamp_seconds", "Unix time of the last successful configuration reload."),
	}
}

// breakerStates are the states of the breaker gauge, one series each.
var breakerStates = [...]store.BreakerState{store.BreakerClosed, store.BreakerOpen, store.BreakerHalfOpen}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	d := &m.descs
	for _, d := range []*prometheus.Desc{d.decisions, d.duration, d.storeErrors, d.keys, d.maxKeys, d.evictions, d.denyCacheHits, d.breaker, d.reloads, d.lastSuccess, d.lastSuccessTime} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the decisions counted so far,
// and what the watched Source says now. A series appears with its first
// event: an outcome that never happened to a rule is not reported, nor
// the histogram of a rule whose store was never asked.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	d := &m.descs
	m.rules.Range(func(rule string, rs *ruleSeries) {
		for o := range rs.outcomes {
			if n := rs.outcomes[o].Load(); n > 0 {
				ch <- prometheus.MustNewConstMetric(d.decisions, prometheus.CounterValue, float64(n), rule, core.Outcome(o).String())
			}
		}
		m.collectHistogram(ch, rule, rs)
	})
	m.kinds.Range(func(kind string, c *atomic.Uint64) {
		ch <- prometheus.MustNewConstMetric(d.storeErrors, prometheus.CounterValue, float64(c.Load()), kind)
	})
	snap := m.watched.Read()
	if snap.HasStore {
		m.collectStore(ch, snap.Store)
	}
	if snap.HasReload {
		m.collectReloads(ch, snap.Reload)
	}
}

// collectHistogram sends the store durations of rule, if any. The buckets are
// read one by one while Observe adds to them: the count is the sum of the
// buckets read, so buckets and count agree, and the sum may be ahead of
// them by the observations in flight.
func (m *Metrics) collectHistogram(ch chan<- prometheus.Metric, rule string, rs *ruleSeries) {
	var count uint64
	cumulative := make(map[float64]uint64, len(m.bounds))
	for i := range rs.buckets {
		count += rs.buckets[i].Load()
		if i < len(m.bounds) {
			cumulative[m.bounds[i]] = count
		}
	}
	if count == 0 {
		return
	}
	ch <- prometheus.MustNewConstHistogram(m.descs.duration, count, float64(rs.sumNs.Load())/1e9, cumulative, rule)
}

func (m *Metrics) collectStore(ch chan<- prometheus.Metric, st store.Stats) {
	d := &m.descs
	// A label must be UTF-8 (or the metric is refused): a store's name and
	// node addresses are, but the scrape must not depend on it.
	st.Store = strings.ToValidUTF8(st.Store, "\uFFFD")
	if st.Keys >= 0 {
		ch <- prometheus.MustNewConstMetric(d.keys, prometheus.GaugeValue, float64(st.Keys), st.Store)
	}
	if st.MaxKeys > 0 {
		ch <- prometheus.MustNewConstMetric(d.maxKeys, prometheus.GaugeValue, float64(st.MaxKeys), st.Store)
	}
	ch <- prometheus.MustNewConstMetric(d.evictions, prometheus.CounterValue, float64(st.Evictions), st.Store)
	ch <- prometheus.MustNewConstMetric(d.denyCacheHits, prometheus.CounterValue, float64(st.DenyCacheHits), st.Store)
	for _, n := range st.Nodes {
		n.Node = strings.ToValidUTF8(n.Node, "\uFFFD")
		for _, s := range breakerStates {
			v := 0.0
			if n.Breaker == s {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(d.breaker, prometheus.GaugeValue, v, st.Store, n.Node, s.String())
		}
	}
}

func (m *Metrics) collectReloads(ch chan<- prometheus.Metric, rs core.ReloadStats) {
	d := &m.descs
	ch <- prometheus.MustNewConstMetric(d.reloads, prometheus.CounterValue, float64(rs.Reloads), "success")
	ch <- prometheus.MustNewConstMetric(d.reloads, prometheus.CounterValue, float64(rs.Failures), "failure")
	ok := 1.0
	if rs.LastError != nil {
		ok = 0
	}
	ch <- prometheus.MustNewConstMetric(d.lastSuccess, prometheus.GaugeValue, ok)
	if rs.LastReload != 0 {
		ch <- prometheus.MustNewConstMetric(d.lastSuccessTime, prometheus.GaugeValue, float64(rs.LastReload)/1e9)
	}
}
