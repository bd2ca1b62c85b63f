// Command server is rlkit's config-driven demo: a net/http server whose every
// path is rate limited by the rules of a YAML file (by default the bundled
// ratelimit.yaml, the example of the design document).
//
//	go run ./examples/server
//
// It shows the usual way to wire rlkit into a service:
//
//   - An auth middleware verifies the HS256 bearer token once per request
//     and puts its claims in the request context; an invalid token gets
//     401 {"detail": "Invalid token"}, except on exempt paths (/health, ...).
//   - nethttp's middleware then counts the request under "user:<sub>"
//     (a request without a token counts under its client IP) and lets a
//     token with "role": "super-admin" through uncounted.
//   - Over the limit it answers 429 with Retry-After and the JSON body
//     {"detail": "Rate limit exceeded for '<rule>' requests"}; every limited
//     response carries the RateLimit-Policy and RateLimit headers.
//
// On start it prints tokens for a demo user and a super-admin and curl
// commands that reach a 429. Counters live in memory, in this process.
package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/nethttp"
)

//go:embed ratelimit.yaml
var bundledConfig []byte

// devSecret signs tokens when neither -jwt-secret nor RLKIT_JWT_SECRET is set.
// It is public: anyone can forge tokens with it.
const devSecret = "rlkit-demo-development-secret-not-for-production"

const (
	errRedis     = "-redis: the Redis store is not available yet (in-memory only); run without -redis"
	superAdmin   = "super-admin"
	tokenTTL     = 24 * time.Hour
	shutdownWait = 5 * time.Second
)

// errUsage reports bad flags; the flag package has already printed why.
var errUsage = errors.New("usage")

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() { <-ctx.Done(); stop() }() // a second Ctrl-C kills at once
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run serves until ctx is done, then shuts down gracefully and returns nil.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configFile := fs.String("config", "", "rate-limit `file` (YAML); default: the bundled ratelimit.yaml")
	addr := fs.String("addr", "127.0.0.1:8080", "`address` to listen on")
	redisURL := fs.String("redis", "", "Redis `URL` for shared counters (not available yet: in-memory only)")
	secret := fs.String("jwt-secret", "", "HS256 `secret` of bearer tokens; default: $RLKIT_JWT_SECRET, else a development secret")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return errUsage
	}
	if *redisURL != "" {
		return errors.New(errRedis)
	}

	cfg, source, err := loadConfig(*configFile)
	if err != nil {
		return err
	}
	if *secret == "" {
		*secret = os.Getenv("RLKIT_JWT_SECRET")
	}
	if *secret == "" {
		*secret = devSecret
		fmt.Fprintf(stderr, "WARNING: no -jwt-secret and no RLKIT_JWT_SECRET: signing with the public development secret %q.\n"+
			"WARNING: for development only; anyone can forge tokens with it.\n", devSecret)
	}
	if len(*secret) < 32 {
		return fmt.Errorf("-jwt-secret (or RLKIT_JWT_SECRET): an HS256 secret needs at least 32 bytes, got %d", len(*secret))
	}

	store := memstore.New()
	defer store.Close()
	limit := nethttp.New(cfg,
		nethttp.WithStore(store),
		nethttp.WithKeyFunc(userKey),
		nethttp.WithBypass(isSuperAdmin),
		nethttp.WithLogger(slog.New(slog.NewTextHandler(stderr, nil))),
	)
	handler := authenticate(cfg, []byte(*secret), limit(http.HandlerFunc(serve)))

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	if err := printBanner(stdout, ln.Addr().String(), source, cfg, *secret); err != nil {
		ln.Close()
		return err
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	<-served // http.ErrServerClosed
	fmt.Fprintln(stdout, "shut down")
	return nil
}

// loadConfig reads file, or the bundled configuration when file is "".
func loadConfig(file string) (*core.Config, string, error) {
	if file == "" {
		cfg, err := core.ParseConfig(bundledConfig, "ratelimit.yaml (bundled)")
		return cfg, "bundled ratelimit.yaml", err
	}
	cfg, err := core.LoadConfig(file)
	return cfg, file, err
}

// claims are the claims of a bearer token.
type claims struct {
	Role string `json:"role,omitempty"`
	jwt.RegisteredClaims
}

type claimsKey struct{}

func claimsFrom(ctx context.Context) *claims {
	c, _ := ctx.Value(claimsKey{}).(*claims)
	return c
}

var invalidToken = []byte(`{"detail": "Invalid token"}`)

// authenticate verifies the bearer token, if any, once per request and puts
// its claims in the request context, where the limiter's key and bypass
// functions read them. A token must be HS256, unexpired, carry exp and name
// its user in sub; any other token gets 401, unless the path is exempt:
// exempt paths never depend on credentials. A request without a bearer
// token passes as anonymous.
func authenticate(cfg *core.Config, secret []byte, next http.Handler) http.Handler {
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	key := func(*jwt.Token) (any, error) { return secret, nil }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := core.BearerToken(r.Header.Get("Authorization"))
		if !ok || cfg.Exempt(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		c := new(claims)
		if _, err := parser.ParseWithClaims(tok, c, key); err != nil || c.Subject == "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(invalidToken)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), claimsKey{}, c)))
	})
}

// userKey counts a request under its token's subject; "" (no token) makes
// nethttp count it under the client IP.
func userKey(r *http.Request) (string, error) {
	if c := claimsFrom(r.Context()); c != nil {
		return "user:" + c.Subject, nil
	}
	return "", nil
}

func isSuperAdmin(r *http.Request) bool {
	c := claimsFrom(r.Context())
	return c != nil && c.Role == superAdmin
}

// serve answers every path with 200 and a small JSON document.
func serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/health" {
		_ = json.NewEncoder(w).Encode(map[string]string{"status": "ok"})
		return
	}
	user := "anonymous"
	if c := claimsFrom(r.Context()); c != nil {
		user = c.Subject
	}
	_ = json.NewEncoder(w).Encode(struct {
		Path string `json:"path"`
		User string `json:"user"`
	}{r.URL.Path, user})
}
