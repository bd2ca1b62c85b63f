package rlmetrics

import (
	"sync"
	"sync/atomic"

	"github.com/rlkit/rlkit/core"
)

// Rules is the Set of rule names a metrics package keeps (MaxRules, then
// OtherRule), which also recognises the rules of the watched Limiter's
// configuration by identity: core passes a rule's own Name in every event,
// so Rules pins the names of the configuration's rules (Set.Pin) and finds
// them without hashing. A name it does not recognise is looked up in the
// Set, and makes Rules check whether the configuration was swapped (a
// reload) and pin the new one. Safe for concurrent use.
type Rules[V any] struct {
	*Set[V]
	w   *Watched
	cfg atomic.Pointer[core.Config] // the configuration pinned
	mu  sync.Mutex                  // serializes pinning
}

// NewRules returns the Rules of the Limiter w watches, whose V are made
// by make.
func NewRules[V any](w *Watched, make func(rule string) V) *Rules[V] {
	return &Rules[V]{Set: NewSet(MaxRules, OtherRule, make), w: w}
}

// Get returns the V of rule, made when new.
func (r *Rules[V]) Get(rule string) V {
	if v, ok := r.Pinned(rule); ok {
		return v
	}
	v := r.Set.Get(rule)
	if cfg := r.w.Config(); cfg != nil && cfg != r.cfg.Load() {
		r.pin(cfg)
	}
	return v
}

// pin pins the rules of cfg, unless another call just did.
func (r *Rules[V]) pin(cfg *core.Config) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if cfg == r.cfg.Load() {
		return
	}
	names := make([]string, 0, len(cfg.Rules())+1)
	if d := cfg.Default(); d != nil {
		names = append(names, d.Name)
	}
	for _, rule := range cfg.Rules() {
		names = append(names, rule.Name)
	}
	r.Pin(names)
	r.cfg.Store(cfg)
}
