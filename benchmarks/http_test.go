package benchmarks

import (
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/nethttp"
)

var jsonBody = []byte(`{"ok": true}`)

// jsonHandler is what an API endpoint minimally does: set Content-Type and
// write a small JSON body.
var jsonHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write(jsonBody)
})

// BenchmarkNetHTTP measures net/http rate-limit middleware on an allowed
// request through an httptest.ResponseRecorder, one client IP, a limit no
// run reaches, both writing their rate-limit headers:
//
//   - bare: the handler alone (the baseline);
//   - rlkit-nethttp: nethttp.New with one rule on the default memory store,
//     client-IP key, RateLimit-Policy and RateLimit written;
//   - sethvargo-httplimit: httplimit.NewMiddleware over memorystore with
//     httplimit.IPKeyFunc(), X-RateLimit-* headers written.
//
// A middleware's cost is its row minus bare.
func BenchmarkNetHTTP(b *testing.B) {
	run := func(b *testing.B, h http.Handler) {
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		b.ReportAllocs()
		for b.Loop() {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d: the limit was reached", w.Code)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, jsonHandler) })
	b.Run("rlkit-nethttp", func(b *testing.B) {
		cfg, err := core.NewConfig(core.Spec{
			Enabled: true,
			Rules:   []core.RuleSpec{{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}}},
		})
		if err != nil {
			b.Fatal(err)
		}
		run(b, nethttp.New(cfg)(jsonHandler))
	})
	b.Run("sethvargo-httplimit", func(b *testing.B) {
		store, err := memorystore.New(&memorystore.Config{Tokens: math.MaxUint64, Interval: time.Hour})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = store.Close(b.Context()) })
		mw, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
		if err != nil {
			b.Fatal(err)
		}
		run(b, mw.Handle(jsonHandler))
	})
}
