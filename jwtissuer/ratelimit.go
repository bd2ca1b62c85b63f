package jwtissuer

import (
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

// RateLimitProvider limits token issuance per key. Allow reports whether
// one more token may be issued for key now (and, if so, counts it); Reset
// forgets key's count; Close releases the provider's resources.
// Implementations must be safe for concurrent use.
//
// RateLimiter is the in-memory implementation; package
// jwtissuer/redislimiter shares counts between replicas through Redis.
type RateLimitProvider interface {
	Allow(key string) bool
	Reset(key string)
	Close()
}

// FallibleRateLimitProvider is an optional interface of a RateLimitProvider
// whose backend can fail (a network store). The Issuer uses AllowErr instead
// of Allow when the provider has it, so that a failure is reported to the
// caller rather than disguised as a denial.
//
// AllowErr reports whether one more token may be issued for key. A non-nil
// error means the backend could not decide; allowed is then what the
// provider's failure policy chose (false for fail-closed). The Issuer
// proceeds when allowed is true, and otherwise returns an error that wraps
// both ErrRateLimitUnavailable and err.
type FallibleRateLimitProvider interface {
	RateLimitProvider
	AllowErr(key string) (allowed bool, err error)
}

// RetryAfterRateLimitProvider is an optional interface of a
// RateLimitProvider that can tell how long a denied key must wait. The
// Issuer uses AllowRetryAfter, when the provider has it, in place of
// AllowErr and Allow, and puts the wait in the RateLimitError it returns.
//
// AllowRetryAfter is AllowErr that also returns, when it denies without
// error, how long until the same request would be admitted: 0 when the
// provider cannot tell (for example, one that never admits the key). err
// has AllowErr's meaning; a provider whose backend cannot fail returns nil.
// Both RateLimiter and jwtissuer/redislimiter's RateLimiter implement it.
type RetryAfterRateLimitProvider interface {
	RateLimitProvider
	AllowRetryAfter(key string) (allowed bool, retryAfter time.Duration, err error)
}

// maxBuckets is the most keys a RateLimiter tracks. An insert into a full
// limiter evicts first (see RateLimiter).
const maxBuckets = 10_000

// A RateLimiter is an in-memory token bucket per key: the built-in
// RateLimitProvider of an Issuer, and usable on its own. It is safe for
// concurrent use; the zero value is not usable, call NewRateLimiter.
//
// # Model
//
// Each key has a bucket of capacity rate. A new key starts full. Tokens
// refill in proportion to the time elapsed since the last refill:
// add = rate×elapsed/window, in integer nanoseconds, capped at rate. The
// part of the elapsed time that did not make a whole token is kept: the
// refill point, lastRefill, advances by exactly add×window/rate, never to
// now, so a bucket below capacity refills at exactly rate per window however
// often it is asked. (The limiter keeps lastRefill exactly, as the instant
// of the last refill and the fraction of a token accrued since the refill
// point, in units of 1/window token, so no nanosecond is lost to rounding
// either.) When a refill reaches capacity the bucket is full and its refill
// point becomes now: time spent full accrues nothing (that is what the cap
// means), so the next token after a consumption arrives window/rate later.
// The remainder is dropped only then, when all it could add is beyond the
// cap; below capacity it is always kept. This is the token bucket of
// package core/algo (algo.TokenBucket with Count = rate, Period = window):
// both admit exactly the same requests (see Time).
//
// # Capacity and eviction
//
// A RateLimiter tracks at most 10,000 keys, so that a flood of distinct keys
// cannot exhaust memory. Inserting a key into a full limiter first drops the
// buckets whose last refill is more than 2×window ago (they are full again,
// so dropping them loses nothing); when that frees less than a tenth of the
// capacity, the same eviction also drops the buckets that have consumed
// fewest tokens (after refill to now; among equals, the oldest last refill
// first), until a tenth (1,000 keys) is free. A live bucket that is evicted
// forgets its count: its key starts full again, and may take at most what
// it had consumed once more. So a drained bucket, whose key is being held
// back, goes last, and a flood of fresh keys, each a token or a few down,
// cannot free it: only keys that drain buckets of their own, 9,000 of them,
// can. One eviction is a few passes over the buckets (a quickselect finds
// the cut-off), and the next ~1,000 inserts need none: no insert scans
// every bucket by itself.
//
// Keys longer than 128 bytes are kept as their SHA-256 digest
// (store.BoundKey), so no key makes the limiter hold more than a few dozen
// bytes per bucket.
//
// # Time
//
// The limiter reads the time once per call, from store.SystemClock (the
// wall clock, which a system clock step moves back or forth). A reading
// earlier than a bucket's last refill refills nothing and takes back
// nothing: tokens granted, and the fraction of a token accrued, stay, and
// the refill resumes from that reading. (There core/algo differs: it
// derives the refill from its anchor at every call, so at an earlier
// reading it counts fewer tokens. With time that never goes back, the two
// admit exactly the same requests.)
type RateLimiter struct {
	rate   int64 // capacity and tokens per window; 0 admits nothing
	window int64 // ns; > 0
	max    int   // capacity in buckets: maxBuckets, smaller in tests
	clock  store.Clock

	mu      sync.Mutex
	index   map[string]int32 // key → position in buckets
	buckets []bucket
	scratch []int64 // eviction's work space, 2×len(buckets) at most
	closed  bool
}

// bucket is one key's state. The refill point is last − credit/rate: credit
// is the refill accrued since it, in units of 1/window token (< window).
type bucket struct {
	key    string
	last   int64 // instant of the last refill, ns
	credit int64
	tokens int64
}

var _ RetryAfterRateLimitProvider = (*RateLimiter)(nil)

// NewRateLimiter returns a RateLimiter that admits rate tokens per window
// for each key, with bursts of up to rate. A rate below 1, or a window
// below 1ns, gives a limiter that admits nothing (AllowN with n ≥ 1 reports
// false); a rate above 2,147,483,647 (math.MaxInt32) is reduced to it.
func NewRateLimiter(rate int, window time.Duration) *RateLimiter {
	return newRateLimiter(rate, window, store.SystemClock, maxBuckets)
}

func newRateLimiter(rate int, window time.Duration, clock store.Clock, maxKeys int) *RateLimiter {
	r := int64(min(max(rate, 0), math.MaxInt32))
	if window <= 0 {
		r, window = 0, 1
	}
	return &RateLimiter{
		rate:   r,
		window: int64(window),
		max:    max(maxKeys, 1),
		clock:  clock,
		index:  make(map[string]int32),
	}
}

// Allow is AllowN(key, 1).
func (rl *RateLimiter) Allow(key string) bool { return rl.AllowN(key, 1) }

// AllowN reports whether n tokens may be taken from key's bucket now, and
// takes them if so. All n or none: a denied call takes nothing.
//
//	n < 0              false
//	n == 0             true (nothing is taken, no bucket is made)
//	n > rate           false (one call can never take more than a full bucket)
//	key == ""          false
//	tokens ≥ n         true, n tokens taken
//	tokens < n         false, nothing taken
//
// After Close, AllowN reports false for every n ≥ 1. On a key that has a
// bucket, AllowN does not allocate.
func (rl *RateLimiter) AllowN(key string, n int) bool {
	switch {
	case n < 0:
		return false
	case n == 0:
		return true
	case int64(n) > rl.rate:
		return false
	case key == "":
		return false
	}
	key = store.BoundKey(key)
	now := rl.clock.Now()
	rl.mu.Lock()
	ok, _ := rl.allowAt(key, int64(n), now)
	rl.mu.Unlock()
	return ok
}

// AllowRetryAfter is Allow that also reports, when it denies, how long
// until key's bucket holds a token again: exactly, to the nanosecond, on
// the limiter's clock (a call that much later is admitted, one a
// nanosecond earlier is not, unless the clock goes back). The wait is 0
// when the call is admitted, and when no wait would admit it: an empty
// key, a limiter that admits nothing, and after Close. err is always nil
// (the limiter cannot fail); it implements RetryAfterRateLimitProvider.
func (rl *RateLimiter) AllowRetryAfter(key string) (allowed bool, retryAfter time.Duration, err error) {
	if rl.rate < 1 || key == "" {
		return false, 0, nil
	}
	key = store.BoundKey(key)
	now := rl.clock.Now()
	rl.mu.Lock()
	ok, wait := rl.allowAt(key, 1, now)
	rl.mu.Unlock()
	return ok, time.Duration(wait), nil
}

// allowAt is AllowN at instant now, for 1 ≤ n ≤ rate, with rl.mu held.
// When it denies an open limiter, wait is how long until n tokens are
// there (see waitFor); otherwise wait is 0.
func (rl *RateLimiter) allowAt(key string, n, now int64) (ok bool, wait int64) {
	if rl.closed {
		return false, 0
	}
	i, ok := rl.index[key]
	if !ok {
		rl.insert(key, now).tokens -= n // a new bucket is full, and n ≤ rate
		return true, 0
	}
	b := &rl.buckets[i]
	rl.refill(b, now)
	if b.tokens < n {
		return false, rl.waitFor(b, n)
	}
	b.tokens -= n
	return true, 0
}

// waitFor returns how long after b's last refill b holds n tokens, for
// b.tokens < n ≤ rate: the least elapsed time, in ns, for which refill's
// arithmetic adds n − tokens, that is rate×elapsed + credit ≥
// (n − tokens)×window, so ⌈((n − tokens)×window − credit) / rate⌉ (at most
// window, which refills a bucket completely). 128-bit, as refill is.
func (rl *RateLimiter) waitFor(b *bucket, n int64) int64 {
	hi, lo := bits.Mul64(uint64(n-b.tokens), uint64(rl.window))
	lo, borrow := bits.Sub64(lo, uint64(b.credit), 0) // credit < window ≤ the product
	hi -= borrow
	lo, carry := bits.Add64(lo, uint64(rl.rate-1), 0)
	hi += carry
	q, _ := bits.Div64(hi, lo, uint64(rl.rate)) // q ≤ window + 1 < 2^64: hi < rate
	return int64(min(q, uint64(rl.window)))
}

// wait returns how long until key's bucket holds a token, without taking
// one or making a bucket: 0 when it holds one now, when key has no bucket,
// and after Close.
func (rl *RateLimiter) wait(key string) time.Duration {
	if rl.rate < 1 || key == "" {
		return 0
	}
	key = store.BoundKey(key)
	now := rl.clock.Now()
	rl.mu.Lock()
	defer rl.mu.Unlock()
	i, ok := rl.index[key]
	if !ok {
		return 0
	}
	b := rl.buckets[i] // a copy: peeking changes nothing
	rl.refill(&b, now)
	if b.tokens >= 1 {
		return 0
	}
	return time.Duration(rl.waitFor(&b, 1))
}

// refill adds to b the tokens accrued up to now.
func (rl *RateLimiter) refill(b *bucket, now int64) {
	if b.tokens >= rl.rate {
		// Full: nothing accrues while full, so the refill point is now.
		b.last, b.credit = now, 0
		return
	}
	elapsed := now - b.last
	if elapsed < 0 {
		// The clock went back (the wall clock was stepped): refill from
		// this reading on, keeping what had accrued. Waiting for the old
		// reading instead could lock a key out for as long as the step.
		b.last = now
		return
	}
	if elapsed == 0 {
		return
	}
	if elapsed >= rl.window {
		// rate×elapsed/window ≥ rate: full.
		b.tokens, b.last, b.credit = rl.rate, now, 0
		return
	}
	// credit' = rate×elapsed + credit, in units of 1/window token; 128 bits,
	// as rate×elapsed may pass 2^63. It is below window×(rate+1), so the
	// quotient fits in 64 bits.
	hi, lo := bits.Mul64(uint64(rl.rate), uint64(elapsed))
	lo, carry := bits.Add64(lo, uint64(b.credit), 0)
	hi += carry
	b.last = now
	if hi == 0 && lo < uint64(rl.window) {
		b.credit = int64(lo) // less than a token: keep it all
		return
	}
	add, rem := bits.Div64(hi, lo, uint64(rl.window))
	if add >= uint64(rl.rate-b.tokens) {
		b.tokens, b.credit = rl.rate, 0 // capped: full, refill point now
		return
	}
	// The refill point advances by add×window/rate exactly: rem/window of a
	// token stays accrued.
	b.tokens += int64(add)
	b.credit = int64(rem)
}

// insert adds a full bucket for key, evicting first when the limiter is
// full, and returns it.
func (rl *RateLimiter) insert(key string, now int64) *bucket {
	if len(rl.buckets) >= rl.max {
		rl.evict(now)
	}
	key = strings.Clone(key) // the caller's string may pin a larger buffer
	rl.index[key] = int32(len(rl.buckets))
	rl.buckets = append(rl.buckets, bucket{key: key, last: now, tokens: rl.rate})
	return &rl.buckets[len(rl.buckets)-1]
}

// evict makes room in a full limiter: it drops the buckets last refilled
// more than 2×window before now (full again: forgetting them loses
// nothing) and, when that leaves fewer than a tenth of the capacity free,
// the buckets that have consumed fewest tokens (counted after refill to
// now: a forgotten bucket lets its key take at most that many again) until
// a tenth is free, so that a drained bucket goes last. Among buckets that
// consumed as many, the oldest last refill goes first (ties are broken
// arbitrarily).
func (rl *RateLimiter) evict(now int64) {
	free := max(rl.max/10, 1)
	if rl.window <= math.MaxInt64/2 && now >= math.MinInt64+2*rl.window {
		idle := now - 2*rl.window
		for i := len(rl.buckets) - 1; i >= 0; i-- {
			if rl.buckets[i].last < idle {
				rl.remove(i)
			}
		}
	}
	need := len(rl.buckets) - (rl.max - free)
	if need <= 0 {
		return
	}
	// keys[i] orders bucket i, lowest first: tokens consumed in the high
	// 32 bits (rate < 2^31), and in the low 32 how recent the last refill
	// is, scaled so that 2×window fits (older ones were idle, dropped
	// above): 0 for the oldest.
	n := len(rl.buckets)
	shift := max(bits.Len64(uint64(rl.window))+1-32, 0)
	rl.scratch = slices.Grow(rl.scratch[:0], 2*n)[:2*n]
	keys, s := rl.scratch[:n], rl.scratch[n:]
	for i := range rl.buckets {
		b := rl.buckets[i] // a copy: the refill is only counted here
		age := min(uint64(max(now-b.last, 0))>>shift, math.MaxUint32)
		rl.refill(&b, now)
		keys[i] = (rl.rate-b.tokens)<<32 | int64(math.MaxUint32-age)
	}
	copy(s, keys)
	cut := selectKth(s, need-1)
	// s[:need] holds the need smallest keys: those below cut all go, and
	// as many equal to cut as make up need.
	ties := need
	for _, v := range s[:need] {
		if v < cut {
			ties--
		}
	}
	// Removing bucket i moves the last one into its place; going down,
	// that one was already seen, so keys[i] is still bucket i's.
	for i := n - 1; i >= 0; i-- {
		switch k := keys[i]; {
		case k < cut:
			rl.remove(i)
		case k == cut && ties > 0:
			ties--
			rl.remove(i)
		}
	}
}

// remove drops bucket i, moving the last bucket into its place.
func (rl *RateLimiter) remove(i int) {
	end := len(rl.buckets) - 1
	delete(rl.index, rl.buckets[i].key)
	if i != end {
		rl.buckets[i] = rl.buckets[end]
		rl.index[rl.buckets[i].key] = int32(i)
	}
	rl.buckets[end] = bucket{}
	rl.buckets = rl.buckets[:end]
}

// selectKth reorders a so that a[k] is the k-th smallest value (from 0),
// every a[:k] ≤ a[k] and every a[k+1:] ≥ a[k], and returns a[k]: a
// quickselect with random pivots and three-way partitions, expected O(n)
// whatever the input.
func selectKth(a []int64, k int) int64 {
	lo, hi := 0, len(a)-1
	for lo < hi {
		p := a[lo+rand.IntN(hi-lo+1)]
		lt, i, gt := lo, lo, hi
		for i <= gt {
			switch {
			case a[i] < p:
				a[lt], a[i] = a[i], a[lt]
				lt++
				i++
			case a[i] > p:
				a[i], a[gt] = a[gt], a[i]
				gt--
			default:
				i++
			}
		}
		// a[lo:lt] < p, a[lt:gt+1] == p, a[gt+1:hi+1] > p.
		switch {
		case k < lt:
			hi = lt - 1
		case k > gt:
			lo = gt + 1
		default:
			return p
		}
	}
	return a[k]
}

// Reset forgets key's bucket: its next request finds it full.
func (rl *RateLimiter) Reset(key string) {
	key = store.BoundKey(key)
	rl.mu.Lock()
	if i, ok := rl.index[key]; ok {
		rl.remove(int(i))
	}
	rl.mu.Unlock()
}

// Close releases the buckets. Afterwards AllowN admits nothing. The
// limiter starts no goroutine, so Close never waits. Closing twice is a
// no-op.
func (rl *RateLimiter) Close() {
	rl.mu.Lock()
	rl.closed = true
	rl.index, rl.buckets, rl.scratch = nil, nil, nil
	rl.mu.Unlock()
}

// len returns the number of buckets.
func (rl *RateLimiter) len() int {
	rl.mu.Lock()
	defer rl.mu.Unlock()
	return len(rl.buckets)
}
