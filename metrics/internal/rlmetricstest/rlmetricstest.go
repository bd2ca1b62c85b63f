// Package rlmetricstest holds the fakes the tests of the metrics packages
// share: a store whose figures a test sets, and watched sources with and
// without reload counts.
package rlmetricstest

import (
	"sync"

	"github.com/rlkit/rlkit/core"
)

// StatsStore is a core.StatsStore whose Stats a test sets.
type StatsStore struct {
	core.Store
	mu    sync.Mutex
	stats core.StoreStats
}

// NewStatsStore returns a StatsStore over store reporting stats.
func NewStatsStore(store core.Store, stats core.StoreStats) *StatsStore {
	return &StatsStore{Store: store, stats: stats}
}

// Stats returns the figures set last.
func (s *StatsStore) Stats() core.StoreStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Set sets the figures Stats returns.
func (s *StatsStore) Set(st core.StoreStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = st
}

// Source is a watched source with reload counts.
type Source struct {
	S core.Store
	R core.ReloadStats
}

func (s *Source) Store() core.Store             { return s.S }
func (s *Source) ReloadStats() core.ReloadStats { return s.R }

// StoreOnly is a watched source without reload counts.
type StoreOnly struct{ S core.Store }

func (s StoreOnly) Store() core.Store { return s.S }

// NoStats hides any Stats method of its store.
type NoStats struct{ core.Store }
