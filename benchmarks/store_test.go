package benchmarks

import (
	"context"
	"flag"
	"math"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"
)

// The in-memory scenarios put every participant of storeImpls (see
// participants_test.go) through the same workload with the same quota, one
// sub-benchmark per participant, named after it. Each decision goes through
// a decideFunc, so every row, the baseline's included, pays the same
// indirect call.

const (
	millionKeys  = 1_000_000
	parallelKeys = 10_000
	// smokeKeys replaces millionKeys in a smoke run (see keyCount).
	smokeKeys = 10_000
)

// keyCount is the number of keys of BenchmarkMillionKeys and
// BenchmarkMemoryPerKey: millionKeys, or smokeKeys in a smoke run, when
// -benchtime is a count below 100 (CI's -benchtime 1x, which runs every
// benchmark once so that none can rot). Setting up a million keys per
// participant would take most of a minute there and measure nothing.
var keyCount = sync.OnceValue(func() int {
	f := flag.Lookup("test.benchtime")
	if f == nil {
		return millionKeys
	}
	if n, ok := strings.CutSuffix(f.Value.String(), "x"); ok {
		if c, err := strconv.Atoi(n); err == nil && c < 100 {
			return smokeKeys
		}
	}
	return millionKeys
})

// shuffledKeys returns "user-0" … "user-<n-1>" in a fixed random order.
func shuffledKeys(n int) []string { return shuffledKeysBy(n, 1) }

// shuffledKeysBy returns "user-0" … "user-<n-1>" in the fixed random order
// of seed: another seed, another order of the same keys.
func shuffledKeysBy(n int, seed uint64) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = "user-" + strconv.Itoa(i)
	}
	rand.New(rand.NewPCG(seed, 2)).Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

// The key sets are built once and shared, so every implementation sees the
// same keys in the same order.
var (
	millionKeySet  = sync.OnceValue(func() []string { return shuffledKeys(keyCount()) })
	parallelKeySet = sync.OnceValue(func() []string { return shuffledKeys(parallelKeys) })
	// parallelVisitSet holds the keys of parallelKeySet in another random
	// order, for BenchmarkParallel10kKeysUnordered.
	parallelVisitSet = sync.OnceValue(func() []string { return shuffledKeysBy(parallelKeys, 7) })
)

// settle collects the garbage of a benchmark's setup (up to a few hundred
// megabytes for a million keys) before the timer starts, so that collection
// is not charged to whichever implementation runs next.
func settle() { runtime.GC() }

// warm makes one admitted decision on every key, so the scenario measures
// existing keys.
func warm(b *testing.B, decide decideFunc, keys []string) {
	ctx := context.Background()
	for _, k := range keys {
		ok, err := decide(ctx, k)
		mustAllow(b, ok, err)
	}
}

// BenchmarkOneKey measures one decision on one existing key ("user-42")
// from one goroutine, quota unreached (every decision admits and writes
// back): the per-call cost of each limiter when everything is in cache.
//
//   - rlkit-memstore-TakeAt: rlkit's memory store with the instant passed
//     in, no clock read: hash, shard lock, lookup, fixed window, write back.
//   - rlkit-memstore-Take: the same with the clock read, as a request sees
//     it (and -sliding_window, -token_bucket, -gcra: the other algorithms).
//     Compare these with the peers, which all read the clock.
//   - the peers: sethvargo-memorystore, ulule-memory, throttled-memstore,
//     tollbooth, echo-memorystore (see storeImpls), and xtime-rate: one
//     x/time/rate Limiter for every key, no lookup.
//   - baseline-map-atomic: a map[string]*atomic.Int64 lookup, Add and
//     compare, the floor for any keyed counter.
func BenchmarkOneKey(b *testing.B) {
	const key = "user-42"
	for _, im := range impls(implSet{keyless: true, baselines: true, variants: true}) {
		b.Run(im.name, func(b *testing.B) {
			decide := im.build(b, unreached, []string{key})
			warm(b, decide, []string{key})
			ctx := context.Background()
			var (
				ok  bool
				err error
			)
			settle()
			b.ReportAllocs()
			for b.Loop() {
				ok, err = decide(ctx, key)
			}
			mustAllow(b, ok, err)
		})
	}
}

// BenchmarkMillionKeys measures one decision per op over 1,000,000 existing
// keys ("user-<i>", all inserted before the timer starts; 10,000 in a smoke
// run, see keyCount) visited in a fixed random order, cycling: nearly every decision misses the CPU caches, as
// under traffic from many users. Every keyed participant of BenchmarkOneKey
// (the rlkit rows in the fixed window) and the map baseline; rlkit's store
// and throttled's LRU are sized (2,000,000 keys) so they never evict.
func BenchmarkMillionKeys(b *testing.B) {
	ks := millionKeySet()
	for _, im := range impls(implSet{baselines: true}) {
		b.Run(im.name, func(b *testing.B) {
			decide := im.build(b, unreached, ks)
			warm(b, decide, ks)
			ctx := context.Background()
			var (
				ok  bool
				err error
			)
			settle()
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				ok, err = decide(ctx, ks[i])
				if i++; i == len(ks) {
					i = 0
				}
			}
			mustAllow(b, ok, err)
		})
	}
}

// BenchmarkParallel10kKeys measures decisions from GOMAXPROCS goroutines
// (b.RunParallel) over 10,000 existing keys, each goroutine starting at a
// random place in the same shuffled key list: contention on each limiter's
// locks and shared memory, with the clock read included. The keyed
// participants of BenchmarkMillionKeys and the map baseline. The keys are
// visited in the order they were created (warm's order), so a limiter that
// allocates one object per key in creation order reads its memory in
// sequence; BenchmarkParallel10kKeysUnordered visits them in another order.
func BenchmarkParallel10kKeys(b *testing.B) {
	benchParallel(b, parallelKeySet(), parallelKeySet())
}

// BenchmarkParallel10kKeysUnordered is BenchmarkParallel10kKeys with the
// keys created in one random order and visited in another, as under real
// traffic, where the next request's key has nothing to do with the order
// in which keys were first seen.
func BenchmarkParallel10kKeysUnordered(b *testing.B) {
	benchParallel(b, parallelKeySet(), parallelVisitSet())
}

// benchParallel creates the keys of created in their order, then measures
// decisions from GOMAXPROCS goroutines, each cycling through visit from a
// random place: every participant on its own, then all of them interleaved
// (see interleaveParallel), which reports each one's time per decision
// (<row>-ns), measured milliseconds apart from the others'.
func benchParallel(b *testing.B, created, visit []string) {
	ctx := context.Background()
	// cycle returns a goroutine's calls of decide, from a random place in
	// visit; the first denial or error fails b (every row pays the same
	// closure call and check).
	cycle := func(b *testing.B, decide decideFunc) func() {
		i := rand.IntN(len(visit))
		failed := false
		return func() {
			if ok, err := decide(ctx, visit[i]); (err != nil || !ok) && !failed {
				failed = true
				b.Error("denied or failed:", err)
			}
			if i++; i == len(visit) {
				i = 0
			}
		}
	}
	ims := impls(implSet{baselines: true})
	for _, im := range ims {
		b.Run(im.name, func(b *testing.B) {
			decide := im.build(b, unreached, created)
			warm(b, decide, created)
			settle()
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				next := cycle(b, decide)
				for pb.Next() {
					next()
				}
			})
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		rows := make([]func() func(), len(ims))
		for i, im := range ims {
			decide := im.build(b, unreached, created)
			warm(b, decide, created)
			rows[i] = func() func() { return cycle(b, decide) }
		}
		spent, n := interleaveParallel(b, rows)
		for i, im := range ims {
			b.ReportMetric(float64(spent[i])/float64(n), im.name+"-ns")
		}
	})
}

// BenchmarkDeniedKey measures one decision on a key that is over its quota
// (1 per hour, used up before the timer starts), one goroutine: the cost of
// saying no, what a limiter pays for every request of a client it is
// holding back. Every participant of BenchmarkOneKey; the map baseline's
// counter is at its count, so it denies after one Add and one compare (and
// undoes the Add).
func BenchmarkDeniedKey(b *testing.B) {
	const key = "user-42"
	for _, im := range impls(implSet{keyless: true, baselines: true, variants: true}) {
		b.Run(im.name, func(b *testing.B) {
			decide := im.build(b, oneAnHour, []string{key})
			ctx := context.Background()
			ok, err := decide(ctx, key)
			mustAllow(b, ok, err)
			settle()
			b.ReportAllocs()
			for b.Loop() {
				ok, err = decide(ctx, key)
			}
			if err != nil {
				b.Fatal(err)
			}
			if ok {
				b.Fatal("admitted: the quota of 1 per hour was used up, the decision must deny")
			}
		})
	}
}

// liveHeap returns the live heap once collections stop freeing anything:
// a store released through a finalizer (ulule's memory store stops its
// cleaner that way) is freed only by a later collection, after the
// finalizer has run on its own goroutine.
func liveHeap() int64 {
	var m runtime.MemStats
	prev := int64(math.MaxInt64)
	for range 10 {
		runtime.GC()
		time.Sleep(time.Millisecond)
		runtime.ReadMemStats(&m)
		if h := int64(m.HeapAlloc); h < prev {
			prev = h
			continue
		}
		break
	}
	return prev
}

// fillTB collects the cleanups a participant registers while
// BenchmarkMemoryPerKey builds it, so each fill's store is closed and
// released before the next fill starts.
type fillTB struct {
	testing.TB
	cleanups []func()
}

func (f *fillTB) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

func (f *fillTB) close() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	f.cleanups = nil
}

// memBench runs fill, which must build a store holding keyCount() keys and
// return it, once per op, and reports the growth of the live heap per key
// (B/key) and the time per insert (ns/key). The collections around each fill
// are outside the timer; B/op and allocs/op are per fill of 1,000,000 keys.
func memBench(b *testing.B, fill func(tb testing.TB) any) {
	b.ReportAllocs()
	var bytes int64
	fills := 0
	for b.Loop() {
		b.StopTimer()
		tb := &fillTB{TB: b}
		before := liveHeap()
		b.StartTimer()
		s := fill(tb)
		b.StopTimer()
		bytes += liveHeap() - before
		runtime.KeepAlive(s)
		s = nil
		tb.close()
		fills++
		b.StartTimer()
	}
	b.ReportMetric(float64(bytes)/float64(fills*keyCount()), "B/key")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(fills*keyCount()), "ns/key")
}

// BenchmarkMemoryPerKey inserts 1,000,000 keys ("user-<i>", in order; 10,000
// in a smoke run, see keyCount) into a new store per op and reports the live heap it then holds per key (B/key,
// HeapAlloc after runtime.GC, before vs after, the store kept alive), and
// the cost of an insert (ns/key). What is counted differs by what each store
// keeps, and that is the point:
//
//   - rlkit-memstore: memstore.New(WithMaxKeys(2,000,000)), TakeAt. The store
//     keeps a 64-bit hash of the key, never the key, so keys are built in
//     one reused buffer (unsafe.String) and cost nothing: B/key is the
//     store's own.
//   - the peers (sethvargo-memorystore, ulule-memory, throttled-memstore,
//     tollbooth, echo-memorystore) keep the key string as a map key, so each
//     key is a real copy (strings.Clone) and nothing is subtracted: B/key
//     includes the key's bytes (16 B for "user-NNNNNN"), which is what the
//     store really costs to hold that key.
//   - baseline-map-int64: a map[string]int64 with real key strings, also
//     counted: the floor for a store that must keep the key.
func BenchmarkMemoryPerKey(b *testing.B) {
	for _, im := range impls(implSet{}) {
		name := im.name
		switch {
		case name == implTakeAt:
			name = implRlkit
		case !im.keepsKey:
			continue // rlkit-memstore-Take: the same store as TakeAt
		}
		b.Run(name, func(b *testing.B) {
			memBench(b, func(tb testing.TB) any {
				decide := im.build(tb, unreached, nil)
				ctx := context.Background()
				var (
					ok  bool
					err error
				)
				buf := make([]byte, 0, 32)
				for i := range keyCount() {
					buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
					key := unsafe.String(&buf[0], len(buf))
					if im.keepsKey {
						key = strings.Clone(key) // a real copy: the store keeps it
					}
					ok, err = decide(ctx, key)
				}
				mustAllow(b, ok, err)
				return decide
			})
		})
	}

	b.Run(implMapInt64, func(b *testing.B) {
		memBench(b, func(testing.TB) any {
			m := make(map[string]int64)
			buf := make([]byte, 0, 32)
			for i := range keyCount() {
				buf = strconv.AppendInt(append(buf[:0], "user-"...), int64(i), 10)
				m[string(buf)]++
			}
			mustAllow(b, len(m) == keyCount(), nil)
			return m
		})
	})
}
