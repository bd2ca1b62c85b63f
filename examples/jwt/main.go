package main

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/jwtissuer"
	"github.com/rlkit/rlkit/nethttp"
)

// devSecret signs tokens when RLKIT_JWT_SECRET is not set. It is public:
// anyone can forge tokens with it.
const devSecret = "rlkit-demo-development-secret-not-for-production"

// The limits of the demo.
const (
	issueRate   = 6 // tokens per user per issueWindow
	issueWindow = time.Minute
	loginLimit  = "10/minute" // POST /login per client IP
	// tokensPerLogin is what one login takes from the user's bucket.
	tokensPerLogin = 2
)

// user is a demo account. Passwords are kept as SHA-256 digests so that
// the comparison takes the same time whatever the input's length.
type user struct {
	id, name string
	password [32]byte
	roles    []string
}

var users = map[string]user{
	"alice": {id: "u-1", name: "alice", password: sha256.Sum256([]byte("wonderland")), roles: []string{"admin"}},
	"bob":   {id: "u-2", name: "bob", password: sha256.Sum256([]byte("builder")), roles: []string{"user"}},
}

func main() { demo.Main(run) }

// run serves until ctx ends, then shuts down gracefully.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("jwt", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "`address` to listen on")
	limits := demo.ServerLimitFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	secret, dev := os.Getenv("RLKIT_JWT_SECRET"), false
	if secret == "" {
		secret, dev = devSecret, true
	}
	a, err := newApp(secret, store.SystemClock)
	if err != nil {
		return err
	}
	defer a.Close()
	ln, err := limits.Listen(*addr)
	if err != nil {
		return err
	}
	printBanner(stdout, ln.Addr().String(), dev)
	return demo.ServeHTTP(ctx, ln, a.handler)
}

// app is the service: its issuer and its handler.
type app struct {
	iss     *jwtissuer.Issuer
	store   *memstore.Store
	handler http.Handler
}

// newApp builds the service on clock (tests pass a manual one).
func newApp(secret string, clock store.Clock) (*app, error) {
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = secret
	cfg.Issuer = "rlkit-jwt-example"
	cfg.EnableRateLimit = true
	cfg.RateLimitRate = issueRate
	cfg.RateLimitWindow = issueWindow
	cfg.Clock = clock
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		return nil, err
	}
	perIP, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "login", Paths: []string{"/login"}, Methods: []string{"POST"}, Limit: []string{loginLimit}}},
	})
	if err != nil {
		iss.Close()
		return nil, err
	}
	a := &app{iss: iss, store: memstore.New(memstore.WithClock(clock))}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /login", a.login)
	mux.HandleFunc("POST /refresh", a.refresh)
	mux.HandleFunc("GET /me", a.me)
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, _ *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	// No key function: every request counts under its client IP (the TCP
	// peer; behind a proxy, see core.WithClientIP).
	a.handler = nethttp.New(core.NewLimiter(perIP, core.WithStore(a.store), core.WithClock(clock)))(mux)
	return a, nil
}

// Close stops issuance and releases the limiters.
func (a *app) Close() {
	a.iss.Close()
	a.store.Close()
}

type tokens struct {
	AccessToken  string `json:"access_token"`
	RefreshToken string `json:"refresh_token,omitempty"`
	TokenType    string `json:"token_type"`
	ExpiresIn    int    `json:"expires_in"`
}

// login checks the credentials and issues an access and a refresh token.
func (a *app) login(w http.ResponseWriter, r *http.Request) {
	var req struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<10)).Decode(&req); err != nil {
		writeDetail(w, http.StatusBadRequest, "Body must be JSON: {\"user\": \"...\", \"password\": \"...\"}")
		return
	}
	u, ok := users[req.User]
	given := sha256.Sum256([]byte(req.Password))
	if subtle.ConstantTimeCompare(given[:], u.password[:]) != 1 || !ok {
		writeDetail(w, http.StatusUnauthorized, "Invalid credentials")
		return
	}
	claims := &jwtissuer.Claims{UserID: u.id, Username: u.name, Roles: u.roles}
	claims.Subject = u.name // the rate-limit key: one bucket per user
	// Two issuances, each counted. With one token left the access token is
	// issued and the refresh token refused: the login answers 429 and the
	// access token is dropped.
	access, err := a.iss.Create(claims)
	if err != nil {
		a.issueError(w, err, false)
		return
	}
	refresh, err := a.iss.CreateRefresh(claims)
	if err != nil {
		a.issueError(w, err, false)
		return
	}
	writeJSON(w, http.StatusOK, tokens{AccessToken: access, RefreshToken: refresh, TokenType: "Bearer", ExpiresIn: int(jwtissuer.DefaultAccessTTL / time.Second)})
}

// refresh exchanges a refresh token for a new access token.
func (a *app) refresh(w http.ResponseWriter, r *http.Request) {
	var req struct {
		RefreshToken string `json:"refresh_token"`
	}
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 64<<10)).Decode(&req); err != nil {
		writeDetail(w, http.StatusBadRequest, "Body must be JSON: {\"refresh_token\": \"...\"}")
		return
	}
	access, err := a.iss.Refresh(req.RefreshToken)
	if err != nil {
		a.issueError(w, err, true)
		return
	}
	writeJSON(w, http.StatusOK, tokens{AccessToken: access, TokenType: "Bearer", ExpiresIn: int(jwtissuer.DefaultAccessTTL / time.Second)})
}

// me answers with the claims of the bearer's access token. Validation is
// never rate limited.
func (a *app) me(w http.ResponseWriter, r *http.Request) {
	tok, ok := adapter.BearerToken(r.Header.Get("Authorization"))
	if !ok {
		writeDetail(w, http.StatusUnauthorized, "Missing bearer token")
		return
	}
	c, err := a.iss.Validate(tok)
	if err != nil {
		writeDetail(w, http.StatusUnauthorized, "Invalid token")
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"user": c.Subject, "user_id": c.UserID, "roles": c.Roles, "expires_at": c.ExpiresAt.Unix()})
}

// retryAfter is how long a user over the issuance limit waits, at most,
// until a login's two tokens have refilled, in whole seconds rounded up.
var retryAfter = int64(math.Ceil((tokensPerLogin * issueWindow / issueRate).Seconds()))

// issueError answers a failed issuance; refresh says whether a refresh
// token was presented (whose failing verification is the caller's fault).
func (a *app) issueError(w http.ResponseWriter, err error, refresh bool) {
	switch {
	case errors.Is(err, jwtissuer.ErrRateLimitExceeded):
		w.Header().Set("Retry-After", strconv.FormatInt(retryAfter, 10))
		writeJSON(w, http.StatusTooManyRequests, map[string]any{
			"detail":      "Too many tokens issued for this user; retry later",
			"retry_after": retryAfter,
		})
	case errors.Is(err, jwtissuer.ErrRateLimitUnavailable), errors.Is(err, jwtissuer.ErrClosed):
		w.Header().Set("Retry-After", "1")
		writeDetail(w, http.StatusServiceUnavailable, "Token issuance unavailable")
	case refresh: // the refresh token did not verify
		writeDetail(w, http.StatusUnauthorized, "Invalid refresh token")
	default:
		writeDetail(w, http.StatusInternalServerError, "Token issuance failed")
	}
}

func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"detail": detail})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

// printBanner writes where the service listens and curl lines that show
// both limits.
func printBanner(w io.Writer, addr string, dev bool) {
	base := "http://" + addr
	secret := "$RLKIT_JWT_SECRET"
	if dev {
		secret = "the public development secret; set RLKIT_JWT_SECRET for your own"
	}
	fmt.Fprintf(w, `rlkit jwt example listening on %[1]s
tokens: HS256, signed with %[2]s
demo users: alice / wonderland, bob / builder
issuance: %[3]d tokens per minute per user; a login issues 2 (access + refresh), so the 4th login within a minute gets 429
requests: POST /login %[4]s per client IP, failed logins included

  # alice logs in 4 times: 200, 200, 200, then 429 with Retry-After
  for i in 1 2 3 4; do curl -s -w ' %%{http_code}\n' -X POST -d '{"user":"alice","password":"wonderland"}' %[5]s/login; done

  # validating a token is never limited
  TOKEN=$(curl -s -X POST -d '{"user":"bob","password":"builder"}' %[5]s/login | sed -E 's/.*"access_token":"([^"]+)".*/\1/')
  for i in $(seq 10); do curl -s -o /dev/null -w '%%{http_code} ' -H "Authorization: Bearer $TOKEN" %[5]s/me; done; echo

  # a refresh token buys a new access token; an access token is not a refresh token (401)
  REFRESH=$(curl -s -X POST -d '{"user":"bob","password":"builder"}' %[5]s/login | sed -E 's/.*"refresh_token":"([^"]+)".*/\1/')
  curl -s -X POST -d "{\"refresh_token\":\"$REFRESH\"}" %[5]s/refresh
  curl -s -X POST -d "{\"refresh_token\":\"$TOKEN\"}" %[5]s/refresh

  # guessing passwords: past 10 POST /login per minute from one IP (the ones above count too), 429
  for i in $(seq 11); do curl -s -o /dev/null -w '%%{http_code} ' -X POST -d '{"user":"bob","password":"guess"}' %[5]s/login; done; echo
`, addr, secret, issueRate, loginLimit, base)
}
