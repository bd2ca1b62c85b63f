package jwtissuer

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// t0 is the start of every step test.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newTestLimiter returns a limiter on a manual clock reading t0.
func newTestLimiter(rate int, window time.Duration, maxKeys int) (*RateLimiter, *store.ManualClock) {
	clock := store.NewManualClock(t0)
	return newRateLimiter(rate, window, clock, maxKeys), clock
}

// state returns key's bucket, and whether it has one.
func (rl *RateLimiter) state(key string) (bucket, bool) {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	i, ok := rl.index[store.BoundKey(key)]
	if !ok {
		return bucket{}, false
	}
	return rl.buckets[i], true
}

func tokensOf(t *testing.T, rl *RateLimiter, key string) int64 {
	t.Helper()
	b, ok := rl.state(key)
	if !ok {
		t.Fatalf("no bucket for %q", key)
	}
	return b.tokens
}

// TestAllowNTable checks every row of the AllowN table, in the table's
// order, and that a refused call changes nothing.
func TestAllowNTable(t *testing.T) {
	rl, _ := newTestLimiter(100, time.Minute, maxBuckets)
	const key = "user:123"

	type row struct {
		name       string
		key        string
		n          int
		want       bool
		wantTokens int64 // key's tokens after the call; -1: key has no bucket
	}
	for _, r := range []row{
		{"n<0 on a new key", key, -1, false, -1},
		{"n==0 on a new key makes no bucket", key, 0, true, -1},
		{"n>rate on a new key", key, 101, false, -1},
		{"key empty", "", 1, false, -1},
		{"key empty, n==0 (n is checked first)", "", 0, true, -1},
		{"new key starts full: n==rate", key, 100, true, 0},
		{"tokens < n: nothing taken", key, 1, false, 0},
		{"n==0 on an empty bucket", key, 0, true, 0},
		{"n<0 on an empty bucket", key, -5, false, 0},
	} {
		if got := rl.AllowN(r.key, r.n); got != r.want {
			t.Fatalf("%s: AllowN(%q, %d) = %v, want %v", r.name, r.key, r.n, got, r.want)
		}
		b, ok := rl.state(key)
		switch {
		case r.wantTokens < 0 && ok:
			t.Fatalf("%s: %q has a bucket (%d tokens), want none", r.name, key, b.tokens)
		case r.wantTokens >= 0 && (!ok || b.tokens != r.wantTokens):
			t.Fatalf("%s: %q has %d tokens (bucket %v), want %d", r.name, key, b.tokens, ok, r.wantTokens)
		}
	}
	if _, ok := rl.state(""); ok {
		t.Fatal("the empty key has a bucket")
	}

	// tokens ≥ n: true and n taken; tokens < n: false, nothing taken.
	rl2, _ := newTestLimiter(100, time.Minute, maxBuckets)
	for _, s := range []struct {
		n          int
		want       bool
		wantTokens int64
	}{
		{10, true, 90},  // the seed's example: 10 of 100
		{95, false, 90}, // 90 left: 95 refused, nothing taken
		{101, false, 90},
		{90, true, 0}, // exactly what is left
		{1, false, 0},
	} {
		if got := rl2.AllowN(key, s.n); got != s.want {
			t.Fatalf("AllowN(%q, %d) = %v, want %v", key, s.n, got, s.want)
		}
		if got := tokensOf(t, rl2, key); got != s.wantTokens {
			t.Fatalf("after AllowN(%q, %d): %d tokens, want %d", key, s.n, got, s.wantTokens)
		}
	}
	// Allow is AllowN(key, 1).
	rl3, _ := newTestLimiter(2, time.Minute, maxBuckets)
	for i, want := range []bool{true, true, false} {
		if got := rl3.Allow(key); got != want {
			t.Fatalf("Allow #%d = %v, want %v", i+1, got, want)
		}
	}
}

// TestRefillKeepsRemainder pins the proportional refill at exact instants:
// rate 3 per second, so a token every 333,333,333⅓ns. A refill at +400ms
// adds one token and moves the refill point to +333,333,333⅓ns, not to
// +400ms: the next token comes at +666,666,667ns (not +733ms), the third
// at +1s exactly.
func TestRefillKeepsRemainder(t *testing.T) {
	rl, clock := newTestLimiter(3, time.Second, maxBuckets)
	const key = "k"
	at := func(d time.Duration) { clock.Set(t0.Add(d)) }
	steps := []struct {
		at   time.Duration
		n    int
		want bool
	}{
		{0, 3, true},                      // empties the new bucket; refill point t0
		{400 * time.Millisecond, 1, true}, // 1 token accrued (1.2 → 1, 0.2 kept)
		{400 * time.Millisecond, 1, false},
		{666_666_666, 1, false}, // 1.999999998 tokens since t0, one taken
		{666_666_667, 1, true},  // 2.000000001
		{999_999_999, 1, false},
		{time.Second, 1, true}, // 3 tokens since t0
		{time.Second, 1, false},
	}
	for _, s := range steps {
		at(s.at)
		if got := rl.AllowN(key, s.n); got != s.want {
			t.Fatalf("+%v: AllowN(%d) = %v, want %v", s.at, s.n, got, s.want)
		}
	}
	// The state after the +400ms refill: the refill point is last −
	// credit/rate = 400ms − 200,000,000/3 ns = 333,333,333⅓ns.
	rl2, clock2 := newTestLimiter(3, time.Second, maxBuckets)
	rl2.AllowN(key, 3)
	clock2.Set(t0.Add(400 * time.Millisecond))
	rl2.AllowN(key, 1)
	b, _ := rl2.state(key)
	if b.last != t0.Add(400*time.Millisecond).UnixNano() || b.credit != 200_000_000 || b.tokens != 0 {
		t.Fatalf("after the +400ms refill: last +%v, credit %d, tokens %d; want +400ms, 200000000 (0.2 token), 0",
			time.Duration(b.last-t0.UnixNano()), b.credit, b.tokens)
	}
}

// TestRefillManySmallSteps asks every millisecond for a minute: the total
// admitted is exactly what the rate allows, however fine the steps.
func TestRefillManySmallSteps(t *testing.T) {
	rl, clock := newTestLimiter(7, time.Second, maxBuckets)
	admitted := 0
	for ms := 0; ms <= 60_000; ms++ {
		clock.Set(t0.Add(time.Duration(ms) * time.Millisecond))
		for rl.Allow("k") {
			admitted++
		}
	}
	// 7 at t0, then one every 1/7 s for 60 s: floor(60×7) = 420 more.
	if want := 7 + 420; admitted != want {
		t.Fatalf("admitted %d over a minute, want %d", admitted, want)
	}
}

// TestFullBucketAccruesNothing: a full bucket's refill point is now, so a
// token taken after a long idle time comes back a whole interval later.
func TestFullBucketAccruesNothing(t *testing.T) {
	rl, clock := newTestLimiter(1, time.Second, maxBuckets)
	clock.Set(t0)
	rl.AllowN("k", 0) // makes nothing
	if !rl.Allow("k") {
		t.Fatal("first Allow refused")
	}
	clock.Set(t0.Add(5 * time.Second)) // full since t0+1s
	if !rl.Allow("k") {
		t.Fatal("Allow after 5s refused")
	}
	for _, s := range []struct {
		at   time.Duration
		want bool
	}{
		{5*time.Second + 999_999_999, false},
		{6 * time.Second, true},
	} {
		clock.Set(t0.Add(s.at))
		if got := rl.Allow("k"); got != s.want {
			t.Fatalf("+%v: Allow = %v, want %v", s.at, got, s.want)
		}
	}
}

// TestClockBackwards: a reading earlier than the last refill adds nothing.
// TestClockBackwards: when the clock goes back, what was granted and the
// half token accrued stay, and the refill resumes from the earlier reading
// (not from the old one, which would lock the key out for the whole step).
func TestClockBackwards(t *testing.T) {
	rl, clock := newTestLimiter(2, time.Second, maxBuckets) // a token per 500ms
	clock.Set(t0.Add(10 * time.Second))
	rl.AllowN("k", 2)
	clock.Set(t0.Add(10*time.Second + 250*time.Millisecond)) // half a token
	if rl.Allow("k") {
		t.Fatal("Allow with half a token admitted")
	}
	clock.Set(t0) // back 10.25s
	if rl.Allow("k") {
		t.Fatal("Allow right after the clock went back admitted")
	}
	clock.Set(t0.Add(249_999_999))
	if rl.Allow("k") {
		t.Fatal("Allow 1ns before the second half of the token admitted")
	}
	clock.Set(t0.Add(250 * time.Millisecond))
	if !rl.Allow("k") {
		t.Fatal("Allow at the first whole token after the step refused")
	}
	// A token granted before a step stays granted.
	clock.Set(t0.Add(time.Hour)) // full again: 2 tokens
	rl.AllowN("k", 1)
	clock.Set(t0)
	if !rl.Allow("k") {
		t.Fatal("the token left before the clock went back was lost")
	}
}

// TestExtremeRates exercises the 128-bit refill: rate×elapsed beyond 2^63.
func TestExtremeRates(t *testing.T) {
	rl, clock := newTestLimiter(math.MaxInt32, 24*time.Hour, maxBuckets)
	if !rl.AllowN("k", math.MaxInt32) {
		t.Fatal("a full bucket refused its capacity")
	}
	elapsed := 12*time.Hour + 1
	clock.Set(t0.Add(elapsed))
	// floor(MaxInt32 × elapsed / 24h): the product needs 77 bits.
	w := new(big.Int).Mul(big.NewInt(math.MaxInt32), big.NewInt(int64(elapsed)))
	want := w.Div(w, big.NewInt(int64(24*time.Hour))).Int64()
	if want != math.MaxInt32/2 {
		t.Fatalf("test arithmetic: %d", want)
	}
	if !rl.AllowN("k", int(want)) || rl.AllowN("k", 1) {
		t.Fatalf("after %v: want exactly %d tokens", elapsed, want)
	}
	if got := newRateLimiter(math.MaxInt, time.Second, store.SystemClock, 1).rate; got != math.MaxInt32 {
		t.Fatalf("rate MaxInt clamped to %d, want %d", got, math.MaxInt32)
	}
}

// TestInvalidLimiterAdmitsNothing: a rate below 1 or a window below 1ns.
func TestInvalidLimiterAdmitsNothing(t *testing.T) {
	for _, c := range []struct {
		rate   int
		window time.Duration
	}{{0, time.Second}, {-1, time.Second}, {10, 0}, {10, -time.Second}} {
		rl := NewRateLimiter(c.rate, c.window)
		if rl.Allow("k") || rl.AllowN("k", 1) || !rl.AllowN("k", 0) {
			t.Errorf("NewRateLimiter(%d, %v): admitted a request, or refused n=0", c.rate, c.window)
		}
		rl.Close()
	}
}

func TestResetAndClose(t *testing.T) {
	rl, _ := newTestLimiter(2, time.Hour, maxBuckets)
	rl.AllowN("a", 2)
	rl.AllowN("b", 2)
	rl.Reset("a")
	rl.Reset("nobody")
	if !rl.AllowN("a", 2) {
		t.Fatal("a after Reset is not full")
	}
	if rl.Allow("b") {
		t.Fatal("Reset of a refilled b")
	}
	rl.Close()
	rl.Close()
	if rl.Allow("a") || rl.Allow("new") || rl.AllowN("new", 1) {
		t.Fatal("Allow after Close admitted")
	}
	if !rl.AllowN("new", 0) {
		t.Fatal("AllowN(0) after Close = false, want true (the table's n == 0 row)")
	}
	rl.Reset("a") // no panic
	if n := rl.len(); n != 0 {
		t.Fatalf("%d buckets after Close", n)
	}
}

// TestLongKeys: keys over 128 bytes are kept as a digest, so a bucket
// holds a bounded key; each long key still has its own bucket.
func TestLongKeys(t *testing.T) {
	rl, _ := newTestLimiter(1, time.Hour, maxBuckets)
	a, b := strings.Repeat("a", 10_000), strings.Repeat("a", 9_999)+"b"
	if !rl.Allow(a) || !rl.Allow(b) || rl.Allow(a) || rl.Allow(b) {
		t.Fatal("long keys do not have one bucket each")
	}
	for _, bk := range rl.buckets {
		if len(bk.key) > store.MaxKeyLen {
			t.Fatalf("bucket key of %d bytes kept", len(bk.key))
		}
	}
	rl.Reset(a)
	if !rl.Allow(a) || rl.Allow(b) {
		t.Fatal("Reset of a long key")
	}
}

// present returns which of keys have a bucket.
func present(rl *RateLimiter, keys ...string) []string {
	var got []string
	for _, k := range keys {
		if _, ok := rl.state(k); ok {
			got = append(got, k)
		}
	}
	return got
}

func names(prefix string, from, to int) []string {
	var s []string
	for i := from; i <= to; i++ {
		s = append(s, prefix+strconv.Itoa(i))
	}
	return s
}

func sameKeys(t *testing.T, what string, got, want []string) {
	t.Helper()
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("%s: keys present %v, want %v", what, got, want)
	}
}

// TestFloodKeepsDrainedKeys: keys that emptied their bucket stay denied
// through a flood of 100,000 fresh keys, 10 times the limiter's capacity,
// whether they keep asking (denied) or go quiet; the fresh keys, each one
// token down, go first. (Dropping the oldest last refill first would drop
// the quiet drained keys at the first eviction.)
func TestFloodKeepsDrainedKeys(t *testing.T) {
	rl, clock := newTestLimiter(5, time.Hour, maxBuckets)
	quiet, polling := names("quiet", 0, 49), names("polling", 0, 49)
	for _, k := range append(append([]string{}, quiet...), polling...) {
		if !rl.AllowN(k, 5) || rl.Allow(k) {
			t.Fatalf("%s: could not drain", k)
		}
	}
	for i := range 100_000 {
		clock.Advance(time.Millisecond) // 100 s in all: less than a token refills (one per 12 min)
		if !rl.Allow("flood:" + strconv.Itoa(i)) {
			t.Fatalf("fresh key %d refused", i)
		}
		if i%1000 == 0 {
			for _, k := range polling {
				if rl.Allow(k) {
					t.Fatalf("after %d fresh keys: %s admitted", i+1, k)
				}
			}
		}
		if n := len(rl.buckets); n > maxBuckets {
			t.Fatalf("%d buckets, want ≤ %d", n, maxBuckets)
		}
	}
	for _, k := range append(quiet, polling...) {
		if got := tokensOf(t, rl, k); got != 0 {
			t.Fatalf("%s has %d tokens after the flood, want 0", k, got)
		}
		if rl.Allow(k) {
			t.Fatalf("%s admitted after the flood", k)
		}
	}
}

// TestEvictionFewestConsumedFirst: with no idle bucket, each eviction
// drops the bucket that consumed fewest tokens: b9 (1 taken), then b8 (2),
// ... b1 (9); the drained buckets go last, the oldest last refill first.
func TestEvictionFewestConsumedFirst(t *testing.T) {
	rl, clock := newTestLimiter(10, time.Minute, 10) // frees 1 when full; a token per 6 s
	rl.AllowN("d", 10)
	for k := 1; k <= 9; k++ {
		clock.Set(t0.Add(time.Duration(k) * time.Millisecond))
		rl.AllowN("b"+strconv.Itoa(k), 10-k)
	}
	all := append(append([]string{"d"}, names("b", 1, 9)...), names("n", 1, 10)...)
	for i := 1; i <= 10; i++ {
		clock.Set(t0.Add(time.Second + time.Duration(i)*time.Millisecond))
		rl.AllowN("n"+strconv.Itoa(i), 10) // drained at once
		want := append(append([]string{"d"}, names("b", 1, 9-i)...), names("n", 1, i)...)
		if i == 10 { // only drained buckets left: d has the oldest last refill
			want = names("n", 1, 10)
		}
		sameKeys(t, "after n"+strconv.Itoa(i), present(rl, all...), want)
	}
}

// TestEvictionCountsRefill: tokens consumed are counted after refill to
// now: a bucket drained 48 s ago has 8 of 10 tokens back, fewer consumed
// than buckets that just took 3, so it goes first.
func TestEvictionCountsRefill(t *testing.T) {
	rl, clock := newTestLimiter(10, time.Minute, 10)
	rl.AllowN("old", 10)
	clock.Set(t0.Add(48 * time.Second))
	for k := 1; k <= 9; k++ {
		rl.AllowN("b"+strconv.Itoa(k), 3)
	}
	rl.Allow("x")
	all := append(append([]string{"old"}, names("b", 1, 9)...), "x")
	sameKeys(t, "after x", present(rl, all...), all[1:])
}

// TestEvictionOldestFirst: a full limiter with no idle bucket drops a tenth
// of its capacity; of buckets that consumed as many tokens, those with the
// oldest last refill, and a bucket refilled since is young again.
func TestEvictionOldestFirst(t *testing.T) {
	rl, clock := newTestLimiter(5, time.Minute, 20) // frees 2 when full
	all := names("k", 0, 24)
	for i := range 20 {
		clock.Set(t0.Add(time.Duration(i) * time.Millisecond))
		rl.Allow(all[i])
	}
	clock.Set(t0.Add(20 * time.Millisecond))
	rl.Allow("k20") // full: k0 and k1 go
	sameKeys(t, "after k20", present(rl, all...), names("k", 2, 20))

	clock.Set(t0.Add(21 * time.Millisecond))
	rl.Allow("k2") // refilled now: young again
	rl.Allow("k3")
	rl.Allow("k21") // 20 buckets: no eviction
	sameKeys(t, "after k21", present(rl, all...), names("k", 2, 21))
	clock.Set(t0.Add(22 * time.Millisecond))
	rl.Allow("k22") // full: the oldest are now k4 and k5
	sameKeys(t, "after k22", present(rl, all...), append(names("k", 2, 3), names("k", 6, 22)...))
	if n := rl.len(); n != 19 {
		t.Fatalf("%d buckets, want 19", n)
	}
	if got := tokensOf(t, rl, "k2"); got != 3 {
		t.Fatalf("k2 kept %d tokens, want 3: eviction must not touch survivors", got)
	}
}

// TestEvictionIdleFirst: the buckets idle for more than 2×window go first,
// all of them, even though younger ones are full too.
func TestEvictionIdleFirst(t *testing.T) {
	rl, clock := newTestLimiter(5, time.Second, 10) // frees 1 when full
	for i := range 5 {
		clock.Set(t0.Add(time.Duration(i)))
		rl.Allow("old" + strconv.Itoa(i))
	}
	for i := range 5 {
		clock.Set(t0.Add(2*time.Second + time.Duration(i)))
		rl.Allow("new" + strconv.Itoa(i))
	}
	// At t0+2s+4ns, old0..old3 were last refilled more than 2s before.
	clock.Set(t0.Add(2*time.Second + 4))
	rl.Allow("x") // old0..old3 are idle > 2s; old4 (t0+4ns) is exactly 2s: not idle
	sameKeys(t, "after x", present(rl, append(names("old", 0, 4), append(names("new", 0, 4), "x")...)...),
		append([]string{"old4"}, append(names("new", 0, 4), "x")...))
}

// TestEvictionTopsUp: when the idle buckets free less than a tenth, the
// oldest live ones go too, until a tenth is free; the next inserts then
// find room.
func TestEvictionTopsUp(t *testing.T) {
	rl, clock := newTestLimiter(5, time.Second, 30) // frees 3 when full
	rl.Allow("idle")
	for i := range 29 {
		clock.Set(t0.Add(3*time.Second + time.Duration(i)))
		rl.Allow("live" + strconv.Itoa(i))
	}
	rl.Allow("a") // idle goes (1), then live0 and live1 (the oldest)
	want := append(names("live", 2, 28), "a")
	sameKeys(t, "after a", present(rl, append(append([]string{"idle"}, names("live", 0, 28)...), "a", "b", "c")...), want)
	rl.Allow("b")
	rl.Allow("c") // 30 buckets, no eviction yet
	if n := rl.len(); n != 30 {
		t.Fatalf("%d buckets, want 30", n)
	}
}

// TestEvictionTies: buckets refilled at the same instant; exactly a tenth
// goes.
func TestEvictionTies(t *testing.T) {
	rl, _ := newTestLimiter(5, time.Minute, 100)
	for i := range 101 {
		rl.Allow("k" + strconv.Itoa(i))
	}
	if n := rl.len(); n != 91 {
		t.Fatalf("%d buckets after 101 inserts at one instant into 100, want 91", n)
	}
	if _, ok := rl.state("k100"); !ok {
		t.Fatal("the key being inserted was evicted")
	}
	// Capacity 5: a tenth rounds down to 0, and at least one goes.
	rl5, _ := newTestLimiter(5, time.Minute, 5)
	for i := range 6 {
		rl5.Allow("k" + strconv.Itoa(i))
	}
	if n := rl5.len(); n != 5 {
		t.Fatalf("%d buckets, want 5", n)
	}
}

// TestBoundUnderFlood inserts 100,000 distinct keys, a microsecond apart
// (no bucket is idle): the limiter never holds more than 10,000, the
// survivors are always the most recent keys, and the evictions happen once
// per 1,000 inserts.
func TestBoundUnderFlood(t *testing.T) {
	rl, clock := newTestLimiter(100, time.Minute, maxBuckets)
	const keys = 100_000
	passes, prev := 0, 0
	for i := range keys {
		clock.Advance(time.Microsecond)
		if !rl.Allow("flood:" + strconv.Itoa(i)) {
			t.Fatalf("new key %d refused", i)
		}
		n := len(rl.buckets)
		if n > maxBuckets {
			t.Fatalf("%d buckets after key %d, want ≤ %d", n, i, maxBuckets)
		}
		if n < prev {
			passes++
		}
		prev = n
	}
	if want := (keys - maxBuckets) / (maxBuckets / 10); passes != want {
		t.Fatalf("%d eviction passes, want %d (one per %d inserts)", passes, want, maxBuckets/10)
	}
	n := rl.len()
	if n <= maxBuckets*9/10 || n > maxBuckets {
		t.Fatalf("%d buckets at the end", n)
	}
	for i := range keys {
		_, ok := rl.state("flood:" + strconv.Itoa(i))
		if want := i >= keys-n; ok != want {
			t.Fatalf("key %d present %v, want %v: the survivors must be the %d most recent", i, ok, want, n)
		}
	}
}

// TestFloodIdle: a flood slow enough that buckets go idle is served by the
// idle pass alone: it never drops a bucket refilled within 2×window.
func TestFloodIdle(t *testing.T) {
	rl, clock := newTestLimiter(1, time.Millisecond, 100)
	const keys = 10_000
	passes, prev := 0, 0
	for i := range keys {
		clock.Advance(100 * time.Microsecond) // 20 inserts per 2×window
		rl.Allow("k" + strconv.Itoa(i))
		n := len(rl.buckets)
		if n > 100 {
			t.Fatalf("%d buckets", n)
		}
		if n < prev {
			passes++
			// The pass dropped exactly the buckets refilled more than 2ms
			// ago: the 20 before the one just inserted stay.
			if n != 21 {
				t.Fatalf("insert %d: %d buckets after an eviction, want 21", i, n)
			}
		}
		prev = n
	}
	if want := (keys - 100) / 80; passes != want && passes != want+1 {
		t.Fatalf("%d eviction passes, want about %d", passes, want)
	}
}

// TestConcurrentExact: goroutines hammering one key at a frozen instant
// are admitted exactly rate times in total; on several keys, rate each.
func TestConcurrentExact(t *testing.T) {
	rl, _ := newTestLimiter(100, time.Minute, maxBuckets)
	const goroutines, calls = 8, 500
	var mu sync.Mutex
	admitted := map[string]int{}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			local := map[string]int{}
			for i := range calls {
				key := "k" + strconv.Itoa((g+i)%3)
				if rl.Allow(key) {
					local[key]++
				}
				if rl.AllowN("one", 1) {
					local["one"]++
				}
			}
			mu.Lock()
			for k, v := range local {
				admitted[k] += v
			}
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, k := range []string{"one", "k0", "k1", "k2"} {
		if admitted[k] != 100 {
			t.Errorf("%s: %d admitted, want exactly 100", k, admitted[k])
		}
	}
}

// TestAllowNNoAllocs pins zero allocations on an existing key, admitted
// and denied, on the real clock.
func TestAllowNNoAllocs(t *testing.T) {
	for _, c := range []struct {
		name   string
		rate   int
		window time.Duration
	}{{"admitted", math.MaxInt32, time.Second}, {"denied", 1, time.Hour}} {
		rl := NewRateLimiter(c.rate, c.window)
		rl.Allow("user:123")
		if n := testing.AllocsPerRun(1000, func() { rl.AllowN("user:123", 1) }); n != 0 {
			t.Errorf("%s: AllowN on an existing key: %v allocs, want 0", c.name, n)
		}
		rl.Close()
	}
}

// TestDifferentialAlgo runs the limiter and core/algo's token bucket
// (Count = rate, Period = window) side by side on random traffic: they
// must admit the same requests and agree on the tokens left.
func TestDifferentialAlgo(t *testing.T) {
	seed := rand.Uint64()
	r := rand.New(rand.NewPCG(seed, 1))
	for round := range 300 {
		rate := 1 + r.IntN(40)
		if round%10 == 0 {
			rate = 1 + r.IntN(1_000_000)
		}
		window := time.Duration(1 + r.Int64N(int64(time.Hour)))
		if round%3 == 0 {
			window = time.Duration(1+r.IntN(60)) * time.Second // round periods too
		}
		window = max(window, time.Duration(rate)) // algo: at most one per ns
		rl, clock := newTestLimiter(rate, window, maxBuckets)
		lim := algo.Limit{Count: int64(rate), Period: window}
		if err := lim.Validate(); err != nil {
			t.Fatal(err)
		}
		var st algo.State
		now := t0
		for step := range 400 {
			// Time never goes back here: see TestClockBackwardsVersusAlgo.
			dt := time.Duration(r.Int64N(int64(window)/int64(rate) + 2)) // within a token's time
			if r.IntN(3) == 0 {
				dt = time.Duration(r.Int64N(int64(window) + 1))
			}
			now = now.Add(dt)
			n := r.IntN(rate + 2) // 0 … rate+1
			if r.IntN(4) == 0 {
				n = min(1, n)
			}
			clock.Set(now)
			got := rl.AllowN("k", n)
			var o algo.Outcome
			st, o = algo.Take(algo.TokenBucket, st, lim, now.UnixNano(), int64(n))
			if got != o.Allowed {
				t.Fatalf("seed %d round %d step %d (rate %d/%v, +%v, n=%d): limiter %v, algo %v",
					seed, round, step, rate, window, dt, n, got, o.Allowed)
			}
			if n >= 1 && n <= rate {
				if tok := tokensOf(t, rl, "k"); tok != o.Remaining {
					t.Fatalf("seed %d round %d step %d (rate %d/%v, +%v, n=%d): limiter has %d tokens, algo %d",
						seed, round, step, rate, window, dt, n, tok, o.Remaining)
				}
			}
		}
	}
}

// TestClockBackwardsVersusAlgo pins where the limiter and core/algo part:
// a clock that goes back. The limiter keeps the tokens it granted at a
// later reading; algo derives the refill from its anchor at every call,
// so at an earlier reading those tokens are not there.
func TestClockBackwardsVersusAlgo(t *testing.T) {
	rl, clock := newTestLimiter(10, time.Second, maxBuckets) // a token per 100ms
	lim := algo.Limit{Count: 10, Period: time.Second}
	var st algo.State
	take := func(at time.Duration, n int) (bool, bool) {
		now := t0.Add(at)
		clock.Set(now)
		got := rl.AllowN("k", n)
		var o algo.Outcome
		st, o = algo.Take(algo.TokenBucket, st, lim, now.UnixNano(), int64(n))
		return got, o.Allowed
	}
	take(0, 10)                   // both empty, refill point t0
	take(250*time.Millisecond, 3) // both refuse; the limiter has refilled 2 tokens, algo keeps its anchor
	l, a := take(150*time.Millisecond, 2)
	if !l || a {
		t.Fatalf("at +150ms after +250ms: limiter %v, algo %v; want true (2 tokens granted at +250ms), false (1 token by +150ms)", l, a)
	}
}

func TestSelectKth(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		n := 1 + r.IntN(300)
		a := make([]int64, n)
		for i := range a {
			a[i] = r.Int64N(int64(1 + r.IntN(50))) // many ties
		}
		k := r.IntN(n)
		sorted := append([]int64(nil), a...)
		slices.Sort(sorted)
		if got := selectKth(a, k); got != sorted[k] {
			t.Fatalf("selectKth(k=%d) = %d, want %d", k, got, sorted[k])
		}
		for i := range a {
			if (i < k && a[i] > a[k]) || (i > k && a[i] < a[k]) {
				t.Fatalf("not partitioned around %d at %d: %v", k, i, fmt.Sprint(a))
			}
		}
	}
}
