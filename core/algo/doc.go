// Package algo holds the rate-limiting algorithms of rlkit as pure state
// transitions: no I/O, no clock, no locks. Every store (in-memory, Redis, or a
// third-party one) applies the same functions, so a decision never depends on
// where the state lives.
//
// # Model
//
// A [Limit] is Count units per Period (nanoseconds) with an optional Burst
// (the capacity of TokenBucket and GCRA; 0 means Count). The state of one
// counter is a [State] of two int64 words whose meaning depends on the
// algorithm; the zero State is a fresh counter for every algorithm, so a
// store only has to keep the two words and may drop a state once its
// [Outcome].ExpireAt has passed.
//
// [Take] evaluates a request of some cost at instant now (Unix nanoseconds,
// or any nanosecond timeline shared by all callers of one counter) and returns
// the next State and an [Outcome]. A denied request consumes nothing: the
// returned State is the one passed in. All arithmetic is integer, with 128-bit
// intermediates where a product could overflow, so results are exact and
// identical on every platform and in the Lua port of each algorithm.
//
// # Algorithms
//
//   - FixedWindow: at most Count per window; windows are aligned on
//     floor(now/Period), so every process and store agrees on the boundaries.
//     Up to 2×Count can pass around a boundary.
//   - SlidingWindow: the two-window weighted counter. The previous window's
//     count is weighted by the part of it still inside the sliding period;
//     a request is admitted when prev×(Period−elapsed)/Period + cur + cost ≤
//     Count, evaluated exactly.
//   - TokenBucket: capacity Burst, refilled Count per Period in whole tokens,
//     proportionally to the elapsed time. The refill anchor moves by whole
//     periods only, so no remainder time is ever lost.
//   - GCRA: the generic cell rate algorithm with an exact rational theoretical
//     arrival time. It admits exactly what a continuous token bucket of the
//     same capacity and rate admits.
//
// # Calendar periods
//
// A Limit with Calendar set counts per calendar day, month or year of a
// time zone: at most Count from one local midnight (the first of the
// month, of January) to the next, whatever the period's length in
// seconds (a day is 23 or 25 hours when the clocks change). The store
// finds the period holding now with Calendar.Periods (time-zone
// arithmetic, which it caches per period) and counts with ApplyCalendar,
// a fixed window over those boundaries. ParseCalendarLimit reads
// "1000/day", "20000/month", "1/year".
//
// The functions are safe for concurrent use: they share nothing.
package algo
