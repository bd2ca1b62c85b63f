package redisstore

import (
	"context"
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redistest"
)

// TestBatchRedirected: a batch sent to one master that carries keys of
// another (its slot map stale, or slots moving) answers the decisions of
// its own keys, and marks the others to be sent alone without applying
// them; sent alone, they count on their own master.
func TestBatchRedirected(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t)
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	// A generous timeout: the first batch loads the batch script (EVAL)
	// on a loaded machine under -race.
	s, err := New(cc, WithDenyCache(false), WithTimeout(redistest.StoreTimeout))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	ctx := context.Background()
	p := testPolicy(t, "redirected", "2/hour")
	pl, err := s.plan(p)
	if err != nil {
		t.Fatal(err)
	}
	// Six keys of the first key's master, and six of others.
	var first *node
	var own, other []string
	for i := 0; len(own) < 6 || len(other) < 6; i++ {
		k := redisKey(s.prefix, fmt.Sprint("u", i), pl.rule)
		n, err := s.nodes.locate(ctx, k, s.clock.Now(), s.timeout)
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first = n
		}
		if n == first {
			own = append(own, k)
		} else {
			other = append(other, k)
		}
	}
	own, other = own[:6], other[:6]
	var batch []*waiter
	for i := range 6 {
		for _, k := range []string{own[i], other[i]} {
			w := &waiter{key: k, alg: pl.algorithm, arg: 1, tail: pl.tail, done: make(chan struct{}, 1)}
			w.deadline, w.expired = s.deadline(ctx)
			w.ctx = ctx
			batch = append(batch, w)
		}
	}
	s.sendBatch(first, batch, nil)
	for i, w := range batch {
		<-w.done
		mine := i%2 == 0
		if w.err != nil || w.alone == mine || (w.reply != nil) != mine {
			t.Fatalf("decision %d (key %s, on the batch's master: %v): reply %v, err %v, alone %v", i, w.key, mine, w.reply, w.err, w.alone)
		}
	}
	// The others were not applied: sent alone now, each admits with 1 of
	// 2 left; the batch's own keys were applied once (0 left).
	for i := range 6 {
		for _, k := range []string{own[i], other[i]} {
			v, err := s.decideCall(ctx, k, pl, pl.tail, 1)
			if err != nil {
				t.Fatal(err)
			}
			var r = v.([]any)
			want := int64(1)
			if k == own[i] {
				want = 2
			}
			if r[0] != want {
				t.Fatalf("%s after the batch: %v, want a count of %d", k, r, want)
			}
		}
	}
}
