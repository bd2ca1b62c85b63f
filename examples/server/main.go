package main

import (
	"context"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/logging"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/reload"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/metrics/prom"
	"github.com/rlkit/rlkit/nethttp"
)

// bundledConfig is the example configuration (ratelimit.yaml), shared with the
// framework examples.
var bundledConfig = demo.ConfigYAML

// devSecret signs tokens when neither -jwt-secret nor RLKIT_JWT_SECRET is set.
// It is public: anyone can forge tokens with it.
const devSecret = "rlkit-demo-development-secret-not-for-production"

const (
	superAdmin = "super-admin"
	tokenTTL   = 24 * time.Hour
	// metricsMaxConns caps the connections of the -metrics listener.
	metricsMaxConns = 16
	// pingWait bounds the PING that checks Redis on start.
	pingWait = 2 * time.Second

	redisForm   = "redis://[user:pass@]host:port/db or rediss://[user:pass@]host:port/db"
	clusterForm = "host:port,host:port,... (addresses of cluster nodes)"
)

// errUsage reports bad flags; the flag package, or run, has already printed
// why and the usage.
var errUsage = errors.New("usage")

// usageError is a usage error that run has printed, with the usage; it is
// errUsage to errors.Is, so main exits 2 without printing it again.
type usageError struct{ msg string }

func (e *usageError) Error() string        { return e.msg }
func (e *usageError) Is(target error) bool { return target == errUsage }

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
	redisURL := fs.String("redis", "", "count in the Redis server at `URL`, "+redisForm+"; default: in memory")
	redisCluster := fs.String("redis-cluster", "", "count in a Redis Cluster: comma-separated host:port `addresses` of some of its nodes; default: in memory")
	secret := fs.String("jwt-secret", "", "HS256 `secret` of bearer tokens; default: $RLKIT_JWT_SECRET, else a development secret")
	metricsAddr := fs.String("metrics", "", "serve Prometheus metrics at http://`address`/metrics, on a listener of their own; default: none")
	watch := fs.Bool("watch", true, "reload the -config file when it changes (it is reloaded on SIGHUP either way)")
	limits := demo.ServerLimitFlags(fs)
	var err error
	if err = fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	usage := func(format string, args ...any) error {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintln(stderr, msg)
		fs.Usage()
		return &usageError{msg}
	}
	if fs.NArg() > 0 {
		return usage("unexpected argument %q", fs.Arg(0))
	}
	if err := limits.Check(); err != nil {
		return usage("%v", err)
	}
	var (
		redisOpts *redis.Options // -redis
		seeds     []string       // -redis-cluster
	)
	switch {
	case *redisURL != "" && *redisCluster != "":
		return usage("-redis and -redis-cluster are mutually exclusive: give one or the other")
	case *redisURL != "":
		if redisOpts, err = redisOptions(*redisURL); err != nil {
			return usage("-redis %q: %v; want %s", redact(*redisURL), err, redisForm)
		}
	case *redisCluster != "":
		if seeds, err = clusterSeeds(*redisCluster); err != nil {
			return usage("-redis-cluster %q: %v; want %s", *redisCluster, err, clusterForm)
		}
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

	// Listen before checking Redis: a taken address fails at once.
	ln, err := limits.Listen(*addr)
	if err != nil {
		return fmt.Errorf("-addr: %w", err)
	}
	var mln *demo.Listener
	if *metricsAddr != "" {
		// Scrapers are few: a small cap of its own, so that the metrics
		// listener never takes the file descriptors the service needs.
		ml := *limits
		ml.MaxConns = min(ml.MaxConns, metricsMaxConns)
		if mln, err = ml.Listen(*metricsAddr); err != nil {
			ln.Close()
			return fmt.Errorf("-metrics: %w", err)
		}
	}
	logger := slog.New(slog.NewTextHandler(stderr, nil)) // the limiter's and the store's
	var (
		store     store.Store
		storeDesc string
		client    redis.UniversalClient
		where     string // which Redis, for the banner and warnings
	)
	switch {
	case redisOpts != nil:
		client, where = redis.NewClient(redisOpts), redact(*redisURL)
	case seeds != nil:
		client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: seeds, ContextTimeoutEnabled: true, PoolSize: redisPoolSize()})
		where = "cluster seeds " + strings.Join(seeds, ",")
	}
	if client == nil {
		ms := memstore.New()
		defer ms.Close()
		store, storeDesc = ms, "in-memory (counters live in this process only)"
	} else {
		// go-redis logs a line for each failed dial while Redis is down
		// (ten and more per outage); the limiter warns instead, at most
		// once per 10s, with the count of the failures it held back.
		logging.Disable()
		defer client.Close() // after the store's Close, deferred below
		// On a Cluster, New warns (through logger) when a node has
		// cluster-require-full-coverage yes.
		rs, err := redisstore.New(client, redisstore.WithLogger(logger))
		if err != nil {
			ln.Close()
			return err
		}
		defer rs.Close()
		store, storeDesc = rs, "redis "+where+" (counters shared by every server using it)"
		checkRedis(ctx, client, where, cfg, stderr)
	}
	limOpts := []core.Option{core.WithStore(store), core.WithLogger(logger)}
	var metrics *prom.Metrics
	reg := prometheus.NewRegistry()
	if mln != nil {
		if metrics, err = prom.New(prom.WithRegisterer(reg)); err != nil {
			ln.Close()
			mln.Close()
			return err
		}
		limOpts = append(limOpts, core.WithObserver(metrics.Observe))
	}
	lim := core.NewLimiter(cfg, limOpts...)
	limit := nethttp.New(
		lim,
		nethttp.WithKeyFunc(userKey),
		nethttp.WithBypass(isSuperAdmin),
		nethttp.WithPlan(planOf),
		nethttp.WithDeniedHandler(denied),
	)
	handler := authenticate(lim, []byte(*secret), limit(app(*secret)))
	if err := reloads(ctx, lim, *configFile, *watch, stderr); err != nil {
		ln.Close()
		return err
	}

	metricsURL := ""
	if mln != nil {
		metricsURL = "http://" + clientAddr(mln.Addr().String()) + "/metrics"
	}
	if err := (banner{addr: ln.Addr().String(), source: source, store: storeDesc, cfg: cfg, secret: *secret, metricsURL: metricsURL}).print(stdout); err != nil {
		ln.Close()
		if mln != nil {
			mln.Close()
		}
		return err
	}
	metricsDone := make(chan error, 1)
	if mln != nil {
		metrics.Watch(lim)
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
		go func() { metricsDone <- demo.ServeHTTP(ctx, mln, mux) }()
	} else {
		metricsDone <- nil
	}
	// The limits' timeouts and header limit; ln caps the connections.
	err = demo.ServeHTTP(ctx, ln, handler)
	if err != nil && mln != nil {
		mln.Close() // the metrics server stops at once
	}
	if merr := <-metricsDone; err == nil && merr != nil {
		err = fmt.Errorf("-metrics: %w", merr)
	}
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "shut down")
	return nil
}

// redisOptions parses a -redis URL into client options with
// ContextTimeoutEnabled set, so that the store's per-call timeout bounds the
// sockets too. Its errors do not repeat the URL, which may hold a password.
func redisOptions(raw string) (*redis.Options, error) {
	if !strings.Contains(raw, "://") {
		return nil, errors.New("not a URL")
	}
	u, err := url.Parse(raw)
	if err != nil {
		if strings.Contains(raw, "@") {
			// The parser's text may quote part of the password (a '/'
			// in it ends the host early: `invalid port ":pa"`).
			return nil, errors.New("malformed URL (in a password, '/', '?', '#' and '@' must be percent-encoded)")
		}
		if ue, ok := errors.AsType[*url.Error](err); ok {
			err = ue.Err // url.Error's text quotes the whole URL
		}
		return nil, err
	}
	if u.Scheme != "redis" && u.Scheme != "rediss" {
		return nil, fmt.Errorf("unsupported scheme %q", u.Scheme)
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, err
	}
	opts.ContextTimeoutEnabled = true
	if opts.PoolSize == 0 { // the URL's pool_size, if any, wins
		opts.PoolSize = redisPoolSize()
	}
	return opts, nil
}

// redisPoolSize is the demo's pool of connections to each Redis node:
// 64 per CPU, where go-redis's default is 10. Every request that is not
// exempt makes one call to Redis, and a call that finds the pool busy waits
// for a connection; past the store's 100ms timeout it fails (open, here)
// while Redis is healthy. With 256 callers on 2 CPUs busy with other work,
// 20 connections failed 9-43% of the decisions that way, 128 failed
// 0.0-0.2%. The pool grows only as the load needs, and go-redis closes
// connections idle for 30 minutes.
func redisPoolSize() int { return 64 * runtime.GOMAXPROCS(0) }

// redact returns a URL with its password, if any, replaced by "xxxxx".
func redact(raw string) string {
	if u, err := url.Parse(raw); err == nil {
		return u.Redacted()
	}
	// Unparsable: hide what follows "scheme://user:" up to the last '@'
	// (a password may hold '/', '?' or '#' unescaped: the authority's end
	// cannot be told).
	i := strings.Index(raw, "://")
	if i < 0 {
		return raw
	}
	start := i + len("://")
	auth := raw[start:]
	at := strings.LastIndex(auth, "@")
	if at < 0 {
		return raw
	}
	colon := strings.Index(auth[:at], ":")
	if colon < 0 {
		return raw
	}
	return raw[:start+colon+1] + "xxxxx" + raw[start+at:]
}

// clusterSeeds splits a -redis-cluster list into host:port addresses.
func clusterSeeds(list string) ([]string, error) {
	var addrs []string
	for a := range strings.SplitSeq(list, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, errors.New("empty address")
		}
		host, port, err := net.SplitHostPort(a)
		if n, perr := strconv.Atoi(port); err != nil || host == "" || perr != nil || n < 1 || n > 65535 {
			return nil, fmt.Errorf("%q is not host:port", a)
		}
		addrs = append(addrs, a)
	}
	return addrs, nil
}

// checkRedis PINGs Redis once and, when it does not answer, warns that the
// server starts anyway and what requests get until Redis answers.
func checkRedis(ctx context.Context, client redis.UniversalClient, where string, cfg *core.Config, stderr io.Writer) {
	pctx, cancel := context.WithTimeout(ctx, pingWait)
	defer cancel()
	err := client.Ping(pctx).Err()
	if err == nil || ctx.Err() != nil {
		return
	}
	msg := fmt.Sprintf("WARNING: Redis at %s did not answer PING: %v\n", where, err)
	switch {
	case !cfg.Enabled():
		msg += "WARNING: starting anyway; rate limiting is off (enabled: false), so nothing is counted.\n"
	case cfg.FailOpen():
		msg += "WARNING: starting anyway; until Redis answers, the limiter fails open: requests pass uncounted, without rate-limit headers.\n"
	default:
		msg += "WARNING: starting anyway; until Redis answers, the limiter fails closed (failure: closed): limited requests get 503.\n"
	}
	_, _ = io.WriteString(stderr, msg)
}

// reloads makes lim follow the configuration file while ctx lasts: it is
// reloaded on SIGHUP and, with watch, whenever it changes. A file that does
// not load leaves the running configuration in place; the limiter logs
// why. The bundled configuration ("" file) has nothing to reload.
func reloads(ctx context.Context, lim *core.Limiter, file string, watch bool, stderr io.Writer) error {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	go func() {
		defer signal.Stop(hup)
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if file == "" {
					fmt.Fprintln(stderr, "SIGHUP: the bundled configuration is in use (no -config): nothing to reload")
					continue
				}
				_ = lim.ReloadFile(file) // logged by the limiter
			}
		}
	}()
	if file == "" || !watch {
		return nil
	}
	if _, err := reload.Watch(ctx, lim, file); err != nil {
		return fmt.Errorf("-config: %w", err)
	}
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
	// Plan is the caller's plan ("pro"): the tiers section of the
	// configuration gives each plan its limits (nethttp.WithPlan).
	Plan string `json:"plan,omitempty"`
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
// exempt paths never depend on credentials. Whether a path is exempt is
// the limiter's own answer (core.Config.Exempt of core.URLPath, as nethttp
// asks it), so a spelling the limiter counts ("/health/", "/health%2F")
// needs a valid token too. A request without a bearer token passes as
// anonymous. (The limiter reads its configuration again: a request
// decided while a reload changes exempt_paths may skip the token check
// under the old list and count under the new one, as anonymous: it gains
// nothing a request without a token would not.)
func authenticate(lim *core.Limiter, secret []byte, next http.Handler) http.Handler {
	parser := jwt.NewParser(jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	key := func(*jwt.Token) (any, error) { return secret, nil }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := adapter.BearerToken(r.Header.Get("Authorization"))
		if !ok || lim.Config().Exempt(core.URLPath(r.URL)) {
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
// nethttp count it under the client IP. A login counts under the client
// IP, token or not: a guesser must not get another 5 guesses a minute
// with each token it holds.
func userKey(r *http.Request) (string, error) {
	if r.URL.Path == "/login" {
		return "", nil
	}
	if c := claimsFrom(r.Context()); c != nil {
		return "user:" + c.Subject, nil
	}
	return "", nil
}

// planOf is the plan of the request's token: its "plan" claim, "" without
// a token. A plan the configuration's tiers lack (or none) gets the rules'
// own limits.
func planOf(r *http.Request) string {
	if c := claimsFrom(r.Context()); c != nil {
		return c.Plan
	}
	return ""
}

func isSuperAdmin(r *http.Request) bool {
	c := claimsFrom(r.Context())
	return c != nil && c.Role == superAdmin
}

// problem is an RFC 9457 problem document, with the rule, the plan and
// the wait of a refused request as extension members.
type problem struct {
	Type       string `json:"type"`
	Title      string `json:"title"`
	Status     int    `json:"status"`
	Detail     string `json:"detail"`
	Rule       string `json:"rule,omitempty"`
	Plan       string `json:"plan,omitempty"`
	RetryAfter int64  `json:"retry_after,omitempty"`
}

// denied answers a request the limiter refuses with an
// application/problem+json document instead of the default
// {"detail": ...} body. The middleware has already set the rate-limit
// headers and Retry-After.
func denied(w http.ResponseWriter, r *http.Request, d *core.Decision) {
	status := d.Status()
	p := problem{Type: "about:blank", Title: http.StatusText(status), Status: status}
	switch {
	case status == http.StatusServiceUnavailable:
		p.Detail = "Rate limiter unavailable"
		p.RetryAfter = 1
	case d.Rule != nil:
		p.Detail = "Rate limit exceeded for '" + d.Rule.Name + "' requests"
		p.Rule, p.Plan = d.Rule.Name, d.Plan
		p.RetryAfter = d.RetryAfterSeconds()
	default:
		p.Detail = http.StatusText(status)
	}
	body, _ := json.Marshal(p)
	w.Header().Set("Content-Type", "application/problem+json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// demoPassword is the password of every demo user at POST /login.
const demoPassword = "demo-password"

var invalidCredentials = []byte(`{"detail": "Invalid credentials"}`)

// app is the service behind the limiter: POST /login, and every other
// path answered by serve.
func app(secret string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && r.URL.Path == "/login" {
			login(w, r, secret)
			return
		}
		serve(w, r)
	})
}

// login checks {"user": ..., "password": ...} and answers 200 with a
// token for the user, or 401 (400 for a body that is not such a document).
// The configuration's login rule counts only its failures (count:
// failures): a guesser is refused after 5 wrong passwords a minute, a
// user who types the right one is never counted.
func login(w http.ResponseWriter, r *http.Request, secret string) {
	var req struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	w.Header().Set("Content-Type", "application/json")
	if err := json.NewDecoder(io.LimitReader(r.Body, 4096)).Decode(&req); err != nil || req.User == "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"detail": "want {\"user\": ..., \"password\": ...}"}`))
		return
	}
	if subtle.ConstantTimeCompare([]byte(req.Password), []byte(demoPassword)) != 1 {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = w.Write(invalidCredentials)
		return
	}
	tok, err := sign(secret, claims{RegisteredClaims: registered(req.User, time.Now())})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]string{"token": tok})
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
