package echorl_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/echorl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// exampleAt returns a memory store whose clock stands at the start of a
// minute, for the example configuration (reindex: two requests a minute).
func exampleAt(t *testing.T) core.Option {
	mem := memstore.New(memstore.WithClock(store.NewManualClock(time.Unix(1_700_000_040, 0))))
	t.Cleanup(func() { _ = mem.Close() })
	return core.WithStore(mem)
}

// TestDeniedHandler: the handler gets the Decision with the rate-limit
// headers and Retry-After already set; the middleware returns its error
// (to Echo's error handler), and the handler does not run.
func TestDeniedHandler(t *testing.T) {
	var got *core.Decision
	var seen http.Header
	errDenied := echo.NewHTTPError(http.StatusTooManyRequests, "slow down")
	var handled error
	e := echo.New()
	e.HTTPErrorHandler = func(err error, c echo.Context) {
		handled = err
		_ = c.String(http.StatusTooManyRequests, "slow down")
	}
	e.Use(echorl.New(core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), exampleAt(t)), echorl.WithDeniedHandler(func(c echo.Context, d *core.Decision) error {
		got, seen = d, c.Response().Header().Clone()
		return errDenied
	})))
	served := 0
	e.GET("/api/kb/:id/reindex", func(c echo.Context) error { served++; return nil })
	for range 3 {
		adaptertest.Serve(e, "GET", "/api/kb/a/reindex")
	}
	w := adaptertest.Serve(e, "GET", "/api/kb/a/reindex")
	if served != 2 {
		t.Errorf("handler ran %d times, want 2", served)
	}
	if got == nil || got.Status() != http.StatusTooManyRequests || got.Rule.Name != "reindex" {
		t.Fatalf("denied handler got %+v, want reindex's 429", got)
	}
	if seen.Get("Retry-After") != "60" || seen.Get("Ratelimit") != `"reindex";r=0;t=60` || len(seen) != 3 {
		t.Errorf("headers before the denied handler: %v, want the rate-limit headers and Retry-After: 60", seen)
	}
	if !errors.Is(handled, errDenied) {
		t.Errorf("Echo's error handler got %v, want the denied handler's error", handled)
	}
	if w.Code != http.StatusTooManyRequests || w.Body.String() != "slow down" || w.Header().Get("Retry-After") != "60" {
		t.Errorf("response: %d %v %q, want the error handler's with Retry-After", w.Code, w.Header(), w.Body)
	}
}

// TestDecisionOf: the handler finds its request's Decision, the same in
// c (DecisionOf, c.Get(DecisionKey)) and in the request's context, only
// core.WithDecisionContext(true).
func TestDecisionOf(t *testing.T) {
	for _, on := range []bool{false, true} {
		var got, inReq, inStore *core.Decision
		var found bool
		e := echo.New()
		e.Use(echorl.New(core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), core.WithDecisionContext(on), exampleAt(t))))
		e.GET("/api/search", func(c echo.Context) error {
			got, found = echorl.DecisionOf(c)
			inReq, _ = core.FromContext(c.Request().Context())
			inStore, _ = c.Get(echorl.DecisionKey).(*core.Decision)
			return nil
		})
		adaptertest.Serve(e, "GET", "/api/search")
		if found != on || (got != nil) != on || inReq != got || inStore != got {
			t.Fatalf("WithDecisionContext(%v): DecisionOf = %p, %v; request context %p; c.Get %p", on, got, found, inReq, inStore)
		}
		if on && (got.Rule.Name != "search" || got.Result.Remaining != 9) {
			t.Errorf("DecisionOf = %+v, want search with 9 remaining", got)
		}
	}
}

// TestAllocs pins what the middleware adds to Echo's own allocations per
// request: by default (and with a denied handler, which an allowed
// request never reaches) one, the RateLimit value (Echo wraps the chain
// for every request, but the handler in front of the route's is built
// once); core.WithDecisionContext(true) five more (the Decision, Echo's store
// map, the context, the request's copy).
func TestAllocs(t *testing.T) {
	if adaptertest.Race {
		t.Skip("the race detector makes Echo's context pool drop contexts")
	}
	denied := echorl.WithDeniedHandler(func(c echo.Context, _ *core.Decision) error { return c.NoContent(429) })
	allocs := func(mw ...echo.MiddlewareFunc) float64 {
		e := echo.New()
		e.Use(mw...)
		e.GET("/api/search", func(c echo.Context) error { return c.JSONBlob(http.StatusOK, okBody) })
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		e.ServeHTTP(w, r)
		return testing.AllocsPerRun(100, func() {
			clear(w.h)
			e.ServeHTTP(w, r)
		})
	}
	bare := allocs()
	for _, tt := range []struct {
		name string
		lim  []core.Option
		opts []echorl.Option
		want float64
	}{
		{"default", nil, nil, 1},
		{"WithDecisionContext(false)", []core.Option{core.WithDecisionContext(false)}, nil, 1},
		{"WithDeniedHandler", nil, []echorl.Option{denied}, 1},
		{"core.WithDecisionContext(true)", []core.Option{core.WithDecisionContext(true)}, nil, 6},
	} {
		if n := allocs(echorl.New(core.NewLimiter(adaptertest.BenchConfig(t), tt.lim...), tt.opts...)) - bare; n != tt.want {
			t.Errorf("%s: %v allocations more than Echo's own, want %v", tt.name, n, tt.want)
		}
	}
}
