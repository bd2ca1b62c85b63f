package memstore

import (
	"context"
	"fmt"
	"slices"

	"github.com/rlkit/rlkit/core/algo"
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
	var (
		states [store.MaxLimits]algo.State
		exp    [store.MaxLimits]int64
		hs     [store.MaxLimits]uint64
		cs     [store.MaxLimits]*cell
		metas  [store.MaxLimits]uint64
		dup    [store.MaxLimits]bool
	)
	// Under the shard's mutex, as a decision over several limits: a
	// charge is rare (once per request served, under the rules that
	// charge by response), and this way one code path serves every policy.
	k := s.keyHash(key)
	sh := s.shard(k)
	sh.mu.Lock()
	t := *sh.tab.Load()
	for i := range p.Limits {
		hs[i] = counterHash(k, p, i)
		if _, cs[i] = s.lookup(t, hs[i]); cs[i] != nil {
			if dup[i] = slices.Contains(cs[:i], cs[i]); !dup[i] {
				metas[i], _ = lockCell(cs[i])
			}
			states[i] = cs[i].st
		}
	}
	*r = store.EvaluateCharge(p, &states, &exp, now, cost)
	charged := cost > 0
	for i, l := range p.Limits {
		if charged {
			// The level of the state after the charge: at the limit
			// while it owes (a peek of cost 1 finds nothing left).
			metas[i] = pack(exp[i], level(l.Capacity(p.Algorithm), r.Limits[i].Remaining+b2i(r.Allowed)))
			if cs[i] != nil {
				cs[i].st = states[i]
			}
		}
	}
	for i := range p.Limits {
		if cs[i] != nil && !dup[i] {
			unlockCell(cs[i], metas[i])
		}
	}
	if charged {
		for i := range p.Limits {
			if cs[i] == nil {
				s.insert(sh, hs[i], metas[i], states[i], now)
			}
		}
	}
	sh.mu.Unlock()
}

// b2i is 1 for true, 0 for false.
func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}
