package rlmetricstest

import (
	"sync"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
)

// StatsStore is a store.StatsStore whose Stats a test sets.
type StatsStore struct {
	store.Store
	mu    sync.Mutex
	stats store.Stats
}

// NewStatsStore returns a StatsStore over store reporting stats.
func NewStatsStore(store store.Store, stats store.Stats) *StatsStore {
	return &StatsStore{Store: store, stats: stats}
}

// Stats returns the figures set last.
func (s *StatsStore) Stats() store.Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Set sets the figures Stats returns.
func (s *StatsStore) Set(st store.Stats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = st
}

// Source is a watched source with reload counts.
type Source struct {
	S store.Store
	R core.ReloadStats
}

func (s *Source) Store() store.Store            { return s.S }
func (s *Source) ReloadStats() core.ReloadStats { return s.R }

// StoreOnly is a watched source without reload counts.
type StoreOnly struct{ S store.Store }

func (s StoreOnly) Store() store.Store { return s.S }

// NoStats hides any Stats method of its store.
type NoStats struct{ store.Store }
