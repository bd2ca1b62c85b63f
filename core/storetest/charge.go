package storetest

import (
	"context"
	"runtime"
	"sync"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// chargeTests are the checks of a store.Charger, run for each algorithm;
// a store that is not one skips them.
var chargeTests = []struct {
	name string
	fn   func(e *env, c store.Charger, a algo.Algorithm)
}{
	{"Charge", chargeDebt},
	{"ChargeBound", chargeBound},
	{"ChargeSeveralLimits", chargeSeveralLimits},
	{"ChargeConcurrency", chargeConcurrency},
}

// charger returns the store as a store.Charger, and skips the test when
// it is not one.
func (e *env) charger() store.Charger {
	c, ok := e.st.(store.Charger)
	if !ok {
		e.Skip("the store is not a store.Charger")
	}
	return c
}

// charge charges cost and checks that the Result is what a Peek of cost
// 1 answers right after.
func (e *env) charge(c store.Charger, key string, p *store.Policy, cost int64) store.Result {
	e.Helper()
	r, err := c.Charge(context.Background(), key, p, cost)
	if err != nil {
		e.Fatalf("Charge(%q, %s, %d): %v", key, p.Name, cost, err)
	}
	if pr := e.peekAt(key, p, 1); !e.sameResult(r, pr) {
		e.Fatalf("Charge(%q, %s, %d) = %+v, then Peek of cost 1 = %+v: want the same answer", key, p.Name, cost, r, pr)
	}
	return r
}

// chargeDebt: under 100/hour, a caller with one unit left is charged 30:
// it owes 29, every request is refused until time has paid them back and
// freed one unit (for token_bucket and GCRA exactly 30 units' refill,
// 18 minutes), and Reset forgets the debt. A charge of 0 creates nothing.
func chargeDebt(e *env, c store.Charger, a algo.Algorithm) {
	p := e.policy("charge", a, "100/hour")
	e.align(time.Hour)
	k := e.key("u")
	e.expect(k, p, 99, true, 1)
	r := e.charge(c, k, p, 30)
	if r.Allowed || r.Remaining != 0 {
		e.Fatalf("after a charge past the limit: allowed=%v remaining=%d, want refused with 0 left", r.Allowed, r.Remaining)
	}
	want := map[algo.Algorithm]time.Duration{
		// The sliding window: 129 in this window, of which the next must
		// weigh at most 99 of 100: 99/129 of the way into it.
		algo.FixedWindow: time.Hour, algo.SlidingWindow: 2*time.Hour - 99*time.Hour/129,
		algo.TokenBucket: 18 * time.Minute, algo.GCRA: 18 * time.Minute,
	}[a]
	e.duration("RetryAfter in debt", r.RetryAfter, want)
	r = e.expect(k, p, 1, false, 0)
	e.duration("RetryAfter of a request in debt", r.RetryAfter, want)
	if e.virtual() {
		e.sleep(want - time.Nanosecond)
		e.expect(k, p, 1, false, 0)
		e.sleep(time.Nanosecond)
		left := int64(0) // one unit freed, taken
		if a == algo.FixedWindow {
			left = 99 // a new window: its debt ended with its own
		}
		e.expect(k, p, 1, true, left)
	}
	e.reset(k, p, true)
	e.expect(k, p, 1, true, 99)
	fresh := e.key("zero")
	if r := e.charge(c, fresh, p, 0); !r.Allowed || r.Remaining != 99 {
		e.Fatalf("a charge of 0 on a new key: %+v, want allowed with 99 left", r)
	}
	e.charge(c, fresh, p, -5)
	e.reset(fresh, p, false) // a charge of 0 created nothing
}

// chargeBound: a charge never takes a counter more than Count past its
// capacity, whatever the cost asked.
func chargeBound(e *env, c store.Charger, a algo.Algorithm) {
	p := e.policy("bound", a, "10/hour")
	e.align(time.Hour)
	k := e.key("u")
	r := e.charge(c, k, p, 1<<40)
	if r.Allowed || r.Remaining != 0 {
		e.Fatalf("after a huge charge: %+v, want refused with 0 left", r)
	}
	want := map[algo.Algorithm]time.Duration{
		algo.FixedWindow: time.Hour, algo.SlidingWindow: time.Hour + 33*time.Minute,
		algo.TokenBucket: 66 * time.Minute, algo.GCRA: 66 * time.Minute,
	}[a]
	e.duration("RetryAfter at the debt's bound", r.RetryAfter, want)
	// At the bound, a further charge consumes nothing.
	if again := e.charge(c, k, p, 5); !e.sameResult(r, again) {
		e.Fatalf("a charge at the bound changed the answer from %+v to %+v", r, again)
	}
}

// chargeSeveralLimits: a charge consumes from every limit, and what each
// limit has left shows in Result.Limits.
func chargeSeveralLimits(e *env, c store.Charger, a algo.Algorithm) {
	p := e.policy("charge-multi", a, "10/minute", "100/hour")
	e.align(time.Hour)
	k := e.key("u")
	r := e.charge(c, k, p, 15)
	if r.Allowed || r.Limit != p.Limits[0] || r.Limits[0].Remaining != 0 || r.Limits[1].Remaining != 85 {
		e.Fatalf("after a charge of 15: %+v; want refused by the minute limit, the hour limit with 85 left", r)
	}
	e.expect(k, p, 1, false, 0)
	if a == algo.TokenBucket || a == algo.GCRA {
		e.duration("RetryAfter", r.RetryAfter, 36*time.Second) // 6 units at 6s each
	}
}

// chargeConcurrency: concurrent charges on one key all count, exactly.
func chargeConcurrency(e *env, c store.Charger, a algo.Algorithm) {
	p := e.policy("charge-conc", a, "1000/hour")
	e.align(time.Hour)
	k := e.key("hot")
	workers := runtime.GOMAXPROCS(0) * 8
	const each = 5
	var wg sync.WaitGroup
	start := make(chan struct{})
	var mu sync.Mutex
	var failed error
	for range workers {
		wg.Go(func() {
			<-start
			for range each {
				if _, err := c.Charge(context.Background(), k, p, 2); err != nil {
					mu.Lock()
					failed = err
					mu.Unlock()
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if failed != nil {
		e.Fatal(failed)
	}
	charged := int64(workers * each * 2)
	want := max(1000-charged, 0) - 1
	if want < 0 {
		e.expect(k, p, 1, false, 0)
		return
	}
	e.expect(k, p, 1, true, want)
}
