package redisstore

import (
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
)

func TestDenyCache(t *testing.T) {
	c := newDenyCache(1000)
	k := denyKey{rule: 7, key: "u"}
	denied := core.Result{Limit: core.Limit{Count: 10, Period: time.Minute}, Remaining: 2, ResetAfter: 50 * time.Second, RetryAfter: 30 * time.Second}
	denied.Limits[0] = core.LimitState{Remaining: 2, ResetAfter: 50 * time.Second}
	c.put(k, 3, 0, &denied) // cost 3 does not fit in 2
	var r core.Result
	if c.get(k, 2, int64(time.Second), &r) {
		t.Fatal("a denial of cost 3 denied cost 2 locally")
	}
	if c.get(denyKey{rule: 8, key: "u"}, 3, int64(time.Second), &r) || c.get(denyKey{rule: 7, key: "v"}, 3, int64(time.Second), &r) {
		t.Fatal("another rule or key was denied")
	}
	if !c.get(k, 5, int64(10*time.Second), &r) {
		t.Fatal("cost 5 was not denied locally")
	}
	want := denied
	want.RetryAfter, want.ResetAfter = 20*time.Second, 40*time.Second
	want.Limits[0].ResetAfter = 40 * time.Second
	if r != want {
		t.Fatalf("cached denial 10s later:\ngot  %+v\nwant %+v", r, want)
	}
	if c.get(k, 3, int64(30*time.Second), &r) {
		t.Fatal("denied locally at the retry-after instant")
	}
	if c.size.Load() != 0 {
		t.Fatalf("size %d after the entry ended, want 0", c.size.Load())
	}
	c.put(k, 1, 0, &denied)
	c.drop(k)
	if c.get(k, 1, 1, &r) || c.size.Load() != 0 {
		t.Fatal("drop left the entry")
	}
	allowed := core.Result{Allowed: true}
	c.put(k, 1, 0, &allowed) // no retry-after: nothing to cache
	if c.size.Load() != 0 {
		t.Fatal("cached a result without a retry-after")
	}
}

// TestDenyCacheBound floods the cache with distinct keys: it never holds
// more than its bound, and prefers to drop entries that ended.
func TestDenyCacheBound(t *testing.T) {
	const bound = 1600
	c := newDenyCache(bound)
	r := core.Result{RetryAfter: time.Second}
	for i := range 100_000 {
		c.put(denyKey{key: strconv.Itoa(i)}, 1, int64(i)*int64(time.Millisecond), &r)
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
	// Every entry alive at the end (put in the last second) is still there
	// unless its shard was full of live entries.
	var got core.Result
	if !c.get(denyKey{key: "99999"}, 1, 99_999*int64(time.Millisecond), &got) {
		t.Fatal("the newest entry is gone")
	}
}
