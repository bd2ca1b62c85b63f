package ginrl_test

// What every adapter must do is checked by internal/adaptertest, over a
// real server; these tests cover what is Gin's own.

import (
	"errors"
	"net/http"
	"slices"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/ginrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

func init() { gin.SetMode(gin.TestMode) }

// TestErrorHandler: Gin's error handler writes the answer, and the chain
// is aborted after it.
func TestErrorHandler(t *testing.T) {
	errNoSession := errors.New("no session")
	var got error
	served := false
	e := gin.New()
	e.Use(ginrl.New(adaptertest.Config(t, adaptertest.ExampleConfig),
		ginrl.WithKeyFunc(func(*gin.Context) (string, error) { return "", errNoSession }),
		ginrl.WithErrorHandler(func(c *gin.Context, err error) {
			got = err
			c.String(http.StatusForbidden, "go away")
		})))
	e.GET("/api/search", func(*gin.Context) { served = true })
	w := adaptertest.Serve(e, "GET", "/api/search")
	if w.Code != http.StatusForbidden || w.Body.String() != "go away" || got != errNoSession || served {
		t.Fatalf("got %d %q, error handler saw %v, handler ran: %v; want 403 \"go away\", the key error, false",
			w.Code, w.Body, got, served)
	}
}

// TestKeyFuncIdentities pins the identities of the built-in key functions
// over a *gin.Context: the same strings as nethttp's, so that a store
// shared by two adapters counts a caller once; verify gets the request's
// own context, and its error is the key function's.
func TestKeyFuncIdentities(t *testing.T) {
	errInvalid := errors.New("invalid token")
	var cur *gin.Context
	hk := ginrl.HeaderKey("x-api-key")
	jwt := ginrl.JWTSubject(func(c *gin.Context, tok string) (string, error) {
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
	e := gin.New()
	e.GET("/", func(c *gin.Context) {
		cur = c
		key, _ := hk(c)
		sub, err := jwt(c)
		seen = append(seen, ids{key, sub, err})
	})
	adaptertest.Serve(e, "GET", "/", "X-API-KEY", "k1", "Authorization", "Bearer alice")
	adaptertest.Serve(e, "GET", "/", "Authorization", "bearer bob")
	adaptertest.Serve(e, "GET", "/", "Authorization", "Basic xyz")
	adaptertest.Serve(e, "GET", "/", "Authorization", "Bearer bad")
	adaptertest.Serve(e, "GET", "/")
	want := []ids{{adapter.HeaderIdentity("X-Api-Key", "k1"), "sub:alice", nil}, {"", "sub:bob", nil}, {"", "", nil}, {"", "", errInvalid}, {"", "", nil}}
	if !slices.Equal(seen, want) {
		t.Fatalf("identities: got %v, want %v", seen, want)
	}
}

// TestDotSegmentsDoNotExempt: Gin serves "/files/../health" from the
// "/files/*filepath" handler, whose catch-all template ginrl passes on
// (c.FullPath()); it must be counted, not treated as the exempt "/health".
func TestDotSegmentsDoNotExempt(t *testing.T) {
	r := gin.New()
	r.Use(ginrl.New(adaptertest.Config(t, `
rate_limit:
  enabled: true
  rules:
    - name: files
      paths: ["/files/*"]
      limit: "1/minute"
  exempt_paths: ["/health"]
`)))
	served := ""
	r.GET("/files/*filepath", func(c *gin.Context) { served = "files " + c.FullPath() })
	r.GET("/health", func(*gin.Context) { served = "health" })
	for _, c := range []struct{ path, policy string }{
		// Three segments as written ("*" is one), "/health" cleaned: no
		// rule either way, so the default applies.
		{"/files/../health", `"default";q=120;w=60`},
		{"/files/x/../../health", `"default";q=120;w=60`},
		{"/files/../files/a", `"files";q=1;w=60`},
	} {
		served = ""
		w := adaptertest.Serve(r, "GET", c.path)
		if served != "files /files/*filepath" {
			t.Fatalf("%s: Gin served %q; this test expects the /files/*filepath handler", c.path, served)
		}
		if got := w.Header().Get("RateLimit-Policy"); w.Code != http.StatusOK || got != c.policy {
			t.Fatalf("%s: %d with RateLimit-Policy %q; want 200 and %q", c.path, w.Code, got, c.policy)
		}
	}
	if w := adaptertest.Serve(r, "GET", "/health"); served != "health" || w.Header().Get("RateLimit-Policy") != "" {
		t.Fatalf("/health: served %q, RateLimit-Policy %q; want health, exempt", served, w.Header().Get("RateLimit-Policy"))
	}
}

// TestRouteTemplateUsed: ginrl passes c.FullPath(), so a parameterized
// route is answered once.
func TestRouteTemplateUsed(t *testing.T) {
	cfg := adaptertest.Config(t, adaptertest.ExampleConfig)
	r := gin.New()
	r.Use(ginrl.New(cfg))
	r.POST("/api/kb/:kb/reindex", func(c *gin.Context) { c.Status(http.StatusOK) })
	for _, kb := range []string{"a", "b", "c"} {
		adaptertest.Serve(r, "POST", "/api/kb/"+kb+"/reindex")
	}
	if n := cfg.CachedRoutes(); n != 1 {
		t.Fatalf("%d cached routes after three requests to one route, want 1", n)
	}
}

// TestErrorHandlerNil: WithErrorHandler(nil) is the default: a failing key
// function gets 401 {"detail": "Unauthorized"}, never a nil call.
func TestErrorHandlerNil(t *testing.T) {
	e := gin.New()
	e.Use(ginrl.New(adaptertest.Config(t, adaptertest.ExampleConfig),
		ginrl.WithKeyFunc(func(*gin.Context) (string, error) { return "", errors.New("no session") }),
		ginrl.WithErrorHandler(nil)))
	e.GET("/api/search", func(*gin.Context) {})
	if w := adaptertest.Serve(e, "GET", "/api/search"); w.Code != http.StatusUnauthorized || w.Body.String() != `{"detail": "Unauthorized"}` {
		t.Fatalf("got %d %q, want 401 {\"detail\": \"Unauthorized\"}", w.Code, w.Body)
	}
}
