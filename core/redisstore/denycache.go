package redisstore

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

// denyCache remembers denials: once Redis denies key a request of some cost
// with a known retry-after, a request of at least that cost under the same
// terms is denied locally until then. That is exact as long as nothing but
// time frees quota (another process's Reset does, and is only seen when the
// entry ends; new terms, a raised limit, are never answered from a denial
// made under the old ones).
type denyCache struct {
	shards [denyShards]denyShard
	size   atomic.Int64
	max    int // per shard
}

const denyShards = 16

// denyKey names the counters of key under a policy, whatever its terms:
// a Reset under new terms drops a denial made under old ones.
type denyKey struct {
	rule uint64 // the identity of the policy's first counter (CounterID(0))
	key  string
}

type denial struct {
	terms     uint64 // the fingerprint of the policy that denied
	at, until int64  // local clock, ns
	cost      int64
	result    store.Result
}

type denyShard struct {
	mu   sync.Mutex
	m    map[denyKey]*denial
	hits uint64 // denials answered from the shard (under mu)
}

func newDenyCache(maxEntries int) *denyCache {
	c := &denyCache{max: max(maxEntries/denyShards, 1)}
	for i := range c.shards {
		c.shards[i].m = make(map[denyKey]*denial)
	}
	return c
}

func (c *denyCache) shard(k denyKey) *denyShard {
	h := k.rule
	for i := 0; i < len(k.key) && i < 32; i++ {
		h = (h ^ uint64(k.key[i])) * 1099511628211
	}
	return &c.shards[h%denyShards]
}

// get fills r and reports true when k is denied locally under the terms
// of fingerprint terms for cost at now. A denial under other terms is
// dropped.
func (c *denyCache) get(k denyKey, terms uint64, cost, now int64, r *store.Result) bool {
	if c.size.Load() == 0 {
		return false
	}
	sh := c.shard(k)
	sh.mu.Lock()
	d := sh.m[k]
	if d == nil || now >= d.until || d.terms != terms {
		if d != nil {
			delete(sh.m, k)
			c.size.Add(-1)
		}
		sh.mu.Unlock()
		return false
	}
	if cost < d.cost {
		sh.mu.Unlock()
		return false
	}
	*r = d.result
	elapsed := time.Duration(now - d.at)
	sh.hits++
	sh.mu.Unlock()
	r.RetryAfter -= elapsed
	r.ResetAfter = max(r.ResetAfter-elapsed, 0)
	for i := range r.Limits {
		r.Limits[i].ResetAfter = max(r.Limits[i].ResetAfter-elapsed, 0)
	}
	return true
}

// put records a denial of cost at now under the terms of fingerprint
// terms, for its RetryAfter, or keep when shorter (> 0; see
// Store.denyKeep).
func (c *denyCache) put(k denyKey, terms uint64, cost, now int64, r *store.Result, keep time.Duration) {
	if r.RetryAfter <= 0 {
		return
	}
	until := now + int64(r.RetryAfter)
	if keep > 0 {
		until = min(until, now+int64(keep))
	}
	d := &denial{terms: terms, at: now, until: until, cost: cost, result: *r}
	sh := c.shard(k)
	sh.mu.Lock()
	if old, ok := sh.m[k]; ok {
		// Keep the entry that denies more under the same terms: the lower
		// cost, and the later end for it.
		if old.terms == terms && old.cost < cost && now < old.until {
			sh.mu.Unlock()
			return
		}
	} else {
		if len(sh.m) >= c.max {
			c.evict(sh, now)
		}
		c.size.Add(1)
	}
	sh.m[k] = d
	sh.mu.Unlock()
}

// evict makes room in a full shard: its expired entries go first and, when
// they are fewer than an eighth of it, arbitrary ones (map order) up to an
// eighth. Freeing an eighth at least keeps the scans rare.
func (c *denyCache) evict(sh *denyShard, now int64) {
	target := max(len(sh.m)/8, 1)
	n := 0
	for k, d := range sh.m {
		if now >= d.until {
			delete(sh.m, k)
			n++
		}
	}
	for k := range sh.m {
		if n >= target {
			break
		}
		delete(sh.m, k)
		n++
	}
	c.size.Add(-int64(n))
}

// drop forgets k, as Reset must.
func (c *denyCache) drop(k denyKey) {
	sh := c.shard(k)
	sh.mu.Lock()
	if _, ok := sh.m[k]; ok {
		delete(sh.m, k)
		c.size.Add(-1)
	}
	sh.mu.Unlock()
}

// hitCount returns how many denials the cache has answered.
func (c *denyCache) hitCount() uint64 {
	var n uint64
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += sh.hits
		sh.mu.Unlock()
	}
	return n
}
