package algo

import (
	"fmt"
	"math"
	"math/bits"
	"strconv"
	"time"
)

// Algorithm selects a rate-limiting algorithm. The zero value is FixedWindow.
type Algorithm uint8

const (
	FixedWindow Algorithm = iota
	SlidingWindow
	TokenBucket
	GCRA
)

var algorithmNames = [...]string{"fixed_window", "sliding_window", "token_bucket", "gcra"}

// String returns the configuration name: fixed_window, sliding_window,
// token_bucket or gcra.
func (a Algorithm) String() string {
	if int(a) < len(algorithmNames) {
		return algorithmNames[a]
	}
	return fmt.Sprintf("algorithm(%d)", uint8(a))
}

// ParseAlgorithm returns the Algorithm named s (as printed by String; "fixed",
// "sliding", "bucket" and "token-bucket" style spellings with '-' are also
// accepted).
func ParseAlgorithm(s string) (Algorithm, error) {
	switch s {
	case "fixed_window", "fixed-window", "fixed":
		return FixedWindow, nil
	case "sliding_window", "sliding-window", "sliding":
		return SlidingWindow, nil
	case "token_bucket", "token-bucket", "bucket":
		return TokenBucket, nil
	case "gcra", "GCRA":
		return GCRA, nil
	}
	return 0, fmt.Errorf("unknown algorithm %q (want fixed_window, sliding_window, token_bucket or gcra)", s)
}

// Limits on the numbers a Limit may hold. They keep every intermediate value
// of every algorithm inside 128 bits and the sliding window's two counters
// inside one int64.
const (
	MaxCount = math.MaxInt32 // largest Count or Burst
	// MaxDrain bounds Capacity×Period/Count, the time a full quota takes to
	// refill (about 36 years). With it no computation overflows for any now
	// below 2^62 ns (the year 2116).
	MaxDrain = 1 << 60
)

// Limit is Count units per Period. Burst is the capacity of TokenBucket
// and GCRA (0 = Count); the window algorithms ignore it.
//
// A limit with Calendar set counts Count units per calendar period (a
// day, month or year of a time zone, see ApplyCalendar), with FixedWindow
// only; its Period is then Calendar.Nominal().
type Limit struct {
	Count    int64
	Period   time.Duration
	Burst    int64
	Calendar Calendar
}

// String formats l as "10/second" or "100/5m", forms algo.ParseLimit reads
// back when the period is a whole number of seconds and there is no burst;
// otherwise the period prints as a Go duration ("10/1.5s") and a burst is
// appended ("1/second burst 5"), for reading only. A calendar limit
// prints as "1000/day", "20000/month" or "1/year", forms
// ParseCalendarLimit reads back.
func (l Limit) String() string {
	if l.Calendar != 0 {
		return strconv.FormatInt(l.Count, 10) + "/" + l.Calendar.String()
	}
	unit := l.Period.String()
	for _, u := range []struct {
		d           time.Duration
		long, short string
	}{{24 * time.Hour, "day", "d"}, {time.Hour, "hour", "h"}, {time.Minute, "minute", "m"}, {time.Second, "second", "s"}} {
		if l.Period == u.d {
			unit = u.long
			break
		}
		if l.Period > 0 && l.Period%u.d == 0 {
			unit = strconv.FormatInt(int64(l.Period/u.d), 10) + u.short
			break
		}
	}
	s := strconv.FormatInt(l.Count, 10) + "/" + unit
	if l.Burst > 0 {
		s += " burst " + strconv.FormatInt(l.Burst, 10)
	}
	return s
}

// Capacity is the largest cost one request can ever be admitted with.
func (l Limit) Capacity(a Algorithm) int64 {
	if (a == TokenBucket || a == GCRA) && l.Burst > 0 {
		return l.Burst
	}
	return l.Count
}

// Validate reports whether l can be evaluated: 1 ≤ Count ≤ MaxCount,
// 0 ≤ Burst ≤ MaxCount, Period ≥ 1, at most one unit per nanosecond, and
// Capacity×Period/Count ≤ MaxDrain; a calendar limit's Calendar is a day,
// month or year and its Period is Calendar.Nominal().
func (l Limit) Validate() error {
	switch {
	case l.Calendar > CalendarYear:
		return fmt.Errorf("unknown %v", l.Calendar)
	case l.Calendar != 0 && l.Period != l.Calendar.Nominal():
		return fmt.Errorf("a limit per calendar %v has Period %v (Calendar.Nominal), not %v", l.Calendar, l.Calendar.Nominal(), l.Period)
	case l.Count < 1 || l.Count > MaxCount:
		return fmt.Errorf("count %d out of range [1, %d]", l.Count, MaxCount)
	case l.Burst < 0 || l.Burst > MaxCount:
		return fmt.Errorf("burst %d out of range [0, %d]", l.Burst, MaxCount)
	case l.Period < 1:
		return fmt.Errorf("period %v must be positive", l.Period)
	case l.Count > int64(l.Period):
		return fmt.Errorf("count %d per %v is more than one per nanosecond", l.Count, l.Period)
	case mulDiv(uint64(max(l.Count, l.Burst)), uint64(l.Period), uint64(l.Count)) > MaxDrain:
		return fmt.Errorf("burst %d at %d per %v takes longer than %v to refill", max(l.Count, l.Burst), l.Count, l.Period, time.Duration(MaxDrain))
	}
	return nil
}

// State is the compact state of one counter. The zero State is a fresh
// counter. Its words mean, per algorithm:
//
//	FixedWindow:   A = window index, B = count in that window
//	SlidingWindow: A = window index, B = previous count<<32 | current count
//	TokenBucket:   A = refill anchor (ns), B = tokens owed at the anchor
//	GCRA:          A = theoretical arrival time (ns), B = Count<<32 | its
//	               fraction, in 1/Count ns
//
// Every word but the GCRA's count is independent of the limit's Count and
// Burst: a state is read under whatever terms the counter has now, so what
// was spent carries over when they change (see Apply).
type State struct{ A, B int64 }

// Outcome is the result of one evaluation. Durations are nanoseconds.
type Outcome struct {
	// Allowed reports whether the request was admitted (and its cost consumed).
	Allowed bool
	// Remaining is how many more units could be admitted right now.
	Remaining int64
	// ResetAfter is the time until the counter is back to its full quota.
	ResetAfter int64
	// RetryAfter is, for a denied request, the time until a request of the
	// same cost would be admitted (if nothing else consumes). Zero when
	// allowed. A cost above the capacity is never admitted; RetryAfter is
	// then max(ResetAfter, Period), a hint only.
	RetryAfter int64
	// ExpireAt is the instant from which the returned State is equivalent to
	// the zero State, so a store may delete it (or let it expire) then.
	ExpireAt int64
}

// Take evaluates a request of the given cost at instant now against state s
// and returns the next state and the outcome. A cost ≤ 0 consumes nothing
// and reports the current state (Allowed is then true). The limit must be
// valid (see Limit.Validate). A denied request consumes nothing: it
// returns s unchanged, or rewritten under l when s was kept under other
// terms (see Apply). It ignores Calendar: a calendar limit is counted by
// ApplyCalendar.
func Take(a Algorithm, s State, l Limit, now, cost int64) (State, Outcome) {
	var o Outcome
	Apply(a, &s, &l, now, cost, &o)
	return s, o
}

// Apply is Take in place, for hot paths: it writes the outcome to *o and,
// when the request is admitted, the next state to *s.
//
// A state may have been kept under other terms of the same counter: the
// same algorithm and Period, another Count or Burst (a reloaded
// configuration). Apply reads it under l, so what was spent carries over:
// the count of a window (which may now exceed Count: the window then
// denies until it ends), the tokens a token bucket owes (refilled at l's
// rate), the units of GCRA's theoretical arrival time (the time they take
// at the old rate, converted to l's). What a token bucket or GCRA had
// spent beyond l's capacity carries over up to the capacity plus Count,
// one period's refill, for GCRA, and plus twice Count for a token bucket
// (whose state may hold a debt that long: see Charge): its owner then
// waits at most one period (two) longer than the cost's own refill. A GCRA state kept under another Count, or
// holding more than that, is rewritten under l, and *s holds it even when
// the request is denied (except for a cost above the capacity, which
// leaves s as it is), so that the state is converted once.
func Apply(a Algorithm, s *State, l *Limit, now, cost int64, o *Outcome) {
	if a == FixedWindow && cost >= 0 && cost <= l.Count { // the common case, first
		fixed(s, l, now, cost, o)
		return
	}
	if cost < 0 {
		cost = 0
	}
	if cost > l.Capacity(a) {
		peek := *s
		Apply(a, &peek, l, now, 0, o)
		o.Allowed = false
		o.RetryAfter = max(o.ResetAfter, int64(l.Period))
		return
	}
	switch a {
	case SlidingWindow:
		sliding(s, l, now, cost, o)
	case TokenBucket:
		tokenBucket(s, l, now, cost, o)
	case GCRA:
		gcra(s, l, now, cost, o)
	default:
		fixed(s, l, now, cost, o)
	}
}

// floorDiv is a/b rounded towards negative infinity (b > 0).
func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

// window returns the index of the window holding now. A clock that went back
// into the previous window is clamped to the stored window's start, so a
// small backwards step can never reset a count. A stored index further ahead
// cannot come from this clock and is ignored.
func window(stored, now, period int64) (idx, at int64) {
	// Most calls fall in the stored window: a multiplication tells, where
	// finding the window takes a division.
	if hi, lo := bits.Mul64(uint64(stored), uint64(period)); hi == 0 && int64(lo) >= 0 && now >= int64(lo) && now-int64(lo) < period {
		return stored, now
	}
	idx = floorDiv(now, period)
	if stored == idx+1 {
		return stored, stored * period
	}
	return idx, now
}

func fixed(s *State, l *Limit, now, cost int64, out *Outcome) {
	idx, now := window(s.A, now, int64(l.Period))
	count := max(s.B, 0)
	if s.A != idx {
		count = 0
	}
	end := (idx + 1) * int64(l.Period)
	if count+cost <= l.Count {
		count += cost
		*out = Outcome{Allowed: true, Remaining: l.Count - count, ResetAfter: end - now, ExpireAt: end}
		*s = State{A: idx, B: count}
		return
	}
	*out = Outcome{Remaining: max(l.Count-count, 0), ResetAfter: end - now, RetryAfter: end - now, ExpireAt: end}
	if cost == 0 { // a count kept under a larger Count: nothing to consume
		out.Allowed, out.RetryAfter = true, 0
		*s = State{A: idx, B: count}
	}
}

func sliding(s *State, l *Limit, now, cost int64, out *Outcome) {
	p := int64(l.Period)
	idx, now := window(s.A, now, p)
	prev, cur := int64(uint64(s.B)>>32), int64(uint32(s.B))
	switch s.A {
	case idx:
	case idx - 1:
		prev, cur = cur, 0
	default:
		prev, cur = 0, 0
	}
	elapsed := now - idx*p
	w := p - elapsed // weight of prev, out of p; in (0, p]
	// The weighted previous count, rounded up: the part of the quota it holds.
	held := int64(mulDivCeil(uint64(prev), uint64(w), uint64(p)))
	o := Outcome{}
	if cur+cost+held <= l.Count {
		cur += cost
		o.Allowed = true
	} else if cur+cost <= l.Count {
		// Room in this window once enough of prev has slid out:
		// prev×w' ≤ (Count−cur−cost)×p.
		w2 := mulDiv(uint64(l.Count-cur-cost), uint64(p), uint64(prev))
		o.RetryAfter = w - int64(w2)
	} else {
		// Wait for the next window, where cur becomes prev.
		w2 := min(int64(mulDiv(uint64(l.Count-cost), uint64(p), uint64(cur))), p)
		o.RetryAfter = w + (p - w2)
	}
	o.Remaining = max(l.Count-cur-held, 0)
	switch {
	case cur > 0:
		o.ExpireAt = (idx + 2) * p
	case prev > 0:
		o.ExpireAt = (idx + 1) * p
	default:
		o.ExpireAt = now
	}
	o.ResetAfter = o.ExpireAt - now
	if cost == 0 { // counts kept under a larger Count: nothing to consume
		o.Allowed, o.RetryAfter = true, 0
	}
	*out = o
	if o.Allowed {
		*s = State{A: idx, B: prev<<32 | cur}
	}
}

func tokenBucket(s *State, l *Limit, now, cost int64, out *Outcome) {
	r, p, c := l.Count, int64(l.Period), l.Capacity(TokenBucket)
	// owed < c+r in any state Take returns under l, < c+2r in one Charge
	// returns; one kept under a larger capacity carries over up to that
	// (see Apply).
	anchor, owed := s.A, min(s.B, c+2*r)
	if anchor-now > MaxDrain {
		anchor = now // not a state Take returns
	}
	elapsed := max(now-anchor, 0) // a clock that went back refills nothing
	if m := elapsed / p; owed <= 0 || m >= (owed+r-1)/r {
		// Full: refill has nothing left to do. A new schedule starts now.
		anchor, owed, elapsed = now, 0, 0
	} else if m > 0 {
		// Move the anchor by whole periods only: exact, no remainder lost.
		anchor += m * p
		owed -= m * r
		elapsed -= m * p
	}
	refilled := int64(mulDiv(uint64(r), uint64(elapsed), uint64(p))) // < r
	if owed <= refilled {
		anchor, owed, refilled = now, 0, 0
	}
	avail := c - owed + refilled
	// at returns the instant at which the total refill since the anchor reaches n tokens.
	at := func(n int64) int64 { return anchor + int64(mulDivCeil(uint64(n), uint64(p), uint64(r))) }
	o := Outcome{}
	if cost <= avail {
		owed += cost
		avail -= cost
		o.Allowed = true
	} else {
		o.RetryAfter = at(owed-c+cost) - now
	}
	o.Remaining = max(avail, 0)
	o.ExpireAt = at(owed)
	if owed == 0 {
		o.ExpireAt = now
	}
	o.ResetAfter = max(o.ExpireAt-now, 0)
	if cost == 0 { // tokens owed beyond a smaller capacity: nothing to consume
		o.Allowed, o.RetryAfter = true, 0
	}
	*out = o
	// A cost of 0 leaves the state: moving its anchor would count the
	// whole periods since at this rate, which new terms may change.
	if o.Allowed && cost > 0 {
		*s = State{A: anchor, B: owed}
	}
}

// fracMask selects the fraction of a GCRA state's B; its high 32 bits
// hold the Count the state was written under.
const fracMask = 1<<32 - 1

func gcra(s *State, l *Limit, now, cost int64, out *Outcome) {
	c, p, b := uint64(l.Count), uint64(l.Period), uint64(l.Capacity(GCRA))
	// TAT = A + frac/c nanoseconds, frac = B's low 32 bits. tat = max(TAT, now).
	tatA, tatB := s.A, uint64(s.B)
	rewrite := tatB>>32 != c
	if rewrite {
		tatA, tatB, rewrite = rebaseGCRA(tatA, tatB, c, p, b, now)
	}
	tatB &= fracMask
	if tatB >= c || tatA-now > MaxDrain { // not a state Take returns
		tatA, tatB = now+MaxDrain, 0
	}
	if tatA < now || tatA == now && tatB == 0 {
		tatA, tatB = now, 0
	}
	// newTAT = tat + cost×p/c.
	hi, lo := bits.Mul64(uint64(cost), p)
	lo, carry := bits.Add64(lo, tatB, 0)
	hi += carry
	q, rem := bits.Div64(hi, lo, c) // q ≤ cost×p < 2^63: cost ≤ MaxCount, p/c ≥ 1
	newA, newB := tatA+int64(q), rem
	// Scaled delay D = (newTAT−now)×c must not exceed b×p.
	dHi, dLo := bits.Mul64(uint64(newA-now), c)
	dLo, carry = bits.Add64(dLo, newB, 0)
	dHi += carry
	lHi, lLo := bits.Mul64(b, p)
	o := Outcome{}
	if dHi < lHi || dHi == lHi && dLo <= lLo {
		o.Allowed = true
		tatA, tatB = newA, newB
		// remaining = (b×p − D)/p
		rHi, rLo, _ := sub128(lHi, lLo, dHi, dLo)
		rq, _ := bits.Div64(rHi, rLo, p)
		o.Remaining = int64(rq)
	} else {
		// remaining = (b×p − (tat−now)×c − tatB)/p for the unchanged state.
		cHi, cLo := bits.Mul64(uint64(tatA-now), c)
		cLo, carry = bits.Add64(cLo, tatB, 0)
		cHi += carry
		if rHi, rLo, borrow := sub128(lHi, lLo, cHi, cLo); borrow == 0 {
			rq, _ := bits.Div64(rHi, rLo, p)
			o.Remaining = int64(rq)
		} else if mHi, mLo := capGCRA(c, p, b); cHi > mHi || cHi == mHi && cLo > mLo {
			// Kept under a larger capacity, more than it carries over.
			q, r := bits.Div64(mHi, mLo, c)
			*s = State{A: now + int64(q), B: int64(c<<32 | r)}
			gcra(s, l, now, cost, out)
			return
		}
		// Earliest t with (newA−t)×c + newB ≤ b×p: t = newA − floor((b×p − newB)/c).
		xHi, xLo, _ := sub128(lHi, lLo, 0, newB)
		slack, _ := bits.Div64(xHi, xLo, c)
		o.RetryAfter = newA - int64(slack) - now
		if cost == 0 { // units owed beyond a smaller capacity: nothing to consume
			o.Allowed, o.RetryAfter = true, 0
		}
	}
	o.ExpireAt = tatA
	if tatB > 0 {
		o.ExpireAt++
	}
	o.ResetAfter = max(o.ExpireAt-now, 0)
	*out = o
	if o.Allowed || rewrite {
		*s = State{A: tatA, B: int64(c<<32 | tatB)}
	}
}

// rebaseGCRA brings a GCRA state (TAT = tatA + the fraction in tatB's
// low 32 bits over the Count in its high 32 bits) under Count c, period
// p and capacity b at now: what it had spent, (TAT − now)×Count + the
// fraction (units × period), stays, up to capGCRA, and becomes TAT' =
// now + that / c. It reports whether the state holds something to
// rewrite: a state with nothing spent is a fresh one, and one Take never
// returns (written without its Count, or out of range) is returned as it
// is for gcra's own checks.
func rebaseGCRA(tatA int64, tatB, c, p, b uint64, now int64) (int64, uint64, bool) {
	old, frac := tatB>>32, tatB&fracMask
	switch {
	case old == 0 || frac >= old || tatA-now > MaxDrain:
		return tatA, frac, false
	case tatA < now || tatA == now && frac == 0:
		return now, 0, false // nothing spent: a fraction of the old count is none of c's
	}
	hi, lo := bits.Mul64(uint64(tatA-now), old)
	lo, carry := bits.Add64(lo, frac, 0)
	hi += carry
	if mHi, mLo := capGCRA(c, p, b); hi > mHi || hi == mHi && lo > mLo {
		hi, lo = mHi, mLo
	}
	q, r := bits.Div64(hi, lo, c) // q ≤ MaxDrain
	return now + int64(q), r, true
}

// capGCRA is the most a GCRA state under Count c, period p and capacity b
// carries over, scaled as (TAT − now)×c: (b + c)×p, the capacity and one
// period's refill, and at most MaxDrain×c, the furthest TAT a state holds.
func capGCRA(c, p, b uint64) (hi, lo uint64) {
	hi, lo = bits.Mul64(b+c, p)
	if mHi, mLo := bits.Mul64(MaxDrain, c); hi > mHi || hi == mHi && lo > mLo {
		return mHi, mLo
	}
	return hi, lo
}

func sub128(aHi, aLo, bHi, bLo uint64) (hi, lo, borrow uint64) {
	lo, borrow = bits.Sub64(aLo, bLo, 0)
	hi, borrow = bits.Sub64(aHi, bHi, borrow)
	return hi, lo, borrow
}

// mulDiv returns floor(a×b/c), saturating at MaxInt64.
func mulDiv(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, _ := bits.Div64(hi, lo, c)
	return min(q, math.MaxInt64)
}

// mulDivCeil returns ceil(a×b/c), saturating at MaxInt64.
func mulDivCeil(a, b, c uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi >= c {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, c)
	if r != 0 {
		q++
	}
	return min(q, math.MaxInt64)
}
