package redisstore

import (
	"fmt"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// maxExact bounds every product the scripts form: Lua numbers are doubles,
// exact for integers below 2^53; the headroom keeps sums exact too.
const maxExact = 1 << 52

// plan is what the store precomputes for one policy.
type plan struct {
	algorithm algo.Algorithm // or calendarWindow, for calendar limits
	rule      string
	// tail is the script's ARGV after the cost: for a fixed window, count
	// and period (µs) per limit (and, in the INCR+EXPIRE layout, a 1 that
	// asks for a TTL of one period); otherwise n, then count, period (in
	// units), capacity and unit (µs) per limit. Both end, for limits 2 to
	// n, with each one's counter identity in 16 hex digits.
	tail []any
	// resetArgs is the reset script's ARGV: tail without the layout's 1.
	resetArgs []any
	// calendar holds, for calendar limits, the tail of the periods last
	// asked for (see tailAt); tail is then nil.
	calendar atomic.Pointer[calendarTail]
	// chargeTail is the charge script's ARGV after the cost (see
	// chargePlan); chargeErr, when the policy cannot be charged exactly.
	chargeTail []any
	chargeErr  error
}

// calendarTail is the tail of a plan of calendar limits while the
// caller's clock is in [from, until): per limit, count and the instants
// (µs) prev, start, end and next of its periods (see calendar.lua).
type calendarTail struct {
	from, until int64
	tail        []any
}

// tailAt returns the script's ARGV after the cost for a decision at the
// caller's instant now (Unix ns): the plan's tail, or for calendar limits
// the periods holding now, kept until now leaves them, so a decision
// within them allocates nothing more than any other.
func (pl *plan) tailAt(p *store.Policy, now int64) []any {
	if pl.algorithm != calendarWindow {
		return pl.tail
	}
	return pl.calendarTailAt(p, now)
}

// calendarTailAt is tailAt for calendar limits; tailAt, the check,
// inlines.
func (pl *plan) calendarTailAt(p *store.Policy, now int64) []any {
	if c := pl.calendar.Load(); c != nil && now >= c.from && now < c.until {
		return c.tail
	}
	c := &calendarTail{from: now, until: now + 1}
	for i, l := range p.Limits {
		ps := p.Periods(i, now)
		if i == 0 || ps.Start > c.from {
			c.from = ps.Start
		}
		if i == 0 || ps.End < c.until {
			c.until = ps.End
		}
		c.tail = append(c.tail, l.Count, micros(ps.Prev), micros(ps.Start), micros(ps.End), micros(ps.Next))
	}
	pl.calendar.Store(c)
	return c.tail
}

// micros is ns (Unix nanoseconds) in whole microseconds, rounded down.
func micros(ns int64) any {
	us := ns / int64(time.Microsecond)
	if ns%int64(time.Microsecond) < 0 {
		us--
	}
	return us
}

// unitFor returns the time unit (microseconds) the scripts count limit l in:
// the smallest power of ten, from 1 µs to 1 s, that divides the period and
// keeps the largest product the algorithms form, (2×capacity + count + 1) ×
// period, below 2^52. Time is then exact to that unit: 1 µs for every limit
// up to about 17,000 per day, 417,000 per hour or 25 million per minute
// (with no larger burst); a million per day counts in units of 100 µs.
func unitFor(a algo.Algorithm, l algo.Limit) (int64, error) {
	if l.Period%time.Microsecond != 0 {
		return 0, fmt.Errorf("limit %v: the period must be a whole number of microseconds (the Redis clock's resolution)", l)
	}
	us := int64(l.Period / time.Microsecond)
	capacity := l.Capacity(a)
	for u := int64(1); u <= 1_000_000; u *= 10 {
		if us%u != 0 {
			break
		}
		if p := us / u; p <= maxExact/(2*capacity+l.Count+1) {
			return u, nil
		}
	}
	return 0, fmt.Errorf("limit %v: too many units per period for exact arithmetic in Redis ((2×capacity + count + 1) × period must stay below 2^52 in some time unit from 1µs to 1s that divides the period)", l)
}

// newPlan precomputes p; incrExpire asks for the INCR+EXPIRE layout
// (WithIncrExpireKeys), which only a one-limit fixed window takes (not
// one per calendar period).
func newPlan(p *store.Policy, incrExpire bool) (*plan, error) {
	if n := len(p.Limits); n == 0 || n > store.MaxLimits {
		return nil, fmt.Errorf("redisstore: policy %q has %d limits: %w", p.Name, n, store.ErrBadPolicy)
	}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("redisstore: %v: %w", err, store.ErrBadPolicy)
	}
	if p.Calendar() {
		// The tail depends on the periods: tailAt makes it.
		return &plan{algorithm: calendarWindow, rule: ruleID(p.Name, p.CounterID(0))}, nil
	}
	fixed := int64(0)
	if p.Algorithm == algo.FixedWindow {
		fixed = 1
	}
	incrExpire = incrExpire && fixed == 1 && len(p.Limits) == 1
	pl := &plan{algorithm: p.Algorithm, rule: ruleID(p.Name, p.CounterID(0))}
	if incrExpire {
		pl.rule = plainRule(p.Name)
	}
	if fixed == 0 {
		pl.tail = append(pl.tail, int64(len(p.Limits)))
	}
	for _, l := range p.Limits {
		u := int64(1) // a fixed window forms no products: always microseconds
		if fixed == 0 {
			var err error
			if u, err = unitFor(p.Algorithm, l); err != nil {
				return nil, fmt.Errorf("redisstore: policy %q: %v: %w", p.Name, err, store.ErrBadPolicy)
			}
		} else if l.Period%time.Microsecond != 0 {
			return nil, fmt.Errorf("redisstore: policy %q: limit %v: the period must be a whole number of microseconds (the Redis clock's resolution): %w", p.Name, l, store.ErrBadPolicy)
		}
		period := int64(l.Period/time.Microsecond) / u
		if fixed == 1 {
			pl.tail = append(pl.tail, l.Count, period)
		} else {
			pl.tail = append(pl.tail, l.Count, period, l.Capacity(p.Algorithm), u)
		}
	}
	for i := 1; i < len(p.Limits); i++ {
		pl.tail = append(pl.tail, hex16(p.CounterID(i)))
	}
	pl.resetArgs = pl.tail[:len(pl.tail):len(pl.tail)]
	if incrExpire {
		pl.tail = append(pl.tail, int64(1))
	}
	pl.chargeTail, pl.chargeErr = chargePlan(p, pl)
	return pl, nil
}
