package ginrl_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/ginrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// okBody is the handler's answer.
var okBody = []byte(adaptertest.OKBody)

// discardWriter is a ResponseWriter that keeps nothing and reuses its
// header map, so that only Gin's, the handler's and the middleware's own
// work is measured.
type discardWriter struct{ h http.Header }

func (w *discardWriter) Header() http.Header         { return w.h }
func (w *discardWriter) WriteHeader(int)             {}
func (w *discardWriter) Write(b []byte) (int, error) { return len(b), nil }

// BenchmarkMiddleware compares a Gin engine serving a JSON handler
// (c.Data: Content-Type and a small body) with no middleware ("bare") and
// the same engine with New in front of it ("rlkit": the example configuration, default
// in-memory store, client-IP key, the route's rule found from its
// template, admitted, RateLimit-Policy and RateLimit written). Requests go
// through engine.ServeHTTP with a writer whose header map is cleared and
// reused; the difference is the middleware's cost.
func BenchmarkMiddleware(b *testing.B) {
	cfg := adaptertest.BenchConfig(b)
	run := func(b *testing.B, mw ...gin.HandlerFunc) {
		e := gin.New()
		e.Use(mw...)
		e.GET("/api/search", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", okBody) })
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		e.ServeHTTP(w, r)
		if w.h.Get("RateLimit") == "" && len(mw) > 0 {
			b.Fatal("no rate-limit headers")
		}
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			e.ServeHTTP(w, r)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b) })
	b.Run("rlkit", func(b *testing.B) { run(b, ginrl.New(cfg)) })
}

// BenchmarkDecisionContext measures what core.WithDecisionContext(true) costs
// an admitted request through a Gin engine: "off" is BenchmarkMiddleware's
// rlkit, "on" the same with the Decision put in the gin.Context and the
// request's context (its copy on the heap, Gin's Keys map, the context,
// the request's copy), with a handler that reads it back (DecisionOf).
func BenchmarkDecisionContext(b *testing.B) {
	cfg := adaptertest.BenchConfig(b)
	run := func(b *testing.B, opts ...core.Option) {
		e := gin.New()
		e.Use(ginrl.New(core.NewLimiter(cfg, opts...)))
		e.GET("/api/search", func(c *gin.Context) {
			if d, ok := ginrl.DecisionOf(c); ok && d.Result.Remaining < 0 {
				b.Fatal("negative remaining")
			}
			c.Data(http.StatusOK, "application/json", okBody)
		})
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		b.ReportAllocs()
		for b.Loop() {
			clear(w.h)
			e.ServeHTTP(w, r)
		}
	}
	b.Run("off", func(b *testing.B) { run(b) })
	b.Run("on", func(b *testing.B) { run(b, core.WithDecisionContext(true)) })
}
