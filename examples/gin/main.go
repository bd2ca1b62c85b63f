package main

import (
	"context"
	"io"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/ginrl"
)

func main() { demo.Main(run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	cfg, ln, err := demo.Setup("gin", args)
	if err != nil {
		return err
	}
	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), ginrl.New(cfg, ginrl.WithKeyFunc(ginrl.HeaderKey(demo.KeyHeader))))
	for _, rt := range demo.Routes {
		r.Handle(rt.Method, rt.Path, func(c *gin.Context) { c.Data(http.StatusOK, "application/json", demo.OK) })
	}
	demo.PrintBanner(stdout, "Gin", ln.Addr().String())
	return demo.ServeHTTP(ctx, ln, r)
}
