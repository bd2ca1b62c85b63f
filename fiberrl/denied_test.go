package fiberrl_test

import (
	"errors"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/fiberrl"
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
// headers and Retry-After already set (and not the default body's
// Content-Type); the middleware returns its error (to Fiber's
// ErrorHandler), and the handler does not run.
func TestDeniedHandler(t *testing.T) {
	var got *core.Decision
	seen := map[string]string{}
	errDenied := fiber.NewError(http.StatusTooManyRequests, "slow down")
	var handled error
	app := fiber.New(fiber.Config{DisableStartupMessage: true, ErrorHandler: func(c *fiber.Ctx, err error) error {
		handled = err
		return c.Status(http.StatusTooManyRequests).SendString("slow down")
	}})
	app.Use(fiberrl.New(core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), exampleAt(t)), fiberrl.WithDeniedHandler(func(c *fiber.Ctx, d *core.Decision) error {
		got = d
		// fasthttp's default Content-Type is text/plain; the default
		// body's application/json must not be set.
		for _, name := range []string{"Ratelimit-Policy", "Ratelimit", "Retry-After", "Content-Length", "X-Ratelimit-Limit"} {
			if v := c.GetRespHeader(name); v != "" {
				seen[name] = v
			}
		}
		if ct := c.GetRespHeader("Content-Type"); ct == "application/json" {
			seen["Content-Type"] = ct
		}
		return errDenied
	})))
	served := 0
	app.Get("/api/kb/:id/reindex", func(*fiber.Ctx) error { served++; return nil })
	for range 3 {
		resp := test(t, app, "GET", "/api/kb/a/reindex")
		_ = resp.Body.Close()
	}
	resp := test(t, app, "GET", "/api/kb/a/reindex")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if served != 2 {
		t.Errorf("handler ran %d times, want 2", served)
	}
	if got == nil || got.Status() != http.StatusTooManyRequests || got.Rule.Name != "reindex" {
		t.Fatalf("denied handler got %+v, want reindex's 429", got)
	}
	if seen["Retry-After"] != "60" || seen["Ratelimit"] != `"reindex";r=0;t=60` || len(seen) != 3 {
		t.Errorf("headers before the denied handler: %v, want the rate-limit headers and Retry-After: 60", seen)
	}
	if !errors.Is(handled, errDenied) {
		t.Errorf("Fiber's error handler got %v, want the denied handler's error", handled)
	}
	if resp.StatusCode != http.StatusTooManyRequests || string(body) != "slow down" || resp.Header.Get("Retry-After") != "60" {
		t.Errorf("response: %d %v %q, want the error handler's with Retry-After", resp.StatusCode, resp.Header, body)
	}
}

// TestDecisionOf: the handler finds its request's Decision, the same in
// c's locals (DecisionOf, c.Locals(DecisionKey)) and in its user context,
// only core.WithDecisionContext(true); it outlives the request.
func TestDecisionOf(t *testing.T) {
	for _, on := range []bool{false, true} {
		var got, inCtx, inLocals *core.Decision
		var found bool
		app := fiber.New(fiber.Config{DisableStartupMessage: true})
		app.Use(fiberrl.New(
			core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), core.WithDecisionContext(on), exampleAt(t)),
			fiberrl.WithKeyFunc(fiberrl.HeaderKey("X-User")),
		))
		app.Get("/api/search", func(c *fiber.Ctx) error {
			got, found = fiberrl.DecisionOf(c)
			inCtx, _ = core.FromContext(c.UserContext())
			inLocals, _ = c.Locals(fiberrl.DecisionKey).(*core.Decision)
			return nil
		})
		_ = test(t, app, "GET", "/api/search", "X-User", "alice").Body.Close()
		_ = test(t, app, "GET", "/api/search", "X-User", "bob").Body.Close() // reuses fasthttp's memory
		if found != on || (got != nil) != on || inCtx != got || inLocals != got {
			t.Fatalf("WithDecisionContext(%v): DecisionOf = %p, %v; user context %p; locals %p", on, got, found, inCtx, inLocals)
		}
		if on && (got.Rule.Name != "search" || got.Result.Remaining != 9 || got.Key != core.NewLimiter(nil).Key(adapter.HeaderIdentity("X-User", "bob"))) {
			t.Errorf("DecisionOf = %+v, want bob's under search with 9 remaining", got)
		}
	}
}

// TestAllocs pins what the middleware adds to Fiber's own allocations per
// request: by default (and with a denied handler, which an allowed
// request never reaches) none, as before these options;
// core.WithDecisionContext(true) two (the Decision and the user context).
func TestAllocs(t *testing.T) {
	if adaptertest.Race {
		t.Skip("the race detector makes Fiber's context pool drop contexts")
	}
	denied := fiberrl.WithDeniedHandler(func(c *fiber.Ctx, _ *core.Decision) error { return c.SendStatus(429) })
	allocs := func(mw ...any) float64 {
		app := fiber.New()
		if len(mw) > 0 {
			app.Use(mw...)
		}
		app.Get("/api/search", func(c *fiber.Ctx) error {
			c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
			return c.Send(okBody)
		})
		h := app.Handler()
		var req fasthttp.Request
		req.Header.SetMethod(fiber.MethodGet)
		req.SetRequestURI("/api/search")
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 1234}, nil)
		h(&ctx)
		return testing.AllocsPerRun(100, func() {
			ctx.Response.Reset()
			h(&ctx)
		})
	}
	bare := allocs()
	for _, tt := range []struct {
		name string
		lim  []core.Option
		opts []fiberrl.Option
		want float64
	}{
		{"default", nil, nil, 0},
		{"WithDecisionContext(false)", []core.Option{core.WithDecisionContext(false)}, nil, 0},
		{"WithDeniedHandler", nil, []fiberrl.Option{denied}, 0},
		{"core.WithDecisionContext(true)", []core.Option{core.WithDecisionContext(true)}, nil, 2},
	} {
		if n := allocs(fiberrl.New(core.NewLimiter(adaptertest.BenchConfig(t), tt.lim...), tt.opts...)) - bare; n != tt.want {
			t.Errorf("%s: %v allocations more than Fiber's own, want %v", tt.name, n, tt.want)
		}
	}
}
