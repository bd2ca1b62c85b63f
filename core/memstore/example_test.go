package memstore_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func Example() {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	st := memstore.New(memstore.WithClock(clock), memstore.WithMaxKeys(100_000))
	defer st.Close()

	p := &store.Policy{Name: "login", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 3, Period: time.Minute}}}
	for range 4 {
		r, _ := st.Take(context.Background(), "alice", p, 1)
		fmt.Println(r.Allowed, r.Remaining, r.RetryAfter)
	}
	clock.Advance(20 * time.Second) // one emission interval: room for one more
	r, _ := st.Take(context.Background(), "alice", p, 1)
	fmt.Println(r.Allowed, r.Remaining)
	// Output:
	// true 2 0s
	// true 1 0s
	// true 0 0s
	// false 0 20s
	// true 0
}
