package redisstore

import (
	"context"
	_ "embed"
	"fmt"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

var _ store.Charger = (*Store)(nil)

var (
	//go:embed lua/charge_driver.lua
	chargeDriver string
	//go:embed lua/fixed_charge.lua
	fixedCharge string
)

// charges holds the charge script of each algorithm: its decide (a dry
// run of cost 1 gives the answer) and its charge driver.
var charges = [...]*script{
	algo.FixedWindow:   newScript(fixedLua + fixedCharge),
	algo.SlidingWindow: newScript(decider[algo.SlidingWindow] + chargeDriver),
	algo.TokenBucket:   newScript(decider[algo.TokenBucket] + chargeDriver),
	algo.GCRA:          newScript(decider[algo.GCRA] + chargeDriver),
}

// Charge implements store.Charger: one script call, on the server's
// clock, consumes cost from every limit of p for key (into debt, at most
// each limit's count past it) and answers what Peek at cost 1 would. Its
// errors are Take's, and store.ErrBadPolicy for a policy whose debt
// cannot be counted exactly in Redis (products above 2^52 in the time
// unit of its decisions: some limits of tens of millions per period).
func (s *Store) Charge(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	var r store.Result
	if s.closed.Load() {
		return r, ErrClosed
	}
	pl, err := s.plan(p)
	if err != nil {
		return r, err
	}
	if pl.chargeErr != nil {
		return r, pl.chargeErr
	}
	cost = min(max(cost, 0), algo.MaxCount)
	sc := charges[pl.algorithm]
	k := redisKey(s.prefix, key, pl.rule)
	args := make([]any, 0, 5+len(pl.chargeTail))
	args = append(args, evalshaCmd, sc.sha, oneKey, k, cost)
	args = append(args, pl.chargeTail...)
	v, err := s.call(ctx, k, sc, args)
	if err != nil {
		return r, err
	}
	if err := parse(p, pl, v, 1, &r); err != nil {
		return store.Result{}, err
	}
	return r, nil
}

// chargePlan returns the charge script's ARGV after the cost for policy p,
// whose plan pl is computed: a fixed window's is its decision's; the
// other algorithms' add to each limit's terms its count and capacity
// widened by the debt's bound (algo.DebtLimit), in the limit's time unit,
// which must keep the widened terms' products exact too.
func chargePlan(p *store.Policy, pl *plan) ([]any, error) {
	if p.Algorithm == algo.FixedWindow {
		return pl.tail, nil
	}
	out := []any{int64(len(p.Limits))}
	for i, l := range p.Limits {
		j := 1 + 4*i
		period, u := pl.tail[j+1].(int64), pl.tail[j+3].(int64)
		w := algo.DebtLimit(p.Algorithm, l)
		wc := w.Capacity(p.Algorithm)
		if period > maxExact/(2*wc+w.Count+1) {
			return nil, fmt.Errorf("redisstore: policy %q: limit %v: a debt of up to its count past it cannot be counted exactly in Redis in its time unit (%dµs): %w", p.Name, l, u, store.ErrBadPolicy)
		}
		out = append(out, pl.tail[j:j+4]...)
		out = append(out, w.Count, wc)
	}
	return append(out, pl.tail[1+4*len(p.Limits):]...), nil // the counter identities of limits 2 to n
}
