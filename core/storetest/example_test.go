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

// mapStore is a minimal store.Store: one mutex over a map of each key's
// per-limit states, evaluated with store.Evaluate.
type mapStore struct {
	clock store.Clock

	mu       sync.Mutex
	counters map[counterKey]counter
}

// counterKey names the counters of a key under a policy: its name and its
// terms (Fingerprint), never the *Policy, which a reload replaces.
type counterKey struct {
	key, policy string
	fingerprint uint64
}

type counter struct {
	states   [store.MaxLimits]algo.State
	expireAt [store.MaxLimits]int64
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
	k := counterKey{key, p.Name, p.Fingerprint()}
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.counters[k] // a copy; the zero counter is a fresh one
	r := store.Evaluate(p, &c.states, &c.expireAt, s.clock.Now(), cost)
	if write && r.Allowed && cost > 0 {
		s.counters[k] = c
	}
	return r, nil
}

func (s *mapStore) Reset(_ context.Context, key string, p *store.Policy) (bool, error) {
	k := counterKey{key, p.Name, p.Fingerprint()}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counters[k]
	if !ok {
		return false, nil
	}
	delete(s.counters, k)
	now := s.clock.Now()
	for i := range p.Limits {
		if c.expireAt[i] > now {
			return true, nil // it held the cost of an admitted request
		}
	}
	return false, nil
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
