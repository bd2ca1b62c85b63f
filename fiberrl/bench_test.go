package fiberrl_test

import (
	"net"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/rlkit/rlkit/fiberrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// okBody is the handler's answer.
var okBody = []byte(adaptertest.OKBody)

// BenchmarkMiddleware compares a Fiber app serving a JSON handler
// (Content-Type and a small body) with no middleware ("bare") and the same
// app with New mounted by app.Use ("rlkit": the example configuration, default
// in-memory store, client-IP key, rule found by path, admitted,
// RateLimit-Policy and RateLimit written). Requests go through
// app.Handler() with one reused fasthttp.RequestCtx whose response is
// reset each time, as fasthttp's server does; the difference is the
// middleware's cost.
func BenchmarkMiddleware(b *testing.B) {
	cfg := adaptertest.BenchConfig(b)
	run := func(b *testing.B, mw ...any) {
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
		if len(ctx.Response.Header.Peek("RateLimit")) == 0 && len(mw) > 0 || ctx.Response.StatusCode() != 200 {
			b.Fatalf("response: %s", &ctx.Response)
		}
		b.ReportAllocs()
		for b.Loop() {
			ctx.Response.Reset()
			h(&ctx)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b) })
	b.Run("rlkit", func(b *testing.B) { run(b, fiberrl.New(cfg)) })
}
