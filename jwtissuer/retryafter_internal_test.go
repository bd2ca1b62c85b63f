package jwtissuer

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestAllowRetryAfterSteps: rate 3 per minute, one token every 20s.
func TestAllowRetryAfterSteps(t *testing.T) {
	rl, clock := newTestLimiter(3, time.Minute, maxBuckets)
	const key = "ann"
	type step struct {
		advance time.Duration
		allowed bool
		wait    time.Duration
	}
	for i, s := range []step{
		{0, true, 0}, {0, true, 0}, {0, true, 0},
		{0, false, 20 * time.Second},
		{7 * time.Second, false, 13 * time.Second},
		{13*time.Second - time.Nanosecond, false, time.Nanosecond},
		{time.Nanosecond, true, 0},
		// The refill point moved by exactly 20s: the next token is 20s on.
		{0, false, 20 * time.Second},
		{50 * time.Second, true, 0}, // 50s: 2 tokens and 10s towards a third
		{0, true, 0},
		{0, false, 10 * time.Second},
	} {
		clock.Advance(s.advance)
		ok, wait, err := rl.AllowRetryAfter(key)
		if ok != s.allowed || wait != s.wait || err != nil {
			t.Fatalf("step %d (+%v): %v, %v, %v; want %v, %v, nil", i, s.advance, ok, wait, err, s.allowed, s.wait)
		}
		if peek := rl.wait(key); !ok && peek != s.wait {
			t.Fatalf("step %d: wait (peek) %v, want %v", i, peek, s.wait)
		}
	}
}

// TestRetryAfterExact: for random rates, windows and steps, a denied
// call's wait is exact: a nanosecond earlier is still denied, the wait
// itself is admitted. The peek (wait) agrees, and changes nothing.
func TestRetryAfterExact(t *testing.T) {
	r := rand.New(rand.NewPCG(14, 6))
	checked := 0
	for range 300 {
		rate := 1 + r.IntN(50)
		window := time.Duration(1 + r.Int64N(int64(2*time.Hour)))
		if r.IntN(4) == 0 {
			window = time.Duration(1 + r.Int64N(1000)) // windows of a few ns
		}
		rl, clock := newTestLimiter(rate, window, maxBuckets)
		for range 40 {
			clock.Advance(time.Duration(r.Int64N(int64(window)/int64(rate) + 1)))
			before, had := rl.state("k")
			peek := rl.wait("k")
			if after, _ := rl.state("k"); after != before {
				t.Fatal("wait changed the bucket")
			}
			ok, wait, _ := rl.AllowRetryAfter("k")
			if ok {
				if wait != 0 || had && peek != 0 {
					t.Fatalf("rate %d window %v: admitted with wait %v, peek %v", rate, window, wait, peek)
				}
				continue
			}
			if wait < 1 || wait > window || peek != wait {
				t.Fatalf("rate %d window %v: wait %v, peek %v", rate, window, wait, peek)
			}
			checked++
			if wait > 1 {
				clock.Advance(wait - 1)
				if ok, w, _ := rl.AllowRetryAfter("k"); ok || w != 1 {
					t.Fatalf("rate %d window %v: 1ns before the wait %v: %v, %v; want false, 1ns", rate, window, wait, ok, w)
				}
				clock.Advance(1)
			} else {
				clock.Advance(wait)
			}
			if ok, _, _ := rl.AllowRetryAfter("k"); !ok {
				t.Fatalf("rate %d window %v: denied after the wait %v", rate, window, wait)
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("only %d denials checked", checked)
	}
}

// TestRetryAfterExtremes: the 128-bit arithmetic at the largest rate and
// window.
func TestRetryAfterExtremes(t *testing.T) {
	const maxWindow = time.Duration(1<<63 - 1)
	rl, _ := newTestLimiter(1, maxWindow, maxBuckets)
	if ok, _, _ := rl.AllowRetryAfter("k"); !ok {
		t.Fatal("first call denied")
	}
	if ok, wait, _ := rl.AllowRetryAfter("k"); ok || wait != maxWindow {
		t.Fatalf("rate 1, longest window: %v, %v; want false, %v", ok, wait, maxWindow)
	}
	rl, clock := newTestLimiter(1<<31-1, maxWindow, maxBuckets)
	if !rl.AllowN("k", 1<<31-1) {
		t.Fatal("full burst denied")
	}
	clock.Advance(time.Nanosecond)
	// ⌈(window − rate×1ns) / rate⌉ = ⌈window/rate⌉ − 1
	want := (maxWindow - 1) / (1<<31 - 1)
	if ok, wait, _ := rl.AllowRetryAfter("k"); ok || wait != want {
		t.Fatalf("largest rate and window: %v, %v; want false, %v", ok, wait, want)
	}
}

// TestAllowRetryAfterNoWait: the calls no wait would admit say 0.
func TestAllowRetryAfterNoWait(t *testing.T) {
	rl, _ := newTestLimiter(1, time.Minute, maxBuckets)
	if ok, wait, err := rl.AllowRetryAfter(""); ok || wait != 0 || err != nil {
		t.Fatalf("empty key: %v, %v, %v", ok, wait, err)
	}
	rl.Allow("k")
	rl.Close()
	if ok, wait, err := rl.AllowRetryAfter("k"); ok || wait != 0 || err != nil {
		t.Fatalf("closed: %v, %v, %v", ok, wait, err)
	}
	if w := rl.wait("k"); w != 0 {
		t.Fatalf("closed: peek %v", w)
	}
	none := NewRateLimiter(0, time.Minute)
	if ok, wait, err := none.AllowRetryAfter("k"); ok || wait != 0 || err != nil {
		t.Fatalf("rate 0: %v, %v, %v", ok, wait, err)
	}
}

// TestAllowRetryAfterNoAllocs: on a key with a bucket, a denial with its
// wait allocates nothing, as AllowN does not.
func TestAllowRetryAfterNoAllocs(t *testing.T) {
	rl, _ := newTestLimiter(1, time.Minute, maxBuckets)
	rl.Allow("k")
	if n := testing.AllocsPerRun(100, func() { rl.AllowRetryAfter("k") }); n != 0 {
		t.Fatalf("AllowRetryAfter: %v allocations", n)
	}
}
