package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/redistest"
)

const testSecret = "test-secret-0123456789-0123456789-abcdef"

// mainArgsEnv makes the test binary run main() with these (argSep-separated)
// arguments instead of the tests, so that exit codes and signals are tested
// on the real program.
const mainArgsEnv, argSep = "RLKIT_SERVER_TEST_MAIN_ARGS", "\x1f"

func TestMain(m *testing.M) {
	if args, ok := os.LookupEnv(mainArgsEnv); ok {
		os.Args = append([]string{"server"}, strings.Split(args, argSep)...)
		main()
		os.Exit(0)
	}
	goleak.VerifyTestMain(m) // every server test stops its server
}

// output collects what run writes and closes ready once the address line is
// in; run prints its whole banner in one Write, so the banner is complete then.
type output struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	addr  string
	ready chan struct{}
}

var listeningRE = regexp.MustCompile(`(?m)^listening on http://(\S+)$`)

func newOutput() *output { return &output{ready: make(chan struct{})} }

func (o *output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	n, err := o.buf.Write(p)
	if o.addr == "" {
		if m := listeningRE.FindSubmatch(o.buf.Bytes()); m != nil {
			o.addr = string(m[1])
			close(o.ready)
		}
	}
	return n, err
}

func (o *output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}

type server struct {
	base           string
	client         *http.Client
	stdout, stderr *output
	cancel         context.CancelFunc
	done           chan error
}

// start runs the server in-process on a free loopback port with testSecret
// (args may override it) and stops it when the test ends.
func start(t *testing.T, args ...string) *server {
	t.Helper()
	return startRaw(t, append([]string{"-jwt-secret", testSecret}, args...)...)
}

// startRaw is start without a default -jwt-secret.
func startRaw(t *testing.T, args ...string) *server {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	s := &server{
		client: &http.Client{Transport: &http.Transport{}, Timeout: 10 * time.Second},
		stdout: newOutput(), stderr: newOutput(), cancel: cancel, done: make(chan error, 1),
	}
	args = append([]string{"-addr", "127.0.0.1:0"}, args...)
	done := s.done
	go func() { done <- run(ctx, args, s.stdout, s.stderr) }()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	select {
	case <-s.stdout.ready:
	case err := <-done:
		cancel()
		t.Fatalf("run returned before listening: %v\nstderr:\n%s", err, s.stderr)
	case <-timeout.C:
		cancel()
		t.Fatalf("no listening line within 10s; stdout:\n%s", s.stdout)
	}
	s.base = "http://" + s.stdout.addr
	t.Cleanup(func() {
		s.client.CloseIdleConnections()
		if err := s.stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// stop cancels run's context and waits for it to return; a second call
// returns nil at once.
func (s *server) stop() error {
	if s.done == nil {
		return nil
	}
	s.cancel()
	done := s.done
	s.done = nil
	select {
	case err := <-done:
		if err != nil {
			return errors.New("run: " + err.Error())
		}
		return nil
	case <-time.After(5 * time.Second):
		return errors.New("run did not return within 5s of cancel")
	}
}

// get requests path with an optional bearer token and returns the response
// (body already read) and the body.
// login POSTs body to /login.
func (s *server) login(t *testing.T, body string) (*http.Response, string) {
	t.Helper()
	resp, err := s.client.Post(s.base+"/login", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}

func (s *server) get(t *testing.T, path, token string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, s.base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(body)
}

// token signs claims for sub (and role, if any), valid for an hour.
func token(t *testing.T, sub, role string) string {
	t.Helper()
	return mint(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": sub, "role": role, "exp": time.Now().Add(time.Hour).Unix()})
}

// mint signs c with m: key is an HMAC secret (string), or for "none"
// jwt.UnsafeAllowNoneSignatureType.
func mint(t *testing.T, m jwt.SigningMethod, key any, c jwt.Claims) string {
	t.Helper()
	if k, ok := key.(string); ok {
		key = []byte(k)
	}
	s, err := jwt.NewWithClaims(m, c).SignedString(key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func wantStatus(t *testing.T, resp *http.Response, body string, want int) {
	t.Helper()
	if resp.StatusCode != want {
		t.Fatalf("GET %s: status %d, want %d; body %s", resp.Request.URL.EscapedPath(), resp.StatusCode, want, body)
	}
}

func wantHeader(t *testing.T, resp *http.Response, name, want string) {
	t.Helper()
	if got := resp.Header.Get(name); got != want {
		t.Errorf("GET %s: %s = %q, want %q", resp.Request.URL.EscapedPath(), name, got, want)
	}
}

// retryAfter returns the Retry-After header, which must be whole seconds in 1..max.
func retryAfter(t *testing.T, resp *http.Response, max int) int {
	t.Helper()
	n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || n < 1 || n > max {
		t.Fatalf("Retry-After = %q, want whole seconds in 1..%d", resp.Header.Get("Retry-After"), max)
	}
	return n
}

const invalidBody = `{"detail": "Invalid token"}`

// wantProblem checks that a refused request got the demo's RFC 9457
// problem document (its denied handler): Content-Type
// application/problem+json, the exact members for rule and plan (rule ""
// for a 503), retry_after equal to the Retry-After header, and a
// Content-Length that is the body's.
func wantProblem(t *testing.T, resp *http.Response, body string, status int, rule, plan string) {
	t.Helper()
	wantStatus(t, resp, body, status)
	wantHeader(t, resp, "Content-Type", "application/problem+json")
	wantHeader(t, resp, "Content-Length", strconv.Itoa(len(body)))
	retry, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || retry < 1 {
		t.Errorf("Retry-After = %q, want whole seconds", resp.Header.Get("Retry-After"))
	}
	detail := "Rate limiter unavailable"
	if rule != "" {
		detail = "Rate limit exceeded for '" + rule + "' requests"
	}
	want := problem{Type: "about:blank", Title: http.StatusText(status), Status: status, Detail: detail, Rule: rule, Plan: plan, RetryAfter: int64(retry)}
	wantJSON, _ := json.Marshal(want)
	if body != string(wantJSON) {
		t.Errorf("%d body = %s, want %s", status, body, wantJSON)
	}
}

func TestSearchHeadersAndLimit(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok := token(t, "demo-user", "")

	resp, body := s.get(t, "/api/search", tok)
	wantStatus(t, resp, body, http.StatusOK)
	if want := `{"path":"/api/search","user":"demo-user"}` + "\n"; body != want {
		t.Errorf("body = %q, want %q", body, want)
	}
	wantHeader(t, resp, "Content-Type", "application/json")
	wantHeader(t, resp, "RateLimit-Policy", `"search";q=10;w=1`)
	wantHeader(t, resp, "RateLimit", `"search";r=9;t=1`) // first request of a fresh user
	wantHeader(t, resp, "Retry-After", "")

	// The window is one wall-clock second, so a burst may straddle two
	// windows: at least 10 requests pass before the first 429, and 21
	// requests (more than two windows' worth) always reach one.
	passed := 1
	for range 20 {
		resp, body = s.get(t, "/api/search", tok)
		if resp.StatusCode != http.StatusOK {
			break
		}
		passed++
	}
	wantStatus(t, resp, body, http.StatusTooManyRequests)
	if passed < 10 {
		t.Errorf("429 after %d requests, want at least 10", passed)
	}
	wantProblem(t, resp, body, http.StatusTooManyRequests, "search", "")
	wantHeader(t, resp, "Retry-After", "1")
	wantHeader(t, resp, "RateLimit-Policy", `"search";q=10;w=1`)
	wantHeader(t, resp, "RateLimit", `"search";r=0;t=1`)
}

func TestReindexExactCount(t *testing.T) {
	t.Parallel()
	awayFromMinuteEdge(t)
	s := start(t)
	user := token(t, "demo-user", "")

	for i, remaining := range []int{1, 0} {
		resp, body := s.get(t, "/api/kb/kb-01/reindex", user)
		wantStatus(t, resp, body, http.StatusOK)
		wantHeader(t, resp, "RateLimit-Policy", `"reindex";q=2;w=60`)
		if got, want := resp.Header.Get("RateLimit"), `"reindex";r=`+strconv.Itoa(remaining)+";t="; !strings.HasPrefix(got, want) {
			t.Errorf("request %d: RateLimit = %q, want prefix %q", i+1, got, want)
		}
	}
	// Counted per user and rule: other knowledge bases and the nested path
	// share the same 2/minute.
	for _, path := range []string{"/api/kb/kb-01/reindex", "/api/kb/kb-02/reindex", "/api/kb/kb-02/docs/d-7/reindex"} {
		resp, body := s.get(t, path, user)
		wantProblem(t, resp, body, http.StatusTooManyRequests, "reindex", "")
		retryAfter(t, resp, 60)
	}
	// Other users, and other rules of the same user, are unaffected.
	resp, body := s.get(t, "/api/kb/kb-01/reindex", token(t, "someone-else", ""))
	wantStatus(t, resp, body, http.StatusOK)
	resp, body = s.get(t, "/api/search", user)
	wantStatus(t, resp, body, http.StatusOK)
}

func TestSuperAdminNeverLimited(t *testing.T) {
	t.Parallel()
	s := start(t)
	admin := token(t, "admin", "super-admin")
	for i := range 20 {
		resp, body := s.get(t, "/api/kb/x/reindex", admin)
		wantStatus(t, resp, body, http.StatusOK)
		for _, h := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
			if v, ok := resp.Header[http.CanonicalHeaderKey(h)]; ok {
				t.Fatalf("request %d: unexpected %s: %q", i+1, h, v)
			}
		}
		if want := `{"path":"/api/kb/x/reindex","user":"admin"}` + "\n"; body != want {
			t.Fatalf("body = %q, want %q", body, want)
		}
	}
	// Another role is an ordinary user.
	other := token(t, "ops", "admin")
	for _, want := range []int{200, 200, 429} {
		resp, body := s.get(t, "/api/kb/x/reindex", other)
		wantStatus(t, resp, body, want)
	}
}

func TestInvalidToken(t *testing.T) {
	t.Parallel()
	s := start(t)
	now := time.Now()
	valid := func() jwt.MapClaims { return jwt.MapClaims{"sub": "demo-user", "exp": now.Add(time.Hour).Unix()} }
	tests := []struct {
		name, token string
	}{
		{"bad signature", mint(t, jwt.SigningMethodHS256, "another-secret-0123456789-0123456789", valid())},
		{"expired", mint(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "demo-user", "exp": now.Add(-time.Minute).Unix()})},
		{"no exp", mint(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "demo-user"})},
		{"no sub", mint(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"exp": now.Add(time.Hour).Unix()})},
		{"HS512", mint(t, jwt.SigningMethodHS512, testSecret, valid())},
		{"alg none", mint(t, jwt.SigningMethodNone, jwt.UnsafeAllowNoneSignatureType, valid())},
		{"not before", mint(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "demo-user", "exp": now.Add(time.Hour).Unix(), "nbf": now.Add(time.Hour).Unix()})},
		{"garbage", "not.a.jwt"},
	}
	for _, tt := range tests {
		for _, path := range []string{"/api/search", "/api/kb/k/reindex"} {
			resp, body := s.get(t, path, tt.token)
			if resp.StatusCode != http.StatusUnauthorized || body != invalidBody {
				t.Errorf("%s: GET %s = %d %q, want 401 %q", tt.name, path, resp.StatusCode, body, invalidBody)
			}
			wantHeader(t, resp, "Content-Type", "application/json")
			wantHeader(t, resp, "RateLimit-Policy", "") // rejected before the limiter
		}
	}
	// Rejected requests counted nothing: this address still has its 2 reindexes.
	for _, want := range []int{200, 200, 429} {
		resp, body := s.get(t, "/api/kb/k/reindex", "")
		wantStatus(t, resp, body, want)
	}
}

func TestExemptPathsIgnoreTokens(t *testing.T) {
	t.Parallel()
	s := start(t)
	for _, tok := range []string{"", "not.a.jwt", token(t, "demo-user", "")} {
		for range 3 {
			resp, body := s.get(t, "/health", tok)
			wantStatus(t, resp, body, http.StatusOK)
			if want := `{"status":"ok"}` + "\n"; body != want {
				t.Errorf("/health body = %q, want %q", body, want)
			}
			wantHeader(t, resp, "Content-Type", "application/json")
			wantHeader(t, resp, "RateLimit-Policy", "")
		}
		resp, body := s.get(t, "/docs", tok)
		wantStatus(t, resp, body, http.StatusOK)
	}
}

// TestFaultPathSpellingsServer: one view of the path, through the demo. "/api%2Fsearch", which the handler reads
// as "/api/search", counts under search; "/health/" and "/health%2F" are
// not exempt, so they are counted and an invalid token gets 401:
// authentication asks the limiter's configuration, and takes its decision.
func TestFaultPathSpellingsServer(t *testing.T) {
	t.Parallel()
	s := start(t)
	tok := token(t, "demo-user", "")

	resp, body := s.get(t, "/api%2Fsearch", tok)
	wantStatus(t, resp, body, http.StatusOK)
	if want := `{"path":"/api/search","user":"demo-user"}` + "\n"; body != want {
		t.Errorf("/api%%2Fsearch: body = %q, want %q", body, want)
	}
	wantHeader(t, resp, "RateLimit-Policy", `"search";q=10;w=1`)
	wantHeader(t, resp, "RateLimit", `"search";r=9;t=1`)
	// Both spellings share the count: a 429 within two windows' worth.
	passed := 1
	for i := range 20 {
		path := []string{"/api/search", "/api%2Fsearch"}[i%2]
		resp, body = s.get(t, path, tok)
		wantHeader(t, resp, "RateLimit-Policy", `"search";q=10;w=1`)
		if resp.StatusCode != http.StatusOK {
			break
		}
		passed++
	}
	wantStatus(t, resp, body, http.StatusTooManyRequests)
	if passed < 10 {
		t.Errorf("429 after %d requests, want at least 10", passed)
	}
	wantProblem(t, resp, body, http.StatusTooManyRequests, "search", "")

	for _, path := range []string{"/health/", "/health%2F", "/%68ealth"} {
		resp, body := s.get(t, path, "not.a.jwt")
		if resp.StatusCode != http.StatusUnauthorized || body != invalidBody {
			t.Errorf("GET %s with an invalid token = %d %q, want 401 %q", path, resp.StatusCode, body, invalidBody)
		}
		wantHeader(t, resp, "RateLimit-Policy", "")
		for _, tk := range []string{tok, ""} {
			resp, body = s.get(t, path, tk)
			wantStatus(t, resp, body, http.StatusOK)
			wantHeader(t, resp, "RateLimit-Policy", `"default";q=120;w=60`)
		}
	}
	// The handler of each: the catch-all for "/health/" and "/health%2F",
	// the health check for "/%68ealth" (r.URL.Path is "/health").
	for path, want := range map[string]string{
		"/health/":   `{"path":"/health/","user":"demo-user"}`,
		"/health%2F": `{"path":"/health/","user":"demo-user"}`,
		"/%68ealth":  `{"status":"ok"}`,
	} {
		if _, body := s.get(t, path, tok); body != want+"\n" {
			t.Errorf("GET %s: body %q, want %q", path, body, want+"\n")
		}
	}
	// "/health" itself stays exempt: any token, no count.
	resp, body = s.get(t, "/health", "not.a.jwt")
	wantStatus(t, resp, body, http.StatusOK)
	wantHeader(t, resp, "RateLimit-Policy", "")
}

func TestAnonymousCountedByIP(t *testing.T) {
	t.Parallel()
	s := start(t)
	for i, want := range []int{200, 200, 429, 429} {
		resp, body := s.get(t, "/api/kb/kb-01/reindex", "")
		wantStatus(t, resp, body, want)
		if i == 0 {
			if want := `{"path":"/api/kb/kb-01/reindex","user":"anonymous"}` + "\n"; body != want {
				t.Errorf("body = %q, want %q", body, want)
			}
		}
		if want == 429 {
			wantProblem(t, resp, body, want, "reindex", "")
		}
	}
	// Users are counted apart from the address they come from, even a user
	// whose name is that address.
	for _, sub := range []string{"demo-user", "127.0.0.1"} {
		resp, body := s.get(t, "/api/kb/kb-01/reindex", token(t, sub, ""))
		wantStatus(t, resp, body, http.StatusOK)
	}
}

func TestDefaultRule(t *testing.T) {
	t.Parallel()
	s := start(t)
	resp, body := s.get(t, "/anything/else", "")
	wantStatus(t, resp, body, http.StatusOK)
	wantHeader(t, resp, "RateLimit-Policy", `"default";q=120;w=60`)
	if want := `{"path":"/anything/else","user":"anonymous"}` + "\n"; body != want {
		t.Errorf("body = %q, want %q", body, want)
	}
}

// printedTokens returns the TOKEN= and ADMIN_TOKEN= values of the banner.
func printedTokens(t *testing.T, stdout string) (user, admin string) {
	t.Helper()
	for line := range strings.Lines(stdout) {
		line = strings.TrimSpace(line)
		if v, ok := strings.CutPrefix(line, "TOKEN="); ok {
			user = v
		}
		if v, ok := strings.CutPrefix(line, "ADMIN_TOKEN="); ok {
			admin = v
		}
	}
	if user == "" || admin == "" {
		t.Fatalf("no TOKEN= and ADMIN_TOKEN= lines in:\n%s", stdout)
	}
	return user, admin
}

func parse(t *testing.T, tok, secret string) *claims {
	t.Helper()
	c := new(claims)
	_, err := jwt.ParseWithClaims(tok, c, func(*jwt.Token) (any, error) { return []byte(secret), nil },
		jwt.WithValidMethods([]string{"HS256"}), jwt.WithExpirationRequired())
	if err != nil {
		t.Fatalf("printed token %q: %v", tok, err)
	}
	return c
}

func TestBanner(t *testing.T) {
	t.Parallel()
	s := start(t)
	out := s.stdout.String()
	for _, want := range []string{
		"config:   bundled ratelimit.yaml",
		"store:    in-memory",
		`for i in $(seq 1 15); do curl -s -o /dev/null -w "%{http_code}\n" -H "Authorization: Bearer $TOKEN" ` + s.base + "/api/search; done",
		`curl -i -H "Authorization: Bearer $TOKEN" ` + s.base + "/api/search\n",
		`-H "Authorization: Bearer $TOKEN" ` + s.base + "/api/kb/kb-01/reindex; done",
		`-H "Authorization: Bearer $ADMIN_TOKEN" ` + s.base + "/api/kb/kb-01/reindex; done",
		"reindex  2/minute",
		"login    5/minute",
		"plan pro:  search 50/second, reindex 20/minute, default 1200/minute (a token with \"plan\": \"pro\")\n",
		`-d '{"user":"demo-user","password":"demo-password"}' ` + s.base + "/login; done",
		`-H "Authorization: Bearer $PRO_TOKEN" ` + s.base + "/api/kb/kb-01/reindex; done",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
	}
	user, admin := printedTokens(t, out)
	var pro string
	for line := range strings.Lines(out) {
		if v, ok := strings.CutPrefix(line, "PRO_TOKEN="); ok {
			pro = strings.TrimSpace(v)
		}
	}
	if pc := parse(t, pro, testSecret); pc.Subject != "pro-user" || pc.Plan != "pro" || pc.Role != "" {
		t.Errorf("pro token: sub %q plan %q role %q, want pro-user, pro and no role", pc.Subject, pc.Plan, pc.Role)
	}
	uc, ac := parse(t, user, testSecret), parse(t, admin, testSecret)
	if uc.Subject != "demo-user" || uc.Role != "" {
		t.Errorf("demo token: sub %q role %q, want demo-user and no role", uc.Subject, uc.Role)
	}
	if ac.Subject != "admin" || ac.Role != "super-admin" {
		t.Errorf("admin token: sub %q role %q, want admin super-admin", ac.Subject, ac.Role)
	}
	if left := time.Until(uc.ExpiresAt.Time); left < 23*time.Hour || left > 24*time.Hour {
		t.Errorf("demo token expires in %v, want 24h", left)
	}
	if s.stderr.String() != "" {
		t.Errorf("stderr with -jwt-secret: %q, want nothing", s.stderr)
	}
	// The printed tokens work.
	resp, body := s.get(t, "/api/kb/kb-01/reindex", user)
	wantStatus(t, resp, body, http.StatusOK)
	wantHeader(t, resp, "RateLimit-Policy", `"reindex";q=2;w=60`)
	resp, body = s.get(t, "/api/kb/kb-01/reindex", admin)
	wantStatus(t, resp, body, http.StatusOK)
	wantHeader(t, resp, "RateLimit-Policy", "")
}

func TestSecretFromEnvironment(t *testing.T) { // not parallel: Setenv
	const envSecret = "env-secret-0123456789-0123456789-xyz"
	t.Setenv("RLKIT_JWT_SECRET", envSecret)
	s := startRaw(t)
	user, _ := printedTokens(t, s.stdout.String())
	parse(t, user, envSecret)
	if s.stderr.String() != "" {
		t.Errorf("stderr = %q, want no warning", s.stderr)
	}
	resp, body := s.get(t, "/api/search", mint(t, jwt.SigningMethodHS256, envSecret, jwt.MapClaims{"sub": "u", "exp": time.Now().Add(time.Hour).Unix()}))
	wantStatus(t, resp, body, http.StatusOK)
}

func TestDevelopmentSecretWarns(t *testing.T) { // not parallel: Setenv
	t.Setenv("RLKIT_JWT_SECRET", "")
	s := startRaw(t)
	user, _ := printedTokens(t, s.stdout.String())
	parse(t, user, devSecret)
	if errOut := s.stderr.String(); !strings.Contains(errOut, "WARNING") || !strings.Contains(errOut, devSecret) || !strings.Contains(errOut, "for development only") {
		t.Errorf("stderr = %q, want a warning naming the development secret", errOut)
	}
	resp, body := s.get(t, "/api/search", user)
	wantStatus(t, resp, body, http.StatusOK)
}

func TestRunErrors(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	unknown := write("unknown.yaml", "rate_limit:\n  enabled: true\n  burst_mode: fast\n")
	unknownRule := write("unknown-rule.yaml", "rate_limit:\n  enabled: true\n  rules:\n    - name: search\n      paths: [\"/api/search\"]\n      limit: \"10/second\"\n      per_user: true\n")
	invalid := write("invalid.yaml", "rate_limit: [\n")
	badLimit := write("bad-limit.yaml", "rate_limit:\n  enabled: true\n  default: \"ten/minute\"\n")
	missing := filepath.Join(dir, "missing.yaml")
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	tests := []struct {
		name string
		args []string
		want []string // substrings of the error
		is   error
	}{
		{"unknown field", []string{"-config", unknown}, []string{unknown, "burst_mode", "unknown field"}, nil},
		{"unknown rule field", []string{"-config", unknownRule}, []string{unknownRule, "per_user", "search"}, nil},
		{"invalid yaml", []string{"-config", invalid}, []string{invalid, "invalid YAML"}, nil},
		{"bad limit", []string{"-config", badLimit}, []string{badLimit, "ten/minute"}, nil},
		{"missing file", []string{"-config", missing}, []string{missing}, fs.ErrNotExist},
		{"bad redis URL", []string{"-redis", "http://127.0.0.1:6379"}, []string{"-redis", "http://127.0.0.1:6379"}, errUsage},
		{"redis and cluster", []string{"-redis", "redis://127.0.0.1:6379", "-redis-cluster", "127.0.0.1:7000"}, []string{"-redis", "-redis-cluster"}, errUsage},
		{"bad cluster seeds", []string{"-redis-cluster", "127.0.0.1"}, []string{"-redis-cluster", "127.0.0.1"}, errUsage},
		{"short secret", []string{"-jwt-secret", "short"}, []string{"-jwt-secret", "32 bytes"}, nil},
		{"unknown flag", []string{"-bogus"}, nil, errUsage},
		{"extra argument", []string{"serve"}, nil, errUsage},
		{"help", []string{"-h"}, nil, flag.ErrHelp},
		{"bad address", []string{"-addr", "256.0.0.1:0"}, []string{"256.0.0.1"}, nil},
		{"address in use", []string{"-addr", taken.Addr().String()}, []string{"-addr", taken.Addr().String(), "in use"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"-addr", "127.0.0.1:0", "-jwt-secret", testSecret}, tt.args...), &stdout, &stderr)
			if err == nil {
				t.Fatal("run returned nil, want an error")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("error %v is not %v", err, tt.is)
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing (the server must not start)", stdout.String())
			}
		})
	}
}

// The store flags' usage errors: the exact message, first on stderr and
// followed by the usage, and the error run returns (errUsage, exit status 2).
var storeFlagErrors = []struct {
	name string
	args []string
	want string
}{
	{"not a URL", []string{"-redis", "127.0.0.1:6379"},
		`-redis "127.0.0.1:6379": not a URL; want redis://[user:pass@]host:port/db or rediss://[user:pass@]host:port/db`},
	{"scheme", []string{"-redis", "http://127.0.0.1:6379"},
		`-redis "http://127.0.0.1:6379": unsupported scheme "http"; want redis://[user:pass@]host:port/db or rediss://[user:pass@]host:port/db`},
	{"password redacted", []string{"-redis", "https://user:hunter2-secret@127.0.0.1:6379/0"},
		`-redis "https://user:xxxxx@127.0.0.1:6379/0": unsupported scheme "https"; want redis://[user:pass@]host:port/db or rediss://[user:pass@]host:port/db`},
	{"unparsable", []string{"-redis", "redis://user:hunter2-secret@127.0.0.1:63%79/0"},
		`-redis "redis://user:xxxxx@127.0.0.1:63%79/0": malformed URL (in a password, '/', '?', '#' and '@' must be percent-encoded); want redis://[user:pass@]host:port/db or rediss://[user:pass@]host:port/db`},
	{"both", []string{"-redis", "redis://127.0.0.1:6379", "-redis-cluster", "127.0.0.1:7000,127.0.0.1:7001"},
		`-redis and -redis-cluster are mutually exclusive: give one or the other`},
	{"both, cluster first", []string{"-redis-cluster", "127.0.0.1:7000", "-redis", "redis://127.0.0.1:6379"},
		`-redis and -redis-cluster are mutually exclusive: give one or the other`},
	{"cluster empty address", []string{"-redis-cluster", "127.0.0.1:7000,,127.0.0.1:7001"},
		`-redis-cluster "127.0.0.1:7000,,127.0.0.1:7001": empty address; want host:port,host:port,... (addresses of cluster nodes)`},
	{"cluster no port", []string{"-redis-cluster", "127.0.0.1:7000,127.0.0.1"},
		`-redis-cluster "127.0.0.1:7000,127.0.0.1": "127.0.0.1" is not host:port; want host:port,host:port,... (addresses of cluster nodes)`},
	{"cluster URL", []string{"-redis-cluster", "redis://127.0.0.1:7000"},
		`-redis-cluster "redis://127.0.0.1:7000": "redis://127.0.0.1:7000" is not host:port; want host:port,host:port,... (addresses of cluster nodes)`},
	{"unparsable, no password", []string{"-redis", "redis://127.0.0.1:63%79/0"},
		`-redis "redis://127.0.0.1:63%79/0": invalid port ":63%79" after host; want redis://[user:pass@]host:port/db or rediss://[user:pass@]host:port/db`},
	// A '/' in the password ends the host early for the URL parser: no
	// part of the password shows, in the URL or in the parser's message.
	{"password with a slash", []string{"-redis", "redis://u:PW/SECRET3@127.0.0.1:1/0"},
		`-redis "redis://u:xxxxx@127.0.0.1:1/0": malformed URL (in a password, '/', '?', '#' and '@' must be percent-encoded); want redis://[user:pass@]host:port/db or rediss://[user:pass@]host:port/db`},
}

func TestStoreFlagErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range storeFlagErrors {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			err := run(t.Context(), append([]string{"-addr", "127.0.0.1:0", "-jwt-secret", testSecret}, tt.args...), &stdout, &stderr)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("run = %v, want %q", err, tt.want)
			}
			if !errors.Is(err, errUsage) {
				t.Errorf("error %v is not errUsage", err)
			}
			if want := tt.want + "\nUsage of server:\n"; !strings.HasPrefix(stderr.String(), want) {
				t.Errorf("stderr = %q, want prefix %q", stderr.String(), want)
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Errorf("stderr shows the password:\n%s", stderr.String())
			}
			if stdout.Len() != 0 {
				t.Errorf("stdout = %q, want nothing (the server must not start)", stdout.String())
			}
		})
	}
}

// awayFromMinuteEdge waits, when a wall-clock minute ends within 5s, until
// it has ended: the fixed windows of "2/minute" start on whole minutes, so
// a test that counts one exactly must not straddle two.
func awayFromMinuteEdge(t *testing.T) {
	t.Helper()
	if left := time.Minute - time.Duration(time.Now().UnixNano())%time.Minute; left < 5*time.Second {
		time.Sleep(left + 100*time.Millisecond)
	}
}

// warmUp sends user's search requests through each server until one is
// counted, so that the server has a connection to the node that holds the
// user's counters (all of them share a hash slot) and the node has the
// counting script (one per algorithm, shared by search and reindex). A cold
// first call can outlast the store's 100ms timeout on a loaded machine, and
// fail open.
func warmUp(t *testing.T, user string, servers ...*server) {
	t.Helper()
	tok := token(t, user, "")
	for _, s := range servers {
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, body := s.get(t, "/api/search", tok)
			if resp.Header.Get("RateLimit-Policy") != "" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: no search request counted within 10s; last: %d %s\nstderr:\n%s", s.base, resp.StatusCode, body, s.stderr)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// takeReindex sends reindex requests for one user, to servers in turn, and
// checks that exactly the rule's 2 per minute pass in total, remaining
// counting down across servers, then that every server answers 429 with
// the exact body.
//
// A request that fails open (200 without RateLimit-Policy: the store's call
// outlasted its 100ms timeout, as happens on an overloaded machine) spoils
// the count, since Redis may or may not have counted it: the check then
// starts over with a fresh user, at most three times in all. Any other
// wrong answer fails the test at once.
func takeReindex(t *testing.T, user string, servers ...*server) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for _, s := range servers {
				t.Logf("stderr of %s:\n%s", s.base, s.stderr)
			}
		}
	}()
	for attempt := 1; ; attempt++ {
		u := user
		if attempt > 1 {
			u += "-" + strconv.Itoa(attempt)
		}
		failedOpen := tryReindex(t, u, servers)
		if failedOpen == "" {
			return
		}
		if attempt == 3 {
			t.Fatalf("%s in each of %d attempts; want counted requests", failedOpen, attempt)
		}
		t.Logf("attempt %d: %s; starting over with a fresh user", attempt, failedOpen)
	}
}

// tryReindex is one attempt of takeReindex. It returns which request
// failed open, or "" when none did.
func tryReindex(t *testing.T, user string, servers []*server) (failedOpen string) {
	t.Helper()
	awayFromMinuteEdge(t)
	warmUp(t, user, servers...)
	tok := token(t, user, "")
	n := 2 + 2*len(servers) // the limit, then two 429s from every server
	for i := range n {
		s := servers[i%len(servers)]
		resp, body := s.get(t, "/api/kb/kb-01/reindex", tok)
		if resp.StatusCode == http.StatusOK && resp.Header.Get("RateLimit-Policy") == "" {
			return fmt.Sprintf("request %d (%s) failed open", i+1, s.base)
		}
		wantHeader(t, resp, "RateLimit-Policy", `"reindex";q=2;w=60`)
		if i < 2 {
			wantStatus(t, resp, body, http.StatusOK)
			if want := `{"path":"/api/kb/kb-01/reindex","user":"` + user + `"}` + "\n"; body != want {
				t.Errorf("request %d (%s): body = %q, want %q", i+1, s.base, body, want)
			}
			if got, want := resp.Header.Get("RateLimit"), `"reindex";r=`+strconv.Itoa(1-i)+";t="; !strings.HasPrefix(got, want) {
				t.Errorf("request %d (%s): RateLimit = %q, want prefix %q", i+1, s.base, got, want)
			}
			continue
		}
		wantProblem(t, resp, body, http.StatusTooManyRequests, "reindex", "")
		wantHeader(t, resp, "RateLimit", `"reindex";r=0;t=`+resp.Header.Get("Retry-After"))
		retryAfter(t, resp, 60)
	}
	return ""
}

func TestRedisSharedByTwoServers(t *testing.T) {
	t.Parallel()
	rs := redistest.StartServer(t)
	// A user with a password and database 2: every part of the URL counts.
	if err := rs.Client(t).Do(t.Context(), "ACL", "SETUSER", "demo", "on", ">hunter2-secret", "~*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	url := "redis://demo:hunter2-secret@" + rs.Addr() + "/2"
	a, b := start(t, "-redis", url), start(t, "-redis", url)
	for _, s := range []*server{a, b} {
		out := s.stdout.String()
		if want := "\nstore:    redis redis://demo:xxxxx@" + rs.Addr() + "/2 (counters shared by every server using it)\n"; !strings.Contains(out, want) {
			t.Errorf("stdout lacks %q:\n%s", want, out)
		}
		if strings.Contains(out, "hunter2") {
			t.Errorf("stdout shows the password:\n%s", out)
		}
		if s.stderr.String() != "" {
			t.Errorf("stderr = %q, want nothing: Redis answers", s.stderr)
		}
	}
	takeReindex(t, "demo-user", a, b)
	// The other server's 429 came from Redis too: a fresh user passes on
	// both, and the counters are in database 2.
	takeReindex(t, "other-user", b, a)
	db2 := redis.NewClient(&redis.Options{Addr: rs.Addr(), Username: "demo", Password: "hunter2-secret", DB: 2})
	defer db2.Close()
	if keys, err := db2.Keys(t.Context(), "*demo-user*").Result(); err != nil || len(keys) == 0 {
		t.Errorf("database 2 keys for demo-user: %q, %v; want some", keys, err)
	}
}

// TestRedisCluster: the demo counts in a Redis Cluster. On one with
// Redis's default, cluster-require-full-coverage yes, it writes one
// warning to stderr, before its banner, naming every node and the section
// of docs/redis.md; once every node says no, nothing.
func TestRedisCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	seeds := strings.Join(c.Addrs(), ",")
	s := start(t, "-redis-cluster", seeds)
	if want := "\nstore:    redis cluster seeds " + seeds + " (counters shared by every server using it)\n"; !strings.Contains(s.stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, s.stdout)
	}
	nodes := slices.Sorted(slices.Values(c.Addrs()))
	lines := strings.Split(strings.TrimSuffix(s.stderr.String(), "\n"), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], "level=WARN ") ||
		!strings.Contains(lines[0], `cluster-require-full-coverage yes`) ||
		!strings.Contains(lines[0], `see \"Cluster full coverage\" in docs/redis.md`) ||
		!strings.Contains(lines[0], ` nodes="[`+strings.Join(nodes, " ")+`]"`) {
		t.Errorf("stderr = %q, want one warning about cluster-require-full-coverage naming %v", s.stderr, nodes)
	}
	takeReindex(t, "demo-user", s)
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}

	for _, n := range c.Nodes() {
		if err := n.Client(t).ConfigSet(t.Context(), "cluster-require-full-coverage", "no").Err(); err != nil {
			t.Fatal(err)
		}
	}
	s = start(t, "-redis-cluster", seeds)
	if s.stderr.String() != "" {
		t.Errorf("stderr = %q, want nothing: the cluster answers, and no node requires full coverage", s.stderr)
	}
	takeReindex(t, "other-user", s)
}

// closedPort returns a loopback address on which nothing listens.
func closedPort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

func TestRedisUnreachableFailsOpen(t *testing.T) {
	t.Parallel()
	addr := closedPort(t)
	s := start(t, "-redis", "redis://"+addr+"/0")
	if want := "\nstore:    redis redis://" + addr + "/0 (counters shared by every server using it)\n"; !strings.Contains(s.stdout.String(), want) {
		t.Errorf("stdout lacks %q:\n%s", want, s.stdout)
	}
	errOut := s.stderr.String()
	for _, want := range []string{
		"WARNING: Redis at redis://" + addr + "/0 did not answer PING: ",
		"\nWARNING: starting anyway; until Redis answers, the limiter fails open: requests pass uncounted, without rate-limit headers.\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	tok := token(t, "demo-user", "")
	for i := range 5 { // more than reindex's 2/minute
		resp, body := s.get(t, "/api/kb/kb-01/reindex", tok)
		wantStatus(t, resp, body, http.StatusOK)
		if want := `{"path":"/api/kb/kb-01/reindex","user":"demo-user"}` + "\n"; body != want {
			t.Errorf("request %d: body = %q, want %q", i+1, body, want)
		}
		for _, h := range []string{"RateLimit", "RateLimit-Policy", "Retry-After"} {
			if v, ok := resp.Header[http.CanonicalHeaderKey(h)]; ok {
				t.Errorf("request %d: unexpected %s: %q", i+1, h, v)
			}
		}
	}
}

func TestRedisUnreachableFailsClosed(t *testing.T) {
	t.Parallel()
	cfg := filepath.Join(t.TempDir(), "closed.yaml")
	if err := os.WriteFile(cfg, []byte("rate_limit:\n  enabled: true\n  failure: closed\n  default: \"5/minute\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := closedPort(t)
	s := start(t, "-config", cfg, "-redis-cluster", addr)
	errOut := s.stderr.String()
	for _, want := range []string{
		"WARNING: Redis at cluster seeds " + addr + " did not answer PING: ",
		"\nWARNING: starting anyway; until Redis answers, the limiter fails closed (failure: closed): limited requests get 503.\n",
	} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
	resp, body := s.get(t, "/anything", "")
	wantProblem(t, resp, body, http.StatusServiceUnavailable, "", "")
	resp, body = s.get(t, "/health", "") // exempt: never reaches the store
	wantStatus(t, resp, body, http.StatusOK)
}

func TestCancelReturnsPromptly(t *testing.T) {
	t.Parallel()
	s := start(t)
	// Leave a keep-alive connection idle; Shutdown must not wait for it.
	resp, body := s.get(t, "/api/search", "")
	wantStatus(t, resp, body, http.StatusOK)

	begin := time.Now()
	if err := s.stop(); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 2*time.Second {
		t.Errorf("run took %v to return after cancel, want promptly", d)
	}
	if !strings.HasSuffix(s.stdout.String(), "shut down\n") {
		t.Errorf("stdout does not end with %q:\n%s", "shut down", s.stdout)
	}
	if conn, err := net.Dial("tcp", s.stdout.addr); err == nil {
		conn.Close()
		t.Errorf("%s still accepts connections after run returned", s.stdout.addr)
	}
}

func TestBundledConfig(t *testing.T) {
	t.Parallel()
	onDisk, err := os.ReadFile("../internal/demo/ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bundledConfig, onDisk) {
		t.Fatal("the embedded ratelimit.yaml differs from the file on disk")
	}
	cfg, err := core.ParseConfig(bundledConfig, "ratelimit.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.Enabled() {
		t.Error("bundled config is disabled")
	}
	var got []string
	for _, r := range append(cfg.Rules(), cfg.Default()) {
		got = append(got, r.Name+" "+limits(r)+" "+strings.Join(r.Paths(), ","))
	}
	want := []string{
		"search 10/second /api/search",
		"upload 30/minute /api/kb/*/docs/upload,/api/kb/*/docs/upload/batch",
		"reindex 2/minute /api/kb/*/reindex,/api/kb/*/docs/*/reindex",
		"mcp 300/minute /mcp",
		"login 5/minute /login",
		"default 120/minute ",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, p := range []core.Path{"/health", "/ready", "/docs", "/redoc", "/openapi.json"} {
		if !cfg.Exempt(p) {
			t.Errorf("%s is not exempt", p)
		}
	}
	if r, cost := cfg.Match("POST", "/api/kb/k/docs/upload/batch"); r.Name != "upload" || cost != 10 {
		t.Errorf("batch upload: rule %q cost %d, want upload 10", r.Name, cost)
	}
}

// mainProcess starts the test binary as the real program with args.
func mainProcess(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), mainArgsEnv+"="+strings.Join(args, argSep))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	return cmd, &stderr
}

func TestMainExitStatus(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.yaml")
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStderr string // exact, or a prefix when it ends in "..."
	}{
		{"bad redis URL", storeFlagErrors[1].args, 2, storeFlagErrors[1].want + "\nUsage of server:\n..."},
		{"redis and cluster", storeFlagErrors[4].args, 2, storeFlagErrors[4].want + "\nUsage of server:\n..."},
		{"bad cluster seeds", storeFlagErrors[7].args, 2, storeFlagErrors[7].want + "\nUsage of server:\n..."},
		{"extra argument", []string{"serve"}, 2, "unexpected argument \"serve\"\nUsage of server:\n..."},
		{"missing config", []string{"-config", missing}, 1, "rate-limit config: open " + missing + ": ..."},
		{"unknown field", []string{"-config", "testdata/unknown-field.yaml"}, 1, "rate-limit config testdata/unknown-field.yaml..."},
		{"unknown flag", []string{"-bogus"}, 2, "flag provided but not defined: -bogus\n..."},
		{"help", []string{"-h"}, 0, "Usage of server:\n..."},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			cmd, stderr := mainProcess(t, tt.args...)
			err := cmd.Run()
			var exit *exec.ExitError
			switch {
			case err == nil && tt.wantCode != 0, err != nil && !errors.As(err, &exit):
				t.Fatalf("run: %v, want exit status %d", err, tt.wantCode)
			case exit != nil && exit.ExitCode() != tt.wantCode:
				t.Errorf("exit status %d, want %d", exit.ExitCode(), tt.wantCode)
			}
			if prefix, ok := strings.CutSuffix(tt.wantStderr, "..."); ok {
				if !strings.HasPrefix(stderr.String(), prefix) {
					t.Errorf("stderr = %q, want prefix %q", stderr, prefix)
				}
			} else if stderr.String() != tt.wantStderr {
				t.Errorf("stderr = %q, want %q", stderr, tt.wantStderr)
			}
			if strings.Contains(stderr.String(), "goroutine ") || strings.Contains(stderr.String(), "panic") {
				t.Errorf("stderr has a stack trace:\n%s", stderr)
			}
		})
	}
}

func TestMainSignalShutdown(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			cmd, _ := mainProcess(t, "-addr", "127.0.0.1:0", "-jwt-secret", testSecret)
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			defer cmd.Process.Kill()
			lines := bufio.NewScanner(stdout)
			addr := ""
			for addr == "" && lines.Scan() {
				if m := listeningRE.FindStringSubmatch(lines.Text()); m != nil {
					addr = m[1]
				}
			}
			if addr == "" {
				t.Fatal("no listening line on stdout")
			}
			client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			resp, err := client.Get("http://" + addr + "/health")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			var rest []byte
			exited := make(chan error, 1)
			go func() {
				rest, _ = io.ReadAll(stdout) // until the process closes stdout
				exited <- cmd.Wait()
			}()
			select {
			case err := <-exited:
				if err != nil {
					t.Errorf("after %v: %v, want exit status 0", sig, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("still running 10s after %v", sig)
			}
			if !strings.Contains(string(rest), "shut down") {
				t.Errorf("stdout after %v = %q, want %q", sig, rest, "shut down")
			}
		})
	}
}

// TestLoginCountsFailures: the login rule (5/minute, count: failures)
// never counts a right password, counts each wrong one (401) and a body
// that is no login (400), and at the limit refuses every login, the
// right one too, before the handler: a 429 problem document.
func TestLoginCountsFailures(t *testing.T) {
	t.Parallel()
	awayFromMinuteEdge(t)
	s := start(t)
	const right, wrong = `{"user":"demo-user","password":"demo-password"}`, `{"user":"demo-user","password":"guess"}`
	for i := range 8 {
		resp, body := s.login(t, right)
		wantStatus(t, resp, body, http.StatusOK)
		var tok struct{ Token string }
		if err := json.Unmarshal([]byte(body), &tok); err != nil || parse(t, tok.Token, testSecret).Subject != "demo-user" {
			t.Fatalf("login %d: body %q, want a token for demo-user", i+1, body)
		}
		wantHeader(t, resp, "RateLimit-Policy", `"login";q=5;w=60`)
		if got, want := resp.Header.Get("RateLimit"), `"login";r=4;t=`; !strings.HasPrefix(got, want) {
			t.Errorf("login %d: RateLimit = %q, want prefix %q (the check's view: nothing counted so far)", i+1, got, want)
		}
	}
	for i := range 5 {
		req, want := wrong, http.StatusUnauthorized
		if i == 4 {
			req, want = "not json", http.StatusBadRequest // a failure too
		}
		resp, body := s.login(t, req)
		wantStatus(t, resp, body, want)
		if want == http.StatusUnauthorized && body != `{"detail": "Invalid credentials"}` {
			t.Errorf("wrong password %d: body %q", i+1, body)
		}
		// The headers are the check's: what remains once this one counts.
		if got, want := resp.Header.Get("RateLimit"), `"login";r=`+strconv.Itoa(4-i)+";t="; !strings.HasPrefix(got, want) {
			t.Errorf("failed login %d: RateLimit = %q, want prefix %q", i+1, got, want)
		}
	}
	for _, body := range []string{wrong, right} {
		resp, got := s.login(t, body)
		wantProblem(t, resp, got, http.StatusTooManyRequests, "login", "")
		retryAfter(t, resp, 60)
	}
	// A token changes nothing: logins count per client IP, so a guesser
	// holding tokens gets no more guesses.
	req, _ := http.NewRequest(http.MethodPost, s.base+"/login", strings.NewReader(right))
	req.Header.Set("Authorization", "Bearer "+token(t, "someone", ""))
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("login with a token from the same address: %d, want 429", resp.StatusCode)
	}
}

// TestPlanFromToken: a token whose "plan" claim is pro gets the pro
// plan's limits (reindex 20/minute, shown in the headers and named in the
// 429), counted apart from the same user's counters without a plan; a
// plan the configuration lacks gets the rules' own.
func TestPlanFromToken(t *testing.T) {
	t.Parallel()
	awayFromMinuteEdge(t)
	s := start(t)
	plan := func(p string) string {
		return mint(t, jwt.SigningMethodHS256, testSecret, jwt.MapClaims{"sub": "carol", "plan": p, "exp": time.Now().Add(time.Hour).Unix()})
	}
	pro, free, gold := plan("pro"), token(t, "carol", ""), plan("gold")
	for i := range 20 {
		resp, body := s.get(t, "/api/kb/kb-01/reindex", pro)
		wantStatus(t, resp, body, http.StatusOK)
		wantHeader(t, resp, "RateLimit-Policy", `"reindex";q=20;w=60`)
		if got, want := resp.Header.Get("RateLimit"), `"reindex";r=`+strconv.Itoa(19-i)+";t="; !strings.HasPrefix(got, want) {
			t.Fatalf("pro request %d: RateLimit = %q, want prefix %q", i+1, got, want)
		}
	}
	resp, body := s.get(t, "/api/kb/kb-01/reindex", pro)
	wantProblem(t, resp, body, http.StatusTooManyRequests, "reindex", "pro")
	// The same user without a plan, or on an unknown one: the rule's own
	// 2/minute, on counters of their own.
	for i, want := range []int{200, 200, 429} {
		resp, body := s.get(t, "/api/kb/kb-01/reindex", []string{free, gold, free}[i])
		wantStatus(t, resp, body, want)
		wantHeader(t, resp, "RateLimit-Policy", `"reindex";q=2;w=60`)
		if want == 429 {
			wantProblem(t, resp, body, want, "reindex", "")
		}
	}
}
