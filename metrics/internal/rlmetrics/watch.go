package rlmetrics

import (
	"sync/atomic"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
)

// A Source is what a metrics package's Watch reads when metrics are
// collected; *core.Limiter is one. Its store's figures are reported when
// the store is a store.StatsStore, and its reload counts when it has a
// method ReloadStats() core.ReloadStats.
type Source interface {
	Store() store.Store
}

// reloadSource is a Source that counts configuration reloads.
type reloadSource interface {
	ReloadStats() core.ReloadStats
}

// configSource is a Source that has a configuration (a Limiter).
type configSource interface {
	Config() *core.Config
}

// Watched holds the Source a metrics package watches. The zero value
// watches nothing; it is safe for concurrent use.
type Watched struct {
	p atomic.Pointer[watched]
}

type watched struct {
	src Source
	cfg configSource // src, when it has a configuration
}

// Watch replaces the Source watched; nil watches nothing.
func (w *Watched) Watch(src Source) {
	cs, _ := src.(configSource)
	w.p.Store(&watched{src: src, cfg: cs})
}

// Config returns the watched Source's configuration now; nil when it has
// none.
func (w *Watched) Config() *core.Config {
	if s := w.p.Load(); s != nil && s.cfg != nil {
		return s.cfg.Config()
	}
	return nil
}

// Snapshot is what a Source says at one moment.
type Snapshot struct {
	Store     store.Stats
	HasStore  bool // the store is a store.StatsStore
	Reload    core.ReloadStats
	HasReload bool // the source counts reloads
}

// Read returns what the watched Source says now; the zero Snapshot when
// none is watched.
func (w *Watched) Read() Snapshot {
	var s Snapshot
	ws := w.p.Load()
	if ws == nil || ws.src == nil {
		return s
	}
	if ss, ok := ws.src.Store().(store.StatsStore); ok {
		s.Store, s.HasStore = ss.Stats(), true
	}
	if rs, ok := ws.src.(reloadSource); ok {
		s.Reload, s.HasReload = rs.ReloadStats(), true
	}
	return s
}
