package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// A store that keeps algo.State values evaluates each request with
// Evaluate: here one key's counters under a policy of two limits, at
// instants a store.ManualClock reads.
func ExampleEvaluate() {
	p := &store.Policy{Name: "search", Algorithm: algo.FixedWindow, Limits: []algo.Limit{
		{Count: 2, Period: time.Minute},
		{Count: 5, Period: time.Hour},
	}}
	var (
		states   [store.MaxLimits]algo.State // the zero State is a fresh counter
		expireAt [store.MaxLimits]int64      // when each state may be dropped
	)
	clock := store.NewManualClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	for range 3 {
		r := store.Evaluate(p, &states, &expireAt, clock.Now(), 1)
		fmt.Printf("allowed=%v limit=%v remaining=%d hour=%d retry=%v\n",
			r.Allowed, r.Limit, r.Remaining, r.Limits[1].Remaining, r.RetryAfter)
	}
	clock.Advance(time.Minute) // a new minute window; the hour still holds 2
	r := store.Evaluate(p, &states, &expireAt, clock.Now(), 1)
	fmt.Printf("allowed=%v limit=%v remaining=%d hour=%d retry=%v\n",
		r.Allowed, r.Limit, r.Remaining, r.Limits[1].Remaining, r.RetryAfter)
	// Output:
	// allowed=true limit=2/minute remaining=1 hour=4 retry=0s
	// allowed=true limit=2/minute remaining=0 hour=3 retry=0s
	// allowed=false limit=2/minute remaining=0 hour=3 retry=1m0s
	// allowed=true limit=2/minute remaining=1 hour=2 retry=0s
}

// A store that evaluates each limit elsewhere (a script on its server)
// makes its Result with Combine. When a limit denies, the request consumes
// nothing, so the outcomes of the limits that admitted it must describe
// their state without the cost: a peek, at cost 0. Here the server's part
// runs inline.
func ExampleCombine() {
	p := &store.Policy{Name: "upload", Algorithm: algo.TokenBucket, Limits: []algo.Limit{
		{Count: 10, Period: time.Minute},
		{Count: 3, Period: time.Second},
	}}
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC).UnixNano()
	var states [store.MaxLimits]algo.State // what the server keeps
	take := func(cost int64) store.Result {
		var (
			next    [store.MaxLimits]algo.State
			out     [store.MaxLimits]algo.Outcome
			allowed = true
		)
		for i, l := range p.Limits {
			next[i], out[i] = algo.Take(p.Algorithm, states[i], l, now, cost)
			allowed = allowed && out[i].Allowed
		}
		if allowed {
			states = next
		} else {
			for i, l := range p.Limits {
				if out[i].Allowed {
					_, out[i] = algo.Take(p.Algorithm, states[i], l, now, 0)
				}
			}
		}
		return store.Combine(p, &out)
	}
	for range 2 {
		r := take(3)
		fmt.Printf("allowed=%v limit=%v remaining=%d retry=%v minute=%d second=%d\n",
			r.Allowed, r.Limit, r.Remaining, r.RetryAfter, r.Limits[0].Remaining, r.Limits[1].Remaining)
	}
	// Output:
	// allowed=true limit=3/second remaining=0 retry=0s minute=7 second=0
	// allowed=false limit=3/second remaining=0 retry=1s minute=7 second=0
}

// BoundKey keeps short keys as they are and replaces long ones with a
// digest of fixed length.
func ExampleBoundKey() {
	fmt.Println(store.BoundKey("sub:alice"))
	long := store.BoundKey(strings.Repeat("x", 1000))
	fmt.Println(len(long), strings.HasPrefix(long, "sha256:"))
	// Output:
	// sub:alice
	// 71 true
}

// errThrottled is a store's own error: its StoreErrorKind names it for
// the metrics' error label.
type errThrottled struct{}

func (errThrottled) Error() string          { return "mystore: server throttled the call" }
func (errThrottled) StoreErrorKind() string { return "throttled" }

func ExampleErrorKind() {
	fmt.Println(store.ErrorKind(fmt.Errorf("take: %w", errThrottled{})))
	fmt.Println(store.ErrorKind(fmt.Errorf("take: %w", context.DeadlineExceeded)))
	fmt.Println(store.ErrorKind(errors.New("disk full")))
	fmt.Printf("%q\n", store.ErrorKind(nil))
	// Output:
	// throttled
	// timeout
	// other
	// ""
}
