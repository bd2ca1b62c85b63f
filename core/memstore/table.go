package memstore

import (
	"hash/maphash"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// A shard's index holds at least minSlots slots, and grows past
// loadNum/loadDen full.
const (
	minSlots = 8
	loadNum  = 13 // grow past 13/16 full
	loadDen  = 16
)

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
func home(h uint64, mask int) int { return int(uint32(h)) & mask }

func entryHome(e uint64, mask int) int { return int(e>>32) & mask }

// keyHash is the seeded hash of key. It chooses the shard of every
// counter of the key (see shard), so that the limits of one policy, and
// a limit whose policy gained or lost others, share one.
func (s *Store) keyHash(key string) uint64 {
	if wordBits == 64 {
		return uint64(memhash(unsafe.Pointer(unsafe.StringData(key)), s.seed64, uintptr(len(key))))
	}
	return maphash.String(s.seed, key)
}

// counterHash identifies the counter of limit i of p for the key of hash
// k: the key's hash and the limit's identity (store.Policy.CounterID: the
// policy's name and algorithm and the limit's period), so that a limit
// whose count or burst changed finds the counter it kept.
func counterHash(k uint64, p *store.Policy, i int) uint64 {
	return max(k^p.CounterID(i), 1)
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

// shard returns the shard of the counters of the key of hash k.
func (s *Store) shard(k uint64) *shard { return &s.shards[s.shardIndex(k)] }

// shardIndex returns the index of the shard of the key of hash k.
func (s *Store) shardIndex(k uint64) int {
	if s.shift >= 64 {
		return 0
	}
	return int(k >> s.shift)
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
