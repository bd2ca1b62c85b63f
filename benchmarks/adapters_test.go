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
//     built-in writes no rate-limit headers; Fiber's writes X-RateLimit-*);
//   - rlkit-noheaders: the same with headers: none, so that what the
//     headers cost is the difference, and Echo's built-in, which writes
//     none, has a row that does the same work;
//   - floor-headers: no limiter, a middleware that only writes the two
//     headers rlkit writes (RateLimit-Policy and RateLimit) with constant
//     values and allocates nothing itself: what writing them costs in the
//     framework at the least. (Echo allocates the handler a plain
//     middleware returns, on every request; echorl avoids that with its
//     handler cache, so Echo's floor row pays one allocation more.)
//
// A limiter's cost is its row minus bare. Responses go to a writer that
// keeps nothing (its header map cleared each time), so the rows measure the
// framework and the middleware, not a recorder.

// sink is a ResponseWriter that keeps only the status.
type sink struct {
	h    http.Header
	code int
}

func (w *sink) Header() http.Header         { return w.h }
func (w *sink) WriteHeader(code int)        { w.code = code }
func (w *sink) Write(b []byte) (int, error) { return len(b), nil }

// server serves a framework benchmark's request once per serve call;
// check fails tb unless its last response was admitted and, when the row
// writes a rate-limit header, carries it.
type server struct {
	serve func()
	check func(tb testing.TB)
}

// httpServer is the server of h (net/http, Gin, Echo), whose rate-limit
// header, when it writes one, is header.
func httpServer(h http.Handler, header string) server {
	r := httptest.NewRequest("GET", "/api/search", nil)
	r.RemoteAddr = "192.0.2.1:1234"
	w := &sink{h: make(http.Header)}
	return server{
		serve: func() {
			clear(w.h)
			w.code = 0
			h.ServeHTTP(w, r)
		},
		check: func(tb testing.TB) {
			tb.Helper()
			if w.code != 0 && w.code != http.StatusOK {
				tb.Fatalf("status %d: the limit was reached", w.code)
			}
			if header != "" && w.h.Get(header) == "" {
				tb.Fatalf("no %s header: the row must write its rate-limit headers", header)
			}
		},
	}
}

// benchFramework runs one framework's rows, names[i] served by build(tb,
// i), names[0] being bare: each row on its own, then all of them
// interleaved (see interleave), which reports what each row adds to bare
// (<row>-added-ns).
func benchFramework(b *testing.B, names []string, build func(tb testing.TB, i int) server) {
	for i, name := range names {
		b.Run(name, func(b *testing.B) {
			s := build(b, i)
			b.ReportAllocs()
			for b.Loop() {
				s.serve()
			}
			s.check(b)
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		servers := make([]server, len(names))
		serve := make([]func(), len(names))
		for i := range names {
			servers[i] = build(b, i)
			serve[i] = servers[i].serve
		}
		spent, n := interleave(b, serve)
		for i, s := range servers {
			s.check(b)
			if i > 0 {
				b.ReportMetric(float64(spent[i]-spent[0])/float64(n), names[i]+"-added-ns")
			}
		}
	})
}

// floorPolicy and floorRateLimit are the values of the floor-headers rows:
// what rlkit writes for the quota, the RateLimit value fixed.
var (
	floorPolicy    = []string{`"search";q=2000000000;w=3600`}
	floorRateLimit = []string{`"search";r=1999999999;t=3600`}
)

// setFloorHeaders writes the floor-headers rows' two headers into h.
func setFloorHeaders(h http.Header) {
	h["Ratelimit-Policy"] = floorPolicy
	h["Ratelimit"] = floorRateLimit
}

// ginEngine serves GET /api/search with Gin and mw.
func ginEngine(mw ...gin.HandlerFunc) *gin.Engine {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(mw...)
	e.GET("/api/search", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", jsonBody) })
	return e
}

// echoServer serves GET /api/search with Echo and mw.
func echoServer(mw ...echo.MiddlewareFunc) *echo.Echo {
	e := echo.New()
	e.Use(mw...)
	e.GET("/api/search", func(c echo.Context) error { return c.Blob(http.StatusOK, "application/json", jsonBody) })
	return e
}

// fiberApp serves GET /api/search with Fiber and mw.
func fiberApp(mw ...fiber.Handler) *fiber.App {
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

// A frameworkImpl is a framework serving GET /api/search, with a limiter
// of quota q keyed by client IP, or none; header is a rate-limit header it
// writes on an allowed request ("" for none).
type frameworkImpl struct {
	name   string
	header string
	build  func(tb testing.TB, q quota) http.Handler
}

// echoBuiltin is Echo's middleware.RateLimiter on its memory store
// (x/time/rate per client IP), with quota q as rate and burst.
func echoBuiltin(q quota) echo.MiddlewareFunc {
	return echomw.RateLimiter(echomw.NewRateLimiterMemoryStoreWithConfig(echomw.RateLimiterMemoryStoreConfig{
		Rate: rate.Limit(q.perSecond()), Burst: int(q.Count), ExpiresIn: time.Hour,
	}))
}

// fiberBuiltin is Fiber's middleware/limiter (fixed window, its memory
// storage, keyed by c.IP()), with quota q.
func fiberBuiltin(q quota) fiber.Handler {
	return fiberlimiter.New(fiberlimiter.Config{Max: int(q.Count), Expiration: q.Period})
}

var (
	ginImpls = []frameworkImpl{
		{name: "bare", build: func(testing.TB, quota) http.Handler { return ginEngine() }},
		{name: "rlkit", header: "RateLimit", build: func(tb testing.TB, q quota) http.Handler {
			return ginEngine(ginrl.New(rlkitConfig(tb, q)))
		}},
		{name: "rlkit-noheaders", build: func(tb testing.TB, q quota) http.Handler {
			return ginEngine(ginrl.New(core.NewLimiter(rlkitConfig(tb, q), core.WithHeaders(core.HeadersNone))))
		}},
		{name: "floor-headers", header: "RateLimit", build: func(testing.TB, quota) http.Handler {
			return ginEngine(func(c *gin.Context) { setFloorHeaders(c.Writer.Header()); c.Next() })
		}},
	}
	echoImpls = []frameworkImpl{
		{name: "bare", build: func(testing.TB, quota) http.Handler { return echoServer() }},
		// Echo's built-in writes no rate-limit headers.
		{name: "builtin", build: func(_ testing.TB, q quota) http.Handler { return echoServer(echoBuiltin(q)) }},
		{name: "rlkit", header: "RateLimit", build: func(tb testing.TB, q quota) http.Handler {
			return echoServer(echorl.New(rlkitConfig(tb, q)))
		}},
		{name: "rlkit-noheaders", build: func(tb testing.TB, q quota) http.Handler {
			return echoServer(echorl.New(core.NewLimiter(rlkitConfig(tb, q), core.WithHeaders(core.HeadersNone))))
		}},
		{name: "floor-headers", header: "RateLimit", build: func(testing.TB, quota) http.Handler {
			return echoServer(func(next echo.HandlerFunc) echo.HandlerFunc {
				return func(c echo.Context) error { setFloorHeaders(c.Response().Header()); return next(c) }
			})
		}},
	}
)

// fiberImpl is frameworkImpl for Fiber, which is not an http.Handler.
type fiberImpl struct {
	name   string
	header string
	build  func(tb testing.TB, q quota) *fiber.App
}

var fiberImpls = []fiberImpl{
	{name: "bare", build: func(testing.TB, quota) *fiber.App { return fiberApp() }},
	{name: "builtin", header: "X-Ratelimit-Limit", build: func(_ testing.TB, q quota) *fiber.App { return fiberApp(fiberBuiltin(q)) }},
	{name: "rlkit", header: "Ratelimit", build: func(tb testing.TB, q quota) *fiber.App {
		return fiberApp(fiberrl.New(rlkitConfig(tb, q)))
	}},
	{name: "rlkit-noheaders", build: func(tb testing.TB, q quota) *fiber.App {
		return fiberApp(fiberrl.New(core.NewLimiter(rlkitConfig(tb, q), core.WithHeaders(core.HeadersNone))))
	}},
	{name: "floor-headers", header: "Ratelimit", build: func(testing.TB, quota) *fiber.App {
		names := [][]byte{[]byte("Ratelimit-Policy"), []byte("Ratelimit")}
		values := [][]byte{[]byte(floorPolicy[0]), []byte(floorRateLimit[0])}
		return fiberApp(func(c *fiber.Ctx) error {
			for i, name := range names {
				c.Response().Header.SetCanonical(name, values[i])
			}
			return c.Next()
		})
	}},
}

// BenchmarkGin measures Gin serving the request bare and with ginrl (Gin
// has no built-in limiter). A limiter's cost is its row minus bare; the
// interleaved row measures it directly.
func BenchmarkGin(b *testing.B) { benchHTTPFramework(b, ginImpls) }

// BenchmarkEcho measures Echo serving the request bare, with its built-in
// middleware.RateLimiter and with echorl.
func BenchmarkEcho(b *testing.B) { benchHTTPFramework(b, echoImpls) }

// benchHTTPFramework is benchFramework for impls, bare first.
func benchHTTPFramework(b *testing.B, impls []frameworkImpl) {
	names := make([]string, len(impls))
	for i, im := range impls {
		names[i] = im.name
	}
	benchFramework(b, names, func(tb testing.TB, i int) server {
		return httpServer(impls[i].build(tb, unreached), impls[i].header)
	})
}

// fiberRequest returns a request context for GET /api/search from
// 192.0.2.1:1234, as fasthttp would hand it to the app.
func fiberRequest() *fasthttp.RequestCtx {
	var ctx fasthttp.RequestCtx
	var req fasthttp.Request
	req.Header.SetMethod("GET")
	req.SetRequestURI("/api/search")
	ctx.Init(&req, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, nil)
	return &ctx
}

// BenchmarkFiber measures Fiber serving the request bare, with its built-in
// middleware/limiter and with fiberrl, through the app's fasthttp handler.
func BenchmarkFiber(b *testing.B) {
	names := make([]string, len(fiberImpls))
	for i, im := range fiberImpls {
		names[i] = im.name
	}
	benchFramework(b, names, func(tb testing.TB, i int) server {
		im := fiberImpls[i]
		h := im.build(tb, unreached).Handler()
		ctx := fiberRequest()
		return server{
			serve: func() {
				ctx.Response.Reset()
				h(ctx)
			},
			check: func(tb testing.TB) {
				tb.Helper()
				if code := ctx.Response.StatusCode(); code != fiber.StatusOK {
					tb.Fatalf("status %d: the limit was reached", code)
				}
				if im.header != "" && len(ctx.Response.Header.Peek(im.header)) == 0 {
					tb.Fatalf("no %s header: the row must write its rate-limit headers", im.header)
				}
			},
		}
	})
}
