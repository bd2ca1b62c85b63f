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

var _ core.Store = (*Store)(nil)

type slot struct {
	h   uint64 // 0: empty
	exp int64
	st  algo.State
}

type shard struct {
	mu    sync.Mutex
	slots []slot
	n     int
	cap   int
	_     [64 - 8 - 24 - 16]byte // keep shards on separate cache lines
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

// Reset implements core.Store.
func (s *Store) Reset(_ context.Context, key string, p *core.Policy) error {
	h0 := s.hash(key, p)
	sh := s.shard(h0)
	sh.mu.Lock()
	for i := range p.Limits {
		if j := sh.find(limitHash(h0, i)); j >= 0 {
			sh.remove(j)
		}
	}
	sh.mu.Unlock()
	return nil
}

// Len returns the number of counters held.
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

// TakeAt is Take at the instant now (Unix nanoseconds), for callers that
// already read the clock; it fills r in place. It allocates nothing for an
// existing key. A policy with no limits or more than core.MaxLimits is
// denied.
func (s *Store) TakeAt(r *core.Result, key string, p *core.Policy, cost, now int64) {
	if len(p.Limits) == 1 {
		s.takeOne(r, key, p, cost, now)
		return
	}
	if n := len(p.Limits); n == 0 || n > core.MaxLimits {
		*r = core.Result{}
		return
	}
	*r = s.takeMany(key, p, cost, now)
}

// takeOne is TakeAt for the common one-limit policy.
func (s *Store) takeOne(r *core.Result, key string, p *core.Policy, cost, now int64) {
	h := s.hash(key, p)
	l := &p.Limits[0]
	sh := s.shard(h)
	var o algo.Outcome
	sh.mu.Lock()
	if i := sh.find(h); i >= 0 {
		e := &sh.slots[i]
		algo.Apply(p.Algorithm, &e.st, l, now, cost, &o)
		if o.Allowed && cost > 0 {
			e.exp = o.ExpireAt
		}
	} else {
		var st algo.State
		algo.Apply(p.Algorithm, &st, l, now, cost, &o)
		if o.Allowed && cost > 0 {
			sh.insert(slot{h: h, exp: o.ExpireAt, st: st}, now)
		}
	}
	sh.mu.Unlock()
	r.SetOutcome(*l, &o)
}

func (s *Store) takeMany(key string, p *core.Policy, cost, now int64) core.Result {
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
	r := core.Evaluate(p, &states, &exp, now, cost)
	if r.Allowed && cost > 0 {
		// Update in place first: inserting may move slots.
		for i := range p.Limits {
			if at[i] >= 0 {
				sh.slots[at[i]].st, sh.slots[at[i]].exp = states[i], exp[i]
			}
		}
		for i := range p.Limits {
			if at[i] < 0 {
				sh.insert(slot{h: hs[i], exp: exp[i], st: states[i]}, now)
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

// evict frees about a tenth of a full shard in one pass: every expired
// counter and, when that is not enough, the live ones closest to expiry.
func (sh *shard) evict(now int64) {
	target := max(sh.cap/10, 1)
	// Sample the expiry of live counters at an even stride to estimate the
	// threshold below which the oldest ones lie.
	var sample [128]int64
	ns, expired := 0, 0
	stride := max(sh.n/len(sample), 1)
	seen := 0
	for _, e := range sh.slots {
		if e.h == 0 {
			continue
		}
		if e.exp <= now {
			expired++
			continue
		}
		if seen%stride == 0 && ns < len(sample) {
			sample[ns] = e.exp
			ns++
		}
		seen++
	}
	threshold, budget := int64(math.MinInt64), 0
	if need := target - expired; need > 0 && ns > 0 {
		live := max(sh.n-expired, 1)
		slices.Sort(sample[:ns])
		threshold, budget = sample[min(need*ns/live, ns-1)], need
	}
	// Counters of one fixed window share an expiry: drop at most budget
	// live ones, so ties at the threshold cannot empty the shard.
	sh.filter(func(e *slot) bool {
		if e.exp <= now {
			return false
		}
		if e.exp <= threshold && budget > 0 {
			budget--
			return false
		}
		return true
	})
}

// filter keeps the entries for which keep is true, in place, in one pass.
func (sh *shard) filter(keep func(*slot) bool) {
	mask := len(sh.slots) - 1
	start := 0
	for sh.slots[start].h != 0 { // a slot empty before the pass: no probe sequence crosses it
		start++
	}
	for k := 1; k <= len(sh.slots); k++ {
		j := (start + k) & mask
		e := sh.slots[j]
		if e.h == 0 {
			continue
		}
		sh.slots[j] = slot{}
		if keep(&e) {
			sh.place(e) // lands at j or before it: its home lies in (start, j]
		} else {
			sh.n--
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
		sh.filter(func(e *slot) bool { return e.exp > now })
		if size := len(sh.slots); size > minSlots && sh.n*8 < size {
			sh.resize(max(minSlots, 1<<bits.Len(uint(sh.n*loadDen/loadNum*2))))
		}
		sh.mu.Unlock()
	}
}
