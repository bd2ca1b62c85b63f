package memstore

import (
	"context"
	"fmt"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

var _ store.MultiTaker = (*Store)(nil)

// TakeAll implements store.MultiTaker: it evaluates the takes in order at
// one instant, each on the counters as the admitted takes before it leave
// them, and consumes every take's cost when all are admitted, nothing
// when any is denied; all in one atomic step, under the mutexes of the
// takes' shards. It fails only for bad takes (store.ErrBadPolicy: none,
// more than store.MaxTakes, fewer results than takes, a nil policy or one
// with no limits or more than store.MaxLimits), and then consumes
// nothing. It allocates nothing for existing keys.
func (s *Store) TakeAll(_ context.Context, takes []store.Take, results []store.Result) (allowed bool, _ error) {
	if err := checkTakes(takes, results); err != nil {
		return false, err
	}
	return s.takeAll(takes, results, s.clock.Now()), nil
}

// checkTakes reports what makes takes and results unfit for TakeAll.
func checkTakes(takes []store.Take, results []store.Result) error {
	if n := len(takes); n == 0 || n > store.MaxTakes || len(results) < n {
		return fmt.Errorf("memstore: %d takes with room for %d results, want 1 to %d takes: %w", n, len(results), store.MaxTakes, store.ErrBadPolicy)
	}
	for j, t := range takes {
		if t.Policy == nil {
			return fmt.Errorf("memstore: take %d (key %q) has no policy: %w", j, t.Key, store.ErrBadPolicy)
		}
		if n := len(t.Policy.Limits); n == 0 || n > store.MaxLimits {
			return fmt.Errorf("memstore: take %d: policy %q has %d limits: %w", j, t.Policy.Name, n, store.ErrBadPolicy)
		}
	}
	return nil
}

// multi holds the counters of a TakeAll call: one counters per take,
// found and locked as takeMany finds its own. A counter that several
// takes count (the same key under the same policy, or under policies
// that share a counter) belongs to the first take's slot that names it:
// the later ones read and write its state there, and it is locked,
// written back and inserted once.
type multi struct {
	c [store.MaxTakes]counters
	// own[j][i] is the slot, take×MaxLimits + limit, of the counter of
	// take j's limit i: its own or an earlier take's.
	own [store.MaxTakes][store.MaxLimits]uint8
	// lvl[j][i] is, for a counter to write, one more than its level; 0
	// for a counter left as it was.
	lvl [store.MaxTakes][store.MaxLimits]uint16
}

// takeAll is TakeAll at the instant now, for valid takes.
func (s *Store) takeAll(takes []store.Take, results []store.Result, now int64) bool {
	var m multi
	s.lockMulti(&m, takes)
	allowed := true
	for j := range takes {
		allowed = m.evaluate(j, &takes[j], &results[j], now, false) && allowed
	}
	if !allowed {
		// Nothing is consumed: each take admitted reports its limits as
		// they stand, a take of cost 0 on the counters as found, and a
		// token bucket or GCRA found keeps that state, as takeMany keeps
		// one that a denial finds (see store.Evaluate).
		m.lvl = [store.MaxTakes][store.MaxLimits]uint16{}
		for j := range takes {
			if results[j].Allowed || takes[j].Policy.Algorithm >= algo.TokenBucket {
				m.evaluate(j, &takes[j], &results[j], now, true)
			}
		}
	}
	s.unlockMulti(&m, takes, now)
	return allowed
}

// lockMulti finds the shard and the hashes of every take's counters and
// the slot that owns each, locks the takes' shards, each once, in
// increasing order (as compact does, so two callers that hold several
// never wait for each other in a cycle), then locks the cells of the
// counters that exist, as lockCounters does, and copies their states.
// No cell is locked before every shard is.
func (s *Store) lockMulti(m *multi, takes []store.Take) {
	var order [store.MaxTakes]int // the shards' indexes, increasing
	n := 0
	for j := range takes {
		c, p := &m.c[j], takes[j].Policy
		k := s.keyHash(takes[j].Key)
		s.placeCounters(c, k, p)
		for i := range p.Limits {
			o := m.owner(j, i, c.sh, c.hs[i])
			m.own[j][i] = o
			c.dup[i] = int(o) != j*store.MaxLimits+i
		}
		x := s.shardIndex(k)
		at := n
		for at > 0 && order[at-1] > x {
			at--
		}
		if at == 0 || order[at-1] != x {
			copy(order[at+1:n+1], order[at:n])
			order[at] = x
			n++
		}
	}
	for _, x := range order[:n] {
		s.shards[x].mu.Lock()
	}
	for j := range takes {
		s.findCounters(&m.c[j], takes[j].Policy)
	}
}

// owner returns the slot of the counter of take j's limit i, of hash h
// in shard sh: the first slot of an earlier take that names it, else its
// own. Within one take, limits keep their own slots, as in takeMany.
func (m *multi) owner(j, i int, sh *shard, h uint64) uint8 {
	for x := range j {
		if m.c[x].sh != sh {
			continue
		}
		for y, hy := range m.c[x].hs {
			if hy == h && !m.c[x].dup[y] { // (unused hashes are 0, a counter's never)
				return uint8(x*store.MaxLimits + y)
			}
		}
	}
	return uint8(j*store.MaxLimits + i)
}

// slot returns the counters and the limit of slot o.
func (m *multi) slot(o uint8) (*counters, int) {
	return &m.c[o/store.MaxLimits], int(o % store.MaxLimits)
}

// evaluate decides take t, take j, into r, and reports whether it was
// admitted. At first (asFound false) it evaluates t's cost on the states
// as the takes before it left them, and an admitted take leaves its new
// states for the takes after it, its counters to be written when it
// consumed or (a token bucket, GCRA) was found. With asFound, after a
// denial, it evaluates a take of cost 0 on the states as found, which
// replaces r when t was admitted, and leaves the state of each token
// bucket or GCRA counter found, to be written.
func (m *multi) evaluate(j int, t *store.Take, r *store.Result, now int64, asFound bool) bool {
	p := t.Policy
	var (
		st  [store.MaxLimits]algo.State
		exp [store.MaxLimits]int64
	)
	cost := t.Cost
	for i := range p.Limits {
		c, oi := m.slot(m.own[j][i])
		switch {
		case !asFound:
			st[i] = c.states[oi]
		case c.cs[oi] != nil:
			st[i] = c.cs[oi].st // as found: the cell is written only once all are decided
		}
	}
	if asFound {
		cost = 0
	}
	res := store.Evaluate(p, &st, &exp, now, cost)
	if !asFound || r.Allowed {
		*r = res
	}
	if !res.Allowed {
		return false
	}
	tb := p.Algorithm >= algo.TokenBucket
	for i, l := range p.Limits {
		o := m.own[j][i]
		c, oi := m.slot(o)
		found := c.cs[oi] != nil
		if asFound && !(found && tb) {
			continue
		}
		c.states[oi], c.exp[oi] = st[i], exp[i]
		if cost > 0 || found && tb {
			m.lvl[o/store.MaxLimits][oi] = uint16(level(l.Capacity(p.Algorithm), res.Limits[i].Remaining)) + 1
		}
	}
	return true
}

// unlockMulti writes back the counters to write, unlocks every cell,
// inserts the counters to write that were missing (an insert may evict,
// and eviction locks cells: none is locked by then), and unlocks the
// shards.
func (s *Store) unlockMulti(m *multi, takes []store.Take, now int64) {
	for j := range takes {
		for i := range takes[j].Policy.Limits {
			if lv := m.lvl[j][i]; lv != 0 {
				m.c[j].keep(i, uint64(lv-1))
			}
		}
	}
	for j := range takes {
		m.c[j].unlockCells(takes[j].Policy)
	}
	for j := range takes {
		s.insertKept(&m.c[j], takes[j].Policy, now)
	}
	for j := range takes {
		if sh := m.c[j].sh; !m.unlockedBefore(j, sh) {
			sh.mu.Unlock()
		}
	}
}

// unlockedBefore reports whether a take before take j has shard sh.
func (m *multi) unlockedBefore(j int, sh *shard) bool {
	for x := range j {
		if m.c[x].sh == sh {
			return true
		}
	}
	return false
}
