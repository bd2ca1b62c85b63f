package memstore

import (
	"context"
	"math"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

var _ store.ConcurrencyStore = (*Store)(nil)

// The requests of a key in flight under a store.Concurrency are one
// counter like any other, in a cell of its own (its hash is the key's
// combined with the Concurrency's fingerprint, which no policy's
// matches): the state's first word is the number of slots held. While
// slots are held its meta word never expires, and its level is how much
// of the limit they take (all of it: atLimit, the last to be evicted);
// once none is, it is expired, so eviction and Sweep drop it first. A
// store in this process needs no lease: its slots go with the process.

// Acquire implements store.ConcurrencyStore: it takes a slot when fewer
// than c.Limit of key's are held. The lease it returns is 0: the store
// counts slots, it does not name them. On an existing key it takes no
// shard lock and allocates nothing, as Take. It fails only for a
// Concurrency that does not validate (store.ErrBadConcurrency).
func (s *Store) Acquire(_ context.Context, key string, c *store.Concurrency) (lease uint64, ok bool, _ error) {
	if c.Limit < 1 || c.Name == "" {
		return 0, false, c.Validate()
	}
	now := s.clock.Now()
	h := s.slotHash(key, c)
	sh := s.shard(h)
	cl, m := s.lockCounter(*sh.tab.Load(), h)
	if cl == nil {
		sh.mu.Lock()
		if _, cl = s.lookup(*sh.tab.Load(), h); cl == nil {
			s.insert(sh, h, slotsMeta(1, c.Limit), algo.State{A: 1}, now)
			sh.mu.Unlock()
			return 0, true, nil
		}
		m, _ = lockCell(cl) // under the mutex, a cell the index shows is not freed
		sh.mu.Unlock()
	}
	if n := cl.st.A; n < c.Limit {
		cl.st.A, m, ok = n+1, slotsMeta(n+1, c.Limit), true
	}
	unlockCell(cl, m)
	return 0, ok, nil
}

// Release implements store.ConcurrencyStore: it gives back one of key's
// slots under c, never counting below zero (a counter eviction dropped
// has none to give back). lease is not read. It never fails.
func (s *Store) Release(_ context.Context, key string, c *store.Concurrency, _ uint64) error {
	h := s.slotHash(key, c)
	sh := s.shard(h)
	cl, m := s.lockCounter(*sh.tab.Load(), h)
	if cl == nil {
		sh.mu.Lock()
		if _, cl = s.lookup(*sh.tab.Load(), h); cl == nil {
			sh.mu.Unlock()
			return nil
		}
		m, _ = lockCell(cl)
		sh.mu.Unlock()
	}
	if n := cl.st.A; n > 0 {
		cl.st.A, m = n-1, slotsMeta(n-1, max(c.Limit, 1))
	}
	unlockCell(cl, m)
	return nil
}

// InFlight returns the slots of key held under c: what Acquire took and
// Release has not given back.
func (s *Store) InFlight(key string, c *store.Concurrency) int64 {
	h := s.slotHash(key, c)
	sh := s.shard(h)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	_, cl := s.lookup(*sh.tab.Load(), h)
	if cl == nil {
		return 0
	}
	m, _ := lockCell(cl)
	n := cl.st.A
	unlockCell(cl, m)
	return n
}

// slotHash identifies the slots of key under c.
func (s *Store) slotHash(key string, c *store.Concurrency) uint64 {
	return max(s.keyHash(key)^c.Fingerprint(), 1)
}

// slotsMeta is the meta word of a counter of n slots held out of limit:
// never expiring, at the level they take of the limit, while n > 0; else
// expired.
func slotsMeta(n, limit int64) uint64 {
	if n <= 0 {
		return pack(0, 0)
	}
	return pack(math.MaxInt64, level(limit, limit-n))
}
