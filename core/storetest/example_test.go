package storetest_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/core/storetest"
)

// mapStore is a minimal store.Store: one mutex over a map of each limit's
// counter, evaluated with store.Evaluate.
type mapStore struct {
	clock store.Clock

	mu       sync.Mutex
	counters map[counterKey]counter
}

// counterKey names the counter of one limit of a policy for one key: the
// limit's identity (CounterID: the policy's name and algorithm, the
// limit's period), never the *Policy, which a reload replaces, nor its
// count or burst, which a reload may change while the counter counts on.
type counterKey struct {
	key string
	id  uint64
}

type counter struct {
	state    algo.State
	expireAt int64
}

func newMapStore(clock store.Clock) *mapStore {
	return &mapStore{clock: clock, counters: make(map[counterKey]counter)}
}

func (s *mapStore) Take(_ context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.decide(key, p, cost, true)
}

func (s *mapStore) Peek(_ context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.decide(key, p, cost, false)
}

func (s *mapStore) decide(key string, p *store.Policy, cost int64, write bool) (store.Result, error) {
	if n := len(p.Limits); n == 0 || n > store.MaxLimits {
		return store.Result{}, fmt.Errorf("mapstore: policy %q has %d limits: %w", p.Name, n, store.ErrBadPolicy)
	}
	var (
		states   [store.MaxLimits]algo.State // the zero state is a fresh counter
		expireAt [store.MaxLimits]int64
		held     [store.MaxLimits]bool
	)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range p.Limits {
		c, ok := s.counters[counterKey{key, p.CounterID(i)}]
		states[i], expireAt[i], held[i] = c.state, c.expireAt, ok
	}
	r := store.Evaluate(p, &states, &expireAt, s.clock.Now(), cost)
	if write {
		// The counters held take their states even when denied (one kept
		// under other terms is rewritten); an admitted cost creates the
		// others.
		for i := range p.Limits {
			if held[i] || r.Allowed && cost > 0 {
				s.counters[counterKey{key, p.CounterID(i)}] = counter{states[i], expireAt[i]}
			}
		}
	}
	return r, nil
}

func (s *mapStore) Reset(_ context.Context, key string, p *store.Policy) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now, cleared := s.clock.Now(), false
	for i := range p.Limits {
		k := counterKey{key, p.CounterID(i)}
		if c, ok := s.counters[k]; ok {
			delete(s.counters, k)
			cleared = cleared || c.expireAt > now // it held the cost of an admitted request
		}
	}
	return cleared, nil
}

// conformance is the store's test. In the store's own package it is a
// test function, func TestConformance(t *testing.T), which go test runs;
// the manual clock lets the suite check every duration exactly, without
// sleeping.
func conformance(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	storetest.Run(t, func() store.Store { return newMapStore(clock) }, storetest.WithClock(clock))
}

// This example is a whole store and the test that runs the suite against
// it.
func ExampleRun() {
	var _ func(*testing.T) = conformance
}
