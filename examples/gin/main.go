// Command gin is rlkit's demo service on Gin: the example rules
// (examples/internal/demo/ratelimit.yaml) in front of a few JSON endpoints,
// with ginrl right after gin.Recovery.
//
//	go run ./examples/gin                 # listens on 127.0.0.1:8080
//	go run ./examples/gin -addr :9000 -config ratelimit.yaml
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
