// Package rlmetricstest holds the fakes the tests of the metrics packages
// (metrics/prom, metrics/otel) share: a store whose figures a test sets
// (StatsStore), watched sources with and without reload counts (Source,
// StoreOnly), and a store that hides its figures (NoStats).
package rlmetricstest
