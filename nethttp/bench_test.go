package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

var (
	jsonBody = []byte(`{"ok": true}`)
	// jsonHandler is what an API endpoint minimally does: set Content-Type
	// and write a small JSON body.
	jsonHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(200)
		_, _ = w.Write(jsonBody)
	})
	// emptyHandler writes nothing at all.
	emptyHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
)

func benchServe(b *testing.B, h http.Handler) {
	r := httptest.NewRequest("GET", "/api/search", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	b.ReportAllocs()
	for b.Loop() {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
}

func limited(b *testing.B, h http.Handler) http.Handler {
	cfg := adaptertest.BenchConfig(b)
	return nethttp.New(cfg)(h)
}

// BenchmarkHandler compares a handler alone ("bare") with the same handler
// behind the middleware ("rlkit": the example configuration, default in-memory store,
// client-IP key, matched rule, admitted, RateLimit-Policy and RateLimit
// written), through an httptest.ResponseRecorder. The difference is the
// middleware's cost. "json" is a handler that sets Content-Type and writes
// a body; with "empty" the recorder's own work (growing an empty header map,
// cloning it on WriteHeader) is charged to the middleware, since only the
// middleware writes headers.
func BenchmarkHandler(b *testing.B) {
	b.Run("json/bare", func(b *testing.B) { benchServe(b, jsonHandler) })
	b.Run("json/rlkit", func(b *testing.B) { benchServe(b, limited(b, jsonHandler)) })
	b.Run("empty/bare", func(b *testing.B) { benchServe(b, emptyHandler) })
	b.Run("empty/rlkit", func(b *testing.B) { benchServe(b, limited(b, emptyHandler)) })
}

// discardWriter is a ResponseWriter that keeps nothing and reuses its
// header map, so that only the handler's and the middleware's own work is
// measured.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkHandlerNoRecorder is BenchmarkHandler's json pair through a
// ResponseWriter that does nothing (its header map cleared and reused): the
// middleware's own cost, without the recorder's.
func BenchmarkHandlerNoRecorder(b *testing.B) {
	run := func(b *testing.B, h http.Handler) {
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	}
	b.Run("json/bare", func(b *testing.B) { run(b, jsonHandler) })
	b.Run("json/rlkit", func(b *testing.B) { run(b, limited(b, jsonHandler)) })
}

// BenchmarkDecisionContext measures what core.WithDecisionContext(true) costs
// an admitted request: "off" is the middleware by default (as
// BenchmarkHandlerNoRecorder's json/rlkit), "on" the same with the
// Decision put in the request's context (its copy on the heap, the
// context, r.WithContext's copy of the request), with a handler that
// reads it back (DecisionOf).
func BenchmarkDecisionContext(b *testing.B) {
	read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d, ok := nethttp.DecisionOf(r); ok && d.Result.Remaining < 0 {
			b.Fatal("negative remaining")
		}
		jsonHandler(w, r)
	})
	run := func(b *testing.B, opts ...core.Option) {
		h := nethttp.New(core.NewLimiter(adaptertest.BenchConfig(b), opts...))(read)
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	}
	b.Run("off", func(b *testing.B) { run(b) })
	b.Run("on", func(b *testing.B) { run(b, core.WithDecisionContext(true)) })
}

// outcomeConfig is BenchConfig with its search rule counted by failures:
// every request is checked (a Peek) and, answered 200, never counted.
func outcomeConfig() string {
	return strings.Replace(strings.Replace(adaptertest.ExampleConfig, `limit: "10/second"`, `limit: "2000000000/hour"`, 1),
		`limit: "2000000000/hour"`, `limit: "2000000000/hour"
      count: failures`, 1)
}

// BenchmarkHandlerOutcome is BenchmarkHandlerNoRecorder's json pair with
// the search rule counted by failures ("peek": a Peek before the handler,
// a status-recording writer, Complete finding 200 not counted), and
// answered 401 ("peek+take": Complete takes too, under a context of its
// own), beside the rule counting every request ("take").
func BenchmarkHandlerOutcome(b *testing.B) {
	run := func(b *testing.B, yaml string, status int) {
		h := nethttp.New(adaptertest.Config(b, yaml))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			_, _ = w.Write(jsonBody)
		}))
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			h.ServeHTTP(w, r)
		}
	}
	bench := strings.Replace(adaptertest.ExampleConfig, `limit: "10/second"`, `limit: "2000000000/hour"`, 1)
	b.Run("take", func(b *testing.B) { run(b, bench, 200) })
	b.Run("peek", func(b *testing.B) { run(b, outcomeConfig(), 200) })
	b.Run("peek+take", func(b *testing.B) { run(b, outcomeConfig(), 401) })
}
