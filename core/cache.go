package core

import (
	"hash/maphash"
	"strings"
	"sync"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

// cacheShards splits a cache, so that requests of different callers
// seldom wait on one lock.
const cacheShards = 16

// cache holds answers about callers, each for a time to live: the
// LimitProvider's limits per (rule, store key) and the plan resolver's
// plan per store key (see WithLimitCache). Each shard is a map and a ring
// of its keys in insertion order, whose oldest is dropped to make room,
// so that it holds at most about size answers however many callers come.
// An answer missing or expired is asked for once for all the requests
// that miss it together: the first asks, the others wait for its answer.
// It is safe for concurrent use.
type cache[V any] struct {
	ttl    int64 // how long an answer holds, in nanoseconds of the limiter's clock
	seed   maphash.Seed
	shards [cacheShards]cacheShard[V]
}

// cacheKey names an answer: the rule it is about (a pointer: a reloaded
// configuration's rules are new, so an answer never outlives its rule's
// terms; nil for an answer about the caller alone, its plan) and the
// caller's store key.
type cacheKey struct {
	rule *Rule
	key  string
}

// cacheEntry is one answer, or one being asked for (done not nil).
type cacheEntry[V any] struct {
	val     V
	expires int64 // limiter clock
	slot    int   // its place in the shard's ring
	done    chan struct{}
}

type cacheShard[V any] struct {
	mu   sync.Mutex
	m    map[cacheKey]*cacheEntry[V]
	ring []cacheKey
	next int
}

// newCache is a cache of about size answers (0: defaultLimitCacheSize,
// at least cacheShards) that hold for ttl (0: defaultLimitCacheTTL, at
// least a millisecond).
func newCache[V any](size int, ttl time.Duration) *cache[V] {
	if size <= 0 {
		size = defaultLimitCacheSize
	}
	if ttl <= 0 {
		ttl = defaultLimitCacheTTL
	}
	size, ttl = max(size, cacheShards), max(ttl, time.Millisecond)
	c := &cache[V]{ttl: int64(ttl), seed: maphash.MakeSeed()}
	per := (size + cacheShards - 1) / cacheShards
	for i := range c.shards {
		c.shards[i].m = make(map[cacheKey]*cacheEntry[V])
		c.shards[i].ring = make([]cacheKey, per)
	}
	return c
}

// get returns the answer for k: the cached one while it holds; else,
// when another request is asking for it, that request's answer once it
// has it; else the one ask gives, on this goroutine, kept for the time
// ask returns with it (0: the next request asks again). ask gets the
// answer k had before (expired), or the zero V. A panic in ask leaves
// that answer, expired, and goes on.
func (c *cache[V]) get(clock store.Clock, k cacheKey, ask func(stale V) (V, int64)) V {
	sh := &c.shards[maphash.String(c.seed, k.key)%cacheShards]
	now := clock.Now()
	sh.mu.Lock()
	e := sh.m[k]
	if e != nil && e.done == nil && now < e.expires {
		v := e.val
		sh.mu.Unlock()
		return v
	}
	if e != nil && e.done != nil {
		// Another request is asking: wait for its answer.
		done := e.done
		sh.mu.Unlock()
		<-done
		sh.mu.Lock()
		v := e.val
		sh.mu.Unlock()
		return v
	}
	// The cache keeps its own copy of the key: it may be part of a
	// request's memory (an address cut from a long X-Forwarded-For),
	// which an entry must not hold on to.
	k.key = strings.Clone(k.key)
	if e == nil {
		e = &cacheEntry[V]{}
		sh.m[k] = e
	}
	sh.place(k, e)
	stale := e.val
	done := make(chan struct{})
	e.done = done
	sh.mu.Unlock()

	v, ttl := stale, int64(0)
	defer func() {
		sh.mu.Lock()
		e.val, e.expires, e.done = v, clock.Now()+ttl, nil
		sh.mu.Unlock()
		close(done)
	}()
	v, ttl = ask(stale)
	return v
}

// place puts k, whose entry is e, at the ring's next slot, dropping the
// entry that slot held (unless it has moved since: an entry asked for
// again takes a new slot).
func (sh *cacheShard[V]) place(k cacheKey, e *cacheEntry[V]) {
	old := sh.ring[sh.next]
	if oe := sh.m[old]; oe != nil && oe != e && oe.slot == sh.next {
		delete(sh.m, old)
	}
	sh.ring[sh.next] = k
	e.slot = sh.next
	sh.next = (sh.next + 1) % len(sh.ring)
}

// len is the number of entries cached (for tests).
func (c *cache[V]) len() int {
	n := 0
	for i := range c.shards {
		sh := &c.shards[i]
		sh.mu.Lock()
		n += len(sh.m)
		sh.mu.Unlock()
	}
	return n
}
