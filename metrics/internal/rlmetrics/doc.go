// Package rlmetrics holds what rlkit's metrics packages (metrics/prom,
// metrics/otel) share: the bounded sets of label values they derive from
// events, the default histogram buckets, and the reading of a watched
// Limiter, so that both label a decision alike and report the same
// figures.
//
// A Set maps a label value (a rule name, a store error kind) to what a
// metrics package records with (its series, its attribute options), made
// once per value. It is bounded: at most MaxRules rule names and
// MaxErrorKinds error kinds get their own, and further values, and values
// that are not UTF-8, share the one of OtherRule or OtherKind. Get on a
// known value takes no lock and allocates nothing. Rules is the Set of rule
// names of one metrics package: it recognises the rules of the watched
// Limiter's configuration by the identity of their names, without hashing
// them, and takes up the new rules after a reload.
//
// Watched holds the Source a metrics package's Watch was given (a
// *core.Limiter); Read returns what it says at the moment of a collection:
// its store's figures when the store is a store.StatsStore, its reload
// counts when it has them. DefaultBuckets are the bounds of the store
// duration histogram.
package rlmetrics
