package memstore

import (
	"math/bits"
	"runtime"
	"sync/atomic"

	"github.com/rlkit/rlkit/core/algo"
)

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
//     makes a counter count as expired up to 256 ns late, never early. A
//     token bucket's or GCRA's expiry is that of the terms its last
//     decision ran under: after a reload to a slower refill, one not
//     decided since may count as expired (refilled) that much early.
//   - bit 55, set while a goroutine holds the cell's lock (see lockCell).
//   - bits 56–63, the consumption level (see level) the last admitted
//     request left (or, for a token bucket or GCRA, the last request, which
//     may find the counter under new terms). It is written only when a
//     request is admitted or, for those two, decided, and consumption only
//     falls with time until the next admitted request, so the level is an
//     upper bound on the current consumption: a counter at its limit stays
//     recognised as such for as long as its owner is denied.
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

// lockCell locks cell c and returns its meta word, unlocked: the lock is
// the word's lockBit, set by compare-and-swap. It returns false, without
// locking, when c is free. Under the shard's mutex (where no cell of the
// shard is freed) it always succeeds for a cell the index shows. Nothing
// deadlocks: a decision without the mutex holds one cell and waits for
// nothing while it does; only holders of a shard's mutex wait for a cell
// while holding others (takeMany, TakeAll), and the cells of one shard are
// locked only under that shard's mutex, so their other holders wait for
// nothing. Those that hold several shards' mutexes (TakeAll, compact,
// which holds them all) take them in increasing order, before any cell.
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
