package memstore

import (
	"math"
	"slices"
	"sync/atomic"
)

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
