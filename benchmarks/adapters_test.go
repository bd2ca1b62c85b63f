package benchmarks

import (
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	fiberlimiter "github.com/gofiber/fiber/v2/middleware/limiter"
	"github.com/labstack/echo/v4"
	echomw "github.com/labstack/echo/v4/middleware"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/echorl"
	"github.com/rlkit/rlkit/fiberrl"
	"github.com/rlkit/rlkit/ginrl"
)

// The framework benchmarks serve GET /api/search from one client IP, an
// allowed request (the limits are far above what a run reaches), to a
// handler that writes a small JSON body, in process:
//
//   - bare: the framework and the handler, no limiter (the baseline);
//   - builtin: the framework's own limiter (Echo's middleware.RateLimiter
//     on its memory store, Fiber's middleware/limiter), keyed by client IP;
//   - rlkit: rlkit's adapter, one rule, the default memory store, keyed by
//     client IP, writing the RateLimit-Policy and RateLimit headers (Echo's
//     built-in writes no rate-limit headers; Fiber's writes X-RateLimit-*).
//
// A limiter's cost is its row minus bare. Responses go to a writer that
// keeps nothing (its header map cleared each time), so the rows measure the
// framework and the middleware, not a recorder.

func adapterConfig(b *testing.B) *core.Config {
	cfg, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return cfg
}

// sink is a ResponseWriter that keeps only the status.
type sink struct {
	h    http.Header
	code int
}

func (w *sink) Header() http.Header         { return w.h }
func (w *sink) WriteHeader(code int)        { w.code = code }
func (w *sink) Write(b []byte) (int, error) { return len(b), nil }

func serveLoop(b *testing.B, h http.Handler, rateLimitHeader string) {
	r := httptest.NewRequest("GET", "/api/search", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	w := &sink{h: make(http.Header)}
	b.ReportAllocs()
	for b.Loop() {
		clear(w.h)
		w.code = 0
		h.ServeHTTP(w, r)
	}
	if w.code != 0 && w.code != http.StatusOK {
		b.Fatalf("status %d: the limit was reached", w.code)
	}
	if rateLimitHeader != "" && w.h.Get(rateLimitHeader) == "" {
		b.Fatalf("no %s header: the row must write its rate-limit headers", rateLimitHeader)
	}
}

func BenchmarkGin(b *testing.B) {
	gin.SetMode(gin.ReleaseMode)
	engine := func(mw ...gin.HandlerFunc) *gin.Engine {
		e := gin.New()
		e.Use(mw...)
		e.GET("/api/search", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", jsonBody) })
		return e
	}
	b.Run("bare", func(b *testing.B) { serveLoop(b, engine(), "") })
	b.Run("rlkit", func(b *testing.B) { serveLoop(b, engine(ginrl.New(adapterConfig(b))), "RateLimit") })
}

func BenchmarkEcho(b *testing.B) {
	server := func(mw ...echo.MiddlewareFunc) *echo.Echo {
		e := echo.New()
		e.Use(mw...)
		e.GET("/api/search", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/json", jsonBody) })
		return e
	}
	b.Run("bare", func(b *testing.B) { serveLoop(b, server(), "") })
	b.Run("builtin", func(b *testing.B) {
		store := echomw.NewRateLimiterMemoryStoreWithConfig(echomw.RateLimiterMemoryStoreConfig{Rate: rate.Limit(1e9), Burst: 1e9, ExpiresIn: time.Hour})
		serveLoop(b, server(echomw.RateLimiter(store)), "") // writes no rate-limit headers
	})
	b.Run("rlkit", func(b *testing.B) { serveLoop(b, server(echorl.New(adapterConfig(b))), "RateLimit") })
}

func BenchmarkFiber(b *testing.B) {
	app := func(mw ...fiber.Handler) *fiber.App {
		a := fiber.New(fiber.Config{DisableStartupMessage: true})
		for _, m := range mw {
			a.Use(m)
		}
		a.Get("/api/search", func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Send(jsonBody)
		})
		return a
	}
	run := func(b *testing.B, a *fiber.App, rateLimitHeader string) {
		h := a.Handler()
		var ctx fasthttp.RequestCtx
		var req fasthttp.Request
		req.Header.SetMethod("GET")
		req.SetRequestURI("/api/search")
		ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, nil)
		b.ReportAllocs()
		for b.Loop() {
			ctx.Response.Reset()
			h(&ctx)
		}
		if code := ctx.Response.StatusCode(); code != fiber.StatusOK {
			b.Fatalf("status %d: the limit was reached", code)
		}
		if rateLimitHeader != "" && len(ctx.Response.Header.Peek(rateLimitHeader)) == 0 {
			b.Fatalf("no %s header: the row must write its rate-limit headers", rateLimitHeader)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, app(), "") })
	b.Run("builtin", func(b *testing.B) {
		run(b, app(fiberlimiter.New(fiberlimiter.Config{Max: 2_000_000_000, Expiration: time.Hour})), "X-Ratelimit-Limit")
	})
	b.Run("rlkit", func(b *testing.B) { run(b, app(fiberrl.New(adapterConfig(b))), "Ratelimit") })
}
