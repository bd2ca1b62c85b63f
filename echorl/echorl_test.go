package echorl_test

// What every adapter must do is checked by internal/adaptertest, over a
// real server; these tests cover what is Echo's own.

import (
	"errors"
	"net/http"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/echorl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// TestErrorHandler: the error handler's error goes to Echo's
// HTTPErrorHandler, which writes the answer; the handler does not run.
func TestErrorHandler(t *testing.T) {
	errNoSession := errors.New("no session")
	var got error
	served := false
	e := echo.New()
	e.Use(echorl.New(adaptertest.Config(t, adaptertest.ExampleConfig),
		echorl.WithKeyFunc(func(echo.Context) (string, error) { return "", errNoSession }),
		echorl.WithErrorHandler(func(c echo.Context, err error) error {
			got = err
			return echo.NewHTTPError(http.StatusForbidden, "go away")
		})))
	e.GET("/api/search", func(echo.Context) error { served = true; return nil })
	w := adaptertest.Serve(e, "GET", "/api/search")
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

// TestPre: as a pre-router middleware (no route template yet) the rules
// apply by path, the same as after routing.
func TestPre(t *testing.T) {
	e := echo.New()
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0))
	e.Pre(echorl.New(core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), core.WithStore(memstore.New(memstore.WithClock(clock))))))
	e.GET("/api/kb/:id/reindex", func(c echo.Context) error { return c.JSONBlob(http.StatusOK, okBody) })
	for i, status := range []int{200, 200, 429} {
		w := adaptertest.Serve(e, "GET", "/api/kb/kb-01/reindex")
		if w.Code != status || w.Header().Get("RateLimit") != `"reindex";r=`+strconv.Itoa(max(1-i, 0))+`;t=60` {
			t.Fatalf("request %d: got %d %q, want %d and the reindex rule", i, w.Code, w.Header().Get("RateLimit"), status)
		}
	}
}

// TestRouteTemplateUsed: echorl passes c.Path(), so a parameterized route
// is answered once.
func TestRouteTemplateUsed(t *testing.T) {
	cfg := adaptertest.Config(t, adaptertest.ExampleConfig)
	e := echo.New()
	e.Use(echorl.New(cfg))
	e.POST("/api/kb/:kb/reindex", func(c echo.Context) error { return c.NoContent(http.StatusOK) })
	for _, kb := range []string{"a", "b", "c"} {
		adaptertest.Serve(e, "POST", "/api/kb/"+kb+"/reindex")
	}
	if n := cfg.CachedRoutes(); n != 1 {
		t.Fatalf("%d cached routes after three requests to one route, want 1", n)
	}
}

// TestErrorHandlerNil: WithErrorHandler(nil) is the default: a failing key
// function gets 401 {"detail": "Unauthorized"}, never a nil call.
func TestErrorHandlerNil(t *testing.T) {
	e := echo.New()
	e.Use(echorl.New(adaptertest.Config(t, adaptertest.ExampleConfig),
		echorl.WithKeyFunc(func(echo.Context) (string, error) { return "", errors.New("no session") }),
		echorl.WithErrorHandler(nil)))
	e.GET("/api/search", func(echo.Context) error { return nil })
	if w := adaptertest.Serve(e, "GET", "/api/search"); w.Code != http.StatusUnauthorized || w.Body.String() != `{"detail": "Unauthorized"}` {
		t.Fatalf("got %d %q, want 401 {\"detail\": \"Unauthorized\"}", w.Code, w.Body)
	}
}
