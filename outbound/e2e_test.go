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
			mw := nethttp.New(
				core.NewLimiter(cfg, core.WithObserver(func(e core.Event) {
					if e.Allowed {
						allowed.Add(1)
					} else {
						denied.Add(1)
					}
				})),
				nethttp.WithKeyFunc(func(*http.Request) (string, error) { return "the-client", nil }),
			)
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
		// The test is about sharing, not time-outs: a store error could fail
		// open and start a sixth request.
		st, err := redisstore.New(client, redisstore.WithTimeout(redistest.StoreTimeout))
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

// informedWaiter is a Limiter that tells, of every request, whether an
// answer had been observed under any key when the request began to wait:
// one that had is a request the Limiter could pace by the upstream's
// headers. (A request counted as blind may have been paced too; one
// counted as informed surely could be.)
type informedWaiter struct {
	*Limiter
	observed atomic.Bool
	informed sync.Map // the request's context → bool
}

func (w *informedWaiter) Wait(ctx context.Context, method, path, key string) error {
	w.informed.Store(ctx, w.observed.Load())
	return w.Limiter.Wait(ctx, method, path, key)
}

func (w *informedWaiter) Observe(ctx context.Context, key string, s Signal) {
	w.Limiter.Observe(ctx, key, s)
	w.observed.Store(true)
}

// sendLog is a RoundTripper that counts the statuses of the requests it
// sends, apart for those that began to wait before any answer
// (informedWaiter).
type sendLog struct {
	base     http.RoundTripper
	waiter   *informedWaiter
	mu       sync.Mutex
	statuses [2]map[int]int // [0]: began to wait before any answer; [1]: after
}

func (s *sendLog) RoundTrip(r *http.Request) (*http.Response, error) {
	informed := 0
	if v, ok := s.waiter.informed.Load(r.Context()); ok && v.(bool) {
		informed = 1
	}
	resp, err := s.base.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.statuses[informed][resp.StatusCode]++
	s.mu.Unlock()
	return resp, nil
}

// TestEndToEndHerd is a herd: a client paced by an rlkit server's
// headers alone (New(nil, nil)), with 16 workers sending 60 requests in
// all to a server at 5 a second (fixed window, draft headers) or 10 per
// 2 s (legacy headers), is refused only requests it sent before it had any
// answer (the first contact of the key: at most 16 less the limit), and
// none it sent after: once a window's budget ends, one request (a probe)
// starts and the others wait for its answer, instead of all starting at
// the reset. Without the probe, the draft server refused 35 and 36 of 60
// in two runs (24 and 25 of them sent after the first answer), the legacy
// one 12 and 20 (6 and 14 after it). Real time:
// about 9 s each, run in parallel.
func TestEndToEndHerd(t *testing.T) {
	for _, tc := range []struct {
		headers, limit string
		count          int
	}{
		{"draft", "5/second", 5},
		{"legacy", "10/2s", 10},
	} {
		t.Run(tc.headers+" "+tc.limit, func(t *testing.T) {
			t.Parallel()
			cfg := mustParse(t, fmt.Sprintf(`
rate_limit:
  enabled: true
  algorithm: fixed_window
  headers: %s
  default: "%s"
`, tc.headers, tc.limit))
			var allowed, denied atomic.Int64
			mw := nethttp.New(
				core.NewLimiter(cfg, core.WithObserver(func(e core.Event) {
					if e.Allowed {
						allowed.Add(1)
					} else {
						denied.Add(1)
					}
				})),
				nethttp.WithKeyFunc(func(*http.Request) (string, error) { return "the-client", nil }),
			)
			srv := httptest.NewServer(mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				io.WriteString(w, "ok")
			})))
			defer srv.Close()

			l, err := New(nil, nil)
			if err != nil {
				t.Fatal(err)
			}
			const workers, total = 16, 60
			w := &informedWaiter{Limiter: l}
			log := &sendLog{base: &http.Transport{MaxIdleConnsPerHost: workers}, waiter: w, statuses: [2]map[int]int{{}, {}}}
			tr := NewTransport(log, w)
			defer log.base.(*http.Transport).CloseIdleConnections()
			c := &http.Client{Transport: tr}

			var sent atomic.Int64
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for sent.Add(1) <= total {
						resp, err := c.Get(srv.URL + "/api/items")
						if err != nil {
							t.Error(err)
							return
						}
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
					}
				})
			}
			wg.Wait()
			blind, informed := log.statuses[0], log.statuses[1]
			t.Logf("sent before any answer: %v; after: %v", blind, informed)
			if n := blind[200] + blind[429] + informed[200] + informed[429]; n != total {
				t.Fatalf("statuses %v then %v, want %d answers, 200 or 429", blind, informed, total)
			}
			if informed[429] != 0 {
				t.Errorf("%d requests sent after the first answer got 429, want 0", informed[429])
			}
			if blind[429] > workers-tc.count {
				t.Errorf("%d requests sent before any answer got 429, want at most %d (16 at once, %d admitted)", blind[429], workers-tc.count, tc.count)
			}
			if a, d := allowed.Load(), denied.Load(); a != int64(blind[200]+informed[200]) || d != int64(blind[429]) {
				t.Fatalf("server admitted %d and denied %d, want %d and %d", a, d, blind[200]+informed[200], blind[429])
			}
		})
	}
}
