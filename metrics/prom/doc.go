// Package prom exports rlkit's limiter metrics to Prometheus, through
// github.com/prometheus/client_golang. Neither core nor the adapters import
// it: a program that does not import prom compiles no Prometheus code.
//
// # Use
//
//	m, err := prom.New() // registers with prometheus.DefaultRegisterer
//	if err != nil { ... }
//	lim := core.NewLimiter(cfg, core.WithStore(store), core.WithObserver(m.Observe))
//	m.Watch(lim) // store and reload figures, read at each scrape
//	http.Handle("/metrics", promhttp.Handler())
//
// # Metrics
//
// With the default namespace "rlkit":
//
//	rlkit_decisions_total{rule,outcome}           counter: every request the limiter saw
//	rlkit_store_duration_seconds{rule}            histogram: one store call, when timed (one in 16 at random, by default; never a store.LocalStore's)
//	rlkit_store_errors_total{kind}                counter: store failures by store.ErrorKind
//	rlkit_store_keys{store}                       gauge: keys the store holds (not reported by Redis)
//	rlkit_store_max_keys{store}                   gauge: the most it holds (not reported when unbounded)
//	rlkit_store_evictions_total{store}            counter: keys dropped to make room before they expired
//	rlkit_store_deny_cache_hits_total{store}      counter: denials answered from the local deny cache
//	rlkit_store_breaker_state{store,node,state}   gauge: 1 for each node's current breaker state, 0 for the others
//	rlkit_config_reloads_total{result}            counter: configuration reloads, result success or failure
//	rlkit_config_last_reload_success              gauge: 1 when the last reload attempt succeeded (or none was made), else 0
//	rlkit_config_last_reload_success_timestamp_seconds  gauge: Unix time of the last successful reload (absent before one)
//
// A request counts once under each rule it counted under: a rule in
// shadow mode counts beside the enforced rule (or the default limit), so
// such a request is a decision of each. outcome is one of allowed,
// denied, shadow_denied, bypassed, exempt, store_error, banned,
// penalized, overshoot, waited and concurrency_denied (core.Outcome); rule is the rule's name from the
// configuration ("default" for the default limit, "" for an exempt path
// and a banned network, which fall under no rule); state is closed, open
// or half_open; store is the store's own name (memory, redis); node a
// server's host:port.
// No label carries an identity or a request path.
//
// The repository's deploy directory holds a Grafana dashboard of these
// metrics and Prometheus alerting rules on them, with their runbook in
// docs/operations.md ("Dashboards and alerts").
//
// A series appears with its first event: a rule that never denied has no
// outcome="denied" series yet (PromQL's rate over a missing series is
// empty, not 0; `or vector(0)` fills it in).
//
// # Bounds
//
// Rule names come from the configuration, so their number is bounded by
// it; still, prom keeps at most MaxRules distinct rule labels, and counts
// the events of any further rule under OtherRule. Store error kinds are
// bounded the same way (MaxErrorKinds, then "other"). Hot reloads that
// rename rules add labels; the old ones stay, as counters must.
//
// # Cost
//
// Observe, the decision hook, finds the rule's counters without a lock,
// then adds one to the outcome's counter and, when the store was timed,
// to the latency's bucket and the sum: three atomic adds, no allocation
// once a rule has been seen. The rules of the watched Limiter's
// configuration are found by the identity of their names (core passes a
// rule's own Name in its events): the address of the bytes, no hashing;
// any other name by a map lookup. The map is replaced, never written, when
// a name is first seen (copy-on-write behind an atomic pointer); a name
// the table of identities does not hold makes Observe check whether the
// configuration was reloaded, and learn the new one's names. The
// histogram's buckets and sum are plain counters turned into a Prometheus
// histogram when scraped (its count is the sum of the buckets read, so
// they always agree). The store and reload figures are read only when
// Prometheus scrapes.
package prom
