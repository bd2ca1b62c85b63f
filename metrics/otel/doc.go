// Package otel exports rlkit's limiter metrics through the OpenTelemetry
// metrics API (go.opentelemetry.io/otel/metric): to any MeterProvider, and
// from there to whatever exporter the program configured (OTLP, a
// Prometheus exporter, ...). Neither core nor the adapters import it: a
// program that does not import this package compiles no OpenTelemetry
// code. Its name is that of OpenTelemetry's own root package; import it
// under another (rlotel below) when a file uses both.
//
// # Use
//
//	m, err := rlotel.New(otel.GetMeterProvider())
//	if err != nil { ... }
//	lim := core.NewLimiter(cfg, core.WithStore(store), core.WithObserver(m.Observe))
//	m.Watch(lim) // store and reload figures, read at each collection
//
// # Instruments
//
// Attribute names follow OpenTelemetry's conventions (error.type is the
// semantic conventions' own; the others are namespaced rlkit.*):
//
//	rlkit.decisions                 Int64Counter {request}           rlkit.rule, rlkit.outcome
//	rlkit.store.duration            Float64Histogram s               rlkit.rule; when the store call was timed (one in 16 by default; never a store.LocalStore's)
//	rlkit.store.errors              Int64Counter {error}             error.type (store.ErrorKind)
//	rlkit.store.key.count           Int64ObservableUpDownCounter {key}       rlkit.store; not reported by Redis
//	rlkit.store.key.limit           Int64ObservableGauge {key}       rlkit.store; not reported when unbounded
//	rlkit.store.evictions           Int64ObservableCounter {key}     rlkit.store
//	rlkit.store.deny_cache.hits     Int64ObservableCounter {request} rlkit.store
//	rlkit.store.breaker.state       Int64ObservableGauge 1           rlkit.store, rlkit.node, rlkit.breaker.state: 1 for each node's current state, 0 for the others
//	rlkit.config.reloads            Int64ObservableCounter {reload}  rlkit.reload.result: success or failure
//	rlkit.config.last_reload.success           Int64ObservableGauge 1  1 when the last reload attempt succeeded (or none was made), else 0
//	rlkit.config.last_reload.success_timestamp Float64ObservableGauge s  Unix time of the last successful reload; absent before one
//
// A request counts once under each rule it counted under: a rule in
// shadow mode counts beside the enforced rule (or the default limit), so
// such a request is a decision of each. rlkit.outcome is one of allowed,
// denied, shadow_denied, bypassed, exempt, store_error, banned,
// penalized, overshoot, waited and concurrency_denied (core.Outcome); rlkit.rule is the rule's name from the
// configuration ("default" for the default limit, "" for an exempt path
// and a banned network, which fall under no rule); rlkit.breaker.state
// is closed, open or half_open; rlkit.store the store's own name (memory, redis); rlkit.node
// a server's host:port. No attribute carries an identity or a request
// path.
//
// # Bounds
//
// Rule names come from the configuration, so their number is bounded by
// it; still, at most MaxRules distinct rule values are kept, and the
// events of any further rule are counted under OtherRule. Store error
// kinds are bounded the same way (MaxErrorKinds, then "other").
//
// # Cost
//
// Observe finds the rule's precomputed attribute sets without a lock (the
// rules of the watched Limiter by the identity of their names, others in
// a copy-on-write map) and records with them; what a record costs beyond
// that is the MeterProvider's (about 0.5 µs with the SDK on the machine
// rlkit is measured on). The store and reload figures are read by a
// callback, only when the provider collects.
package otel
