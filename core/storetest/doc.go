// Package storetest is the conformance suite every store.Store must pass:
// the in-memory store, the Redis store, and third-party stores alike. A
// store's own test calls Run with a function that makes a store:
//
//	func TestConformance(t *testing.T) {
//		clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
//		storetest.Run(t, func() store.Store {
//			return memstore.New(memstore.WithClock(clock))
//		}, storetest.WithClock(clock))
//	}
//
// # Time
//
// With WithClock the suite moves that clock and never sleeps, and checks
// every duration exactly. Without it (a store that reads a server's
// clock) the suite waits in real time at the few points where time must
// pass (periods of 200 ms and one second, and the start of an hour when
// one is less than 10 seconds away), checks durations within bounds, and
// skips the part of one check that would wait minutes; counts are exact
// in both modes.
//
// # Stores
//
// Each subtest calls the function once for a store of its own, and closes
// it at the end when it has a method Close() error. Keys and policy names
// are unique per run, so a store that persists (a Redis server) may be
// the same one each time.
//
// # What it checks
//
// Each check is a subtest named after it, once per algorithm
// ("Peek/gcra", "Reset/fixed_window"), so that a failure names what the
// store got wrong:
//
//   - ExactCount: 5 per hour admits exactly 5, with Remaining 4 down to 0
//     and Result.Limit the policy's limit; the denials that follow have
//     Remaining 0 and the exact RetryAfter (an admitted request has
//     RetryAfter 0, a denied one more).
//   - Cost: costs add up; a cost that does not fit is denied and consumes
//     nothing; a cost above the capacity is never admitted.
//   - Rollover: waiting RetryAfter is enough to be admitted again, and two
//     whole periods give back the whole quota.
//   - SeveralLimits: every limit's state is in Result.Limits; a denial by
//     one limit consumes from none; the deciding limit is the denying one,
//     or when admitted the one with the fewest units left.
//   - Reset: it reports true exactly when a counter of the key under the
//     policy was live, holding the cost of an admitted request that time
//     had not yet given back; false for a key never counted, one asked
//     only at cost 0 or only denied, and one already reset. After a Reset
//     the key counts afresh under every limit, and the same key's
//     counters under other policies are untouched.
//   - ResetExpired: once the ResetAfter of a key's last admitted Take has
//     passed, Reset reports false; just before, true.
//   - Peek: Peek answers what the Take right after it answers (admitted or
//     denied, the same counts, the same RetryAfter), for one limit and
//     two, and changes nothing: a second Peek answers the same, and a key
//     only peeked at holds nothing to Reset.
//   - Isolation: keys of any bytes and length ("", "a:b", "{a}", a NUL,
//     UTF-8, 10,000 bytes) and policies never share counters.
//   - Concurrency and ConcurrencyTwoLimits: GOMAXPROCS×8 goroutines send
//     at least three times the limit at one key; exactly the limit (100) is
//     admitted, and no call fails.
//   - NewTerms: a limit's counter belongs to the policy's name, algorithm
//     and period (store.Policy.CounterID), not its count or burst: 3 of 5
//     per hour spent, 10 per hour leaves 6 after one more, 3 per hour
//     denies, 10 per hour then admits at once (no denial cached under 3
//     per hour answers), a burst of 20 leaves 14; another period,
//     algorithm or name counts afresh; a Reset under new terms forgets
//     what was spent under the old.
//   - NewTermsSeveralLimits: each limit of a policy keeps its counter
//     whatever the order, counts and other limits (a limit of a new period
//     starts afresh, one that comes back finds its counts), and a limit
//     lowered below what was spent denies until it drains at its new
//     rate.
//
// A store.ConcurrencyStore also gets the InFlight checks (skipped for
// another store): ExactCount (a limit of 3 takes exactly 3 slots, each
// Release frees one), Isolation (keys, names, and the counters of a
// policy of the same name never share slots; a Reset frees none),
// LimitChange (slots belong to the name, whatever the limit),
// ReleaseOnce (a slot released twice frees one), Concurrency (goroutines
// taking and releasing never hold more than the limit at once) and
// BadConcurrency (a limit below 1 is store.ErrBadConcurrency).
//
// A store.MultiTaker also gets the TakeAll checks, once per algorithm
// (skipped for another store): Admitted (takes of one key under two
// policies and of another key consume each their cost exactly, and a take
// of cost 0 creates nothing), Denied (a call with a denied take consumes
// from no counter, whichever place it has; the denied take answers what
// a Take alone does, the others what a Peek of cost 0 does),
// SameCounterTwice (two takes of one key and policy count twice against
// one counter, the second on what the first left), SeveralLimits and
// Calendar (policies of two limits, and of calendar limits, inside a
// call), Concurrency (goroutines under a global policy of 50 and a
// route's of 20 for one key admit exactly 20, and the global counter
// shows exactly 20; then under two more routes exactly the 30 the global
// policy has left) and BadTakes (no takes, too many, too few results, no
// policy, no limits or too many: store.ErrBadPolicy, nothing taken).
//
// And once each:
//
//   - Calendar: a fixed-window policy of 3 per calendar day and 5 per
//     calendar month in America/New_York (store.Policy.Location, limits of
//     algo.ParseCalendarLimit). In virtual time, across the midnights of
//     2025-03-09, a day of 23 hours: exact counts, the ResetAfter of both
//     limits and the RetryAfter of the denying one to the instant the day
//     (or the month) ends, Reset, a fresh day and a fresh month. In real
//     time, within one day: exact counts, and waits that end with the day
//     or the month.
//   - PenaltyBan: what a rule's penalty relies on. Under a GCRA policy of
//     1 per hour, burst 1, a Take at cost 0 consumes nothing and reports
//     the state as it stands: Remaining 1 while the unit is free,
//     Remaining 0 with ResetAfter the rest of the hour while it is taken.
package storetest
