package memstore

import (
	"context"
	"fmt"

	"github.com/rlkit/rlkit/core/store"
)

var _ store.Charger = (*Store)(nil)

// Charge implements store.Charger: it consumes cost from every limit of p
// for key, into debt when the limits have no room (store.EvaluateCharge),
// and answers what Peek at cost 1 would. A cost ≤ 0 creates no counter.
// It fails only for a policy with no limits or more than store.MaxLimits
// (store.ErrBadPolicy), and allocates nothing for an existing key.
func (s *Store) Charge(_ context.Context, key string, p *store.Policy, cost int64) (r store.Result, _ error) {
	if n := len(p.Limits); n == 0 || n > store.MaxLimits {
		return r, fmt.Errorf("memstore: policy %q has %d limits: %w", p.Name, n, store.ErrBadPolicy)
	}
	s.ChargeAt(&r, key, p, cost, s.clock.Now())
	return r, nil
}

// ChargeAt is Charge at the instant now (Unix nanoseconds); it fills r in
// place. A policy with no limits or more than store.MaxLimits charges
// nothing and is answered with the zero Result.
func (s *Store) ChargeAt(r *store.Result, key string, p *store.Policy, cost, now int64) {
	if n := len(p.Limits); n == 0 || n > store.MaxLimits {
		*r = store.Result{}
		return
	}
	// Under the shard's mutex, as a decision over several limits: a
	// charge is rare (once per request served, under the rules that
	// charge by response), and this way one code path serves every policy.
	var c counters
	s.lockCounters(&c, key, p)
	*r = store.EvaluateCharge(p, &c.states, &c.exp, now, cost)
	charged := cost > 0
	if charged {
		for i, l := range p.Limits {
			// The level of the state after the charge: at the limit
			// while it owes (a peek of cost 1 finds nothing left).
			c.keep(i, level(l.Capacity(p.Algorithm), r.Limits[i].Remaining+b2i(r.Allowed)))
		}
	}
	s.unlockCounters(&c, p, now)
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
