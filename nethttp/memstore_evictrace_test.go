package nethttp_test

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/nethttp"
)

// TestMemstoreEvictionRaceThroughMiddleware: a client that controls
// its identities (X-API-Key) sends requests from two goroutines to the
// middleware over an in-memory store of WithMaxKeys(1024) (64 shards of
// 16), for a token_bucket rule of 100/minute, cycling 3,072 identities.
// An eviction pass that raced decisions made without the shard's mutex
// could free nothing; the insert then went past the shard's cap, and once
// every cell was handed out, memstore indexed past its chunks and panicked
// under the shard's mutex, which stayed locked: from then on every request
// whose identity fell in that shard blocked for ever (memstore's evictOne
// now guarantees progress). The test stops at the first panic and counts,
// among 3,072 identities sent at once, those whose request has not come
// back after 500 ms.
func TestMemstoreEvictionRaceThroughMiddleware(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "100/minute"
      algorithm: token_bucket
`), "ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	store := memstore.New(memstore.WithMaxKeys(1024))
	h := nethttp.New(
		core.NewLimiter(cfg, core.WithStore(store)),
		nethttp.WithKeyFunc(nethttp.HeaderKey("X-API-Key")),
	)(ok)
	const ids = 3 * 1024
	serve := func(id int) {
		req := httptest.NewRequest("GET", "/api", nil)
		req.Header.Set("X-API-Key", "id-"+strconv.Itoa(id))
		h.ServeHTTP(httptest.NewRecorder(), req)
	}
	var (
		stop   atomic.Bool
		panics atomic.Int64
		first  atomic.Value
		sent   atomic.Int64
		wg     sync.WaitGroup
	)
	for g := range 2 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for !stop.Load() {
				func() {
					defer func() {
						if e := recover(); e != nil {
							panics.Add(1)
							first.CompareAndSwap(nil, fmt.Sprint(e))
							stop.Store(true)
						}
					}()
					for range 256 {
						serve(rng.IntN(ids))
						sent.Add(1)
					}
				}()
			}
		})
	}
	// A shard past its cap no longer panics (a block of the chunk directory
	// covers 2^20 cells): the bound is checked every 10 ms as well.
	deadline := time.Now().Add(2 * time.Second)
	var worst int64
	for time.Now().Before(deadline) && !stop.Load() {
		time.Sleep(10 * time.Millisecond)
		worst = max(worst, store.Stats().Keys)
	}
	stop.Store(true)
	if panics.Load() == 0 {
		wg.Wait()
		if worst = max(worst, store.Stats().Keys); worst > 1024 {
			t.Fatalf("after %d requests the store held %d counters, bound 1024", sent.Load(), worst)
		}
		t.Logf("%d requests, no panic, at most %d counters", sent.Load(), worst)
		return
	}
	var done atomic.Int64
	for id := range ids {
		go func() { serve(id); done.Add(1) }()
	}
	time.Sleep(500 * time.Millisecond)
	hung := ids - int(done.Load())
	t.Fatalf("after %d requests a request panicked in the store: %v; then %d of %d identities' requests have not come back after 500 ms", sent.Load(), first.Load(), hung, ids)
}
