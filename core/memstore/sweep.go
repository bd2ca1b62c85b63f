package memstore

import (
	"math/bits"
	"sync/atomic"
	"time"
)

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
