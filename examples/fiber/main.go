package main

import (
	"context"
	"io"
	"net"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/fiberrl"
)

func main() { demo.Main(run) }

// newApp returns a Fiber app with ln's limits. Fiber (fasthttp) has no
// header timeout of its own and reads a request's body before any
// handler runs, so they map as follows:
//
//   - ReadHeaderTimeout is fasthttp's ReadTimeout: the request header must
//     arrive within it (from the start of the connection, or from the
//     first byte of a keep-alive connection's next request);
//   - ReadTimeout: once the header is in, the body gets what remains of
//     it after ReadHeaderTimeout (HeaderReceived sets the deadline), so a
//     whole request takes at most ReadTimeout;
//   - WriteTimeout and IdleTimeout are fasthttp's own;
//   - MaxHeaderBytes is the read buffer size, which bounds the header
//     (each connection reading a request holds a buffer of that size);
//   - a connection is busy for ln from its handler's start (the first
//     middleware) until fasthttp reports it idle after the response, so at
//     the connection limit one that is sending a header or a body may be
//     closed for a newcomer, never one whose handler is running.
func newApp(ln *demo.Listener) *fiber.App {
	lim := ln.Limits
	app := fiber.New(fiber.Config{
		DisableStartupMessage: true,
		ReadTimeout:           lim.ReadHeaderTimeout,
		WriteTimeout:          lim.WriteTimeout,
		IdleTimeout:           lim.IdleTimeout,
		ReadBufferSize:        lim.MaxHeaderBytes,
	})
	srv := app.Server()
	if body := lim.ReadTimeout - lim.ReadHeaderTimeout; body > 0 {
		srv.HeaderReceived = func(*fasthttp.RequestHeader) fasthttp.RequestConfig {
			return fasthttp.RequestConfig{ReadTimeout: body}
		}
	}
	srv.ConnState = func(c net.Conn, s fasthttp.ConnState) {
		if s == fasthttp.StateIdle {
			ln.Busy(c, false)
		}
	}
	app.Use(func(c *fiber.Ctx) error {
		ln.Busy(c.Context().Conn(), true)
		return c.Next()
	})
	return app
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, ln, err := demo.Setup("fiber", args)
	if err != nil {
		return err
	}
	app := newApp(ln)
	app.Use(fiberrl.New(cfg, fiberrl.WithKeyFunc(fiberrl.HeaderKey(demo.KeyHeader))))
	for _, rt := range demo.Routes {
		app.Add(rt.Method, rt.Path, func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Send(demo.OK)
		})
	}
	demo.PrintBanner(stdout, "Fiber", ln.Addr().String())
	return demo.Serve(ctx, func() error { return app.Listener(ln) }, app.ShutdownWithContext)
}
