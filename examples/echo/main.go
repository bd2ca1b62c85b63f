// Command echo is rlkit's demo service on Echo: the example rules
// (examples/internal/demo/ratelimit.yaml) in front of a few JSON endpoints,
// with echorl as the first middleware.
//
//	go run ./examples/echo                # listens on 127.0.0.1:8080
//	go run ./examples/echo -addr :9000 -config ratelimit.yaml
//
// The server's timeouts and connection limits are demo.ServerLimitFlags'
// (-read-header-timeout, -read-timeout, -write-timeout, -idle-timeout,
// -max-header-bytes, -max-conns; -h lists them with their defaults).
//
// Callers are counted by their X-API-Key header (a stand-in for your
// authentication), or by their IP without one. On start it prints curl
// lines that reach a 429.
package main

import (
	"context"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/echorl"
	"github.com/rlkit/rlkit/examples/internal/demo"
)

func main() { demo.Main(run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, ln, err := demo.Setup("echo", args)
	if err != nil {
		return err
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.Use(echorl.New(cfg, echorl.WithKeyFunc(echorl.HeaderKey(demo.KeyHeader))))
	for _, rt := range demo.Routes {
		e.Add(rt.Method, rt.Path, func(c echo.Context) error { return c.Blob(http.StatusOK, "application/json", demo.OK) })
	}
	demo.PrintBanner(stdout, "Echo", ln.Addr().String())
	return demo.ServeHTTP(ctx, ln, e)
}
