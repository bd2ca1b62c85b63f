package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

func TestDenyCache(t *testing.T) {
	c := newDenyCache(1000)
	k := denyKey{rule: 7, key: "u"}
	denied := store.Result{Limit: algo.Limit{Count: 10, Period: time.Minute}, Remaining: 2, ResetAfter: 50 * time.Second, RetryAfter: 30 * time.Second}
	denied.Limits[0] = store.LimitState{Remaining: 2, ResetAfter: 50 * time.Second}
	c.put(k, 1, 3, 0, &denied, 0) // cost 3 does not fit in 2
	var r store.Result
	if c.get(k, 1, 2, int64(time.Second), &r) {
		t.Fatal("a denial of cost 3 denied cost 2 locally")
	}
	if c.get(denyKey{rule: 8, key: "u"}, 1, 3, int64(time.Second), &r) || c.get(denyKey{rule: 7, key: "v"}, 1, 3, int64(time.Second), &r) {
		t.Fatal("another rule or key was denied")
	}
	if !c.get(k, 1, 5, int64(10*time.Second), &r) {
		t.Fatal("cost 5 was not denied locally")
	}
	want := denied
	want.RetryAfter, want.ResetAfter = 20*time.Second, 40*time.Second
	want.Limits[0].ResetAfter = 40 * time.Second
	if r != want {
		t.Fatalf("cached denial 10s later:\ngot  %+v\nwant %+v", r, want)
	}
	if c.get(k, 1, 3, int64(30*time.Second), &r) {
		t.Fatal("denied locally at the retry-after instant")
	}
	if c.size.Load() != 0 {
		t.Fatalf("size %d after the entry ended, want 0", c.size.Load())
	}
	// Under new terms (a limit raised), the denial is not answered, and
	// is gone; a denial under the new terms replaces one under the old.
	c.put(k, 1, 1, 0, &denied, 0)
	if c.get(k, 2, 1, int64(time.Second), &r) || c.size.Load() != 0 {
		t.Fatal("a denial was answered under other terms, or kept")
	}
	c.put(k, 1, 1, 0, &denied, 0)
	c.put(k, 2, 3, 0, &denied, 0)
	if !c.get(k, 2, 3, int64(time.Second), &r) || c.size.Load() != 1 || c.get(k, 1, 5, int64(time.Second), &r) {
		t.Fatal("the denial under the new terms did not replace the old one")
	}
	c.put(k, 1, 1, 0, &denied, 0)
	c.drop(k)
	if c.get(k, 1, 1, 1, &r) || c.size.Load() != 0 {
		t.Fatal("drop left the entry")
	}
	allowed := store.Result{Allowed: true}
	c.put(k, 1, 1, 0, &allowed, 0) // no retry-after: nothing to cache
	if c.size.Load() != 0 {
		t.Fatal("cached a result without a retry-after")
	}
}

// TestDenyCacheExpiredFirst: a full cache makes room by dropping the
// entries that ended, not the live ones.
func TestDenyCacheExpiredFirst(t *testing.T) {
	const bound = 160 // 10 per shard
	c := newDenyCache(bound)
	short := store.Result{RetryAfter: time.Second}
	long := store.Result{RetryAfter: time.Hour}
	for i := range 2000 { // fill every shard with entries that end at 1s
		c.put(denyKey{key: "old" + strconv.Itoa(i)}, 1, 1, 0, &short, 0)
	}
	var live []denyKey
	for i := range 2000 {
		k := denyKey{key: "new" + strconv.Itoa(i)}
		sh := c.shard(k)
		if len(live) < bound/2 && countLive(sh, int64(2*time.Second)) < 5 {
			c.put(k, 1, 1, int64(2*time.Second), &long, 0)
			live = append(live, k)
		}
	}
	if n := c.size.Load(); n > bound {
		t.Fatalf("%d entries, bound %d", n, bound)
	}
	var r store.Result
	for _, k := range live {
		if !c.get(k, 1, 1, int64(3*time.Second), &r) {
			t.Fatalf("live entry %q was evicted while expired ones were there", k.key)
		}
	}
	if len(live) != bound/2 {
		t.Fatalf("placed %d live entries, want %d", len(live), bound/2)
	}
}

func countLive(sh *denyShard, now int64) int {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	n := 0
	for _, d := range sh.m {
		if now < d.until {
			n++
		}
	}
	return n
}

// TestDenyCacheBound floods the cache with distinct keys: it never holds
// more than its bound.
func TestDenyCacheBound(t *testing.T) {
	const bound = 1600
	c := newDenyCache(bound)
	r := store.Result{RetryAfter: time.Second}
	for i := range 100_000 {
		c.put(denyKey{key: strconv.Itoa(i)}, 1, 1, int64(i)*int64(time.Millisecond), &r, 0)
		if n := c.size.Load(); n > bound {
			t.Fatalf("%d entries after %d puts, bound %d", n, i+1, bound)
		}
	}
	total := 0
	for i := range c.shards {
		total += len(c.shards[i].m)
	}
	if int64(total) != c.size.Load() {
		t.Fatalf("size %d, entries %d", c.size.Load(), total)
	}
}
