// Command fiber is rlkit's demo service on Fiber: the DESIGN example rules
// (examples/internal/demo/ratelimit.yaml) in front of a few JSON endpoints,
// with fiberrl as the first middleware.
//
//	go run ./examples/fiber               # listens on 127.0.0.1:8080
//	go run ./examples/fiber -addr :9000 -config ratelimit.yaml
//
// Callers are counted by their X-API-Key header (a stand-in for your
// authentication), or by their IP without one. On start it prints curl
// lines that reach a 429.
package main

import (
	"context"
	"io"

	"github.com/gofiber/fiber/v2"

	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/fiberrl"
)

func main() { demo.Main(run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, ln, err := demo.Setup("fiber", args)
	if err != nil {
		return err
	}
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(fiberrl.New(cfg, fiberrl.WithKeyFunc(fiberrl.HeaderKey(demo.KeyHeader))))
	for _, rt := range demo.Routes {
		app.Add(rt.Method, rt.Path, func(c *fiber.Ctx) error {
			c.Set(fiber.HeaderContentType, fiber.MIMEApplicationJSON)
			return c.Send(demo.OK)
		})
	}
	demo.PrintBanner(stdout, "Fiber", ln.Addr().String())
	go func() {
		<-ctx.Done()
		_ = app.Shutdown()
	}()
	return app.Listener(ln)
}
