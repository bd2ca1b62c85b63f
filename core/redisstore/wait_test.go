package redisstore_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestWaitRedis: a rule's wait (core.RuleSpec.Wait) works on the store's
// Retry-After, on a memory store and on a real redis-server alike (its
// clock the server's): at 1 a second (gcra) with wait 2.5s, a request is
// admitted, and of three more at once two are held and admitted about a
// second apart, and the third, whose wait the two ahead would make about
// 3s, is refused at once. The store then has nothing left.
func TestWaitRedis(t *testing.T) {
	t.Parallel()
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "1/second"
      algorithm: gcra
      wait: 2500ms
`), "w.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name  string
		store func(t *testing.T) store.Store
	}{
		{"memory", func(t *testing.T) store.Store {
			m := memstore.New()
			t.Cleanup(func() { _ = m.Close() })
			return m
		}},
		{"redis", func(t *testing.T) store.Store { return newStore(t, client(t, redistest.StartServer(t).Addr())) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			st := tt.store(t)
			l := core.NewLimiter(cfg, core.WithStore(st))
			ctx := context.Background()
			if d := l.Decide(ctx, "GET", "/api/search", "alice", false); !d.Allowed || d.Waited != 0 {
				t.Fatalf("the first request: allowed %v, waited %v", d.Allowed, d.Waited)
			}
			var (
				wg        sync.WaitGroup
				mu        sync.Mutex
				waits     []time.Duration // of the admitted
				refused   int
				refusedRA time.Duration
			)
			for range 3 {
				wg.Go(func() {
					d := l.Decide(ctx, "GET", "/api/search", "alice", false)
					mu.Lock()
					defer mu.Unlock()
					if d.Allowed {
						waits = append(waits, d.Waited)
						return
					}
					refused++
					refusedRA = d.Result.RetryAfter
					if d.Waited != 0 || d.Rule == nil || d.Status() != 429 {
						t.Errorf("the refused request: waited %v, status %d; want refused at once, 429", d.Waited, d.Status())
					}
				})
			}
			wg.Wait()
			slices.Sort(waits)
			// Generous bounds on the real clock: a second apart, within the wait.
			if refused != 1 || len(waits) != 2 || waits[0] < 500*time.Millisecond || waits[1]-waits[0] < 500*time.Millisecond || waits[1] > 2500*time.Millisecond+time.Second {
				t.Fatalf("admitted after %v, %d refused; want two, about 1s and 2s, and one refused", waits, refused)
			}
			if refusedRA <= 2500*time.Millisecond {
				t.Errorf("the refused request's Retry-After is %v, want past the wait (about 3s)", refusedRA)
			}
			p := cfg.Rule("search").Policy
			if r, err := st.Peek(ctx, l.Key("alice"), p, 1); err != nil || r.Allowed {
				t.Errorf("after the held requests: %+v, %v; want nothing left", r, err)
			}
		})
	}
}
