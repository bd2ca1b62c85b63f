package memstore

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// TestEvictOneOrder: evictOne drops an expired counter first and
// does not count it as an eviction; then the live counter of the lowest
// level (closest to expiry among equals), counted; a counter at its limit
// goes last, whatever its expiry.
func TestEvictOneOrder(t *testing.T) {
	s := New(WithShards(1), WithMaxKeys(16))
	const now = int64(1_700_000_000) * int64(time.Second)
	pol := func(count int64, period time.Duration) *store.Policy {
		return &store.Policy{Name: "p", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: count, Period: period}}}
	}
	var r store.Result
	take := func(h uint64, p *store.Policy, cost int64, at int64) {
		s.takeOne(&r, h, p, cost, at, true)
		if !r.Allowed {
			t.Fatalf("counter %d: denied", h)
		}
	}
	const (
		expiredH = 1 + iota
		atLimitSoon
		lowLate
		lowSoon
		mid
	)
	take(expiredH, pol(10, time.Second), 1, now-10*int64(time.Second)) // expired at now
	take(atLimitSoon, pol(1, time.Second), 1, now)                     // at its limit, expires first of the live ones
	take(lowLate, pol(1000, 24*time.Hour), 1, now)                     // level 0, expires last
	take(lowSoon, pol(1000, time.Minute), 1, now)                      // level 0, expires before lowLate
	take(mid, pol(10, time.Minute), 5, now)                            // half consumed
	sh := &s.shards[0]
	has := func(h uint64) bool { _, c := s.lookup(*sh.tab.Load(), h); return c != nil }
	for i, want := range []struct {
		gone      uint64
		evictions uint64
	}{{expiredH, 0}, {lowSoon, 1}, {lowLate, 2}, {mid, 3}, {atLimitSoon, 4}} {
		sh.mu.Lock()
		s.evictOne(sh, now)
		sh.mu.Unlock()
		if has(want.gone) || sh.evictions != want.evictions || sh.n != 4-i {
			t.Fatalf("evictOne #%d: counter %d kept %v, evictions %d, n %d; want it gone, %d evictions, n %d",
				i+1, want.gone, has(want.gone), sh.evictions, sh.n, want.evictions, 4-i)
		}
	}
	sh.mu.Lock()
	s.evictOne(sh, now) // an empty index: nothing to drop, no panic
	sh.mu.Unlock()
}
