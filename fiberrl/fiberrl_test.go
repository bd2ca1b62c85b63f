package fiberrl_test

// What every adapter must do is checked by internal/adaptertest, over a
// real server; these tests cover what is Fiber's (and fasthttp's) own.

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/fiberrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// test sends a request with the given header lines through app.Test
// (fasthttp's server and a connection).
func test(t *testing.T, app *fiber.App, method, path string, hdr ...string) *http.Response {
	t.Helper()
	r := httptest.NewRequest(method, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	resp, err := app.Test(r)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// TestErrorHandler: the error handler's error goes to Fiber's
// ErrorHandler, which writes the answer; the handler does not run.
func TestErrorHandler(t *testing.T) {
	errNoSession := errors.New("no session")
	var got error
	served := false
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(fiberrl.New(adaptertest.Config(t, adaptertest.ExampleConfig),
		fiberrl.WithKeyFunc(func(*fiber.Ctx) (string, error) { return "", errNoSession }),
		fiberrl.WithErrorHandler(func(c *fiber.Ctx, err error) error {
			got = err
			return fiber.NewError(http.StatusForbidden, "go away")
		})))
	app.Get("/api/search", func(*fiber.Ctx) error { served = true; return nil })
	resp := test(t, app, "GET", "/api/search")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusForbidden || string(body) != "go away" || got != errNoSession || served {
		t.Fatalf("got %d %q, error handler saw %v, handler ran: %v; want 403 \"go away\", the key error, false",
			resp.StatusCode, body, got, served)
	}
}

// TestKeyFuncIdentities pins the identities of the built-in key functions
// over a *fiber.Ctx: the same strings as nethttp's, so that a store shared
// by two adapters counts a caller once; verify gets the request's own
// context, and its error is the key function's.
func TestKeyFuncIdentities(t *testing.T) {
	errInvalid := errors.New("invalid token")
	var cur *fiber.Ctx
	hk := fiberrl.HeaderKey("x-api-key")
	jwt := fiberrl.JWTSubject(func(c *fiber.Ctx, tok string) (string, error) {
		if c != cur {
			return "", errors.New("verify got another context")
		}
		if tok == "bad" {
			return "", errInvalid
		}
		return tok, nil
	})
	type ids struct {
		key, sub string
		err      error
	}
	var seen []ids
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Get("/", func(c *fiber.Ctx) error {
		cur = c
		key, _ := hk(c)
		sub, err := jwt(c)
		seen = append(seen, ids{key, sub, err})
		return nil
	})
	test(t, app, "GET", "/", "X-API-KEY", "k1", "Authorization", "Bearer alice")
	test(t, app, "GET", "/", "Authorization", "bearer bob")
	test(t, app, "GET", "/", "Authorization", "Basic xyz")
	test(t, app, "GET", "/", "Authorization", "Bearer bad")
	test(t, app, "GET", "/")
	want := []ids{{adapter.HeaderIdentity("X-Api-Key", "k1"), "sub:alice", nil}, {"", "sub:bob", nil}, {"", "", nil}, {"", "", errInvalid}, {"", "", nil}}
	if !slices.Equal(seen, want) {
		t.Fatalf("identities: got %v, want %v", seen, want)
	}
}

// keepingStore keeps every key it is given, as a store with a deny cache
// does.
type keepingStore struct {
	store.Store
	keys []string
}

func (s *keepingStore) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	s.keys = append(s.keys, key)
	return s.Store.Take(ctx, key, p, cost)
}

// TestNothingKeptFromFasthttp: identities from a KeyFunc that returns
// fasthttp's memory as it is (c.Get), from forwarding headers, and tokens
// kept by a verifier, all survive the reuse of fasthttp's buffers by the
// requests that follow.
func TestNothingKeptFromFasthttp(t *testing.T) {
	store := &keepingStore{Store: memstore.New()}
	var tokens []string
	jwt := fiberrl.JWTSubject(func(_ *fiber.Ctx, tok string) (string, error) {
		tokens = append(tokens, tok)
		return tok, nil
	})
	app := fiber.New()
	app.Use(fiberrl.New(
		core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), core.WithStore(store), core.WithClientIP(clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/32")}})),
		fiberrl.WithKeyFunc(func(c *fiber.Ctx) (string, error) {
			if c.Get("Authorization") != "" {
				return jwt(c)
			}
			return c.Get("X-User"), nil // fasthttp's memory
		}),
	))
	app.Get("/*", func(c *fiber.Ctx) error { return c.SendString("ok") })
	var wantKeys, wantTokens []string
	for i := range 30 {
		r := httptest.NewRequest("GET", "/api/item"+strconv.Itoa(i), nil)
		switch n := strconv.Itoa(1000 + i); i % 3 {
		case 0:
			r.Header.Set("X-User", "user-"+n)
			wantKeys = append(wantKeys, "user-"+n)
		case 1:
			r.Header.Set("X-Forwarded-For", "203.0.113."+strconv.Itoa(i)+", 0.0.0.0")
			wantKeys = append(wantKeys, "203.0.113."+strconv.Itoa(i))
		case 2:
			r.Header.Set("Authorization", "Bearer tok-"+n)
			wantKeys, wantTokens = append(wantKeys, "sub:tok-"+n), append(wantTokens, "tok-"+n)
		}
		if _, err := app.Test(r); err != nil {
			t.Fatal(err)
		}
	}
	if !slices.Equal(store.keys, wantKeys) || !slices.Equal(tokens, wantTokens) {
		t.Fatalf("kept keys %q and tokens %q, want %q and %q", store.keys, tokens, wantKeys, wantTokens)
	}
}

// TestRouteTemplateUsed: fiberrl passes c.Route().Path, so a parameterized
// route the middleware is mounted on is answered once; under app.Use it
// sees only the mount prefix and matches by path.
func TestRouteTemplateUsed(t *testing.T) {
	cfg := adaptertest.Config(t, adaptertest.ExampleConfig)
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Post("/api/kb/:kb/reindex", fiberrl.New(cfg), func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) })
	for _, kb := range []string{"a", "b", "c"} {
		test(t, app, "POST", "/api/kb/"+kb+"/reindex")
	}
	if n := cfg.CachedRoutes(); n != 1 {
		t.Fatalf("%d cached routes after three requests to one route, want 1", n)
	}
}

// TestCaseFolding: Fiber serves "/API/search" by the handler of
// "/api/search" unless the app is CaseSensitive, so fiberrl counts it
// under that rule, and an upper-case spelling of an exempt path is not
// exempt; a CaseSensitive app counts paths as written, like the other
// adapters.
func TestCaseFolding(t *testing.T) {
	for _, sensitive := range []bool{false, true} {
		cfg := adaptertest.Config(t, strings.Replace(adaptertest.ExampleConfig, "  default:", `    - name: users
      paths: ["/api/Users"]
      limit: "3/second"
  default:`, 1))
		app := fiber.New(fiber.Config{DisableStartupMessage: true, CaseSensitive: sensitive})
		app.Use(fiberrl.New(cfg, fiberrl.WithKeyFunc(fiberrl.HeaderKey("X-User"))))
		app.All("/*", func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) })
		for _, c := range []struct {
			path, policy string // "" for exempt: no header
		}{
			{"/API/search", `"search";q=10;w=1`},
			{"/Api%2FSearch", `"search";q=10;w=1`},
			{"/HEALTH", `"default";q=120;w=60`},
			{"/api/Users", `"users";q=3;w=1`},
			{"/api/users", `"users";q=3;w=1`},
			{"/API/USERS", `"users";q=3;w=1`},
			{"/health", ""},
		} {
			want := c.policy
			if sensitive && want != "" {
				want = `"default";q=120;w=60`
			}
			if c.path == "/api/Users" {
				want = c.policy
			}
			req := httptest.NewRequest("GET", c.path, nil)
			req.Header.Set("X-User", "alice")
			resp, err := app.Test(req, -1)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if got := resp.Header.Get("RateLimit-Policy"); got != want {
				t.Errorf("CaseSensitive %v: GET %s: RateLimit-Policy %q, want %q", sensitive, c.path, got, want)
			}
		}
	}
}

// TestCaseFoldingParamKey: behind an app that ignores case, "/kb/K1" is
// served as "/kb/k1", so a rule keyed by the parameter counts both under
// one key, in lower case, with the route and without; a CaseSensitive
// app counts them apart, as written.
func TestCaseFoldingParamKey(t *testing.T) {
	for _, sensitive := range []bool{false, true} {
		for _, route := range []bool{false, true} {
			cfg := adaptertest.Config(t, `
rate_limit:
  enabled: true
  rules:
    - name: kb
      paths: ["/api/kb/:kb/search"]
      limit: "10/minute"
      key: param:kb
`)
			var keys []string
			lim := core.NewLimiter(cfg, core.WithObserver(func(e core.Event) { keys = append(keys, e.Key) }))
			app := fiber.New(fiber.Config{DisableStartupMessage: true, CaseSensitive: sensitive})
			ok := func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) }
			if route {
				app.Get("/api/kb/:id/search", fiberrl.New(lim), ok)
			} else {
				app.Use(fiberrl.New(lim))
				app.All("/*", ok)
			}
			for _, p := range []string{"/api/kb/k1/search", "/api/kb/K1/search", "/API/KB/%4B1/SEARCH"} {
				test(t, app, "GET", p).Body.Close()
			}
			want := []string{"p:k1", "p:k1", "p:k1"}
			switch {
			case sensitive && route:
				want = []string{"p:k1", "p:K1"} // the third is not the route's
			case sensitive:
				want = []string{"p:k1", "p:K1", "0.0.0.0"} // nor the rule's: the default's, per caller
			}
			if !slices.Equal(keys, want) {
				t.Errorf("CaseSensitive %v, route %v: keys %q, want %q", sensitive, route, keys, want)
			}
		}
	}
}

// TestErrorHandlerNil: WithErrorHandler(nil) is the default: a failing key
// function gets 401 {"detail": "Unauthorized"}, never a nil call (which
// would take the whole process down: fasthttp recovers no panic).
func TestErrorHandlerNil(t *testing.T) {
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Use(fiberrl.New(adaptertest.Config(t, adaptertest.ExampleConfig),
		fiberrl.WithKeyFunc(func(*fiber.Ctx) (string, error) { return "", errors.New("no session") }),
		fiberrl.WithErrorHandler(nil)))
	app.Get("/api/search", func(*fiber.Ctx) error { return nil })
	resp := test(t, app, "GET", "/api/search")
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusUnauthorized || string(body) != `{"detail": "Unauthorized"}` {
		t.Fatalf("got %d %q, want 401 {\"detail\": \"Unauthorized\"}", resp.StatusCode, body)
	}
}
