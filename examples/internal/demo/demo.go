package demo

import (
	"context"
	_ "embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/rlkit/rlkit/core"
)

// ConfigYAML is the example configuration (ratelimit.yaml).
//
//go:embed ratelimit.yaml
var ConfigYAML []byte

// LoadConfig reads file, or the bundled ConfigYAML when file is "".
func LoadConfig(file string) (*core.Config, error) {
	if file == "" {
		return core.ParseConfig(ConfigYAML, "ratelimit.yaml (bundled)")
	}
	return core.LoadConfig(file)
}

// Route is one endpoint of the example services, in the routers' common
// template form (":id" parameters).
type Route struct{ Method, Path string }

// Routes are the endpoints the configuration's rules name, and /health,
// which it exempts.
var Routes = []Route{
	{"GET", "/api/search"},
	{"POST", "/api/kb/:kb/docs/upload"},
	{"POST", "/api/kb/:kb/docs/upload/batch"},
	{"POST", "/api/kb/:kb/reindex"},
	{"POST", "/api/kb/:kb/docs/:doc/reindex"},
	{"POST", "/mcp"},
	{"GET", "/api/items"}, // no rule: the default limit
	{"GET", "/health"},
}

// OK is the body every example endpoint answers with.
var OK = []byte(`{"ok": true}` + "\n")

// KeyHeader names the header the examples count callers by: a stand-in for
// your authentication (an API key, a user id from a verified token).
const KeyHeader = "X-API-Key"

// PrintBanner writes where the service listens and curl lines that show a
// limit being hit.
func PrintBanner(w io.Writer, framework, addr string) {
	base := "http://" + addr
	fmt.Fprintf(w, `rlkit %s example listening on %s (in-memory store)
callers are counted by their %s header, or their IP without one.

  # search allows 10/second: the 11th answers 429 with Retry-After
  for i in $(seq 11); do curl -s -o /dev/null -w '%%{http_code} ' -H '%s: alice' %s/api/search; done; echo

  # reindex allows 2/minute per caller; another caller has their own count
  for i in 1 2 3; do curl -s -w '\n' -X POST -H '%s: alice' %s/api/kb/kb1/reindex; done
  curl -s -i -X POST -H '%s: bob' %s/api/kb/kb1/reindex

  # a batch upload weighs 10 of upload's 30/minute: the 4th is refused
  for i in 1 2 3 4; do curl -s -o /dev/null -w '%%{http_code} ' -X POST -H '%s: alice' %s/api/kb/kb1/docs/upload/batch; done; echo

  # /health is exempt: never counted, no rate-limit headers
  curl -s -i %s/health
`, framework, addr, KeyHeader, KeyHeader, base, KeyHeader, base, KeyHeader, base, KeyHeader, base, base)
}

// ErrUsage reports bad flags: the command has printed why, and its usage,
// so Command exits 2 without printing it again.
var ErrUsage = errors.New("usage")

// Command runs a command's entry point until SIGINT or SIGTERM: it exits 2
// when run returns ErrUsage (errors.Is), 1 after printing any other error,
// and 0 otherwise (also after -h).
func Command(run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
	case errors.Is(err, ErrUsage):
		stop()
		os.Exit(2)
	default:
		fmt.Fprintln(os.Stderr, err)
		stop()
		os.Exit(1)
	}
}

// Main is Command for an entry point that writes no usage of its own.
func Main(run func(ctx context.Context, args []string, stdout io.Writer) error) {
	Command(func(ctx context.Context, args []string, stdout, _ io.Writer) error { return run(ctx, args, stdout) })
}

// Setup reads an example's flags (-addr, -config, and those of
// ServerLimitFlags), loads the configuration and opens the listener.
func Setup(name string, args []string) (*core.Config, *Listener, error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "`address` to listen on")
	file := fs.String("config", "", "rate-limit `file` (YAML); default: the bundled example")
	limits := ServerLimitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return nil, nil, err
	}
	cfg, err := LoadConfig(*file)
	if err != nil {
		return nil, nil, err
	}
	ln, err := limits.Listen(*addr)
	if err != nil {
		return nil, nil, err
	}
	return cfg, ln, nil
}

// ServeHTTP serves h on ln, with ln's limits (Listener.HTTPServer), until
// ctx ends, then shuts down gracefully (see Serve).
func ServeHTTP(ctx context.Context, ln *Listener, h http.Handler) error {
	srv := ln.HTTPServer(h)
	return Serve(ctx, func() error { return srv.Serve(ln) }, srv.Shutdown)
}

// ShutdownWait bounds the wait for the requests under way at shutdown.
const ShutdownWait = 5 * time.Second

// Serve runs serve until it fails, whose error it returns, or until ctx
// ends; then it calls shutdown, which must make serve return, waiting up
// to ShutdownWait for the requests under way, and waits for serve to
// return. net/http and Fiber servers both fit: (srv.Serve, srv.Shutdown),
// (app.Listener, app.ShutdownWithContext).
func Serve(ctx context.Context, serve func() error, shutdown func(context.Context) error) error {
	served := make(chan error, 1)
	go func() { served <- serve() }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), ShutdownWait)
	defer cancel()
	err := shutdown(sctx)
	<-served // the server's closed error
	if err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	return nil
}
