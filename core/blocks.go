package core

import (
	"context"
	"hash/maphash"
	"strconv"
	"sync"
	"time"
	_ "unsafe" // for go:linkname

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// Lease mode (RuleSpec.Consistency): a limiter takes quota from the store
// in blocks and decides from them with no store call.
const (
	// defaultLeaseBlock is a lease rule's largest block when the file
	// names none.
	defaultLeaseBlock = 1000
	// blockShare: a block is at most 1/blockShare of what the store said
	// was left of the key (of the capacity, before it said anything), so
	// that a key near its limit is decided exactly.
	blockShare = 8
	// blockLife is the longest a block is kept, whatever its window.
	blockLife = time.Minute
	// defaultLeaseKeys is how many keys' blocks a limiter keeps at most
	// (WithLeaseKeys).
	defaultLeaseKeys = 65536
	// blockShards is the number of locks the blocks are spread over.
	blockShards = 64
	// evictSample is how many entries of a full shard are looked at to
	// choose the one evicted.
	evictSample = 8
)

// fileConsistency compiles the file's consistency and lease_block.
func (cc *compiler) fileConsistency(spec Spec) {
	switch spec.Consistency {
	case "", "exact":
	case "lease":
		cc.leaseBlock = defaultLeaseBlock
		cc.leased = true
	default:
		cc.fail("consistency", "", "consistency", spec.Consistency, "want exact or lease")
	}
	if _, given := cc.ln["lease_block"]; given || spec.LeaseBlock != 0 {
		if n, ok := cc.blockSize("lease_block", "", spec.LeaseBlock); ok {
			cc.fileBlock = n
			if cc.leaseBlock > 0 {
				cc.leaseBlock = n
			}
		}
	}
}

// fileLeaseBlock faults a lease_block of the file when nothing in it
// takes blocks (called once every rule is compiled).
func (cc *compiler) fileLeaseBlock(spec Spec) {
	if _, given := cc.ln["lease_block"]; (given || spec.LeaseBlock != 0) && !cc.leased {
		cc.needsLease("lease_block", "", spec.LeaseBlock)
	}
}

// needsLease faults the lease_block n at key, where nothing takes blocks.
func (cc *compiler) needsLease(key, label string, n int64) {
	cc.fail(key, label, "lease_block", strconv.FormatInt(n, 10), "lease_block needs consistency: lease (in the file or on the rule): it sizes the blocks of lease mode")
}

// blockSize checks a lease_block value at key.
func (cc *compiler) blockSize(key, label string, n int64) (int64, bool) {
	if n < 1 || n > algo.MaxCount {
		cc.fail(key, label, "lease_block", strconv.FormatInt(n, 10), "want 1 to %d units", int64(algo.MaxCount))
		return 0, false
	}
	return n, true
}

// consistency compiles the consistency and lease_block of the rule at key
// (whose policy, count mode and stacking are compiled) into r.block.
func (cc *compiler) consistency(key, label string, rs RuleSpec, r *Rule) {
	why := ""
	switch {
	case r.stack:
		why = "a stacked rule is taken in one store call with the rule that applies"
	case r.count == countResponse:
		why = "a rule charged by response (cost: response) charges after the handler, whatever is left"
	case r.byOutcome():
		why = "a rule that counts " + r.Count() + " asks the store before the handler and counts after it"
	case len(r.Policy.Limits) == 0:
		why = "the rule has no limit, only requests in flight"
	}
	block := cc.leaseBlock
	switch rs.Consistency {
	case "":
		if why != "" {
			block = 0 // stays exact under a lease file
		}
	case "exact":
		block = 0
	case "lease":
		block = defaultLeaseBlock
		if cc.fileBlock > 0 {
			block = cc.fileBlock
		}
		if why != "" {
			cc.fail(key+".consistency", label, "consistency", rs.Consistency, "lease mode decides from blocks taken before the request: %s", why)
			block = 0
		}
	default:
		cc.fail(key+".consistency", label, "consistency", rs.Consistency, "want exact or lease")
		block = 0
	}
	if _, given := cc.ln[key+".lease_block"]; given || rs.LeaseBlock != 0 {
		n, ok := cc.blockSize(key+".lease_block", label, rs.LeaseBlock)
		switch {
		case !ok:
		case block == 0 && why == "":
			cc.needsLease(key+".lease_block", label, rs.LeaseBlock)
		case block == 0:
			cc.fail(key+".lease_block", label, "lease_block", strconv.FormatInt(rs.LeaseBlock, 10), "the rule takes no blocks: %s", why)
		default:
			block = n
		}
	}
	r.block = block
	cc.leased = cc.leased || block > 0
}

// Consistency returns "lease" when the rule takes quota from the store in
// blocks (RuleSpec.Consistency), else "exact".
func (r *Rule) Consistency() string {
	if r.block > 0 {
		return "lease"
	}
	return "exact"
}

// LeaseBlock returns the largest block of a lease rule (RuleSpec.LeaseBlock);
// 0 for an exact one.
func (r *Rule) LeaseBlock() int64 { return r.block }

// blockTable holds a limiter's blocks: per rule policy and store key, the
// units it took from the store and has not spent. It keeps at most max
// keys; past it, a new key evicts (from its shard) an expired entry, else
// the one that decided the fewest units, of a few looked at. The zero
// value keeps none until init.
type blockTable struct {
	seed   maphash.Seed
	max    int // per shard
	shards [blockShards]blockShard
}

type blockShard struct {
	mu sync.Mutex
	m  map[blockKey]*block
}

// blockKey names an entry: a policy's name and algorithm, which every
// counter it may share with another policy has too (store.Policy.CounterID:
// two policies that share any counter meet in one entry), and a key.
type blockKey struct {
	name string
	alg  algo.Algorithm
	key  string
}

// block is what a limiter holds of one key under one policy.
type block struct {
	units   int64 // unspent units of the block
	expires int64 // when the block ends (blockTable.now); its units are void then
	size    int64 // the block's size when taken
	spent   int64 // units spent of it
	used    int64 // units decided through the entry, for eviction
	at      int64 // when res was asked for (blockTable.now)
	known   bool  // res holds an answer of the store
	// res is the store's answer when the block was taken (or the last
	// exact decision): its Remaining is what the store had left.
	res store.Result
	// renewing is closed when the store call that takes the next block
	// returns; nil when none runs. failed is the last such call's when
	// the store failed it.
	renewing, failed chan struct{}
	terms            uint64 // the Fingerprint of the policy the block was taken under
}

func (t *blockTable) init(keys int) {
	t.seed = maphash.MakeSeed()
	t.max = max(keys/blockShards, 1)
}

//go:linkname nanotime runtime.nanotime
func nanotime() int64

// now is the time blocks are measured on: with the system clock, the
// runtime's monotonic clock, which no step of the wall clock moves (a
// block lasts what the store said was left of its window); with another
// clock (a test's), that clock.
func (t *blockTable) now(c store.Clock) int64 {
	if c == store.SystemClock {
		return nanotime()
	}
	return c.Now()
}

func (t *blockTable) shard(key string) *blockShard {
	return &t.shards[maphash.String(t.seed, key)%blockShards]
}

// takeBlocks is take's store call for a lease rule: the request of a is
// decided from the block of its key when it holds enough units, else by
// the store, asked for the request's cost and the next block; while
// another request of the key asks for a block, it waits for that answer.
// Blocks are the policy's (its name and algorithm) and the key's, taken
// under one policy's terms (Fingerprint): a request under other terms (a
// provider's limits on the same counters, a reload's) is decided alone
// while a block of the first terms lasts.
func (l *Limiter) takeBlocks(ctx context.Context, a ask, res *store.Result, err *error) {
	p := a.rule.Policy
	terms := p.Fingerprint()
	k := blockKey{p.Name, p.Algorithm, a.key}
	sh := l.blocks.shard(a.key)
	sh.mu.Lock()
	b := sh.m[k]
	now := l.blocks.now(l.clock)
	for b != nil {
		if now < b.at { // the clock went back: the block's end is unknown
			b.units, b.expires = 0, 0
		}
		if b.terms != terms {
			if b.renewing != nil || now < b.expires && b.units > 0 {
				sh.mu.Unlock()
				*res, *err = l.store.Take(ctx, a.key, p, a.cost)
				return
			}
			*b = block{terms: terms, used: b.used}
		}
		if now < b.expires && b.units >= a.cost {
			b.units -= a.cost
			b.spent += a.cost
			b.used += a.cost
			b.answer(p, res, now)
			sh.mu.Unlock()
			*err = nil
			return
		}
		if b.renewing == nil {
			break
		}
		ch := b.renewing
		sh.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			*res, *err = l.store.Take(ctx, a.key, p, a.cost)
			return
		}
		sh.mu.Lock()
		now = l.blocks.now(l.clock)
		if b.failed == ch && !(sh.m[k] == b && b.terms == terms && now < b.expires && b.units >= a.cost) {
			// The store failed the block's call, and the block has not
			// the units for the request: each request waiting for it
			// asks alone, at once, and meets the failure policy.
			sh.mu.Unlock()
			*res, *err = l.store.Take(ctx, a.key, p, a.cost)
			return
		}
		b = sh.m[k]
	}
	if b == nil {
		b = &block{terms: terms}
		l.blocks.insert(sh, k, b, now)
	}
	held := int64(0) // units of the block still good (fewer than the cost)
	if now < b.expires {
		held = b.units
	}
	// The request's cost and the block must fit in the capacity, or the
	// store would refuse them together.
	extra := max(min(b.next(p, a.rule.block, now), p.Capacity()-a.cost+held), 0)
	if extra == 0 && held == 0 {
		// The request alone: requests of the key near its limit ask the
		// store side by side.
		sh.mu.Unlock()
		*res, *err = l.store.Take(ctx, a.key, p, a.cost)
		if *err == nil {
			sh.mu.Lock()
			b.exact(p, res, now, a.cost)
			sh.mu.Unlock()
		}
		return
	}
	// The units held go into the request: no other request spends them
	// meanwhile, and the requests of the key wait for the block.
	b.units -= held
	b.renewing = make(chan struct{})
	sh.mu.Unlock()
	l.renew(ctx, a, renewal{sh, b, held, extra, now, b.expires}, res, err)
}

// renewal is a request's call for a block: b (of shard sh), the units
// held of it that go into the request, the size of the block asked for,
// and when (blockTable.now).
type renewal struct {
	sh                *blockShard
	b                 *block
	held, extra, when int64
	heldEnd           int64 // when the units held end
}

// renew asks the store for the cost of the request of a, less the units
// held of r.b (taken out of it), and a block of r.extra units, or, when
// there is no room for the block, for the request alone; then records the
// answer in r.b, whose renewing it closes, also when the store panics.
//
// Units held of a window algorithm spend only in their window: when it
// ended (r.heldEnd) before the store answered, the store may have counted
// the request in the next window, and the request takes as many units
// again, from the block the store just counted, else from the store; if
// the store refuses them (or fails), the request is refused and what the
// store counted is the block. A bucket's held units (at most a block)
// have no window: they are spent.
func (l *Limiter) renew(ctx context.Context, a ask, r renewal, res *store.Result, err *error) {
	p := a.rule.Policy
	sh, b, held, extra, now := r.sh, r.b, r.held, r.extra, r.when
	done := false
	var (
		counted store.Result // the store's answer that counted the block
		block   int64        // the units of the block once the request is served
	)
	defer func() {
		sh.mu.Lock()
		ch := b.renewing
		b.renewing = nil
		close(ch)
		switch {
		case counted.Allowed: // also when the retake failed or panicked
			b.units, b.size, b.spent = block, extra, 0
			b.res, b.at, b.known = counted, now, true
			b.expires = now + blockEnd(p, &counted)
			if done && *err == nil {
				b.res = *res // the last answer: what the store has left now
				if res.Allowed {
					b.used += a.cost
					addUnits(p, res, block) // the units of the block are the caller's as well
				}
			}
		case !done || *err != nil: // the store failed (or panicked): nothing taken
			b.units += held
			b.failed = ch
		default: // denied: the units held are the key's again
			b.units += held
			b.res, b.at, b.known = *res, now, true
			b.size, b.spent = 0, 0
		}
		sh.mu.Unlock()
	}()
	*res, *err = l.store.Take(ctx, a.key, p, a.cost-held+extra)
	if *err == nil && !res.Allowed && extra > 0 {
		extra = 0 // no room for a block: the request alone, with the units held
		*res, *err = l.store.Take(ctx, a.key, p, a.cost-held)
	}
	if *err == nil && res.Allowed {
		counted, block = *res, extra
		windowed := p.Algorithm == algo.FixedWindow || p.Algorithm == algo.SlidingWindow
		if held > 0 && windowed && l.blocks.now(l.clock) >= r.heldEnd {
			if block >= held {
				block -= held
			} else {
				block = a.cost - held + extra // counted in the new window: the key's, unless the retake is allowed
				*res, *err = l.store.Take(ctx, a.key, p, held-extra)
				if *err == nil && res.Allowed {
					block = 0
				}
			}
		}
	}
	done = true
}

// next is the size of the block to ask for with the next request at now
// (0: the request alone), for p's rule whose blocks are at most most:
// twice the last one when it was spent in full; what was spent of it when
// it ended with units unspent; after a request decided alone, 1 when the
// window it was counted in (blockEnd) has not ended, else 0: a key whose
// requests come one per window never takes a block, nor does a key's
// first request. At most most, and an eighth of what the store last said
// was left (of the capacity before it said anything).
func (b *block) next(p *store.Policy, most, now int64) int64 {
	var want int64
	switch {
	case b.spent < b.size:
		want = b.spent
	case b.size > 0:
		want = 2 * b.size
	case now < b.expires:
		want = 1
	}
	left := p.Capacity()
	if b.known {
		left = b.res.Remaining
	}
	return min(want, most, left/blockShare)
}

// exact records the store's answer to a request of cost decided alone at
// now: its Remaining sizes the next block, and the end of the window it
// was counted in tells whether the next request comes in it too. A block
// another request took meanwhile is left as it is.
func (b *block) exact(p *store.Policy, res *store.Result, now, cost int64) {
	if res.Allowed {
		b.used += cost
	}
	if b.renewing != nil || b.units > 0 && now < b.expires {
		return
	}
	b.units = 0
	b.res, b.at, b.known = *res, now, true
	b.size, b.spent = 0, 0
	b.expires = now + blockEnd(p, res)
}

// answer fills res with the decision of a request of p spent from the
// block at now: admitted, with what the store had left when the block was
// taken and the units still in the block as remaining, and the resets
// counted down since.
func (b *block) answer(p *store.Policy, res *store.Result, now int64) {
	*res = b.res
	elapsed := time.Duration(now - b.at)
	res.Allowed, res.RetryAfter = true, 0
	addUnits(p, res, b.units)
	res.ResetAfter = max(res.ResetAfter-elapsed, 0)
	for i := range p.Limits {
		res.Limits[i].ResetAfter = max(res.Limits[i].ResetAfter-elapsed, 0)
	}
}

// addUnits counts n units a limiter holds in res's remaining, of p's
// every limit.
func addUnits(p *store.Policy, res *store.Result, n int64) {
	res.Remaining += n
	for i := range p.Limits {
		res.Limits[i].Remaining += n
	}
}

// blockEnd is how long a block the store granted with res lasts: until
// the end of the window its units were counted in (fixed and calendar
// windows: the window; a sliding window: the window its count is in,
// which ends a period before the count is forgotten), at most blockLife.
func blockEnd(p *store.Policy, res *store.Result) int64 {
	end := int64(blockLife)
	for i, lim := range p.Limits {
		switch p.Algorithm {
		case algo.FixedWindow:
			end = min(end, int64(res.Limits[i].ResetAfter))
		case algo.SlidingWindow:
			end = min(end, int64(res.Limits[i].ResetAfter-lim.Period))
		}
	}
	return max(end, 0)
}

// insert adds b under k to sh (locked), evicting an entry when the shard
// is full: of the first evictSample entries (map order) not waiting for
// the store, one without a live block (ended, or spent) if there is one,
// and of those the one that decided the fewest units; its unspent units,
// if any, are lost.
func (t *blockTable) insert(sh *blockShard, k blockKey, b *block, now int64) {
	if sh.m == nil {
		sh.m = make(map[blockKey]*block)
	}
	if len(sh.m) >= t.max {
		var (
			victim blockKey
			found  bool
			vLive  bool
			vUsed  int64
			seen   int
		)
		for vk, v := range sh.m {
			if v.renewing != nil {
				continue
			}
			live := now < v.expires && v.units > 0
			if !found || !live && vLive || live == vLive && v.used < vUsed {
				victim, found, vLive, vUsed = vk, true, live, v.used
			}
			if seen++; seen == evictSample {
				break
			}
		}
		if found {
			delete(sh.m, victim)
		}
	}
	sh.m[k] = b
}

// forget drops the blocks of key under every policy: after a Reset, the
// limiter's next request of it asks the store.
func (t *blockTable) forget(key string) {
	sh := t.shard(key)
	sh.mu.Lock()
	for k := range sh.m {
		if k.key == key {
			delete(sh.m, k)
		}
	}
	sh.mu.Unlock()
}
