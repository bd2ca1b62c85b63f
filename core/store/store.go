package store

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
)

// MaxLimits is the largest number of limits one Policy may hold.
const MaxLimits = 4

// Policy is what a store counts against: one algorithm and one or more
// limits that must all admit a request. A denial consumes from none of them.
//
// Each limit has a counter per key, identified by the policy's Name and
// Algorithm and the limit's Period (CounterID): the limit's Count and
// Burst, and its place among the policy's limits, are terms, not identity.
// Two policies whose limits have the same identity share those counters,
// so a reloaded configuration that changes a count or a burst keeps what
// each caller spent in the current window and counts it against the new
// terms (see algo.Apply); a new name, algorithm or period starts afresh.
//
// A Policy must not change once it is in use: stores identify its counters
// by CounterID and its terms by Fingerprint, each computed once.
//
// Calendar limits (algo.Limit.Calendar: per day, month or year) count per
// calendar period of Location, with FixedWindow; a policy's limits are all
// calendar limits or none.
type Policy struct {
	Name      string
	Algorithm algo.Algorithm
	Limits    []algo.Limit
	// Location is the time zone of the policy's calendar limits: their
	// periods start at local midnight there. nil means UTC; a policy
	// without calendar limits has none.
	Location *time.Location

	fingerprint atomic.Uint64
	periods     [MaxLimits]atomic.Pointer[algo.Periods] // of each calendar limit, the last asked for
	counted     atomic.Uint32                           // 1 once counters holds every limit's CounterID
	once        sync.Once
	counters    [MaxLimits]uint64
}

// Periods returns the calendar period of limit i (a calendar limit) that
// holds the instant now (Unix nanoseconds) in p.Location, and its
// neighbours. The period last returned for each limit is kept, so a call
// for an instant inside it is two atomic loads and no time-zone
// arithmetic; Periods allocates only when now leaves that period. Stores
// count a calendar limit with algo.ApplyCalendar over what it returns.
func (p *Policy) Periods(i int, now int64) algo.Periods {
	c := &p.periods[i&(MaxLimits-1)]
	if ps := c.Load(); ps != nil && ps.Contains(now) {
		return *ps
	}
	return p.newPeriods(c, i, now)
}

// LastPeriods returns the periods Periods last returned for limit i, and
// false when it has returned none: what a decision on the policy counted
// in most recently, whatever its key (headers that show a calendar
// period's length read it).
func (p *Policy) LastPeriods(i int) (algo.Periods, bool) {
	if ps := p.periods[i&(MaxLimits-1)].Load(); ps != nil {
		return *ps, true
	}
	return algo.Periods{}, false
}

// newPeriods computes the periods of limit i holding now and keeps them
// in c; Periods, the load and compare, inlines into the stores.
func (p *Policy) newPeriods(c *atomic.Pointer[algo.Periods], i int, now int64) algo.Periods {
	ps := p.Limits[i].Calendar.Periods(now, p.Location)
	c.Store(&ps)
	return ps
}

// Calendar reports whether the policy's limits count per calendar period.
func (p *Policy) Calendar() bool { return len(p.Limits) > 0 && p.Limits[0].Calendar != 0 }

// Fingerprint is a 64-bit digest (FNV-1a) of the policy's terms: its name,
// algorithm and every limit's count, period and burst, in order (and, for
// calendar limits, the time zone's name); the same in every process. It
// changes whenever the terms do, so a store keys by it what must not
// outlive them: an answer it caches (a denial), work it precomputes for
// the terms. Counters are keyed by CounterID instead.
func (p *Policy) Fingerprint() uint64 {
	if f := p.fingerprint.Load(); f != 0 {
		return f
	}
	return p.makeFingerprint()
}

// makeFingerprint computes the fingerprint and keeps it; Fingerprint, the
// one load it costs once kept, inlines into the stores' hot paths.
func (p *Policy) makeFingerprint() uint64 {
	h := fnv.New64a()
	b := append([]byte(p.Name), 0, byte(p.Algorithm))
	for _, l := range p.Limits {
		b = binary.LittleEndian.AppendUint64(b, uint64(l.Count))
		b = binary.LittleEndian.AppendUint64(b, uint64(l.Period))
		b = binary.LittleEndian.AppendUint64(b, uint64(l.Burst))
	}
	if p.Calendar() {
		// Calendar periods (their nominal lengths tell which), and the
		// zone whose midnights start them.
		b = append(append(b, 0, 'c'), zoneName(p.Location)...)
	}
	h.Write(b)
	f := max(h.Sum64(), 1)
	p.fingerprint.Store(f)
	return f
}

// zoneName is the name of loc, "UTC" for nil.
func zoneName(loc *time.Location) string {
	if loc == nil {
		return time.UTC.String()
	}
	return loc.String()
}

// CounterID identifies the counter of p.Limits[i], for any key: a 64-bit
// digest (FNV-1a) of the policy's name, its algorithm and the limit's
// period (for a calendar limit, its calendar period and the policy's time
// zone), never 0, the same in every process. Limits of two policies with
// the same CounterID share their counters, whatever their counts, bursts
// and order; a store keys each limit's counter by the key and
// CounterID(i).
func (p *Policy) CounterID(i int) uint64 {
	if p.counted.Load() == 0 {
		p.makeCounterIDs()
	}
	return p.counters[i]
}

// makeCounterIDs computes the identity of every limit's counter and keeps
// them; CounterID, two loads once kept, inlines into the stores' hot
// paths.
func (p *Policy) makeCounterIDs() {
	var ids [MaxLimits]uint64
	for i, l := range p.Limits[:min(len(p.Limits), MaxLimits)] {
		h := fnv.New64a()
		b := append([]byte(p.Name), 0, byte(p.Algorithm))
		b = binary.LittleEndian.AppendUint64(b, uint64(l.Period))
		if l.Calendar != 0 {
			// A calendar period, and the zone whose midnights start it.
			b = append(append(b, 'c', byte(l.Calendar)), zoneName(p.Location)...)
		}
		h.Write(b)
		ids[i] = max(h.Sum64(), 1)
	}
	p.once.Do(func() {
		p.counters = ids
		p.counted.Store(1)
	})
}

// Validate reports whether p can be counted: 1 to MaxLimits valid limits
// of distinct periods, and calendar limits only with FixedWindow, all of
// a policy's limits or none, and a Location only with them.
func (p *Policy) Validate() error {
	if p.Name == "" {
		return errors.New("policy has no name")
	}
	if len(p.Limits) == 0 || len(p.Limits) > MaxLimits {
		return fmt.Errorf("policy %q: %d limits, want 1 to %d", p.Name, len(p.Limits), MaxLimits)
	}
	if p.Algorithm > algo.GCRA {
		return fmt.Errorf("policy %q: unknown %v", p.Name, p.Algorithm)
	}
	cal := p.Calendar()
	switch {
	case cal && p.Algorithm != algo.FixedWindow:
		return fmt.Errorf("policy %q: calendar limits count with fixed_window, not %v", p.Name, p.Algorithm)
	case !cal && p.Location != nil:
		return fmt.Errorf("policy %q: time zone %s applies to calendar limits only", p.Name, p.Location)
	}
	for i, l := range p.Limits {
		if err := l.Validate(); err != nil {
			return fmt.Errorf("policy %q: %w", p.Name, err)
		}
		if (l.Calendar != 0) != cal {
			return fmt.Errorf("policy %q: %s and %s: a policy's limits are all calendar periods or none", p.Name, p.Limits[0], l)
		}
		for _, m := range p.Limits[:i] {
			if m.Period == l.Period {
				return fmt.Errorf("policy %q: two limits per %v (%s and %s)", p.Name, l.Period, m, l)
			}
		}
	}
	return nil
}

// Capacity is the largest cost one request can be admitted with: the
// smallest capacity of the policy's limits.
func (p *Policy) Capacity() int64 {
	c := int64(algo.MaxCount)
	for _, l := range p.Limits {
		c = min(c, l.Capacity(p.Algorithm))
	}
	return c
}

// LimitState is the state of one limit after a decision.
type LimitState struct {
	Remaining  int64
	ResetAfter time.Duration
}

// Result is a store's answer. A denial is a Result with Allowed false, never
// an error.
type Result struct {
	Allowed bool
	// Limit is the limit that decided: when denied, the denying limit with
	// the longest wait; when allowed, the one with the fewest units left.
	// Remaining and ResetAfter are that limit's.
	Limit      algo.Limit
	Remaining  int64
	ResetAfter time.Duration
	// RetryAfter is, when denied, how long until the same request would be
	// admitted (the longest wait over the denying limits). Zero when allowed.
	RetryAfter time.Duration
	// Limits holds every limit's state, in policy order.
	Limits [MaxLimits]LimitState
}

// ErrBadPolicy is returned by stores for a policy with no limits or more
// than MaxLimits (see Policy.Validate).
var ErrBadPolicy = errors.New("rate-limit policy needs 1 to 4 limits")

// Store keeps counters. Implementations must be safe for concurrent use, and
// must pass the conformance suite in package storetest.
type Store interface {
	// Take evaluates a request of the given cost for key under policy p and,
	// when every limit admits it, consumes cost from each. A denied request
	// consumes nothing. An error means the store failed, not a denial.
	// ctx is the request's; when a call fails because the request was
	// cancelled, the limiter calls again with a context that is not
	// cancelled with the request and ends after a second.
	Take(ctx context.Context, key string, p *Policy, cost int64) (Result, error)
	// Peek answers what Take would for the same call at this instant,
	// consuming nothing and creating no key: the limiter asks it before
	// the handler runs for a rule that counts by outcome (see
	// core.RuleSpec.Count), and takes only once the response status is known.
	// A denial it answers has the RetryAfter Take's would have. Its
	// errors and contexts are Take's.
	Peek(ctx context.Context, key string, p *Policy, cost int64) (Result, error)
	// Reset forgets the counters of key under policy p. cleared reports
	// whether any of them was live: it held the cost of an admitted
	// request that time had not yet given back (a fixed window that has
	// not ended, a sliding window's counts that still weigh, a token
	// bucket or GCRA not yet refilled). It is false for a key never
	// counted (or asked only at cost 0, or only denied), already reset,
	// or whose counters time has brought back to their initial state:
	// a Take after a Reset finds the full quota either way. With an
	// error, cleared is false and the counters may or may not be gone.
	Reset(ctx context.Context, key string, p *Policy) (cleared bool, err error)
}

// SetOutcome makes r the Result of a one-limit policy whose limit l gave
// outcome o. It fills r in place: a Result is large to copy.
func (r *Result) SetOutcome(l algo.Limit, o *algo.Outcome) {
	r.Allowed = o.Allowed
	r.Limit = l
	r.Remaining = o.Remaining
	r.ResetAfter = time.Duration(o.ResetAfter)
	r.RetryAfter = time.Duration(o.RetryAfter)
	r.Limits[0] = LimitState{Remaining: o.Remaining, ResetAfter: r.ResetAfter}
}

// Evaluate runs one decision at instant now over the per-limit states of one
// key (states[i] belongs to p.Limits[i]). It evaluates every limit and, when
// all admit, replaces states[i] with the new states and sets expireAt[i] to
// the instant from which each may be dropped. When any limit denies, the
// request consumes nothing: states[i] and expireAt[i] are then each
// limit's state as it stands at now, the state given (or one equal to it
// from now on) unless it was kept under other terms of the same counter
// (see algo.Apply). Either way a store writes back the states of the
// counters it holds, and creates a counter only for a request admitted at
// a cost above zero.
// Stores that keep algo.State values themselves (package memstore) use it
// so that every store combines limits the same way.
//
// A policy with no limits, or more than MaxLimits, admits nothing.
func Evaluate(p *Policy, states *[MaxLimits]algo.State, expireAt *[MaxLimits]int64, now, cost int64) Result {
	if len(p.Limits) == 0 || len(p.Limits) > MaxLimits {
		return Result{}
	}
	var (
		next    [MaxLimits]algo.State
		out     [MaxLimits]algo.Outcome
		allowed = true
	)
	for i := range p.Limits {
		next[i] = states[i]
		p.apply(i, &next[i], now, cost, &out[i])
		allowed = allowed && out[i].Allowed
	}
	if !allowed {
		// Denied: nothing was consumed, so the limits that would have
		// admitted report their state as it stands.
		for i := range p.Limits {
			if out[i].Allowed {
				var o algo.Outcome
				next[i] = states[i]
				p.apply(i, &next[i], now, 0, &o)
				out[i].Remaining, out[i].ResetAfter, out[i].ExpireAt = o.Remaining, o.ResetAfter, o.ExpireAt
			}
		}
	}
	*states = next
	for i := range p.Limits {
		expireAt[i] = out[i].ExpireAt
	}
	return Combine(p, &out)
}

// apply evaluates limit i of p on state s: algo.Apply, or for a calendar
// limit algo.ApplyCalendar over the periods holding now.
func (p *Policy) apply(i int, s *algo.State, now, cost int64, o *algo.Outcome) {
	l := &p.Limits[i]
	if l.Calendar != 0 {
		ps := p.Periods(i, now)
		algo.ApplyCalendar(s, l, &ps, now, cost, o)
		return
	}
	algo.Apply(p.Algorithm, s, l, now, cost, o)
}

// Combine makes the Result of a decision under p from the outcome of each
// limit (out[i] belongs to p.Limits[i]). out[i].Allowed tells whether limit
// i admitted the request. When some limit denied, the request consumed
// nothing, and the outcomes of the limits that admitted must describe their
// state without the cost (a peek, as Evaluate does). Stores that evaluate
// limits elsewhere (a Redis script) use it to report exactly what Evaluate
// would.
//
// The deciding limit is, when denied, the denying limit with the longest
// RetryAfter (the first on a tie); when allowed, the limit with the fewest
// units left (the first on a tie).
func Combine(p *Policy, out *[MaxLimits]algo.Outcome) Result {
	n := min(len(p.Limits), MaxLimits)
	if n == 0 {
		return Result{}
	}
	r := Result{Allowed: true, Remaining: -1}
	for i, l := range p.Limits[:n] {
		o := &out[i]
		r.Limits[i] = LimitState{Remaining: o.Remaining, ResetAfter: time.Duration(o.ResetAfter)}
		switch {
		case !o.Allowed:
			if r.Allowed || time.Duration(o.RetryAfter) > r.RetryAfter {
				r.Limit, r.Remaining, r.ResetAfter = l, o.Remaining, time.Duration(o.ResetAfter)
				r.RetryAfter = time.Duration(o.RetryAfter)
			}
			r.Allowed = false
		case r.Allowed && (r.Remaining < 0 || o.Remaining < r.Remaining):
			r.Limit, r.Remaining, r.ResetAfter = l, o.Remaining, time.Duration(o.ResetAfter)
		}
	}
	return r
}
