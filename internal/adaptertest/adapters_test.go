package adaptertest_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/gofiber/fiber/v2"
	fiberrecover "github.com/gofiber/fiber/v2/middleware/recover"
	"github.com/labstack/echo/v4"
	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/echorl"
	"github.com/rlkit/rlkit/fiberrl"
	"github.com/rlkit/rlkit/ginrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	// Every case shuts its server down. fasthttp keeps two goroutines
	// past Shutdown by design: its worker pool's cleaner sleeps out its
	// MaxIdleWorkerDuration (10s) before it sees the stop, and one
	// process-wide goroutine refreshes the Date header forever.
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
	)
}

// adapters are the wirings Same compares, nethttp first: the reference.
var adapters = []adaptertest.Adapter{
	{Name: "nethttp", Start: startNetHTTP},
	{Name: "ginrl", Start: startGin},
	{Name: "echorl", Start: startEcho},
	{Name: "fiberrl", Start: startFiber},
}

func TestNetHTTP(t *testing.T) { adaptertest.Run(t, startNetHTTP) }
func TestGin(t *testing.T)     { adaptertest.Run(t, startGin) }
func TestEcho(t *testing.T)    { adaptertest.Run(t, startEcho) }
func TestFiber(t *testing.T)   { adaptertest.Run(t, startFiber) }

// TestWaitClientGone: net/http, Gin and Echo end a request's context
// when its client goes away, so a held request leaves its queue; fasthttp
// does not tell Fiber, whose held request is served when its turn comes.
func TestWaitClientGone(t *testing.T) {
	adaptertest.RunWaitClientGone(t, startNetHTTP, true)
	adaptertest.RunWaitClientGone(t, startGin, true)
	adaptertest.RunWaitClientGone(t, startEcho, true)
	adaptertest.RunWaitClientGone(t, startFiber, false)
}

// TestSameResponses checks that every adapter answers every request of the
// table exactly as nethttp does.
func TestSameResponses(t *testing.T) { adaptertest.Same(t, adapters[0], adapters[1:]...) }

// TestFaultPathSpellings runs the path-spelling cases (one view of the
// path) over every adapter and compares their answers.
func TestFaultPathSpellings(t *testing.T) { adaptertest.RunPathSpellings(t, adapters...) }

func startNetHTTP(t *testing.T, s adaptertest.Setup) string {
	lim := s.NewLimiter()
	key := nethttp.HeaderKey(adaptertest.UserHeader)
	opts := []nethttp.Option{
		nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
			if r.Header.Get(adaptertest.UserHeader) == adaptertest.BadUser {
				return "", adaptertest.ErrBadUser
			}
			return key(r)
		}),
		nethttp.WithBypass(func(r *http.Request) bool {
			return r.Header.Get(adaptertest.RoleHeader) == adaptertest.SuperAdmin
		}),
		nethttp.WithCost(func(r *http.Request) int64 { return adaptertest.BatchCost(r.Header.Get(adaptertest.BatchHeader)) }),
	}
	if s.PlanHeader != "" {
		opts = append(opts, nethttp.WithPlan(func(r *http.Request) string { return s.Plan(r.Header.Get(s.PlanHeader)) }))
	}
	if s.Denied != nil {
		opts = append(opts, nethttp.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, d *core.Decision) {
			status, contentType, body := s.Denied(d)
			w.Header().Set("Content-Type", contentType)
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		}))
	}
	mw := nethttp.New(lim, opts...)
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.Served(nethttp.Identity(r, lim, opts...))
		adaptertest.ReportCost(r.Context(), r.Header.Get(adaptertest.CostHeader))
		w.Header().Set("Content-Type", "application/json")
		if v := r.Header.Get(adaptertest.StatusHeader); v != "" {
			w.WriteHeader(adaptertest.Status(v))
		}
		_, _ = io.WriteString(w, body(s, r.Context(), decision(nethttp.DecisionOf(r))))
	})
	if len(s.Routes) == 0 {
		return adaptertest.ServeHTTP(t, recoverer(mw(ok)))
	}
	// Inside a ServeMux, so that the middleware sees r.Pattern.
	mux := http.NewServeMux()
	for _, r := range s.Routes {
		mux.Handle(bracePattern(r), mw(ok))
	}
	mux.Handle("/", mw(ok))
	return adaptertest.ServeHTTP(t, recoverer(mux))
}

// recoverer answers 500 to a request whose handler panics, as the
// recovery middleware of an application over net/http does (the other
// wirings use their framework's own).
func recoverer(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if recover() != nil {
				w.WriteHeader(http.StatusInternalServerError)
			}
		}()
		h.ServeHTTP(w, r)
	})
}

// body is what the handler behind the adapter answers: OKBody, or with
// s.Report what it found in the request's context ctx and in the
// framework's (inFramework).
func body(s adaptertest.Setup, ctx context.Context, inFramework *core.Decision) string {
	if s.Report == nil {
		return adaptertest.OKBody
	}
	return s.Report(decision(core.FromContext(ctx)), inFramework)
}

// decision is d, or nil when not ok.
func decision(d *core.Decision, ok bool) *core.Decision {
	if !ok {
		return nil
	}
	return d
}

// bracePattern turns "/api/kb/:id/reindex" into "/api/kb/{id}/reindex",
// and a catch-all "/files/*path" into "/files/{path...}".
func bracePattern(route string) string {
	segs := strings.Split(route, "/")
	for i, s := range segs {
		switch {
		case strings.HasPrefix(s, ":"):
			segs[i] = "{" + s[1:] + "}"
		case strings.HasPrefix(s, "*"):
			segs[i] = "{" + s[1:] + "...}"
		}
	}
	return strings.Join(segs, "/")
}

// starPattern turns a catch-all "/files/*path" into "/files/*", as Echo
// and Fiber write it.
func starPattern(route string) string {
	if i := strings.LastIndexByte(route, '/'); strings.HasPrefix(route[i+1:], "*") {
		return route[:i+1] + "*"
	}
	return route
}

func startGin(t *testing.T, s adaptertest.Setup) string {
	lim := s.NewLimiter()
	key := ginrl.HeaderKey(adaptertest.UserHeader)
	opts := []ginrl.Option{
		ginrl.WithKeyFunc(func(c *gin.Context) (string, error) {
			if c.GetHeader(adaptertest.UserHeader) == adaptertest.BadUser {
				return "", adaptertest.ErrBadUser
			}
			return key(c)
		}),
		ginrl.WithBypass(func(c *gin.Context) bool {
			return c.GetHeader(adaptertest.RoleHeader) == adaptertest.SuperAdmin
		}),
		ginrl.WithCost(func(c *gin.Context) int64 { return adaptertest.BatchCost(c.GetHeader(adaptertest.BatchHeader)) }),
	}
	if s.PlanHeader != "" {
		opts = append(opts, ginrl.WithPlan(func(c *gin.Context) string { return s.Plan(c.GetHeader(s.PlanHeader)) }))
	}
	if s.Denied != nil {
		opts = append(opts, ginrl.WithDeniedHandler(func(c *gin.Context, d *core.Decision) {
			status, contentType, body := s.Denied(d)
			c.Data(status, contentType, []byte(body))
		}))
	}
	r := gin.New()
	r.Use(gin.RecoveryWithWriter(io.Discard), ginrl.New(lim, opts...))
	ok := func(c *gin.Context) {
		s.Served(ginrl.Identity(c, lim, opts...))
		adaptertest.ReportCost(c.Request.Context(), c.GetHeader(adaptertest.CostHeader))
		c.Data(adaptertest.Status(c.GetHeader(adaptertest.StatusHeader)), "application/json", []byte(body(s, c.Request.Context(), decision(ginrl.DecisionOf(c)))))
	}
	for _, route := range s.Routes {
		r.Any(route, ok)
	}
	r.NoRoute(ok)
	return adaptertest.ServeHTTP(t, r)
}

func startEcho(t *testing.T, s adaptertest.Setup) string {
	lim := s.NewLimiter()
	key := echorl.HeaderKey(adaptertest.UserHeader)
	opts := []echorl.Option{
		echorl.WithKeyFunc(func(c echo.Context) (string, error) {
			if c.Request().Header.Get(adaptertest.UserHeader) == adaptertest.BadUser {
				return "", adaptertest.ErrBadUser
			}
			return key(c)
		}),
		echorl.WithBypass(func(c echo.Context) bool {
			return c.Request().Header.Get(adaptertest.RoleHeader) == adaptertest.SuperAdmin
		}),
		echorl.WithCost(func(c echo.Context) int64 {
			return adaptertest.BatchCost(c.Request().Header.Get(adaptertest.BatchHeader))
		}),
	}
	if s.PlanHeader != "" {
		opts = append(opts, echorl.WithPlan(func(c echo.Context) string { return s.Plan(c.Request().Header.Get(s.PlanHeader)) }))
	}
	if s.Denied != nil {
		opts = append(opts, echorl.WithDeniedHandler(func(c echo.Context, d *core.Decision) error {
			status, contentType, body := s.Denied(d)
			return c.Blob(status, contentType, []byte(body))
		}))
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(echoRecover, echorl.New(lim, opts...))
	ok := func(c echo.Context) error {
		s.Served(echorl.Identity(c, lim, opts...))
		adaptertest.ReportCost(c.Request().Context(), c.Request().Header.Get(adaptertest.CostHeader))
		return c.Blob(adaptertest.Status(c.Request().Header.Get(adaptertest.StatusHeader)), "application/json", []byte(body(s, c.Request().Context(), decision(echorl.DecisionOf(c)))))
	}
	for _, route := range s.Routes {
		e.Any(starPattern(route), ok)
	}
	e.Any("/*", ok)
	return adaptertest.ServeHTTP(t, e)
}

// echoRecover is what Echo's middleware.Recover does, without its stack
// trace (package middleware would add a module to go.mod for the
// tests): a panic of the handlers after it goes to Echo's error handler
// as a 500.
func echoRecover(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if r := recover(); r != nil {
				c.Error(echo.NewHTTPError(http.StatusInternalServerError, fmt.Sprint(r)))
				err = nil
			}
		}()
		return next(c)
	}
}

func startFiber(t *testing.T, s adaptertest.Setup) string {
	lim := s.NewLimiter()
	key := fiberrl.HeaderKey(adaptertest.UserHeader)
	opts := []fiberrl.Option{
		fiberrl.WithKeyFunc(func(c *fiber.Ctx) (string, error) {
			if c.Get(adaptertest.UserHeader) == adaptertest.BadUser {
				return "", adaptertest.ErrBadUser
			}
			return key(c)
		}),
		fiberrl.WithBypass(func(c *fiber.Ctx) bool {
			return c.Get(adaptertest.RoleHeader) == adaptertest.SuperAdmin
		}),
		fiberrl.WithCost(func(c *fiber.Ctx) int64 { return adaptertest.BatchCost(c.Get(adaptertest.BatchHeader)) }),
	}
	if s.PlanHeader != "" {
		opts = append(opts, fiberrl.WithPlan(func(c *fiber.Ctx) string { return s.Plan(c.Get(s.PlanHeader)) }))
	}
	if s.Denied != nil {
		opts = append(opts, fiberrl.WithDeniedHandler(func(c *fiber.Ctx, d *core.Decision) error {
			status, contentType, body := s.Denied(d)
			c.Set(fiber.HeaderContentType, contentType)
			return c.Status(status).SendString(body)
		}))
	}
	mw := fiberrl.New(lim, opts...)
	ok := func(c *fiber.Ctx) error {
		s.Served(fiberrl.Identity(c, lim, opts...))
		adaptertest.ReportCost(c.UserContext(), c.Get(adaptertest.CostHeader))
		c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
		return c.Status(adaptertest.Status(c.Get(adaptertest.StatusHeader))).SendString(body(s, c.UserContext(), decision(fiberrl.DecisionOf(c))))
	}
	// Case-sensitive like the other routers, so that every case reads the
	// same; fiberrl's own tests cover Fiber's case-insensitive default.
	app := fiber.New(fiber.Config{DisableStartupMessage: true, CaseSensitive: true})
	app.Use(fiberrecover.New())
	if len(s.Routes) == 0 {
		app.Use(mw)
		app.All("/*", ok)
	} else {
		// On each route, so that the middleware sees c.Route().Path (with
		// Use it sees the mount's prefix).
		for _, route := range s.Routes {
			app.All(starPattern(route), mw, ok)
		}
		app.All("/*", mw, ok)
	}
	ln := adaptertest.Listen(t)
	done := make(chan error, 1)
	go func() { done <- app.Listener(ln) }()
	t.Cleanup(func() {
		if err := app.Shutdown(); err != nil {
			t.Errorf("fiber.App.Shutdown: %v", err)
		}
		if err := <-done; err != nil {
			t.Errorf("fiber.App.Listener: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}
