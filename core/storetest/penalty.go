package storetest

import (
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// penaltyBan checks what a rule's penalty (core.PenaltySpec) relies on:
// under a GCRA policy of 1 per period, burst 1 (the ban), a Take at cost
// 0 consumes nothing and leaves nothing to reset; it reports Remaining 1
// when the unit is free, and Remaining 0, with ResetAfter the time until
// the unit is free again, while it is taken.
func penaltyBan(e *env) {
	p := &store.Policy{Name: e.prefix + "rule!ban", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 1, Period: time.Hour, Burst: 1}}}
	k := e.key("banned")
	e.expect(k, p, 0, true, 1)
	e.reset(k, p, false) // the check created nothing live
	r := e.expect(k, p, 1, true, 0)
	e.duration("ResetAfter of the ban", r.ResetAfter, time.Hour)
	r = e.expect(k, p, 0, true, 0)
	e.duration("ResetAfter of a check during the ban", r.ResetAfter, time.Hour)
	e.expect(k, p, 1, false, 0)
	e.reset(k, p, true)
	e.expect(k, p, 0, true, 1)
}
