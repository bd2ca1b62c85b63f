package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// DefaultMaxKeys is the default bound on the number of counters.
const DefaultMaxKeys = 1 << 20

const (
	minSlots = 8
	loadNum  = 13 // grow past 13/16 full
	loadDen  = 16
)

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

// cell is one counter: 32 bytes, so that memory per key stays the same
// whatever the key.
//
// Cells are handed out store-wide in the order counters are created, and
// a counter keeps its cell for life, so counters created one after the
// other sit side by side in memory, as they do in a store that allocates
// an object per key. A shard finds its counters through an index of one
// word per counter (see entry), which is written only when counters come
// and go; a decision on an existing key reads the index without the
// shard's mutex, and locks only its cell (the lock bit of its meta word,
// see lockCell). Cores deciding for different keys then write no memory
// in common, and read the index from their own caches. Everything that
// creates, removes or moves counters (insert, evict, Reset, Sweep), and
// every policy with several limits, holds the shard's mutex and locks each
// cell it reads the state of or frees, so it waits for a decision in
// progress on that cell and never loses it. Hence the fields' rules:
//
//   - h is written only by the holder of the shard's mutex, atomically: a
//     cell is filled with its meta word last and freed with it last, so a
//     cell whose meta word is 0 is free and cannot be locked.
//   - meta is written by whoever holds the cell's lock, and by fill;
//     always atomically. Eviction loads it atomically without locking.
//   - st is read and written only by the holder of the cell's lock, or by
//     fill before the meta word makes the cell lockable.
//
// A decision that locks a cell checks its h again under the lock: a cell
// found through an index read without the mutex may have been freed, and
// even handed to another counter, in between.
type cell struct {
	h    uint64 // 0: free
	meta uint64 // lock bit, consumption level and expiry: see pack; 0: free
	st   algo.State
}

// chunkBits sets the cells per chunk: 256, 8 KiB; blockBits the chunks
// per block: 4,096, a block of pointers being 32 KiB (a million cells).
const (
	chunkBits  = 8
	chunkCells = 1 << chunkBits
	blockBits  = 12
)

type (
	chunk [chunkCells]cell
	block [1 << blockBits]atomic.Pointer[chunk]
)

// maxCells bounds the cells of a store: an index entry holds a cell's
// number plus one in 32 bits.
const maxCells = 1<<32 - 2

// A cell's meta word holds the cell's lock and two things only eviction
// and Sweep read:
//
//   - bits 0–54, the instant from which the state equals the zero state
//     (algo.Outcome.ExpireAt), in units of 256 ns, rounded up, and at least
//     one unit; the largest value, all ones (instants after 2^63 − 512 ns,
//     in the year 2262), means never. Decisions never read it: the
//     algorithm derives everything from the state. The coarser unit only
//     makes a counter count as expired up to 256 ns late, never early.
//   - bit 55, set while a goroutine holds the cell's lock (see lockCell).
//   - bits 56–63, the consumption level (see level) the last admitted
//     request left. It is written only when a request is admitted (a denied
//     one changes nothing), and consumption only falls with time until the
//     next admitted request, so the level is an upper bound on the current
//     consumption: a counter at its limit stays recognised as such for as
//     long as its owner is denied.
//
// The word is never 0 in a used cell. Without its lock bit, it orders
// counters the way eviction wants: by level, then by expiry.
const (
	expShift   = 8         // the expiry is kept in units of 1<<expShift ns
	expMask    = 1<<55 - 1 // bits of the expiry; all of them set: never
	lockBit    = 1 << 55
	levelShift = 56
	atLimit    = 255 // the level of a counter with no unit left
)

// pack makes a meta word, unlocked, from an expiry instant (ns) and a
// level. The expiry is ceil(exp/256) units, 1 for exp ≤ 0, and at most
// expMask (never).
func pack(exp int64, lvl uint64) uint64 {
	return lvl<<levelShift | min(uint64(max(exp, 1)-1)>>expShift+1, expMask)
}

// expired reports whether the counter whose meta word is m has a state
// equal to the zero state at now: whether its expiry, units×256 ns, is at
// most now (compared in units, so nothing overflows).
func expired(m uint64, now int64) bool {
	u := m & expMask
	return now >= 0 && u != expMask && u <= uint64(now)>>expShift
}

// level returns how much of its capacity a counter has consumed once an
// admitted request left it remaining units (algo.Outcome.Remaining, for
// every algorithm the capacity less what is consumed: the count in the
// window, the weighted count of the sliding window, the token bucket's and
// GCRA's debt): atLimit (255) when no unit is left; otherwise
// 16×log2(capacity/remaining), on the scale of log16, from 0 (nothing, or
// less than about 4 %, consumed) to 254 (about 1/60,000 or less left).
//
// Forgetting a counter lets its owner through at most what it had consumed,
// so eviction drops the lowest levels first. The level is relative to the
// capacity, so that a counter at its limit goes last whatever its rule's
// size, and logarithmic, so that it is finest near the limit and costs no
// division on the hot path.
func level(capacity, remaining int64) uint64 {
	if remaining <= 0 {
		return atLimit
	}
	return uint64(min(max(log16(capacity)-log16(remaining), 0), atLimit-1))
}

// log16 is 16×log2(x) rounded down, with log2 interpolated linearly
// between powers of two: 16×(n−1) plus the 4 bits after the leading one of
// x, an n-bit number. It is monotone. log16(x) is 0 for x ≤ 1.
func log16(x int64) int {
	if x <= 1 {
		return 0
	}
	n := bits.Len64(uint64(x))
	return 16*(n-1) + int(uint64(x)<<(65-n)>>60)
}

// A shard is one cache line (shards do not share lines), written only
// under its mutex: a decision on an existing key only reads tab.
type shard struct {
	mu sync.Mutex
	// tab is the shard's index: an open-addressing table of entries,
	// replaced whole when it grows or shrinks, its entries written
	// atomically under mu.
	tab atomic.Pointer[[]uint64]
	// free holds the cells this shard freed, for its next inserts.
	free []uint32
	n    int // counters held
	cap  int
	// evictions counts the live counters eviction dropped (under mu).
	evictions uint64
}

// An index entry is the counter's hash's low 32 bits (its home in the
// table, and a filter) over its cell's number plus one; 0 is empty.
func entry(h uint64, c uint32) uint64 { return h<<32 | (uint64(c) + 1) }

func entryCell(e uint64) uint32 { return uint32(e) - 1 }

// home returns the slot of a table of mask+1 entries where the probe for
// the counter of hash h (or of entry e: the same bits) starts.
func home(h uint64, mask int) int      { return int(uint32(h)) & mask }
func entryHome(e uint64, mask int) int { return int(e>>32) & mask }

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
	if len(p.Limits) == 1 {
		s.takeOne(&r, s.hash(key, p), p, cost, s.clock.Now(), true)
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
	h0 := s.hash(key, p)
	sh := s.shard(h0)
	sh.mu.Lock()
	t := *sh.tab.Load()
	for i := range p.Limits {
		if j, c := s.lookup(t, limitHash(h0, i)); c != nil {
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

// decide is TakeAt when write is set, else PeekAt.
func (s *Store) decide(r *store.Result, key string, p *store.Policy, cost, now int64, write bool) {
	if len(p.Limits) == 1 {
		s.takeOne(r, s.hash(key, p), p, cost, now, write)
		return
	}
	if n := len(p.Limits); n == 0 || n > store.MaxLimits {
		*r = store.Result{}
		return
	}
	*r = s.takeMany(key, p, cost, now, write)
}

// takeOne is decide for the common one-limit policy, on the counter of
// hash h (Store.hash of the key and policy). On an existing key it
// takes no shard lock (see cell); a key the index read without the mutex
// does not show, or shows in a cell freed since, is decided again under
// the shard's mutex, where the lookup is exact, and inserted when
// admitted.
func (s *Store) takeOne(r *store.Result, h uint64, p *store.Policy, cost, now int64, write bool) {
	l := &p.Limits[0]
	sh := s.shard(h)
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
		if o.Allowed && cost > 0 {
			m = pack(o.ExpireAt, level(l.Capacity(p.Algorithm), o.Remaining))
		}
	} else {
		st := c.st // a copy: a peek leaves the counter as it is
		algo.Apply(p.Algorithm, &st, l, now, cost, &o)
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

// lockCell locks cell c and returns its meta word, unlocked: the lock is
// the word's lockBit, set by compare-and-swap. It returns false, without
// locking, when c is free. Under the shard's mutex (where no cell of the
// shard is freed) it always succeeds for a cell the index shows. Nothing
// deadlocks: a decision without the mutex holds one cell and waits for
// nothing while it does; only holders of a shard's mutex wait for a cell
// while holding others (takeMany), and the cells of one shard are locked
// only under that shard's mutex (compact holds them all).
func lockCell(c *cell) (uint64, bool) {
	if m := atomic.LoadUint64(&c.meta); m != 0 && m&lockBit == 0 && atomic.CompareAndSwapUint64(&c.meta, m, m|lockBit) {
		return m, true
	}
	return lockCellSlow(c)
}

// spinsBeforeYield is how many times lockCellSlow retries a held lock
// before it yields the processor between tries. A cell is held for one
// algorithm step (tens of nanoseconds).
const spinsBeforeYield = 32

func lockCellSlow(c *cell) (uint64, bool) {
	for spins := 0; ; spins++ {
		switch m := atomic.LoadUint64(&c.meta); {
		case m == 0:
			return 0, false
		case m&lockBit == 0:
			if atomic.CompareAndSwapUint64(&c.meta, m, m|lockBit) {
				return m, true
			}
		case spins >= spinsBeforeYield:
			runtime.Gosched()
		}
	}
}

// unlockCell unlocks cell c, writing m (unlocked) as its meta word.
func unlockCell(c *cell, m uint64) { atomic.StoreUint64(&c.meta, m) }

// fill writes a counter into the free cell c, its meta word last: no
// decision can lock it before it is whole.
func fill(c *cell, h, m uint64, st algo.State) {
	c.st = st
	atomic.StoreUint64(&c.h, h)
	atomic.StoreUint64(&c.meta, m)
}

// release frees cell c, which the caller holds locked; that unlocks it,
// and no one can lock it again until it is filled.
func release(c *cell) {
	c.st = algo.State{}
	atomic.StoreUint64(&c.h, 0)
	atomic.StoreUint64(&c.meta, 0)
}

func (s *Store) takeMany(key string, p *store.Policy, cost, now int64, write bool) store.Result {
	var (
		states [store.MaxLimits]algo.State
		exp    [store.MaxLimits]int64
		hs     [store.MaxLimits]uint64
		cs     [store.MaxLimits]*cell  // the counters found
		metas  [store.MaxLimits]uint64 // of the cells found, as locked
		dup    [store.MaxLimits]bool   // cs[i] is an earlier limit's cell
	)
	h0 := s.hash(key, p)
	sh := s.shard(h0)
	sh.mu.Lock()
	t := *sh.tab.Load()
	for i := range p.Limits {
		hs[i] = limitHash(h0, i)
		if _, cs[i] = s.lookup(t, hs[i]); cs[i] != nil {
			// Two limits whose hashes are equal share one counter (as two
			// keys would): its cell is locked once.
			if dup[i] = slices.Contains(cs[:i], cs[i]); !dup[i] {
				metas[i], _ = lockCell(cs[i])
			}
			states[i] = cs[i].st
		}
	}
	r := store.Evaluate(p, &states, &exp, now, cost) // on copies of the states
	admit := write && r.Allowed && cost > 0
	for i := range p.Limits {
		if admit {
			metas[i] = pack(exp[i], level(p.Limits[i].Capacity(p.Algorithm), r.Limits[i].Remaining))
			if cs[i] != nil {
				cs[i].st = states[i]
			}
		}
	}
	// Unlock before inserting: an insert may evict, and eviction locks.
	for i := range p.Limits {
		if cs[i] != nil && !dup[i] {
			unlockCell(cs[i], metas[i])
		}
	}
	if admit {
		for i := range p.Limits {
			if cs[i] == nil {
				s.insert(sh, hs[i], metas[i], states[i], now)
			}
		}
	}
	sh.mu.Unlock()
	return r
}

// hash identifies the counters of key under p; it is also the slot hash of
// the policy's first limit.
func (s *Store) hash(key string, p *store.Policy) uint64 {
	var k uint64
	if wordBits == 64 {
		k = uint64(memhash(unsafe.Pointer(unsafe.StringData(key)), s.seed64, uintptr(len(key))))
	} else {
		k = maphash.String(s.seed, key)
	}
	return max(k^p.Fingerprint(), 1)
}

// wordBits is the width of uintptr: memhash hashes to a uintptr, so a
// 32-bit platform hashes through hash/maphash, which makes 64 bits.
const wordBits = 32 << (^uintptr(0) >> 63)

// memhash is the runtime's seeded string hash (AES-based where the CPU has
// it), which hash/maphash calls through three more frames.
//
//go:linkname memhash runtime.memhash
//go:noescape
func memhash(p unsafe.Pointer, h, s uintptr) uintptr

func (s *Store) shard(h0 uint64) *shard {
	if s.shift >= 64 {
		return &s.shards[0]
	}
	return &s.shards[h0>>s.shift]
}

// limitHash identifies the counter of limit i of the policy whose counters
// h0 identifies (the policy's fingerprint covers the algorithm and limits,
// so a changed rule never reads a counter kept under other terms).
func limitHash(h0 uint64, i int) uint64 {
	if i == 0 {
		return h0
	}
	return max(mix(h0+uint64(i)*0x9e3779b97f4a7c15), 1)
}

// mix is the splitmix64 finalizer.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// lookup returns the entry of the index t that shows the counter of hash
// h, and its cell; or -1 and nil. It is called under the shard's mutex,
// where it is exact (lockCounter is the lookup without it).
func (s *Store) lookup(t []uint64, h uint64) (int, *cell) {
	mask := len(t) - 1
	for i := home(h, mask); ; i = (i + 1) & mask {
		e := atomic.LoadUint64(&t[i])
		if e == 0 {
			return -1, nil
		}
		if uint32(e>>32) == uint32(h) {
			if c := s.cellOf(entryCell(e)); c != nil && atomic.LoadUint64(&c.h) == h {
				return i, c
			}
		}
	}
}

// cellOf returns cell i, or nil when its chunk was dropped (see compact):
// only an index read without the shard's mutex can show such a cell.
func (s *Store) cellOf(i uint32) *cell {
	bi, ci := chunkPlace(i >> chunkBits)
	b := s.blocks[bi].Load()
	if b == nil {
		return nil
	}
	ch := b[ci].Load()
	if ch == nil {
		return nil
	}
	return &ch[i&(chunkCells-1)]
}

// chunkPlace returns where chunk n is: its block, and its slot there.
func chunkPlace(n uint32) (blk, slot uint32) { return n >> blockBits, n & (1<<blockBits - 1) }

// setTable makes t the shard's index (under mu).
func (sh *shard) setTable(t []uint64) { sh.tab.Store(&t) }

// place writes entry e into the first empty slot of t from its home;
// there must be one.
func place(t []uint64, e uint64) {
	atomic.StoreUint64(&t[firstFree(t, e, -1)], e)
}

// firstFree returns the first slot of t from the home of entry e that is
// empty or is skip (the slot e is being moved from; -1 for none).
func firstFree(t []uint64, e uint64, skip int) int {
	mask := len(t) - 1
	i := entryHome(e, mask)
	for i != skip && t[i] != 0 {
		i = (i + 1) & mask
	}
	return i
}

// insert adds the counter of hash h, with meta word m and state st, to
// shard sh (under its mutex), evicting first when the shard is full.
func (s *Store) insert(sh *shard, h, m uint64, st algo.State, now int64) {
	if sh.n >= sh.cap {
		s.evict(sh, now)
		if sh.n >= sh.cap {
			s.evictOne(sh, now)
		}
	}
	t := *sh.tab.Load()
	if (sh.n+1)*loadDen > len(t)*loadNum {
		t = sh.resize(len(t) * 2)
	}
	i := s.alloc(sh)
	fill(s.cellOf(i), h, m, st)
	place(t, entry(h, i))
	sh.n++
}

// alloc returns a free cell for shard sh (under its mutex): one the shard
// freed, or else the next never used. Every cell handed out is either in
// use by one shard or on one shard's free list, and a shard takes a new
// one only while it holds fewer than its cap of counters and has no free
// one, so cells never number more than the shards' caps together.
func (s *Store) alloc(sh *shard) uint32 {
	if k := len(sh.free); k > 0 {
		i := sh.free[k-1]
		sh.free = sh.free[:k-1]
		return i
	}
	i := uint32(s.next.Add(1) - 1)
	// Another shard may make the block or the chunk first.
	bi, ci := chunkPlace(i >> chunkBits)
	bp := &s.blocks[bi]
	if bp.Load() == nil {
		bp.CompareAndSwap(nil, new(block))
	}
	if cp := &bp.Load()[ci]; cp.Load() == nil {
		cp.CompareAndSwap(nil, new(chunk))
	}
	return i
}

// resize replaces the shard's index by one of size slots holding the same
// entries, and returns it. A decision still reading the old index finds
// the counters it shows, which stay in their cells.
func (sh *shard) resize(size int) []uint64 {
	t := make([]uint64, size)
	for _, e := range *sh.tab.Load() {
		if e != 0 {
			place(t, e)
		}
	}
	sh.setTable(t)
	return t
}

// remove frees cell c, which the caller holds locked, and deletes its
// entry i from the index t, shifting back the entries after it so that
// every probe sequence stays unbroken.
func (s *Store) remove(sh *shard, t []uint64, i int, c *cell) {
	sh.free = append(sh.free, entryCell(t[i]))
	release(c)
	mask := len(t) - 1
	for j := (i + 1) & mask; t[j] != 0; j = (j + 1) & mask {
		home := entryHome(t[j], mask)
		// The entry at j may move to i unless its home lies in (i, j].
		if i <= j && (home <= i || home > j) || i > j && home <= i && home > j {
			atomic.StoreUint64(&t[i], t[j])
			i = j
		}
	}
	atomic.StoreUint64(&t[i], 0)
	sh.n--
}

// evict frees about a tenth of a full shard in one pass, dropping first
// what costs least to forget: every expired counter; then, when that is not
// enough, the live ones by level (see level), lowest first, so that a
// counter at its limit goes only when the expired counters and those below
// their limit together make up less than a tenth of the shard. Within the
// last level it reaches, it drops those closest to expiry first.
func (s *Store) evict(sh *shard, now int64) {
	target := max(sh.cap/10, 1)
	// One pass counts the live counters of each level exactly, and samples
	// the meta words of live counters at an even stride to estimate, within
	// a level, the expiry below which the oldest ones lie.
	var (
		perLevel [atLimit + 1]int
		sample   [128]uint64
	)
	ns, dead, seen := 0, 0, 0
	stride := max(sh.n/len(sample), 1)
	for _, e := range *sh.tab.Load() {
		if e == 0 {
			continue
		}
		// Without the cell's lock: a decision in progress may change the
		// word, and drop judges again under the lock.
		switch m := atomic.LoadUint64(&s.cellOf(entryCell(e)).meta) &^ lockBit; {
		case m == 0: // empty
		case expired(m, now):
			dead++
		default:
			perLevel[m>>levelShift]++
			if seen%stride == 0 && ns < len(sample) {
				sample[ns] = m
				ns++
			}
			seen++
		}
	}
	// Every live counter below level lv goes, and budget of those at lv
	// whose meta word (at one level, the expiry) is at most cut: about
	// eligible of them, of which every eligible/budget-th goes in table
	// order. (lv 0 and budget 0: none.) Spreading the drops matters when
	// many are tied, as the counters of one fixed window are: dropping the
	// first ones in table order would empty one region of the table while
	// the rest fills, and probe sequences would grow without bound.
	var lv, cut uint64
	budget, eligible := 0, 0
	if need := target - dead; need > 0 {
		below := 0
		for lv < atLimit && below+perLevel[lv] < need {
			below += perLevel[lv]
			lv++
		}
		budget, cut, eligible = need-below, math.MaxUint64, perLevel[lv]
		k := 0
		for _, m := range sample[:ns] {
			if m>>levelShift == lv {
				sample[k] = m
				k++
			}
		}
		// The sample's budget/perLevel[lv] quantile; when the sample holds
		// only part of the level, with a margin of about two standard errors
		// so that one pass rarely frees less than it should.
		i := (budget*k+perLevel[lv]-1)/perLevel[lv] - 1
		if k < perLevel[lv] {
			i += k/16 + 1
		}
		if 0 <= i && i < k {
			slices.Sort(sample[:k])
			cut = sample[i]
			le, _ := slices.BinarySearch(sample[:k], cut+1) // samples at most cut
			eligible = max((perLevel[lv]*le+k-1)/k, budget)
		}
	}
	s.drop(sh, now, lv, cut, budget, eligible)
}

// evictOne drops the one counter that costs least to forget: an expired
// one, else the lowest meta word. An eviction pass judges words read
// without the cells' locks, and decisions made meanwhile without the
// shard's mutex can raise every word it chose (a token bucket's or GCRA's
// expiry moves with each admission), so that it frees nothing; this keeps
// a full shard from growing past its cap. It locks the counter it drops,
// which may have changed since it was chosen.
func (s *Store) evictOne(sh *shard, now int64) {
	t := *sh.tab.Load()
	at, low := -1, uint64(0)
	for i, e := range t {
		if e == 0 {
			continue
		}
		m := atomic.LoadUint64(&s.cellOf(entryCell(e)).meta) &^ lockBit
		if expired(m, now) {
			m = 0
		}
		if at < 0 || m < low {
			at, low = i, m
		}
	}
	if at < 0 {
		return
	}
	c := s.cellOf(entryCell(t[at]))
	if m, _ := lockCell(c); !expired(m, now) {
		sh.evictions++
	}
	s.remove(sh, t, at, c)
}

// drop removes, in place and in one pass, every counter expired at now,
// every live one below level lv and, of the live ones at level lv whose
// meta word is at most cut (about eligible), budget spread evenly in index
// order. With lv and budget 0 it removes the expired counters only.
//
// It locks the cells it may free, and judges those on their meta word as
// locked: a decision in progress on one of them is waited for, and counted
// before the counter is judged. A counter it keeps without locking is
// judged as it was an instant before such a decision.
func (s *Store) drop(sh *shard, now int64, lv, cut uint64, budget, eligible int) {
	t := *sh.tab.Load()
	mask := len(t) - 1
	start := 0
	for t[start] != 0 { // a slot empty before the pass: no probe sequence crosses it
		start++
	}
	// A slot is visited before the pass writes to it (an entry only moves
	// back), so an empty one was empty before the pass and ends a run of
	// entries. An entry kept before any removal in its run is where it
	// would be placed: it stays.
	removed := false
	share, acc := budget, 0 // every candidate adds share to acc; each eligible of it is a drop
	// judge tells whether the counter whose meta word is m goes for
	// certain (expired, or below level lv), whether it expired, and whether
	// it is a candidate, one at level lv with a word at most cut.
	judge := func(m uint64) (gone, dead, cand bool) {
		dead = expired(m, now)
		l := m >> levelShift
		return dead || l < lv, dead, !dead && l == lv && m <= cut && budget > 0
	}
	for k := 1; k <= len(t); k++ {
		j := (start + k) & mask
		e := t[j]
		if e == 0 {
			removed = false
			continue
		}
		c := s.cellOf(entryCell(e))
		// Lock the cell when it may go, and judge it again on the word as
		// locked. A cell judged to stay on the word read without its lock
		// is judged the same on that word below.
		m := atomic.LoadUint64(&c.meta) &^ lockBit
		gone, _, cand := judge(m)
		locked := gone || cand && acc+share >= eligible
		if locked {
			m, _ = lockCell(c)
		}
		gone, dead, cand := judge(m)
		if cand {
			if acc += share; acc >= eligible {
				acc -= eligible
				budget--
				gone = true
			}
		}
		if locked && !gone {
			unlockCell(c, m)
		}
		switch {
		case gone: // locked
			if !dead {
				sh.evictions++
			}
			sh.free = append(sh.free, entryCell(e))
			release(c)
			atomic.StoreUint64(&t[j], 0)
			sh.n--
			removed = true
		case removed:
			// Its home lies in (start, j]: it lands at j or before it.
			if i := firstFree(t, e, j); i != j {
				atomic.StoreUint64(&t[i], e)
				atomic.StoreUint64(&t[j], 0)
			}
		}
	}
}

func (s *Store) sweeper() {
	defer close(s.done)
	t := time.NewTicker(s.sweepEvery)
	defer t.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-t.C:
			s.Sweep()
		}
	}
}

// Sweep drops every expired counter now, shrinks indexes left mostly
// empty, and gives back the memory of cells left mostly unused (see
// compact). The sweeper calls it; callers may too.
func (s *Store) Sweep() {
	now := s.clock.Now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		s.drop(sh, now, 0, 0, 0, 0)
		if size := len(*sh.tab.Load()); size > minSlots && sh.n*8 < size {
			sh.resize(max(minSlots, 1<<bits.Len(uint(sh.n*loadDen/loadNum*2))))
		}
		sh.mu.Unlock()
	}
	s.compact()
}

// compact gives back the memory of cells after a burst of counters: when
// at least half the chunks made (and at least one) would hold no counter
// once the counters were moved into the lowest cells, it moves the
// counters of the cells beyond the whole chunks that the live counters
// need into free cells below them, and drops the chunks beyond. It holds
// every shard's mutex while it runs, and locks each cell it moves, so a
// decision in progress on it is kept and one that follows finds it in its
// new cell.
func (s *Store) compact() {
	for i := range s.shards {
		s.shards[i].mu.Lock()
	}
	defer func() {
		for i := range s.shards {
			s.shards[i].mu.Unlock()
		}
	}()
	live := 0
	for i := range s.shards {
		live += s.shards[i].n
	}
	made := (int(s.next.Load()) + chunkCells - 1) / chunkCells
	kept := max(1, (live+chunkCells-1)/chunkCells) // the first chunk stays: an idle store makes no chunk again
	if made-kept < max(1, made/2) {
		return
	}
	keep := uint32(kept * chunkCells)
	// The free cells below keep: as many as the counters above it.
	var pool []uint32
	for i := range s.shards {
		for _, c := range s.shards[i].free {
			if c < keep {
				pool = append(pool, c)
			}
		}
	}
	for i := range s.shards {
		sh := &s.shards[i]
		t := *sh.tab.Load()
		for j, e := range t {
			if e == 0 || entryCell(e) < keep {
				continue
			}
			src := s.cellOf(entryCell(e))
			m, _ := lockCell(src)
			to := pool[len(pool)-1]
			pool = pool[:len(pool)-1]
			h := src.h
			fill(s.cellOf(to), h, m, src.st)
			atomic.StoreUint64(&t[j], entry(h, to))
			release(src)
		}
	}
	// The other free cells below keep go back to the shards' lists, dealt
	// out in turn, each shard taking no more than its cap less its
	// counters.
	for i := range s.shards {
		s.shards[i].free = nil // new lists: a burst's capacity goes too
	}
	for dealt := true; len(pool) > 0 && dealt; {
		dealt = false // (the caps hold more than the pool: a round always deals one)
		for i := range s.shards {
			if sh := &s.shards[i]; len(pool) > 0 && sh.n+len(sh.free) < sh.cap {
				sh.free = append(sh.free, pool[len(pool)-1])
				pool = pool[:len(pool)-1]
				dealt = true
			}
		}
	}
	for i := kept; i < made; i++ {
		bi, ci := chunkPlace(uint32(i))
		s.blocks[bi].Load()[ci].Store(nil)
	}
	for i := (kept + 1<<blockBits - 1) >> blockBits; i < len(s.blocks); i++ {
		s.blocks[i].Store(nil) // blocks left with no chunk
	}
	s.next.Store(int64(keep))
}
