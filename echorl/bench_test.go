package echorl_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/echorl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// okBody is the handler's answer.
var okBody = []byte(adaptertest.OKBody)

// discardWriter is a ResponseWriter that keeps nothing and reuses its
// header map, so that only Echo's, the handler's and the middleware's own
// work is measured.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkMiddleware compares an Echo instance serving a JSON handler
// (c.JSONBlob: Content-Type and a small body) with no middleware ("bare")
// and the same instance with New in front of it ("rlkit": the example configuration,
// default in-memory store, client-IP key, the route's rule found from its
// template, admitted, RateLimit-Policy and RateLimit written). Requests go
// through e.ServeHTTP with a writer whose header map is cleared and
// reused; the difference is the middleware's cost.
func BenchmarkMiddleware(b *testing.B) {
	cfg := adaptertest.BenchConfig(b)
	run := func(b *testing.B, mw ...echo.MiddlewareFunc) {
		e := echo.New()
		e.Use(mw...)
		e.GET("/api/search", func(c echo.Context) error { return c.JSONBlob(http.StatusOK, okBody) })
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		e.ServeHTTP(w, r)
		if w.h.Get("RateLimit") == "" && b.Name() == "BenchmarkMiddleware/rlkit" {
			b.Fatal("no rate-limit headers")
		}
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			e.ServeHTTP(w, r)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b) })
	// A middleware that only calls the next handler: what Echo charges any
	// middleware (it wraps the chain again on every request).
	b.Run("passthrough", func(b *testing.B) {
		run(b, func(next echo.HandlerFunc) echo.HandlerFunc { return func(c echo.Context) error { return next(c) } })
	})
	b.Run("rlkit", func(b *testing.B) { run(b, echorl.New(cfg)) })
}
