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
