package jwtissuer

import (
	"math"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// BenchmarkAllowN measures one AllowN on a key that already has a bucket,
// on the real clock, single goroutine:
//
//   - admit: a rate so high that every call refills (a 128-bit division)
//     and is admitted;
//   - deny: an empty bucket that refills less than a token per call (the
//     refill is a multiplication and a comparison), so every call is
//     denied;
//   - baseline: a mutex around one lookup and update of a
//     map[string]int64, the floor of any design with one lock and a map,
//     without the clock read.
func BenchmarkAllowN(b *testing.B) {
	const key = "user:123"
	run := func(b *testing.B, rate int, window time.Duration, want bool) {
		rl := NewRateLimiter(rate, window)
		defer rl.Close()
		rl.AllowN(key, rate) // make the bucket, and empty it
		if got := rl.AllowN(key, 1); got != want {
			b.Fatalf("first AllowN after emptying = %v, want %v", got, want)
		}
		b.ReportAllocs()
		for b.Loop() {
			rl.AllowN(key, 1)
		}
		if got := rl.AllowN(key, 1); got != want {
			b.Fatalf("last AllowN = %v, want %v", got, want)
		}
	}
	b.Run("admit", func(b *testing.B) { run(b, math.MaxInt32, time.Second, true) })
	b.Run("deny", func(b *testing.B) { run(b, 1, time.Hour, false) })
	b.Run("baseline=mutex+map", func(b *testing.B) {
		var mu sync.Mutex
		m := map[string]int64{key: 0}
		b.ReportAllocs()
		for b.Loop() {
			mu.Lock()
			m[key]++
			mu.Unlock()
		}
	})
}

// BenchmarkFlood inserts 1,000,000 distinct keys into one RateLimiter (real
// clock, 100 per minute: no bucket goes idle, so every eviction is the
// oldest-tenth pass) and times every insert. One op is one whole flood. It
// reports the insert latency of the last flood — p50, p99, p99.9 and max,
// in ns — and the buckets held at the end, and fails if the limiter ever
// holds more than 10,000. The latencies include two clock reads (about
// 40ns).
func BenchmarkFlood(b *testing.B) {
	const n = 1_000_000
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "flood:" + strconv.Itoa(i)
	}
	lat := make([]int64, n)
	var held int
	b.ReportAllocs()
	for b.Loop() {
		rl := NewRateLimiter(100, time.Minute)
		for i, k := range keys {
			start := time.Now()
			rl.Allow(k)
			lat[i] = int64(time.Since(start))
			if len(rl.buckets) > maxBuckets {
				b.Fatalf("%d buckets after %d inserts, want ≤ %d", len(rl.buckets), i+1, maxBuckets)
			}
		}
		held = rl.len()
		rl.Close()
	}
	slices.Sort(lat)
	at := func(q float64) float64 { return float64(lat[min(int(q*n), n-1)]) }
	b.ReportMetric(at(0.50), "p50-ns")
	b.ReportMetric(at(0.99), "p99-ns")
	b.ReportMetric(at(0.999), "p99.9-ns")
	b.ReportMetric(float64(lat[n-1]), "max-ns")
	b.ReportMetric(float64(held), "buckets")
}
