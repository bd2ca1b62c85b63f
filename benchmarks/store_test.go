package benchmarks

import (
	"context"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"github.com/sethvargo/go-limiter"
	"github.com/sethvargo/go-limiter/memorystore"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
)

// Sub-benchmark names, one per implementation, so benchstat can put them
// side by side.
const (
	implTakeAt   = "rlkit-memstore-TakeAt"
	implTake     = "rlkit-memstore-Take"
	implSeth     = "sethvargo-memorystore"
	implMap      = "baseline-map-atomic"
	implMapInt64 = "baseline-map-int64"
	implRlkit    = "rlkit-memstore"
)

const (
	millionKeys  = 1_000_000
	parallelKeys = 10_000
	// maxKeys bounds rlkit's store well above every key set used here, so no
	// benchmark measures eviction.
	maxKeys = 2_000_000
)

// policy is a one-limit fixed window that no benchmark reaches, so every
// decision admits and writes back.
func policy() *core.Policy {
	return &core.Policy{Name: "bench", Algorithm: core.FixedWindow, Limits: []core.Limit{{Count: 2_000_000_000, Period: time.Hour}}}
}

func newRlkit(b *testing.B) *memstore.Store {
	s := memstore.New(memstore.WithMaxKeys(maxKeys))
	b.Cleanup(func() {
		if err := s.Close(); err != nil {
			b.Error(err)
		}
	})
	return s
}

// newSeth returns a go-limiter memory store with as many tokens per hour as a
// uint64 holds, so no benchmark reaches it. Its purge goroutine (every 6 h by
// default) never runs during a benchmark.
func newSeth(b *testing.B) limiter.Store {
	s, err := memorystore.New(&memorystore.Config{Tokens: math.MaxUint64, Interval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		if err := s.Close(context.Background()); err != nil {
			b.Error(err)
		}
	})
	return s
}

// shuffledKeys returns "user-0" … "user-<n-1>" in a fixed random order.
func shuffledKeys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "user-" + strconv.Itoa(i)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// The key sets are built once and shared, so every implementation sees the
// same keys in the same order.
var (
	millionKeySet  = sync.OnceValue(func() []string { return shuffledKeys(millionKeys) })
	parallelKeySet = sync.OnceValue(func() []string { return shuffledKeys(parallelKeys) })
)

// Sinks keep results observable, and let each benchmark check after its loop
// that the last decision was admitted (the limit was never reached).
var (
	resultSink core.Result
	okSink     bool
)

// settle collects the garbage of a benchmark's setup (up to a few hundred
// megabytes for a million keys) before the timer starts, so that collection
// is not charged to whichever implementation runs next.
func settle() { runtime.GC() }

func mustAllow(b *testing.B, allowed bool, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	if !allowed {
		b.Fatal("denied: the benchmark reached the limit and measured denials")
	}
}

// BenchmarkOneKey measures one decision on one existing key, single
// goroutine: the per-call cost of each store when everything is in cache.
//
//   - rlkit-memstore-TakeAt: the instant passed in (no clock read); hash,
//     shard lock, lookup, fixed window, write back.
//   - rlkit-memstore-Take: the same with the clock read (core.SystemClock),
//     as a request sees it. Compare this one with sethvargo.
//   - sethvargo-memorystore: Take(ctx, key), which reads its own clock.
//   - baseline-map-atomic: a map[string]*atomic.Int64 lookup plus Add, the
//     floor for any keyed counter.
func BenchmarkOneKey(b *testing.B) {
	ctx := context.Background()
	key := "user-42"

	b.Run(implTakeAt, func(b *testing.B) {
		s, p := newRlkit(b), policy()
		now := time.Now().UnixNano()
		var r core.Result
		s.TakeAt(&r, key, p, 1, now)
		settle()
		b.ReportAllocs()
		for b.Loop() {
			s.TakeAt(&r, key, p, 1, now)
		}
		mustAllow(b, r.Allowed, nil)
		resultSink = r
	})

	b.Run(implTake, func(b *testing.B) {
		s, p := newRlkit(b), policy()
		r, err := s.Take(ctx, key, p, 1)
		settle()
		b.ReportAllocs()
		for b.Loop() {
			r, err = s.Take(ctx, key, p, 1)
		}
		mustAllow(b, r.Allowed, err)
		resultSink = r
	})

	b.Run(implSeth, func(b *testing.B) {
		s := newSeth(b)
		_, _, _, ok, err := s.Take(ctx, key)
		settle()
		b.ReportAllocs()
		for b.Loop() {
			_, _, _, ok, err = s.Take(ctx, key)
		}
		mustAllow(b, ok, err)
		okSink = ok
	})

	b.Run(implMap, func(b *testing.B) {
		m := map[string]*atomic.Int64{key: new(atomic.Int64)}
		settle()
		b.ReportAllocs()
		for b.Loop() {
			m[key].Add(1)
		}
		mustAllow(b, m[key].Load() > 0, nil)
	})
}

// BenchmarkMillionKeys measures one decision per op over 1,000,000 existing
// keys ("user-<i>", all inserted before the timer starts) visited in a fixed
// random order, cycling: nearly every decision misses the CPU caches, as
// under traffic from many users. Same four implementations as
// BenchmarkOneKey; the rlkit store is sized (WithMaxKeys(2,000,000)) so it
// never evicts.
func BenchmarkMillionKeys(b *testing.B) {
	ctx := context.Background()
	ks := millionKeySet()

	b.Run(implTakeAt, func(b *testing.B) {
		s, p := newRlkit(b), policy()
		now := time.Now().UnixNano()
		var r core.Result
		for _, k := range ks {
			s.TakeAt(&r, k, p, 1, now)
		}
		settle()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			s.TakeAt(&r, ks[i], p, 1, now)
			if i++; i == len(ks) {
				i = 0
			}
		}
		mustAllow(b, r.Allowed, nil)
		resultSink = r
	})

	b.Run(implTake, func(b *testing.B) {
		s, p := newRlkit(b), policy()
		var (
			r   core.Result
			err error
		)
		for _, k := range ks {
			if r, err = s.Take(ctx, k, p, 1); err != nil {
				b.Fatal(err)
			}
		}
		settle()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			r, err = s.Take(ctx, ks[i], p, 1)
			if i++; i == len(ks) {
				i = 0
			}
		}
		mustAllow(b, r.Allowed, err)
		resultSink = r
	})

	b.Run(implSeth, func(b *testing.B) {
		s := newSeth(b)
		var (
			ok  bool
			err error
		)
		for _, k := range ks {
			if _, _, _, ok, err = s.Take(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
		settle()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			_, _, _, ok, err = s.Take(ctx, ks[i])
			if i++; i == len(ks) {
				i = 0
			}
		}
		mustAllow(b, ok, err)
		okSink = ok
	})

	b.Run(implMap, func(b *testing.B) {
		m := make(map[string]*atomic.Int64, len(ks))
		for _, k := range ks {
			m[k] = new(atomic.Int64)
		}
		settle()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			m[ks[i]].Add(1)
			if i++; i == len(ks) {
				i = 0
			}
		}
		mustAllow(b, m[ks[0]].Load() > 0, nil)
	})
}

// BenchmarkParallel10kKeys measures decisions from GOMAXPROCS goroutines
// (b.RunParallel) over 10,000 existing keys, each goroutine starting at a
// random place in the same shuffled key list: contention on the store's
// locks and shared memory, with the clock read included.
//
//   - rlkit-memstore-Take: Take(ctx, key, policy, 1).
//   - sethvargo-memorystore: Take(ctx, key).
func BenchmarkParallel10kKeys(b *testing.B) {
	ctx := context.Background()
	ks := parallelKeySet()

	b.Run(implTake, func(b *testing.B) {
		s, p := newRlkit(b), policy()
		for _, k := range ks {
			if _, err := s.Take(ctx, k, p, 1); err != nil {
				b.Fatal(err)
			}
		}
		settle()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var (
				r   = core.Result{Allowed: true}
				err error
			)
			i := rand.IntN(len(ks))
			for pb.Next() {
				r, err = s.Take(ctx, ks[i], p, 1)
				if i++; i == len(ks) {
					i = 0
				}
			}
			if err != nil || !r.Allowed {
				b.Error("denied or failed:", err)
			}
		})
	})

	b.Run(implSeth, func(b *testing.B) {
		s := newSeth(b)
		for _, k := range ks {
			if _, _, _, _, err := s.Take(ctx, k); err != nil {
				b.Fatal(err)
			}
		}
		settle()
		b.ReportAllocs()
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			var (
				ok  = true
				err error
			)
			i := rand.IntN(len(ks))
			for pb.Next() {
				_, _, _, ok, err = s.Take(ctx, ks[i])
				if i++; i == len(ks) {
					i = 0
				}
			}
			if err != nil || !ok {
				b.Error("denied or failed:", err)
			}
		})
	})
}

// liveHeap returns the live heap after a full collection.
func liveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// memBench runs fill, which must build a store holding millionKeys keys and
// return it, once per op, and reports the growth of the live heap per key
// (B/key) and the time per insert (ns/key). The collections around each fill
// are outside the timer; B/op and allocs/op are per fill of 1,000,000 keys.
func memBench(b *testing.B, fill func() any) {
	b.ReportAllocs()
	var bytes int64
	fills := 0
	for b.Loop() {
		b.StopTimer()
		before := liveHeap()
		b.StartTimer()
		s := fill()
		b.StopTimer()
		bytes += liveHeap() - before
		runtime.KeepAlive(s)
		if c, ok := s.(interface{ Close() error }); ok {
			_ = c.Close()
		}
		if c, ok := s.(limiter.Store); ok {
			_ = c.Close(context.Background())
		}
		fills++
		b.StartTimer()
	}
	b.ReportMetric(float64(bytes)/float64(fills*millionKeys), "B/key")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fills*millionKeys), "ns/key")
}

// BenchmarkMemoryPerKey inserts 1,000,000 keys ("user-<i>", in order) into a
// new store per op and reports the live heap it then holds per key (B/key,
// HeapAlloc after runtime.GC, before vs after, the store kept alive), and
// the cost of an insert (ns/key). What is counted differs by what each store
// keeps, and that is the point:
//
//   - rlkit-memstore: memstore.New(WithMaxKeys(2,000,000)), TakeAt. The store
//     keeps a 64-bit hash of the key, never the key, so keys are built in
//     one reused buffer (unsafe.String) and cost nothing: B/key is the
//     store's own.
//   - sethvargo-memorystore: the store keeps the key string as its map key,
//     so each key is a real copy (strings.Clone) and nothing is subtracted:
//     B/key includes the key's bytes (16 B for "user-NNNNNN"), which is what
//     the store really costs to hold that key.
//   - baseline-map-int64: a map[string]int64 with real key strings, also
//     counted: the floor for a store that must keep the key.
func BenchmarkMemoryPerKey(b *testing.B) {
	b.Run(implRlkit, func(b *testing.B) {
		p := policy()
		memBench(b, func() any {
			s := memstore.New(memstore.WithMaxKeys(maxKeys))
			now := time.Now().UnixNano()
			var r core.Result
			buf := make([]byte, 0, 32)
			for i := range millionKeys {
				buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
				s.TakeAt(&r, unsafe.String(&buf[0], len(buf)), p, 1, now)
			}
			mustAllow(b, r.Allowed, nil)
			return s
		})
	})

	b.Run(implSeth, func(b *testing.B) {
		memBench(b, func() any {
			s, err := memorystore.New(&memorystore.Config{Tokens: math.MaxUint64, Interval: time.Hour})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			var ok bool
			buf := make([]byte, 0, 32)
			for i := range millionKeys {
				buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
				// A real copy: the store keeps it as its map key.
				_, _, _, ok, err = s.Take(ctx, strings.Clone(unsafe.String(&buf[0], len(buf))))
			}
			mustAllow(b, ok, err)
			return s
		})
	})

	b.Run(implMapInt64, func(b *testing.B) {
		memBench(b, func() any {
			m := make(map[string]int64)
			buf := make([]byte, 0, 32)
			for i := range millionKeys {
				buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
				m[string(buf)]++
			}
			mustAllow(b, len(m) == millionKeys, nil)
			return m
		})
	})
}
