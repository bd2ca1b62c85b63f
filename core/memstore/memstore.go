package memstore

import (
	"context"
	"fmt"
	"hash/maphash"
	"math"
	"math/bits"
	"slices"
	"sync"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
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

// WithClock sets the clock Take reads. Default: core.SystemClock.
func WithClock(c core.Clock) Option { return func(s *Store) { s.clock = c } }

// WithMaxKeys bounds the number of counters (one per key, rule and limit).
// The bound is split evenly over the shards (fewer shards are used when
// the bound is small), so a skewed load may evict before the store as a
// whole is full. Default: DefaultMaxKeys (1,048,576).
func WithMaxKeys(n int) Option { return func(s *Store) { s.maxKeys = max(n, 1) } }

// WithShards sets the number of shards, rounded up to a power of two.
// Default: 64.
func WithShards(n int) Option { return func(s *Store) { s.nshards = max(n, 1) } }

// WithSweepInterval starts a goroutine that drops expired counters every d
// and shrinks tables left mostly empty, so memory comes back after a burst
// of keys. Close stops it. Default: 0, no sweeper (memory stays bounded by
// MaxKeys either way).
func WithSweepInterval(d time.Duration) Option { return func(s *Store) { s.sweepEvery = d } }

// Store is an in-memory core.Store. It is safe for concurrent use.
type Store struct {
	seed       maphash.Seed
	clock      core.Clock
	maxKeys    int
	nshards    int
	sweepEvery time.Duration
	shift      uint
	shards     []shard

	stop      chan struct{}
	done      chan struct{}
	closeOnce sync.Once
}

var _ core.StatsStore = (*Store)(nil)

// slot is one counter: 32 bytes, so that memory per key stays the same
// whatever the key.
type slot struct {
	h    uint64 // 0: empty
	meta uint64 // consumption level and expiry: see pack
	st   algo.State
}

// A slot's meta word holds two things only eviction and Sweep read:
//
//   - bits 0–55, the instant from which the state equals the zero state
//     (algo.Outcome.ExpireAt), in units of 256 ns, rounded up, and at least
//     one unit. Decisions never read it: the algorithm derives everything
//     from the state. The coarser unit only makes a counter count as
//     expired up to 256 ns late, never early. Any int64 instant fits.
//   - bits 56–63, the consumption level (see level) the last admitted
//     request left. It is written only when a request is admitted (a denied
//     one changes nothing), and consumption only falls with time until the
//     next admitted request, so the level is an upper bound on the current
//     consumption: a counter at its limit stays recognised as such for as
//     long as its owner is denied.
//
// The word is never 0 in a used slot, so the eviction and sweep passes tell
// empty slots by it alone. It orders counters the way eviction wants: by
// level, then by expiry.
const (
	expShift   = 8         // the expiry is kept in units of 1<<expShift ns
	expMask    = 1<<56 - 1 // bits of the expiry
	levelShift = 56
	atLimit    = 255 // the level of a counter with no unit left
)

// pack makes a meta word from an expiry instant (ns) and a level. The
// expiry is ceil(exp/256) units, at most 2^55 for exp ≤ MaxInt64, and 1 for
// exp ≤ 0.
func pack(exp int64, lvl uint64) uint64 {
	return lvl<<levelShift | (uint64(max(exp, 1)-1)>>expShift + 1)
}

// expired reports whether the counter whose meta word is m has a state
// equal to the zero state at now: whether its expiry, units×256 ns, is at
// most now (compared in units, so nothing overflows).
func expired(m uint64, now int64) bool { return now >= 0 && m&expMask <= uint64(now)>>expShift }

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

type shard struct {
	mu    sync.Mutex
	slots []slot
	n     int
	cap   int
	// evictions counts the live counters eviction dropped (under mu).
	evictions uint64
	_         [64 - 8 - 24 - 24]byte // keep shards on separate cache lines
}

// New returns an empty Store.
func New(opts ...Option) *Store {
	s := &Store{seed: maphash.MakeSeed(), clock: core.SystemClock, maxKeys: DefaultMaxKeys, nshards: 64}
	for _, o := range opts {
		o(s)
	}
	// Round the shard count up to a power of two, but keep at least 16 keys
	// per shard, and floor the per-shard cap, so that the store never holds
	// more than maxKeys counters.
	n := 1 << bits.Len(uint(s.nshards-1))
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
		s.shards[i].slots = make([]slot, minSlots)
	}
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

// Take implements core.Store. It fails only for a policy with no limits
// or more than core.MaxLimits (core.ErrBadPolicy).
func (s *Store) Take(_ context.Context, key string, p *core.Policy, cost int64) (r core.Result, _ error) {
	if n := len(p.Limits); n == 0 || n > core.MaxLimits {
		return r, fmt.Errorf("memstore: policy %q has %d limits: %w", p.Name, n, core.ErrBadPolicy)
	}
	s.TakeAt(&r, key, p, cost, s.clock.Now())
	return r, nil
}

// Peek implements core.Store: the Result Take would return now, with
// nothing consumed and no counter created. It fails as Take does.
func (s *Store) Peek(_ context.Context, key string, p *core.Policy, cost int64) (r core.Result, _ error) {
	if n := len(p.Limits); n == 0 || n > core.MaxLimits {
		return r, fmt.Errorf("memstore: policy %q has %d limits: %w", p.Name, n, core.ErrBadPolicy)
	}
	s.PeekAt(&r, key, p, cost, s.clock.Now())
	return r, nil
}

// Reset implements core.Store: it removes the counters of key under p and
// reports whether any of them had not expired at the store's clock's now
// (an expired one is removed too, and reported as not cleared). It never
// fails.
func (s *Store) Reset(_ context.Context, key string, p *core.Policy) (cleared bool, _ error) {
	now := s.clock.Now()
	h0 := s.hash(key, p)
	sh := s.shard(h0)
	sh.mu.Lock()
	for i := range p.Limits {
		if j := sh.find(limitHash(h0, i)); j >= 0 {
			cleared = cleared || !expired(sh.slots[j].meta, now)
			sh.remove(j)
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

// Stats implements core.StatsStore. Keys is Len: the counters held,
// counting expired ones that no eviction pass or sweep has dropped yet;
// MaxKeys is the bound the shards enforce together (WithMaxKeys rounded
// down to a multiple of the number of shards); Evictions counts the
// counters that eviction dropped before they expired. It takes each
// shard's lock in turn, briefly, and reads two words under it: its cost
// grows with the number of shards (64 by default), never with the number
// of keys.
func (s *Store) Stats() core.StoreStats {
	st := core.StoreStats{Store: "memory"}
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
// existing key. A policy with no limits or more than core.MaxLimits is
// denied.
func (s *Store) TakeAt(r *core.Result, key string, p *core.Policy, cost, now int64) {
	s.decide(r, key, p, cost, now, true)
}

// PeekAt is Peek at the instant now: TakeAt that writes nothing. It
// allocates nothing.
func (s *Store) PeekAt(r *core.Result, key string, p *core.Policy, cost, now int64) {
	s.decide(r, key, p, cost, now, false)
}

// decide is TakeAt when write is set, else PeekAt.
func (s *Store) decide(r *core.Result, key string, p *core.Policy, cost, now int64, write bool) {
	if len(p.Limits) == 1 {
		s.takeOne(r, key, p, cost, now, write)
		return
	}
	if n := len(p.Limits); n == 0 || n > core.MaxLimits {
		*r = core.Result{}
		return
	}
	*r = s.takeMany(key, p, cost, now, write)
}

// takeOne is decide for the common one-limit policy.
func (s *Store) takeOne(r *core.Result, key string, p *core.Policy, cost, now int64, write bool) {
	h := s.hash(key, p)
	l := &p.Limits[0]
	sh := s.shard(h)
	var o algo.Outcome
	sh.mu.Lock()
	if i := sh.find(h); i >= 0 {
		e := &sh.slots[i]
		if write {
			algo.Apply(p.Algorithm, &e.st, l, now, cost, &o)
			if o.Allowed && cost > 0 {
				e.meta = pack(o.ExpireAt, level(l.Capacity(p.Algorithm), o.Remaining))
			}
		} else {
			st := e.st // a copy: a peek leaves the counter as it is
			algo.Apply(p.Algorithm, &st, l, now, cost, &o)
		}
	} else {
		var st algo.State
		algo.Apply(p.Algorithm, &st, l, now, cost, &o)
		if write && o.Allowed && cost > 0 {
			sh.insert(slot{h: h, meta: pack(o.ExpireAt, level(l.Capacity(p.Algorithm), o.Remaining)), st: st}, now)
		}
	}
	sh.mu.Unlock()
	r.SetOutcome(*l, &o)
}

func (s *Store) takeMany(key string, p *core.Policy, cost, now int64, write bool) core.Result {
	var (
		states [core.MaxLimits]algo.State
		exp    [core.MaxLimits]int64
		hs     [core.MaxLimits]uint64
		at     [core.MaxLimits]int
	)
	h0 := s.hash(key, p)
	sh := s.shard(h0)
	sh.mu.Lock()
	for i := range p.Limits {
		hs[i] = limitHash(h0, i)
		at[i] = sh.find(hs[i])
		if at[i] >= 0 {
			states[i] = sh.slots[at[i]].st
		}
	}
	r := core.Evaluate(p, &states, &exp, now, cost) // on copies of the states
	if write && r.Allowed && cost > 0 {
		// Update in place first: inserting may move slots.
		var metas [core.MaxLimits]uint64
		for i := range p.Limits {
			metas[i] = pack(exp[i], level(p.Limits[i].Capacity(p.Algorithm), r.Limits[i].Remaining))
			if at[i] >= 0 {
				sh.slots[at[i]].st, sh.slots[at[i]].meta = states[i], metas[i]
			}
		}
		for i := range p.Limits {
			if at[i] < 0 {
				sh.insert(slot{h: hs[i], meta: metas[i], st: states[i]}, now)
			}
		}
	}
	sh.mu.Unlock()
	return r
}

// hash identifies the counters of key under p; it is also the slot hash of
// the policy's first limit.
func (s *Store) hash(key string, p *core.Policy) uint64 {
	return max(maphash.String(s.seed, key)^p.Fingerprint(), 1)
}

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

// find returns the slot holding h, or -1.
func (sh *shard) find(h uint64) int {
	mask := len(sh.slots) - 1
	for i := int(h) & mask; ; i = (i + 1) & mask {
		switch sh.slots[i].h {
		case h:
			return i
		case 0:
			return -1
		}
	}
}

// place puts e in the first free slot from its home; there must be one.
func (sh *shard) place(e slot) {
	mask := len(sh.slots) - 1
	i := int(e.h) & mask
	for sh.slots[i].h != 0 {
		i = (i + 1) & mask
	}
	sh.slots[i] = e
}

func (sh *shard) insert(e slot, now int64) {
	if sh.n >= sh.cap {
		sh.evict(now)
	}
	if (sh.n+1)*loadDen > len(sh.slots)*loadNum {
		sh.resize(len(sh.slots) * 2)
	}
	sh.place(e)
	sh.n++
}

func (sh *shard) resize(size int) {
	old := sh.slots
	sh.slots = make([]slot, size)
	for _, e := range old {
		if e.h != 0 {
			sh.place(e)
		}
	}
}

// remove deletes slot i, shifting back the entries after it so that every
// probe sequence stays unbroken.
func (sh *shard) remove(i int) {
	mask := len(sh.slots) - 1
	for j := (i + 1) & mask; sh.slots[j].h != 0; j = (j + 1) & mask {
		home := int(sh.slots[j].h) & mask
		// The entry at j may move to i unless its home lies in (i, j].
		if i <= j && (home <= i || home > j) || i > j && home <= i && home > j {
			sh.slots[i] = sh.slots[j]
			i = j
		}
	}
	sh.slots[i] = slot{}
	sh.n--
}

// evict frees about a tenth of a full shard in one pass, dropping first
// what costs least to forget: every expired counter; then, when that is not
// enough, the live ones by level (see level), lowest first, so that a
// counter at its limit goes only when the expired counters and those below
// their limit together make up less than a tenth of the shard. Within the
// last level it reaches, it drops those closest to expiry first.
func (sh *shard) evict(now int64) {
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
	for i := range sh.slots {
		switch m := sh.slots[i].meta; {
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
	sh.drop(now, lv, cut, budget, eligible)
}

// drop removes, in place and in one pass, every counter expired at now,
// every live one below level lv and, of the live ones at level lv whose
// meta word is at most cut (about eligible), budget spread evenly in table
// order. With lv and budget 0 it removes the expired counters only.
func (sh *shard) drop(now int64, lv, cut uint64, budget, eligible int) {
	mask := len(sh.slots) - 1
	start := 0
	for sh.slots[start].h != 0 { // a slot empty before the pass: no probe sequence crosses it
		start++
	}
	// A slot is visited before the pass writes to it (an entry only moves
	// back), so an empty one was empty before the pass and ends a run of
	// entries. An entry kept before any removal in its run is where it
	// would be placed: it stays.
	removed := false
	share, acc := budget, 0 // every candidate adds share to acc; each eligible of it is a drop
	for k := 1; k <= len(sh.slots); k++ {
		j := (start + k) & mask
		m := sh.slots[j].meta
		if m == 0 { // empty
			removed = false
			continue
		}
		l := m >> levelShift
		dead := expired(m, now)
		gone := dead || l < lv
		if !gone && l == lv && m <= cut && budget > 0 {
			if acc += share; acc >= eligible {
				acc -= eligible
				budget--
				gone = true
			}
		}
		switch {
		case gone:
			if !dead {
				sh.evictions++
			}
			sh.slots[j] = slot{}
			sh.n--
			removed = true
		case removed:
			e := sh.slots[j]
			sh.slots[j] = slot{}
			sh.place(e) // lands at j or before it: its home lies in (start, j]
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

// Sweep drops every expired counter now and shrinks tables left mostly
// empty. The sweeper calls it; callers may too.
func (s *Store) Sweep() {
	now := s.clock.Now()
	for i := range s.shards {
		sh := &s.shards[i]
		sh.mu.Lock()
		sh.drop(now, 0, 0, 0, 0)
		if size := len(sh.slots); size > minSlots && sh.n*8 < size {
			sh.resize(max(minSlots, 1<<bits.Len(uint(sh.n*loadDen/loadNum*2))))
		}
		sh.mu.Unlock()
	}
}
