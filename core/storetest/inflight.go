package storetest

import (
	"context"
	"errors"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// inFlightChecks are the checks of a store.ConcurrencyStore, each run
// when the store implements it and skipped otherwise.
var inFlightChecks = []struct {
	name string
	fn   func(e *env, cs store.ConcurrencyStore)
}{
	{"InFlight/ExactCount", inFlightExact},
	{"InFlight/Isolation", inFlightIsolation},
	{"InFlight/LimitChange", inFlightLimitChange},
	{"InFlight/ReleaseOnce", inFlightReleaseOnce},
	{"InFlight/Concurrency", inFlightConcurrency},
	{"InFlight/BadConcurrency", inFlightBad},
}

// concurrency returns a store.Concurrency of the run's own name.
func (e *env) concurrency(name string, limit int64) *store.Concurrency {
	return &store.Concurrency{Name: e.prefix + name, Limit: limit, Lease: 30 * time.Second}
}

// acquire acquires a slot of key under c, failing the test on an error
// or an answer other than want, and returns the slot's lease.
func (e *env) acquire(cs store.ConcurrencyStore, key string, c *store.Concurrency, want bool) uint64 {
	e.Helper()
	lease, ok, err := cs.Acquire(context.Background(), key, c)
	if err != nil || ok != want {
		e.Fatalf("Acquire(%q) under %s (limit %d): got %v, %v; want %v", key, c.Name, c.Limit, ok, err, want)
	}
	return lease
}

// release releases the slot lease of key under c, failing on an error.
func (e *env) release(cs store.ConcurrencyStore, key string, c *store.Concurrency, lease uint64) {
	e.Helper()
	if err := cs.Release(context.Background(), key, c, lease); err != nil {
		e.Fatalf("Release(%q) under %s: %v", key, c.Name, err)
	}
}

// inFlightExact: a limit of 3 takes exactly 3 slots; a refused Acquire
// takes nothing; each Release frees exactly one slot, which the next
// Acquire takes.
func inFlightExact(e *env, cs store.ConcurrencyStore) {
	c := e.concurrency("exact", 3)
	k := e.key("k")
	leases := []uint64{e.acquire(cs, k, c, true), e.acquire(cs, k, c, true), e.acquire(cs, k, c, true)}
	e.acquire(cs, k, c, false)
	e.acquire(cs, k, c, false)
	e.release(cs, k, c, leases[1])
	leases[1] = e.acquire(cs, k, c, true)
	e.acquire(cs, k, c, false)
	for _, l := range leases {
		e.release(cs, k, c, l)
	}
	for range 3 {
		e.acquire(cs, k, c, true)
	}
	e.acquire(cs, k, c, false)
}

// inFlightIsolation: keys of any bytes, names, and the counters of a
// policy of the same name never share slots; a Reset of the policy
// frees none.
func inFlightIsolation(e *env, cs store.ConcurrencyStore) {
	c, other := e.concurrency("iso", 1), e.concurrency("iso-other", 1)
	keys := []string{"", "a", "a:b", "{a}", "a\x00b", "ключ", string(make([]byte, 10_000))}
	for _, k := range keys {
		e.acquire(cs, e.key(k), c, true)
	}
	for _, k := range keys {
		e.acquire(cs, e.key(k), c, false)
		e.acquire(cs, e.key(k), other, true)
	}
	p := &store.Policy{Name: c.Name, Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 1, Period: time.Hour}}}
	k := e.key("a")
	e.align(time.Hour)
	e.expect(k, p, 1, true, 0) // the slot held is no count
	e.expect(k, p, 1, false, 0)
	e.reset(k, p, true)
	e.acquire(cs, k, c, false) // the Reset freed no slot
}

// inFlightLimitChange: the slots belong to the name, not the limit: a
// raised limit admits only the difference, a lowered one refuses until
// enough slots are released.
func inFlightLimitChange(e *env, cs store.ConcurrencyStore) {
	two, four, one := e.concurrency("change", 2), e.concurrency("change", 4), e.concurrency("change", 1)
	k := e.key("k")
	a, b := e.acquire(cs, k, two, true), e.acquire(cs, k, two, true)
	e.acquire(cs, k, two, false)
	c, d := e.acquire(cs, k, four, true), e.acquire(cs, k, four, true)
	e.acquire(cs, k, four, false)
	e.release(cs, k, one, a)
	e.release(cs, k, one, b)
	e.release(cs, k, one, c)
	e.acquire(cs, k, one, false) // d is held
	e.release(cs, k, one, d)
	e.acquire(cs, k, one, true)
}

// inFlightReleaseOnce: a slot released twice frees no second slot, and
// a Release of a key never acquired frees nothing either.
func inFlightReleaseOnce(e *env, cs store.ConcurrencyStore) {
	c := e.concurrency("once", 2)
	k := e.key("k")
	e.release(cs, k, c, 1) // nothing held
	l := e.acquire(cs, k, c, true)
	e.release(cs, k, c, l)
	e.release(cs, k, c, l)
	e.acquire(cs, k, c, true)
	e.acquire(cs, k, c, true)
	e.acquire(cs, k, c, false)
}

// inFlightConcurrency: GOMAXPROCS×8 goroutines take, hold and release
// slots of one key with a limit of 5, 20 times each: never more than 5
// are held at once, every refusal came while 5 may have been held, and
// once all are released exactly 5 can be taken again.
func inFlightConcurrency(e *env, cs store.ConcurrencyStore) {
	const limit, rounds = 5, 20
	c := e.concurrency("conc", limit)
	k := e.key("hot")
	workers := runtime.GOMAXPROCS(0) * 8
	var held, most, admitted, failed atomic.Int64
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range workers {
		wg.Go(func() {
			<-start
			for range rounds {
				lease, ok, err := cs.Acquire(context.Background(), k, c)
				if err != nil {
					failed.Add(1)
					continue
				}
				if !ok {
					continue
				}
				admitted.Add(1)
				n := held.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				runtime.Gosched()
				held.Add(-1)
				if err := cs.Release(context.Background(), k, c, lease); err != nil {
					failed.Add(1)
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if failed.Load() != 0 || most.Load() > limit || admitted.Load() < limit {
		e.Fatalf("%d goroutines: %d calls failed, at most %d slots held at once, %d admitted; want no failure, at most %d, at least %d",
			workers, failed.Load(), most.Load(), admitted.Load(), limit, limit)
	}
	for range limit {
		e.acquire(cs, k, c, true)
	}
	e.acquire(cs, k, c, false)
}

// inFlightBad: a Concurrency with a limit below 1 fails with
// store.ErrBadConcurrency and takes nothing.
func inFlightBad(e *env, cs store.ConcurrencyStore) {
	for _, limit := range []int64{0, -1} {
		c := e.concurrency("bad", limit)
		if _, ok, err := cs.Acquire(context.Background(), e.key("k"), c); ok || !errors.Is(err, store.ErrBadConcurrency) {
			e.Fatalf("Acquire under limit %d: got %v, %v; want false and an error wrapping store.ErrBadConcurrency", limit, ok, err)
		}
	}
}
