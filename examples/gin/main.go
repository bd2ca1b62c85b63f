// Command gin is rlkit's demo service on Gin: the DESIGN example rules
// (examples/internal/demo/ratelimit.yaml) in front of a few JSON endpoints,
// with ginrl right after gin.Recovery.
//
//	go run ./examples/gin                 # listens on 127.0.0.1:8080
//	go run ./examples/gin -addr :9000 -config ratelimit.yaml
//
// Callers are counted by their X-API-Key header (a stand-in for your
// authentication), or by their IP without one. On start it prints curl
// lines that reach a 429.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/ginrl"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout); err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("gin", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "`address` to listen on")
	file := fs.String("config", "", "rate-limit `file` (YAML); default: the bundled DESIGN example")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := demo.LoadConfig(*file)
	if err != nil {
		return err
	}

	gin.SetMode(gin.ReleaseMode)
	r := gin.New()
	r.Use(gin.Recovery(), ginrl.New(cfg, ginrl.WithKeyFunc(ginrl.HeaderKey(demo.KeyHeader))))
	for _, rt := range demo.Routes {
		r.Handle(rt.Method, rt.Path, func(c *gin.Context) { c.Data(http.StatusOK, "application/json", demo.OK) })
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: r, ReadHeaderTimeout: 10 * time.Second}
	demo.PrintBanner(stdout, "Gin", ln.Addr().String())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
