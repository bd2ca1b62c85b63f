package nethttp_test

// What every adapter must do is checked by internal/adaptertest, over a
// real server; these tests cover what is net/http's own.

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

// TestKeyFuncIdentities pins the identities of the built-in key functions
// over an *http.Request, the strings every adapter's must match; verify
// gets the request itself, and its error is the key function's.
func TestKeyFuncIdentities(t *testing.T) {
	errInvalid := errors.New("invalid token")
	var cur *http.Request
	hk := nethttp.HeaderKey("x-api-key")
	jwt := nethttp.JWTSubject(func(r *http.Request, tok string) (string, error) {
		if r != cur {
			return "", errors.New("verify got another request")
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
	for _, hdr := range [][]string{
		{"X-API-KEY", "k1", "Authorization", "Bearer alice"},
		{"Authorization", "bearer bob"},
		{"Authorization", "Basic xyz"},
		{"Authorization", "Bearer bad"},
		nil,
	} {
		cur = httptest.NewRequest("GET", "/", nil)
		for i := 0; i+1 < len(hdr); i += 2 {
			cur.Header.Add(hdr[i], hdr[i+1])
		}
		key, _ := hk(cur)
		sub, err := jwt(cur)
		seen = append(seen, ids{key, sub, err})
	}
	want := []ids{{adapter.HeaderIdentity("X-Api-Key", "k1"), "sub:alice", nil}, {"", "sub:bob", nil}, {"", "", nil}, {"", "", errInvalid}, {"", "", nil}}
	if !slices.Equal(seen, want) {
		t.Fatalf("identities: got %v, want %v", seen, want)
	}
}

// TestRoutePattern: inside a ServeMux handler the middleware finds the rule
// by the route (r.Pattern, with its method), with the same answers as by
// path.
func TestRoutePattern(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0))
	store := memstore.New(memstore.WithClock(clock))
	limit := nethttp.New(core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), core.WithStore(store)), nethttp.WithKeyFunc(nethttp.HeaderKey("X-User")))
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })
	mux := http.NewServeMux()
	mux.Handle("GET /api/kb/{id}/docs/upload/batch", limit(ok)) // weight 10 of 30/minute
	mux.Handle("POST /api/kb/{kb}/reindex", limit(ok))          // 2/minute
	mux.Handle("GET /health", limit(ok))                        // exempt
	do := func(method, path string) *http.Response {
		req := httptest.NewRequest(method, path, nil)
		req.Header.Set("X-User", "alice")
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec.Result()
	}
	for i, want := range []int{200, 200, 200, 429} {
		if got := do("GET", "/api/kb/k"+strconv.Itoa(i)+"/docs/upload/batch").StatusCode; got != want {
			t.Fatalf("batch upload %d: status %d, want %d", i, got, want)
		}
	}
	for i, want := range []int{200, 200, 429} {
		if got := do("POST", "/api/kb/k1/reindex").StatusCode; got != want {
			t.Fatalf("reindex %d: status %d, want %d", i, got, want)
		}
	}
	for range 200 {
		if r := do("GET", "/health"); r.StatusCode != 200 || r.Header.Get("RateLimit") != "" {
			t.Fatalf("exempt /health: %d with RateLimit %q", r.StatusCode, r.Header.Get("RateLimit"))
		}
	}
}

// TestRouteTemplateUsed: inside a ServeMux handler, r.Pattern's path is
// the route, answered once.
func TestRouteTemplateUsed(t *testing.T) {
	cfg := adaptertest.Config(t, adaptertest.ExampleConfig)
	mux := http.NewServeMux()
	mux.Handle("POST /api/kb/{kb}/reindex", nethttp.New(cfg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	for _, kb := range []string{"a", "b", "c"} {
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/api/kb/"+kb+"/reindex", nil))
	}
	if n := cfg.CachedRoutes(); n != 1 {
		t.Fatalf("%d cached routes after three requests to one route, want 1", n)
	}
}

// TestErrorHandlerNil: WithErrorHandler(nil) is the default: a failing key
// function gets 401 {"detail": "Unauthorized"}, never a nil call.
func TestErrorHandlerNil(t *testing.T) {
	h := nethttp.New(adaptertest.Config(t, adaptertest.ExampleConfig),
		nethttp.WithKeyFunc(func(*http.Request) (string, error) { return "", errors.New("no session") }),
		nethttp.WithErrorHandler(nil))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	if w := adaptertest.Serve(h, "GET", "/api/search"); w.Code != http.StatusUnauthorized || w.Body.String() != `{"detail": "Unauthorized"}` {
		t.Fatalf("got %d %q, want 401 {\"detail\": \"Unauthorized\"}", w.Code, w.Body)
	}
}
