package outbound

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/internal/redistest"
	"github.com/rlkit/rlkit/nethttp"
)

// TestEndToEndRlkitServer: a client paced only by the rate-limit headers
// of an rlkit server (its own Limiter has no limit, or a thousand a
// second) sends 30
// requests, one at a time and from 4 goroutines, and gets no 429; the
// server admitted exactly 30 and denied none. Real time: about 6 s each,
// run in parallel.
func TestEndToEndRlkitServer(t *testing.T) {
	for _, tc := range []struct {
		headers, limit string
		workers        int
		own            bool // the client's Limiter has a limit of its own (far above), else none
	}{
		{"draft", "5/second", 1, false},
		{"draft", "5/second", 4, true},
		{"legacy", "10/2s", 1, true},
		{"legacy", "10/2s", 4, false},
	} {
		t.Run(fmt.Sprintf("%s %s x%d own limit %v", tc.headers, tc.limit, tc.workers, tc.own), func(t *testing.T) {
			t.Parallel()
			cfg := mustParse(t, fmt.Sprintf(`
rate_limit:
  enabled: true
  algorithm: fixed_window
  headers: %s
  default: "%s"
`, tc.headers, tc.limit))
			var allowed, denied atomic.Int64
			mw := nethttp.New(cfg,
				nethttp.WithKeyFunc(func(*http.Request) (string, error) { return "the-client", nil }),
				nethttp.WithObserver(func(e core.Event) {
					if e.Allowed {
						allowed.Add(1)
					} else {
						denied.Add(1)
					}
				}))
			srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok")
			})))
			defer srv.Close()

			var own *core.Config
			if tc.own {
				own = mustRate(t, 1000, time.Second, 1000)
			}
			l, err := New(own, nil)
			if err != nil {
				t.Fatal(err)
			}
			tr := NewTransport(nil, l)
			defer tr.CloseIdleConnections()
			c := &http.Client{Transport: tr}

			const total = 30
			var sent atomic.Int64
			var mu sync.Mutex
			statuses := map[int]int{}
			var wg sync.WaitGroup
			for range tc.workers {
				wg.Go(func() {
					for sent.Add(1) <= total {
						resp, err := c.Get(srv.URL + "/api/items")
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						mu.Lock()
						statuses[resp.StatusCode]++
						mu.Unlock()
					}
				})
			}
			wg.Wait()
			if statuses[200] != total || len(statuses) != 1 {
				t.Fatalf("statuses %v, want %d × 200 and no 429", statuses, total)
			}
			if a, d := allowed.Load(), denied.Load(); a != total || d != 0 {
				t.Fatalf("server admitted %d and denied %d, want %d and 0", a, d, total)
			}
		})
	}
}

// TestRedisTwoLimitersShareOneLimit: two Limiters (two processes' worth)
// on one Redis store share one limit exactly: of 8 requests asking at
// once for a burst of 5 an hour, 5 start and the others wait until their
// context ends.
func TestRedisTwoLimitersShareOneLimit(t *testing.T) {
	client, kind := redistest.Standalone(t)
	t.Logf("redis: %s", kind)
	cfg := mustRate(t, 5, time.Hour, 5)
	var limiters [2]*Limiter
	for i := range limiters {
		st, err := redisstore.New(client)
		if err != nil {
			t.Fatal(err)
		}
		if limiters[i], err = New(cfg, st); err != nil {
			t.Fatal(err)
		}
	}
	key := fmt.Sprintf("upstream-%d", time.Now().UnixNano())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	var started, waited atomic.Int64
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			err := limiters[i%2].Wait(ctx, "GET", "/", key)
			switch {
			case err == nil:
				started.Add(1)
			case errors.Is(err, context.DeadlineExceeded):
				waited.Add(1)
			default:
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if s, w := started.Load(), waited.Load(); s != 5 || w != 3 {
		t.Fatalf("%d started and %d waited to the end, want 5 and 3 (one limit for both)", s, w)
	}
}
