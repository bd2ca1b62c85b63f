package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math/bits"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// DefaultMaxKeys is the default bound on the number of counters.
const DefaultMaxKeys = 1 << 20

// Option configures a Store.
type Option func(*Store)

// WithClock sets the clock Take reads. Default: store.SystemClock.
func WithClock(c store.Clock) Option { return func(s *Store) { s.clock = c } }

// WithMaxKeys bounds the number of counters (one per key, rule and limit).
// The bound is split evenly over the shards (fewer shards are used when
// the bound is small), so a skewed load may evict before the store as a
// whole is full. Default: DefaultMaxKeys (1,048,576); at most 2^32 − 2.
// Memory grows with the counters held, not with the bound.
func WithMaxKeys(n int) Option { return func(s *Store) { s.maxKeys = max(n, 1) } }

// WithShards sets the number of shards, rounded up to a power of two.
// Default: 64.
func WithShards(n int) Option { return func(s *Store) { s.nshards = max(n, 1) } }

// WithSweepInterval starts a goroutine that calls Sweep every d: it drops
// expired counters, shrinks indexes left mostly empty and gives back cells
// left mostly unused, so memory comes back after a burst of keys. Close
// stops it. Default: 0, no sweeper (memory stays bounded by MaxKeys either
// way).
func WithSweepInterval(d time.Duration) Option { return func(s *Store) { s.sweepEvery = d } }

// Store is an in-memory store.Store. It is safe for concurrent use.
type Store struct {
	seed       maphash.Seed
	seed64     uintptr // a random seed for memhash, on 64-bit platforms
	clock      store.Clock
	maxKeys    int
	nshards    int
	sweepEvery time.Duration
	shift      uint
	shards     []shard

	// The counters themselves live in cells, handed out in the order
	// counters are created (see cell): cell i is in chunk i>>chunkBits,
	// which is in block i>>(chunkBits+blockBits) (see cellOf). Blocks and
	// chunks are made when their first cell is handed out, so memory grows
	// with the counters held whatever MaxKeys says. next is the number of
	// cells handed out so far: it only grows under some shard's mutex, and
	// falls (see compact) under all of them; it has a cache line of its
	// own, as decisions read the fields above it.
	blocks []atomic.Pointer[block]
	_      [64]byte
	next   atomic.Int64
	_      [56]byte

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var _ store.StatsStore = (*Store)(nil)

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{seed: maphash.MakeSeed(), clock: store.SystemClock, maxKeys: DefaultMaxKeys, nshards: 64}
	s.seed64 = uintptr(maphash.Comparable(s.seed, 0))
	for _, o := range opts {
		o(s)
	}
	// Round the shard count up to a power of two, but keep at least 16 keys
	// per shard, and floor the per-shard cap, so that the store never holds
	// more than maxKeys counters.
	n := 1 << bits.Len(uint(s.nshards-1))
	s.maxKeys = int(min(int64(s.maxKeys), maxCells))
	for n > 1 && n*16 > s.maxKeys {
		n /= 2
	}
	s.shift = uint(64 - bits.Len(uint(n-1)))
	if n == 1 {
		s.shift = 64
	}
	s.shards = make([]shard, n)
	per := max(s.maxKeys/n, 1)
	for i := range s.shards {
		s.shards[i].cap = per
		s.shards[i].setTable(make([]uint64, minSlots))
	}
	s.blocks = make([]atomic.Pointer[block], (int64(n*per)+chunkCells<<blockBits-1)>>(chunkBits+blockBits))
	if s.sweepEvery > 0 {
		s.stop, s.done = make(chan struct{}), make(chan struct{})
		go s.sweeper()
	}
	return s
}

// Close stops the sweeper, if any. The store stays usable. It is safe to
// call more than once.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		if s.stop != nil {
			close(s.stop)
			<-s.done
		}
	})
	return nil
}

// Take implements store.Store. It fails only for a policy with no limits
// or more than store.MaxLimits (store.ErrBadPolicy).
func (s *Store) Take(_ context.Context, key string, p *store.Policy, cost int64) (r store.Result, _ error) {
	if len(p.Limits) == 1 && p.Limits[0].Calendar == 0 {
		s.takeOne(&r, s.keyHash(key), p, cost, s.clock.Now(), true)
		return r, nil
	}
	if n := len(p.Limits); n == 0 || n > store.MaxLimits {
		return r, fmt.Errorf("memstore: policy %q has %d limits: %w", p.Name, n, store.ErrBadPolicy)
	}
	s.TakeAt(&r, key, p, cost, s.clock.Now())
	return r, nil
}

// Peek implements store.Store: the Result Take would return now, with
// nothing consumed and no counter created. It fails as Take does.
func (s *Store) Peek(_ context.Context, key string, p *store.Policy, cost int64) (r store.Result, _ error) {
	if n := len(p.Limits); n == 0 || n > store.MaxLimits {
		return r, fmt.Errorf("memstore: policy %q has %d limits: %w", p.Name, n, store.ErrBadPolicy)
	}
	s.PeekAt(&r, key, p, cost, s.clock.Now())
	return r, nil
}

// Reset implements store.Store: it removes the counters of key under p and
// reports whether any of them had not expired at the store's clock's now
// (an expired one is removed too, and reported as not cleared). It never
// fails.
func (s *Store) Reset(_ context.Context, key string, p *store.Policy) (cleared bool, _ error) {
	now := s.clock.Now()
	k := s.keyHash(key)
	sh := s.shard(k)
	sh.mu.Lock()
	t := *sh.tab.Load()
	for i := range p.Limits {
		if j, c := s.lookup(t, counterHash(k, p, i)); c != nil {
			m, _ := lockCell(c) // wait for a decision in progress
			cleared = cleared || !expired(m, now)
			s.remove(sh, t, j, c)
		}
	}
	sh.mu.Unlock()
	return cleared, nil
}

// Len returns the number of counters held, expired ones not yet dropped
// included.
func (s *Store) Len() int {
	n := 0
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		n += sh.n
		sh.mu.Unlock()
	}
	return n
}

// Stats implements store.StatsStore. Keys is Len: the counters held,
// counting expired ones that no eviction pass or sweep has dropped yet;
// MaxKeys is the bound the shards enforce together (WithMaxKeys rounded
// down to a multiple of the number of shards); Evictions counts the
// counters that eviction dropped before they expired. It takes each
// shard's lock in turn, briefly, and reads two words under it: its cost
// grows with the number of shards (64 by default), never with the number
// of keys.
func (s *Store) Stats() store.Stats {
	st := store.Stats{Store: "memory"}
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		st.Keys += int64(sh.n)
		st.Evictions += sh.evictions
		sh.mu.Unlock()
		st.MaxKeys += int64(sh.cap)
	}
	return st
}

// TakeAt is Take at the instant now (Unix nanoseconds), for callers that
// already read the clock; it fills r in place. It allocates nothing for an
// existing key. A policy with no limits or more than store.MaxLimits is
// denied.
func (s *Store) TakeAt(r *store.Result, key string, p *store.Policy, cost, now int64) {
	s.decide(r, key, p, cost, now, true)
}

// PeekAt is Peek at the instant now: TakeAt that writes nothing. It
// allocates nothing.
func (s *Store) PeekAt(r *store.Result, key string, p *store.Policy, cost, now int64) {
	s.decide(r, key, p, cost, now, false)
}

// decide is TakeAt when write is set, else PeekAt. A policy of one limit
// takes the lock-free path (takeOne; takeCalendar for a calendar limit);
// one of several, takeMany, under the shard's mutex.
func (s *Store) decide(r *store.Result, key string, p *store.Policy, cost, now int64, write bool) {
	if len(p.Limits) == 1 {
		if p.Limits[0].Calendar == 0 {
			s.takeOne(r, s.keyHash(key), p, cost, now, write)
		} else {
			s.takeCalendar(r, key, p, cost, now, write)
		}
		return
	}
	if n := len(p.Limits); n == 0 || n > store.MaxLimits {
		*r = store.Result{}
		return
	}
	*r = s.takeMany(key, p, cost, now, write)
}

// takeOne is decide for the common one-limit policy, for the key of hash
// k (Store.keyHash). On an existing key it
// takes no shard lock (see cell); a key the index read without the mutex
// does not show, or shows in a cell freed since, is decided again under
// the shard's mutex, where the lookup is exact, and inserted when
// admitted.
func (s *Store) takeOne(r *store.Result, k uint64, p *store.Policy, cost, now int64, write bool) {
	l := &p.Limits[0]
	h := counterHash(k, p, 0)
	sh := s.shard(k)
	var o algo.Outcome
	c, m := s.lockCounter(*sh.tab.Load(), h)
	if c == nil {
		sh.mu.Lock()
		if _, c = s.lookup(*sh.tab.Load(), h); c != nil {
			m, _ = lockCell(c) // under the mutex, a cell the index shows is not freed
		} else {
			var st algo.State
			algo.Apply(p.Algorithm, &st, l, now, cost, &o)
			if write && o.Allowed && cost > 0 {
				s.insert(sh, h, pack(o.ExpireAt, level(l.Capacity(p.Algorithm), o.Remaining)), st, now)
			}
			sh.mu.Unlock()
			r.SetOutcome(*l, &o)
			return
		}
		sh.mu.Unlock() // the cell is locked
	}
	if write {
		algo.Apply(p.Algorithm, &c.st, l, now, cost, &o)
		// A token bucket's or GCRA's expiry moves with its terms: a
		// request that consumes nothing under new ones (see algo.Apply)
		// may push it back.
		if o.Allowed && cost > 0 || p.Algorithm >= algo.TokenBucket {
			m = pack(o.ExpireAt, level(l.Capacity(p.Algorithm), o.Remaining))
		}
	} else {
		st := c.st // a copy: a peek leaves the counter as it is
		algo.Apply(p.Algorithm, &st, l, now, cost, &o)
	}
	unlockCell(c, m)
	r.SetOutcome(*l, &o)
}

// takeCalendar is takeOne for a policy of one calendar limit, over the
// periods the policy keeps (store.Policy.Periods: no time-zone arithmetic
// but at a boundary): an existing counter is decided without a shard
// lock; a key the index read without the mutex does not show is decided
// by takeMany, under the mutex, which inserts it when admitted.
func (s *Store) takeCalendar(r *store.Result, key string, p *store.Policy, cost, now int64, write bool) {
	k := s.keyHash(key)
	h := counterHash(k, p, 0)
	c, m := s.lockCounter(*s.shard(k).tab.Load(), h)
	if c == nil {
		*r = s.takeMany(key, p, cost, now, write)
		return
	}
	l := &p.Limits[0]
	ps := p.Periods(0, now)
	st := &c.st
	if !write {
		cp := c.st // a copy: a peek leaves the counter as it is
		st = &cp
	}
	var o algo.Outcome
	algo.ApplyCalendar(st, l, &ps, now, cost, &o)
	if write && o.Allowed && cost > 0 {
		m = pack(o.ExpireAt, level(l.Count, o.Remaining))
	}
	unlockCell(c, m)
	r.SetOutcome(*l, &o)
}

// lockCounter is the lock-free path's lookup: it finds the counter of hash
// h through the index t, read without the shard's mutex, and returns its
// cell, locked, with its meta word (unlocked). It returns nil when t shows
// no counter h, when the cell it shows was freed before it could be
// locked, and when the first entry that matches h's low 32 bits is
// another counter's (two counters of a shard agree on those bits about
// once in 4 billion pairs). The caller then decides under the mutex,
// where lookup is exact.
func (s *Store) lockCounter(t []uint64, h uint64) (*cell, uint64) {
	mask := len(t) - 1
	for i := home(h, mask); ; i = (i + 1) & mask {
		e := atomic.LoadUint64(&t[i])
		if e == 0 {
			return nil, 0
		}
		if uint32(e>>32) != uint32(h) {
			continue
		}
		c := s.cellOf(entryCell(e))
		if c == nil {
			return nil, 0
		}
		m := atomic.LoadUint64(&c.meta)
		if m == 0 || m&lockBit != 0 || !atomic.CompareAndSwapUint64(&c.meta, m, m|lockBit) {
			var ok bool
			if m, ok = lockCellSlow(c); !ok {
				return nil, 0
			}
		}
		if atomic.LoadUint64(&c.h) != h { // another counter's, or freed and filled again since the index showed it
			unlockCell(c, m)
			return nil, 0
		}
		return c, m
	}
}

func (s *Store) takeMany(key string, p *store.Policy, cost, now int64, write bool) store.Result {
	var c counters
	s.lockCounters(&c, key, p)
	r := store.Evaluate(p, &c.states, &c.exp, now, cost) // on copies of the states
	admit := write && r.Allowed && cost > 0
	for i := range p.Limits {
		// A token bucket or GCRA found keeps its state as it stands even
		// when nothing is consumed: one kept under other terms is
		// rewritten (see store.Evaluate), and its expiry moves with them.
		if admit || write && c.cs[i] != nil && p.Algorithm >= algo.TokenBucket {
			c.keep(i, level(p.Limits[i].Capacity(p.Algorithm), r.Limits[i].Remaining))
		}
	}
	s.unlockCounters(&c, p, now)
	return r
}

// counters are the cells of one key's limits under a policy, found and
// locked by lockCounters, with copies of their states, to be written
// back and unlocked by unlockCounters.
type counters struct {
	sh     *shard
	states [store.MaxLimits]algo.State
	exp    [store.MaxLimits]int64
	hs     [store.MaxLimits]uint64
	cs     [store.MaxLimits]*cell  // the counters found
	metas  [store.MaxLimits]uint64 // of the cells found, as locked; of a counter kept, its new word
	// dup[i]: limit i's counter is held elsewhere, an earlier limit's
	// cell (cs[i] is that cell) or another take's counter (TakeAll; cs[i]
	// is nil): it is neither unlocked nor inserted through limit i.
	dup [store.MaxLimits]bool
}

// lockCounters locks the shard of key and the cells of p's limits for
// key that exist, into c, and copies their states.
func (s *Store) lockCounters(c *counters, key string, p *store.Policy) {
	s.placeCounters(c, s.keyHash(key), p)
	c.sh.mu.Lock()
	s.findCounters(c, p)
}

// placeCounters sets the shard and the hashes of the counters of p's
// limits for the key of hash k.
func (s *Store) placeCounters(c *counters, k uint64, p *store.Policy) {
	c.sh = s.shard(k)
	for i := range p.Limits {
		c.hs[i] = counterHash(k, p, i)
	}
}

// findCounters finds the counters of p's limits in c's shard, whose mutex
// the caller holds, but those dup marks already, locks the cells of those
// that exist, and copies their states.
func (s *Store) findCounters(c *counters, p *store.Policy) {
	t := *c.sh.tab.Load()
	for i := range p.Limits {
		if c.dup[i] {
			continue
		}
		if _, c.cs[i] = s.lookup(t, c.hs[i]); c.cs[i] != nil {
			// Two limits whose hashes are equal share one counter (as two
			// keys would): its cell is locked once.
			if c.dup[i] = slices.Contains(c.cs[:i], c.cs[i]); !c.dup[i] {
				c.metas[i], _ = lockCell(c.cs[i])
			}
			c.states[i] = c.cs[i].st
		}
	}
}

// keep makes limit i's new state in c the one to write, at level lvl: a
// counter found is written back, one missing is inserted.
func (c *counters) keep(i int, lvl uint64) {
	c.metas[i] = pack(c.exp[i], lvl)
	if c.cs[i] != nil {
		c.cs[i].st = c.states[i]
	}
}

// unlockCounters unlocks the cells c locked and adds the counters kept
// that were missing, then unlocks the shard.
func (s *Store) unlockCounters(c *counters, p *store.Policy, now int64) {
	// Unlock before inserting: an insert may evict, and eviction locks.
	c.unlockCells(p)
	s.insertKept(c, p, now)
	c.sh.mu.Unlock()
}

// unlockCells unlocks the cells c locked, writing their meta words.
func (c *counters) unlockCells(p *store.Policy) {
	for i := range p.Limits {
		if c.cs[i] != nil && !c.dup[i] {
			unlockCell(c.cs[i], c.metas[i])
		}
	}
}

// insertKept adds to c's shard (under its mutex, with no cell of it
// locked) the counters c keeps that were missing: a meta word is never 0
// once kept.
func (s *Store) insertKept(c *counters, p *store.Policy, now int64) {
	for i := range p.Limits {
		if c.cs[i] == nil && !c.dup[i] && c.metas[i] != 0 {
			s.insert(c.sh, c.hs[i], c.metas[i], c.states[i], now)
		}
	}
}
