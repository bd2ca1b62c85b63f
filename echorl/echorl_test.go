package echorl_test

// What every adapter must do is checked by internal/adaptertest, over a
// real server; these tests cover what is Echo's own.

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/echorl"
)

const designConfig = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
    - name: upload
      paths: ["/api/kb/*/docs/upload", "/api/kb/*/docs/upload/batch"]
      limit: "30/minute"
      weights:
        "/api/kb/*/docs/upload/batch": 10
    - name: reindex
      paths: ["/api/kb/*/reindex", "/api/kb/*/docs/*/reindex"]
      limit: "2/minute"
    - name: mcp
      paths: ["/mcp"]
      limit: "300/minute"
  default: "120/minute"
  exempt_paths: ["/health", "/ready", "/docs", "/redoc", "/openapi.json"]
`

func config(t testing.TB, yaml string) *core.Config {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var okBody = []byte(`{"ok": true}`)

func serve(h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:1"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestErrorHandler: the error handler's error goes to Echo's
// HTTPErrorHandler, which writes the answer; the handler does not run.
func TestErrorHandler(t *testing.T) {
	errNoSession := errors.New("no session")
	var got error
	served := false
	e := echo.New()
	e.Use(echorl.New(config(t, designConfig),
		echorl.WithKeyFunc(func(echo.Context) (string, error) { return "", errNoSession }),
		echorl.WithErrorHandler(func(c echo.Context, err error) error {
			got = err
			return echo.NewHTTPError(http.StatusForbidden, "go away")
		})))
	e.GET("/api/search", func(echo.Context) error { served = true; return nil })
	w := serve(e, "GET", "/api/search")
	if want := `{"message":"go away"}` + "\n"; w.Code != http.StatusForbidden || w.Body.String() != want || got != errNoSession || served {
		t.Fatalf("got %d %q, error handler saw %v, handler ran: %v; want 403 %q, the key error, false",
			w.Code, w.Body, got, served, want)
	}
}

// TestKeyFuncIdentities pins the identities of the built-in key functions
// over an echo.Context: the same strings as nethttp's, so that a store
// shared by two adapters counts a caller once; verify gets the request's
// own context, and its error is the key function's.
func TestKeyFuncIdentities(t *testing.T) {
	errInvalid := errors.New("invalid token")
	var cur echo.Context
	hk := echorl.HeaderKey("x-api-key")
	jwt := echorl.JWTSubject(func(c echo.Context, tok string) (string, error) {
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
	e := echo.New()
	e.GET("/", func(c echo.Context) error {
		cur = c
		key, _ := hk(c)
		sub, err := jwt(c)
		seen = append(seen, ids{key, sub, err})
		return nil
	})
	serve(e, "GET", "/", "X-API-KEY", "k1", "Authorization", "Bearer alice")
	serve(e, "GET", "/", "Authorization", "bearer bob")
	serve(e, "GET", "/", "Authorization", "Basic xyz")
	serve(e, "GET", "/", "Authorization", "Bearer bad")
	serve(e, "GET", "/")
	want := []ids{{"X-Api-Key:k1", "sub:alice", nil}, {"", "sub:bob", nil}, {"", "", nil}, {"", "", errInvalid}, {"", "", nil}}
	if !slices.Equal(seen, want) {
		t.Fatalf("identities: got %v, want %v", seen, want)
	}
}

// TestPre: as a pre-router middleware (no route template yet) the rules
// apply by path, the same as after routing.
func TestPre(t *testing.T) {
	e := echo.New()
	clock := core.NewManualClock(time.Unix(1_700_000_040, 0))
	e.Pre(echorl.New(config(t, designConfig), echorl.WithStore(memstore.New(memstore.WithClock(clock)))))
	e.GET("/api/kb/:id/reindex", func(c echo.Context) error { return c.JSONBlob(http.StatusOK, okBody) })
	for i, status := range []int{200, 200, 429} {
		w := serve(e, "GET", "/api/kb/kb-01/reindex")
		if w.Code != status || w.Header().Get("RateLimit") != `"reindex";r=`+strconv.Itoa(max(1-i, 0))+`;t=60` {
			t.Fatalf("request %d: got %d %q, want %d and the reindex rule", i, w.Code, w.Header().Get("RateLimit"), status)
		}
	}
}

// TestRouteTemplateUsed: echorl passes c.Path(), so a parameterized route
// is answered once.
func TestRouteTemplateUsed(t *testing.T) {
	cfg := config(t, designConfig)
	e := echo.New()
	e.Use(echorl.New(cfg))
	e.POST("/api/kb/:kb/reindex", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	for _, kb := range []string{"a", "b", "c"} {
		serve(e, "POST", "/api/kb/"+kb+"/reindex")
	}
	if n := cfg.CachedRoutes(); n != 1 {
		t.Fatalf("%d cached routes after three requests to one route, want 1", n)
	}
}
