package nethttp_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

const loginYAML = `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "100/minute"
      count: failures
`

// TestCountByOutcomeStatus: under a rule counted by failures, the status
// the client gets decides the count, however the handler writes it: a
// handler that writes nothing or only a body answers 200; informational
// statuses (1xx) are not the answer; a flush sends the status; and
// http.ResponseController reaches the server's writer (SetWriteDeadline
// works), as do http.Flusher and http.Hijacker assertions.
func TestCountByOutcomeStatus(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       http.HandlerFunc
		status  int
		counted bool
	}{
		{"nothing written", func(http.ResponseWriter, *http.Request) {}, 200, false},
		{"body only", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("hi")) }, 200, false},
		{"401", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(401) }, 401, true},
		{"103 then 401", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(103); w.WriteHeader(401) }, 401, true},
		{"flushed, then 500", func(w http.ResponseWriter, _ *http.Request) {
			w.(http.Flusher).Flush()
			w.WriteHeader(500) // superfluous: the 200 is sent
		}, 200, false},
		{"404 through a ResponseController", func(w http.ResponseWriter, _ *http.Request) {
			rc := http.NewResponseController(w)
			if err := rc.SetWriteDeadline(time.Now().Add(time.Minute)); err != nil {
				panic(err)
			}
			w.WriteHeader(404)
			if err := rc.Flush(); err != nil {
				panic(err)
			}
		}, 404, true},
		{"a Hijacker", func(w http.ResponseWriter, _ *http.Request) {
			if _, ok := w.(http.Hijacker); !ok {
				panic("no http.Hijacker")
			}
			w.WriteHeader(429)
		}, 429, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var (
				mu     sync.Mutex
				events []core.Event
			)
			h := nethttp.New(core.NewLimiter(adaptertest.Config(t, loginYAML), core.WithObserver(func(e core.Event) {
				mu.Lock()
				events = append(events, e)
				mu.Unlock()
			})))(c.h)
			srv := httptest.NewServer(h)
			defer srv.Close()
			resp, err := http.Post(srv.URL+"/login", "text/plain", nil)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			mu.Lock()
			defer mu.Unlock()
			want := int64(0)
			if c.counted {
				want = 1
			}
			if len(events) != 1 || events[0].Outcome != core.OutcomeAllowed || events[0].Cost != want {
				t.Fatalf("events %+v, want one allowed event of cost %d", events, want)
			}
		})
	}
}

// TestCountByOutcomeAllocs pins the allocations per request of the
// middleware over a JSON handler, beside the handler alone: one (the
// rate-limit header values) on the ordinary path, whether or not the
// configuration has rules counted by outcome; under such a rule one more
// (the status-recording writer), and one more again when the status
// counts (the context of the count).
func TestCountByOutcomeAllocs(t *testing.T) {
	if adaptertest.Race {
		t.Skip("allocations are not exact under the race detector")
	}
	allocs := func(h http.Handler, status string) float64 {
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		r.Header.Set("X-Status", status)
		w := &discardWriter{h: make(http.Header)}
		return testing.AllocsPerRun(200, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
	}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(adaptertest.Status(r.Header.Get("X-Status")))
		_, _ = w.Write(jsonBody)
	})
	bench := strings.Replace(adaptertest.ExampleConfig, `limit: "10/second"`, `limit: "2000000000/hour"`, 1)
	bare := allocs(handler, "200")
	for _, c := range []struct {
		name, yaml, status string
		extra              float64
	}{
		{"every request counted", bench, "200", 1},
		{"every request counted, answered 401", bench, "401", 1},
		{"failures counted, answered 200", outcomeConfig(), "200", 2},
		{"failures counted, answered 401", outcomeConfig(), "401", 3},
	} {
		if got := allocs(nethttp.New(adaptertest.Config(t, c.yaml))(handler), c.status) - bare; got != c.extra {
			t.Errorf("%s: %v allocations more than the handler alone, want %v", c.name, got, c.extra)
		}
	}
}
