package memstore_test

import (
	"math/rand/v2"
	"runtime"
	"strconv"
	"testing"
	"time"
	"unsafe"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func policy(a algo.Algorithm) *store.Policy {
	// A limit no benchmark reaches, so every decision admits and writes.
	return &store.Policy{Name: "bench", Algorithm: a, Limits: []algo.Limit{{Count: 2_000_000_000, Period: time.Hour}}}
}

var sink store.Result

// BenchmarkTakeAtOneKey measures one decision on an existing key with the
// instant passed in: the store's own cost (hash, lock, lookup, algorithm,
// write back).
func BenchmarkTakeAtOneKey(b *testing.B) {
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		b.Run(a.String(), func(b *testing.B) {
			s := memstore.New()
			p := policy(a)
			now := time.Now().UnixNano()
			s.TakeAt(&sink, "user-42", p, 1, now)
			b.ReportAllocs()
			for b.Loop() {
				s.TakeAt(&sink, "user-42", p, 1, now)
			}
		})
	}
}

// BenchmarkPeek measures one Peek (what a rule counted by outcome asks
// before the handler) on an existing key with the instant passed in,
// beside TakeAt on the same key as the baseline: a peek evaluates the
// same state without writing it back.
func BenchmarkPeek(b *testing.B) {
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		s := memstore.New()
		p := policy(a)
		now := time.Now().UnixNano()
		s.TakeAt(&sink, "user-42", p, 1, now)
		b.Run("peek/"+a.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.PeekAt(&sink, "user-42", p, 1, now)
			}
		})
		b.Run("take/"+a.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				s.TakeAt(&sink, "user-42", p, 1, now)
			}
		})
	}
}

// BenchmarkTakeOneKey is BenchmarkTakeAtOneKey with the clock read included
// (store.SystemClock), as a request sees it.
func BenchmarkTakeOneKey(b *testing.B) {
	s := memstore.New()
	p := policy(algo.FixedWindow)
	s.TakeAt(&sink, "user-42", p, 1, time.Now().UnixNano())
	b.ReportAllocs()
	for b.Loop() {
		sink, _ = s.Take(ctx, "user-42", p, 1)
	}
}

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "user-" + strconv.Itoa(i)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// BenchmarkTakeAtMillionKeys cycles through 1,000,000 existing keys in
// random order: every decision misses the CPU caches, as under real traffic
// from many users.
func BenchmarkTakeAtMillionKeys(b *testing.B) {
	ks := keys(1_000_000)
	s := memstore.New()
	p := policy(algo.FixedWindow)
	now := time.Now().UnixNano()
	for _, k := range ks {
		s.TakeAt(&sink, k, p, 1, now)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		s.TakeAt(&sink, ks[i], p, 1, now)
		if i++; i == len(ks) {
			i = 0
		}
	}
}

// BenchmarkTakeAtNewKeyFullStore measures one decision on a new key in a
// store already holding its 1,000,000-counter bound, as under a flood of
// distinct keys: the insert and its share of the eviction passes (one pass
// over a shard frees a tenth of it, so it is spread over the next tenth of
// inserts). Keys are built in a reused buffer: the store keeps none.
func BenchmarkTakeAtNewKeyFullStore(b *testing.B) {
	const n = 1_000_000
	s := memstore.New(memstore.WithMaxKeys(n))
	p := policy(algo.FixedWindow)
	now := time.Now().UnixNano()
	buf := make([]byte, 0, 32)
	key := func(i int) string {
		buf = strconv.AppendInt(append(buf[:0], "flood-"...), int64(i), 10)
		return unsafe.String(&buf[0], len(buf))
	}
	i := 0
	for ; s.Len() < n*9/10 || i < n; i++ {
		s.TakeAt(&sink, key(i), p, 1, now)
	}
	b.ReportAllocs()
	for b.Loop() {
		s.TakeAt(&sink, key(i), p, 1, now)
		i++
	}
}

// BenchmarkParallelTenThousandKeys spreads decisions from all cores over
// 10,000 keys.
func BenchmarkParallelTenThousandKeys(b *testing.B) {
	ks := keys(10_000)
	s := memstore.New()
	p := policy(algo.FixedWindow)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := rand.IntN(len(ks))
		for pb.Next() {
			s.Take(ctx, ks[i], p, 1)
			if i++; i == len(ks) {
				i = 0
			}
		}
	})
}

// heapBytesPerKey inserts n keys and returns the growth of the live heap
// per key, keys themselves excluded (they are built in a reused buffer).
func heapBytesPerKey(n int) float64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	s := memstore.New(memstore.WithMaxKeys(2 * n))
	p := policy(algo.FixedWindow)
	now := time.Now().UnixNano()
	buf := make([]byte, 0, 32)
	for i := range n {
		buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
		s.TakeAt(&sink, unsafe.String(&buf[0], len(buf)), p, 1, now)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(s)
	return float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
}

// BenchmarkMemoryPerKey reports the live heap per key at 1,000,000 keys
// (metric bytes/key); one op fills a new store with the million keys.
func BenchmarkMemoryPerKey(b *testing.B) {
	var perKey float64
	for b.Loop() {
		perKey = heapBytesPerKey(1_000_000)
	}
	b.ReportMetric(perKey, "bytes/key")
}

// BenchmarkTakeAll measures a request counted under two policies of one
// key (a stacked rule over a route's own) on an existing key with the
// store's clock: one TakeAll of the two takes, all or nothing, beside two
// Takes, one after the other (which are not).
func BenchmarkTakeAll(b *testing.B) {
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.GCRA} {
		s := memstore.New()
		global, route := policy(a), policy(a)
		route.Name = "bench-route"
		takes := []store.Take{{Key: "user-42", Policy: global, Cost: 1}, {Key: "user-42", Policy: route, Cost: 1}}
		var rs [2]store.Result
		_, _ = s.TakeAll(ctx, takes, rs[:])
		b.Run("takeall/"+a.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _ = s.TakeAll(ctx, takes, rs[:])
			}
		})
		b.Run("take×2/"+a.String(), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				sink, _ = s.Take(ctx, "user-42", global, 1)
				sink, _ = s.Take(ctx, "user-42", route, 1)
			}
		})
	}
}
