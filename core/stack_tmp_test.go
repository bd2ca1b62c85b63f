package core

// Temporary until memstore.TakeAll lands.
import (
	"context"

	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

type naiveMulti struct{ *memstore.Store }

func (m naiveMulti) TakeAll(ctx context.Context, takes []store.Take, results []store.Result) (bool, error) {
	all := true
	for i, t := range takes {
		results[i], _ = m.Peek(ctx, t.Key, t.Policy, t.Cost)
		all = all && results[i].Allowed
	}
	if !all {
		for i, t := range takes {
			if results[i].Allowed {
				results[i], _ = m.Peek(ctx, t.Key, t.Policy, 0)
			}
		}
		return false, nil
	}
	for i, t := range takes {
		results[i], _ = m.Take(ctx, t.Key, t.Policy, t.Cost)
	}
	return true, nil
}
