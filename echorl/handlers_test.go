package echorl_test

import (
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/echorl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// manyRoutes is a configuration whose default limit no test reaches.
const manyRoutes = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2000000000/hour"
  default: "2000000000/hour"
`

// TestHandlersPerRoute: Echo calls the middleware with each route's
// handler on every request, and the middleware keeps the handler it built
// in front of each: with 300 routes (more than its cache has slots, so
// that they share slots), in three orders, every request reaches its own
// route's handler, counted (its RateLimit header), and no other.
func TestHandlersPerRoute(t *testing.T) {
	const routes = 300
	e := echo.New()
	e.Use(echorl.New(adaptertest.Config(t, manyRoutes)))
	for i := range routes {
		body := "route " + strconv.Itoa(i)
		e.GET("/r/"+strconv.Itoa(i), func(c echo.Context) error { return c.String(http.StatusOK, body) })
	}
	serve := func(i int) {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest("GET", "/r/"+strconv.Itoa(i), nil)
		r.RemoteAddr = "192.0.2.1:1"
		e.ServeHTTP(w, r)
		if got, want := w.Body.String(), "route "+strconv.Itoa(i); w.Code != http.StatusOK || got != want {
			t.Fatalf("GET /r/%d: %d %q, want 200 %q", i, w.Code, got, want)
		}
		if got, want := w.Header().Get("RateLimit"), `"default";r=`; len(got) < len(want) || got[:len(want)] != want {
			t.Fatalf("GET /r/%d: RateLimit %q, want it to start %q", i, got, want)
		}
	}
	for range 3 { // each route's handler seen more than twice: built and cached
		for i := range routes {
			serve(i)
			serve(i)
		}
	}
	for i := routes - 1; i >= 0; i-- {
		serve(i)
	}
	for i := range routes {
		serve(i * 7 % routes)
		serve((i*13 + 5) % routes)
	}
}

// TestAllocsMiddlewareAfter: with a middleware after this one (whose
// handler Echo builds anew for every request, so this one is given a new
// next each time), the middleware allocates its handler and the RateLimit
// value: no more than building its handler costs, and the request still
// reaches the route's handler.
func TestAllocsMiddlewareAfter(t *testing.T) {
	if adaptertest.Race {
		t.Skip("the race detector makes Echo's context pool drop contexts")
	}
	after := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return next(c) }
	}
	served := 0
	allocs := func(limited bool, mw ...echo.MiddlewareFunc) float64 {
		e := echo.New()
		e.Use(mw...)
		e.GET("/api/search", func(c echo.Context) error { served++; return c.JSONBlob(http.StatusOK, okBody) })
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		e.ServeHTTP(w, r)
		return testing.AllocsPerRun(100, func() {
			clear(w.h)
			e.ServeHTTP(w, r)
			if limited && len(w.h["Ratelimit"]) == 0 { // a map read: Get would allocate
				t.Fatal("no RateLimit header")
			}
		})
	}
	bare := allocs(false, after)
	served = 0
	if n := allocs(true, echorl.New(adaptertest.BenchConfig(t)), after) - bare; n != 2 {
		t.Errorf("%v allocations more than Echo's own with the other middleware, want 2", n)
	}
	if served != 102 {
		t.Errorf("the route's handler ran %d times, want 102", served)
	}
}
