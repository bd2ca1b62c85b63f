// Package replay replays access logs through rlkit's limiter, on the logs'
// own clock, and reports what a rule file would have done to that
// traffic: per rule, the requests it would have refused, the keys it
// would have refused most, and the limits the traffic itself suggests.
// It is the engine of `rlkit replay` (see docs/cli.md).
//
// # Model
//
// Load compiles a rule file as core.LoadConfig does. New builds a
// Replayer: a core.Limiter over a memory store, both on a
// store.ManualClock, and a core.Flow over Record, a parsed log line, so
// that rule keys, weights, path spellings, exempt paths, allow and ban
// lists, plans and penalties behave as in the service. Run reads the logs
// in a goroutine of its own, parsing lines into pooled batches without
// copying them, while the calling goroutine decides each request at its
// time stamp: the clock moves to it, never backwards (a line far ahead of
// the lines on both sides of it is taken at the time of the line before:
// Options.MaxAhead). A request whose
// rule counts by outcome is completed (core.Limiter.Complete) with the
// log's status. A rule's wait is replayed on the log's clock (see
// Replayer); a concurrency limit is not replayed, since a log has no
// durations. The limiter's Observer sees every rule's count of every
// request, and each rule's figures come from it.
//
// # Recommendations
//
// Per limit of each rule, the units each key asks for are counted in
// windows cut as the fixed-window algorithm cuts them (the limit's
// period, aligned on the Unix epoch; calendar periods for a calendar
// limit), each request in the window of its own time stamp, among the
// last two windows its key counted in (see keyTable): the distribution
// of each key's peak (its most in one window) gives percentiles, and the distribution of all key-window counts c the
// smallest limit L whose refusals Σ max(0, c − L) stay within a share of
// the units. Both distributions are histograms exact up to 1,024 units
// and, above, in buckets of 1/64 of a power of two: a figure above 1,024
// may be high by up to 1/64 (1.6%), never low. The keys a rule's figures
// hold at once are bounded (Options.StatsKeys); past the bound the
// figures say how many keys were forgotten and whether that split an open
// window, and how many units of requests logged out of order were counted
// in a later window than their own (WindowReport.Exact).
package replay
