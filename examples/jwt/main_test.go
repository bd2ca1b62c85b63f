package main

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/examples/internal/demotest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

const testSecret = "test-secret-0123456789-0123456789-abcdef"

type client struct {
	t    *testing.T
	base string
}

// do sends a request and returns the status, the Retry-After header and
// the body.
func (c *client) do(method, path, bearer, body string) (int, string, string) {
	c.t.Helper()
	req, err := http.NewRequest(method, c.base+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	return resp.StatusCode, resp.Header.Get("Retry-After"), strings.TrimSpace(string(b))
}

func (c *client) login(user, password string, want int) tokens {
	c.t.Helper()
	status, _, body := c.do("POST", "/login", "", `{"user":"`+user+`","password":"`+password+`"}`)
	if status != want {
		c.t.Fatalf("login %s: %d %s, want %d", user, status, body, want)
	}
	var tk tokens
	if status == http.StatusOK {
		if err := json.Unmarshal([]byte(body), &tk); err != nil || tk.AccessToken == "" || tk.RefreshToken == "" {
			c.t.Fatalf("login %s: %v, body %s", user, err, body)
		}
	}
	return tk
}

func (c *client) expect(method, path, bearer, body string, wantStatus int, wantBody string) string {
	c.t.Helper()
	status, _, got := c.do(method, path, bearer, body)
	if status != wantStatus || (wantBody != "" && got != wantBody) {
		c.t.Fatalf("%s %s: %d %s, want %d %s", method, path, status, got, wantStatus, wantBody)
	}
	return got
}

// TestFlow runs the service on a manual clock and checks every status the
// banner promises.
func TestFlow(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC))
	a, err := newApp(testSecret, clock)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.handler)
	defer srv.Close()
	defer a.Close()
	c := &client{t: t, base: srv.URL}

	// bob: log in, read /me, refresh; the wrong kind of token is refused.
	bob := c.login("bob", "builder", 200)
	c.expect("GET", "/me", bob.AccessToken, "", 200, "")
	body := c.expect("POST", "/refresh", "", `{"refresh_token":"`+bob.RefreshToken+`"}`, 200, "")
	var refreshed tokens
	if err := json.Unmarshal([]byte(body), &refreshed); err != nil || refreshed.AccessToken == "" {
		t.Fatalf("refresh body %s: %v", body, err)
	}
	me := c.expect("GET", "/me", refreshed.AccessToken, "", 200, "")
	if !strings.Contains(me, `"user":"bob"`) || !strings.Contains(me, `"roles":["user"]`) {
		t.Fatalf("/me with the refreshed token: %s", me)
	}
	c.expect("POST", "/refresh", "", `{"refresh_token":"`+bob.AccessToken+`"}`, 401, `{"detail":"Invalid refresh token"}`)
	c.expect("GET", "/me", bob.RefreshToken, "", 401, `{"detail":"Invalid token"}`)
	c.expect("GET", "/me", "", "", 401, `{"detail":"Missing bearer token"}`)

	// alice: 3 logins, then the issuer's 429.
	first := c.login("alice", "wonderland", 200)
	c.login("alice", "wonderland", 200)
	c.login("alice", "wonderland", 200)
	status, retry, body := c.do("POST", "/login", "", `{"user":"alice","password":"wonderland"}`)
	if want := `{"detail":"Too many tokens issued for this user; retry later","retry_after":20}`; status != 429 || retry != "20" || body != want {
		t.Fatalf("4th login: %d, Retry-After %q, %s; want 429, 20, %s", status, retry, body, want)
	}
	// Validation is never limited; bob has his own bucket.
	for range 20 {
		c.expect("GET", "/me", first.AccessToken, "", 200, "")
	}
	// alice's refresh is an issuance too: refused.
	c.expect("POST", "/refresh", "", `{"refresh_token":"`+first.RefreshToken+`"}`, 429, "")

	// Bad requests.
	c.login("alice", "guess", 401)
	c.login("mallory", "wonderland", 401)
	c.expect("POST", "/login", "", `not json`, 400, "")

	// Per IP: 8 POST /login so far; the 11th within the minute is refused by
	// nethttp, whatever the credentials.
	c.login("bob", "guess", 401)
	c.login("bob", "guess", 401)
	status, retry, body = c.do("POST", "/login", "", `{"user":"bob","password":"builder"}`)
	if want := `{"detail": "Rate limit exceeded for 'login' requests"}`; status != 429 || body != want || retry == "" {
		t.Fatalf("11th login from one IP: %d, Retry-After %q, %s; want 429 and %s", status, retry, body, want)
	}
	c.expect("GET", "/health", "", "", 200, `{"status":"ok"}`)

	// A minute later both limits have refilled.
	clock.Advance(time.Minute)
	c.login("alice", "wonderland", 200)
}

// TestRun starts the program as main does, reads the address from the
// banner, logs in once and shuts it down.
func TestRun(t *testing.T) {
	t.Setenv("RLKIT_JWT_SECRET", testSecret)
	base := demotest.Start(t, run)
	c := &client{t: t, base: base}
	tk := c.login("alice", "wonderland", 200)
	c.expect("GET", "/me", tk.AccessToken, "", 200, "")
	http.DefaultClient.CloseIdleConnections()
}

func TestRunBadFlags(t *testing.T) {
	if err := run(context.Background(), []string{"extra"}, io.Discard); err == nil {
		t.Fatal("run with an extra argument succeeded")
	}
	if err := run(context.Background(), []string{"-addr", "256.0.0.1:1"}, io.Discard); err == nil {
		t.Fatal("run with a bad address succeeded")
	}
}

func TestLimits(t *testing.T) { demotest.Limits(t, run) }
