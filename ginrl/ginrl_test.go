package ginrl_test

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/ginrl"
	"github.com/rlkit/rlkit/nethttp"
)

func init() { gin.SetMode(gin.TestMode) }

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

// routes are the fixture's Gin routes; any other path reaches the NoRoute
// handler, so that rules are checked both with a route template and without.
var routes = []string{
	"/api/search", "/api/kb/:id/docs/upload", "/api/kb/:id/docs/upload/batch",
	"/api/kb/:id/reindex", "/api/kb/:id/docs/:doc/reindex", "/mcp", "/health",
}

func config(t testing.TB, yaml string) *core.Config {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

var okBody = []byte(`{"ok": true}`)

// fixture is a Gin engine with the middleware over a handler that counts
// its calls, with a memory store on a manual clock set at the start of a
// minute.
type fixture struct {
	t     *testing.T
	h     http.Handler
	calls atomic.Int64
	clock *core.ManualClock
}

func newFixture(t *testing.T, yaml string, opts ...ginrl.Option) *fixture {
	f := &fixture{t: t, clock: core.NewManualClock(time.Unix(1_700_000_040, 0))}
	opts = append([]ginrl.Option{ginrl.WithStore(memstore.New(memstore.WithClock(f.clock)))}, opts...)
	e := gin.New()
	e.Use(ginrl.New(config(t, yaml), opts...))
	handler := func(c *gin.Context) {
		f.calls.Add(1)
		c.Data(http.StatusOK, "application/json", okBody)
	}
	for _, r := range routes {
		e.Any(r, handler)
	}
	e.NoRoute(handler)
	f.h = e
	return f
}

func (f *fixture) do(method, path, peer string, hdr ...string) *httptest.ResponseRecorder {
	return serve(f.h, method, path, peer, hdr...)
}

func serve(h http.Handler, method, path, peer string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

type want struct {
	status  int
	headers map[string]string // "" value: must be absent
	body    string
}

func (f *fixture) check(w *httptest.ResponseRecorder, want want) {
	f.t.Helper()
	if w.Code != want.status {
		f.t.Fatalf("status: got %d, want %d (body %s)", w.Code, want.status, w.Body)
	}
	for k, v := range want.headers {
		if got := w.Header().Get(k); got != v {
			f.t.Fatalf("header %s: got %q, want %q", k, got, v)
		}
	}
	if want.body != "" && w.Body.String() != want.body {
		f.t.Fatalf("body: got %q, want %q", w.Body.String(), want.body)
	}
}

const denyBody = `{"detail": "Rate limit exceeded for 'search' requests"}`

func itoa(i int) string { return strconv.Itoa(i) }

func TestSearchLimitExactHeadersAndBody(t *testing.T) {
	f := newFixture(t, designConfig)
	for i := 9; i >= 0; i-- {
		f.check(f.do("GET", "/api/search", "192.0.2.1:1234"), want{status: 200, headers: map[string]string{
			"RateLimit-Policy": `"search";q=10;w=1`,
			"RateLimit":        `"search";r=` + itoa(i) + `;t=1`,
			"Retry-After":      "",
		}, body: `{"ok": true}`})
	}
	f.clock.Advance(250 * time.Millisecond)
	f.check(f.do("GET", "/api/search", "192.0.2.1:1234"), want{status: 429, headers: map[string]string{
		"RateLimit-Policy": `"search";q=10;w=1`,
		"RateLimit":        `"search";r=0;t=1`,
		"Retry-After":      "1",
		"Content-Type":     "application/json",
		"Content-Length":   itoa(len(denyBody)),
	}, body: denyBody})
	if n := f.calls.Load(); n != 10 {
		t.Fatalf("handler ran %d times, want 10", n)
	}
	f.clock.Advance(750 * time.Millisecond)
	f.check(f.do("GET", "/api/search", "192.0.2.1:1234"), want{status: 200})
}

func TestWeights(t *testing.T) {
	f := newFixture(t, designConfig)
	for i := range 3 {
		f.check(f.do("POST", "/api/kb/kb-01/docs/upload/batch", "192.0.2.1:1"), want{status: 200, headers: map[string]string{
			"RateLimit": `"upload";r=` + itoa(20-10*i) + `;t=60`,
		}})
	}
	f.check(f.do("POST", "/api/kb/other/docs/upload", "192.0.2.1:1"), want{status: 429, headers: map[string]string{
		"Retry-After": "60",
	}, body: `{"detail": "Rate limit exceeded for 'upload' requests"}`})
}

func TestFirstMatchAndDefault(t *testing.T) {
	f := newFixture(t, designConfig)
	for i, c := range []struct{ path, policy string }{
		{"/api/kb/kb-01/reindex", `"reindex";q=2;w=60`},          // route /api/kb/:id/reindex
		{"/api/kb/kb-01/docs/d-9/reindex", `"reindex";q=2;w=60`}, // route /api/kb/:id/docs/:doc/reindex
		{"/api/kb/kb-01//reindex", `"reindex";q=2;w=60`},         // no route: by the cleaned path
		{"/api/kb/a/b/reindex", `"default";q=120;w=60`},          // '*' is one segment
		{"/api/kb/a%2Fb/reindex", `"reindex";q=2;w=60`},          // an encoded slash stays in its segment
		{"/mcp", `"mcp";q=300;w=60`},
		{"/api/anything", `"default";q=120;w=60`}, // no route
	} {
		w := f.do("GET", c.path, "192.0.2."+itoa(10+i)+":1")
		f.check(w, want{status: 200, headers: map[string]string{"RateLimit-Policy": c.policy}})
	}
}

// TestRouteTemplateNeverChangesTheRule: a rule that names one value of a
// route parameter still applies to that value only.
func TestRouteTemplateNeverChangesTheRule(t *testing.T) {
	f := newFixture(t, `
rate_limit:
  enabled: true
  rules:
    - name: special
      paths: ["/api/kb/special/reindex"]
      limit: "1/minute"
    - name: reindex
      paths: ["/api/kb/*/reindex"]
      limit: "2/minute"
  exempt_paths: ["/api/kb/public/reindex"]
`)
	for i, c := range []struct{ path, policy string }{
		{"/api/kb/special/reindex", `"special";q=1;w=60`},
		{"/api/kb/other/reindex", `"reindex";q=2;w=60`},
		{"/api/kb/public/reindex", ""},
		{"/api/kb/special/reindex", `"special";q=1;w=60`}, // the second time, with the route cached
		{"/api/kb/other2/reindex", `"reindex";q=2;w=60`},
		{"/api/kb/public/reindex", ""},
	} {
		f.check(f.do("GET", c.path, "192.0.2."+itoa(10+i)+":1"), want{status: 200, headers: map[string]string{"RateLimit-Policy": c.policy}})
	}
}

func TestExemptAndBypassTouchNoCounter(t *testing.T) {
	f := newFixture(t, designConfig,
		ginrl.WithBypass(func(c *gin.Context) bool { return c.GetHeader("X-Role") == "super-admin" }),
		ginrl.WithKeyFunc(func(c *gin.Context) (string, error) {
			if c.GetHeader("X-Broken") != "" {
				return "", errors.New("bad credentials")
			}
			return "", nil
		}))
	for range 10 {
		f.do("GET", "/api/search", "192.0.2.1:1")
	}
	f.check(f.do("GET", "/api/search", "192.0.2.1:1"), want{status: 429})
	// Exempt: passes with no headers, even over the limit and with broken credentials.
	f.check(f.do("GET", "/health", "192.0.2.1:1", "X-Broken", "1"), want{status: 200, headers: map[string]string{"RateLimit": "", "RateLimit-Policy": ""}})
	// Bypass: passes with no headers and counts nothing.
	for range 20 {
		f.check(f.do("GET", "/api/search", "192.0.2.2:1", "X-Role", "super-admin"), want{status: 200, headers: map[string]string{"RateLimit": ""}})
	}
	f.check(f.do("GET", "/api/search", "192.0.2.2:1"), want{status: 200, headers: map[string]string{"RateLimit": `"search";r=9;t=1`}})
	// A failing key function: 401, and the handler does not run.
	before := f.calls.Load()
	f.check(f.do("GET", "/api/search", "192.0.2.3:1", "X-Broken", "1"), want{status: 401, headers: map[string]string{
		"Content-Type": "application/json", "RateLimit": "",
	}, body: `{"detail": "Unauthorized"}`})
	if f.calls.Load() != before {
		t.Fatal("the handler ran after a key error")
	}
}

func TestErrorHandler(t *testing.T) {
	var got error
	f := newFixture(t, designConfig,
		ginrl.WithKeyFunc(func(*gin.Context) (string, error) { return "", errors.New("no session") }),
		ginrl.WithErrorHandler(func(c *gin.Context, err error) {
			got = err
			c.String(http.StatusForbidden, "go away")
		}))
	f.check(f.do("GET", "/api/search", "192.0.2.1:1"), want{status: 403, body: "go away"})
	if got == nil || got.Error() != "no session" || f.calls.Load() != 0 {
		t.Fatalf("error handler saw %v, handler ran %d times; want the key error and 0", got, f.calls.Load())
	}
}

func TestPerUserIsolationAndKeyFuncs(t *testing.T) {
	verify := func(_ *gin.Context, tok string) (string, error) {
		if tok == "bad" {
			return "", errors.New("invalid token")
		}
		return tok, nil
	}
	f := newFixture(t, designConfig, ginrl.WithKeyFunc(ginrl.JWTSubject(verify)))
	for range 10 {
		f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer alice"), want{status: 200})
	}
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer alice"), want{status: 429})
	// Same IP, other user; and the anonymous IP bucket: both untouched.
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "bearer bob"), want{status: 200, headers: map[string]string{"RateLimit": `"search";r=9;t=1`}})
	f.check(f.do("GET", "/api/search", "192.0.2.1:1"), want{status: 200, headers: map[string]string{"RateLimit": `"search";r=9;t=1`}})
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer bad"), want{status: 401})

	h := newFixture(t, designConfig, ginrl.WithKeyFunc(ginrl.HeaderKey("x-api-key")))
	for range 10 {
		h.do("GET", "/api/search", "192.0.2.1:1", "X-Api-Key", "k1")
	}
	h.check(h.do("GET", "/api/search", "192.0.2.9:1", "X-Api-Key", "k1"), want{status: 429})
	h.check(h.do("GET", "/api/search", "192.0.2.1:1", "X-Api-Key", "k2"), want{status: 200})
}

// TestKeyFuncIdentities pins the identities of the built-in key functions:
// the same strings as nethttp's, so that a store shared by two adapters
// counts a caller once.
func TestKeyFuncIdentities(t *testing.T) {
	var seen []string
	e := gin.New()
	hk := ginrl.HeaderKey("x-api-key")
	jwt := ginrl.JWTSubject(func(_ *gin.Context, tok string) (string, error) { return tok, nil })
	e.GET("/", func(c *gin.Context) {
		a, _ := hk(c)
		b, _ := jwt(c)
		seen = append(seen, a, b)
	})
	serve(e, "GET", "/", "192.0.2.1:1", "X-API-KEY", "k1", "Authorization", "Bearer alice")
	serve(e, "GET", "/", "192.0.2.1:1", "Authorization", "Basic xyz")
	if want := []string{"X-Api-Key:k1", "sub:alice", "", ""}; !slices.Equal(seen, want) {
		t.Fatalf("identities: got %q, want %q", seen, want)
	}
}

func TestTrustedProxies(t *testing.T) {
	f := newFixture(t, designConfig, ginrl.WithClientIP(core.ClientIPConfig{
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("10.0.0.0/8")},
	}))
	for range 10 {
		f.do("GET", "/api/search", "10.0.0.2:5000", "X-Forwarded-For", "203.0.113.5")
	}
	// Same client behind another proxy hop: still limited; a spoofed leftmost value changes nothing.
	f.check(f.do("GET", "/api/search", "10.0.0.3:5000", "X-Forwarded-For", "198.51.100.1, 203.0.113.5, 10.0.0.9"), want{status: 429})
	// Another client through the same proxy.
	f.check(f.do("GET", "/api/search", "10.0.0.2:5000", "X-Forwarded-For", "203.0.113.6"), want{status: 200})
	// An untrusted peer cannot pick its key with the header.
	for range 10 {
		f.do("GET", "/api/search", "192.0.2.50:1", "X-Forwarded-For", "203.0.113.77")
	}
	f.check(f.do("GET", "/api/search", "192.0.2.50:1", "X-Forwarded-For", "203.0.113.78"), want{status: 429})
}

func TestDisabledPassesUntouched(t *testing.T) {
	f := newFixture(t, "rate_limit:\n  enabled: false\n  default: \"1/hour\"\n")
	for range 5 {
		f.check(f.do("GET", "/api/search", "192.0.2.1:1"), want{status: 200, headers: map[string]string{"RateLimit": "", "RateLimit-Policy": ""}})
	}
	var nilCfg *core.Config
	e := gin.New()
	e.Use(ginrl.New(nilCfg))
	e.GET("/", func(c *gin.Context) { c.Status(http.StatusNoContent) })
	w := serve(e, "GET", "/", "192.0.2.1:1")
	if w.Code != 204 || len(w.Header()) != 0 {
		t.Fatalf("nil config: got %d %v, want 204 and no headers", w.Code, w.Header())
	}
}

// quiet drops the warnings about the failing store.
var quiet = slog.New(slog.DiscardHandler)

type failingStore struct{}

func (failingStore) Take(context.Context, string, *core.Policy, int64) (core.Result, error) {
	return core.Result{}, errors.New("store down")
}
func (failingStore) Reset(context.Context, string, *core.Policy) error {
	return errors.New("store down")
}

func TestFailOpenAndClosed(t *testing.T) {
	open := newFixture(t, designConfig, ginrl.WithStore(failingStore{}), ginrl.WithLogger(quiet))
	open.check(open.do("GET", "/api/search", "192.0.2.1:1"), want{status: 200, headers: map[string]string{"RateLimit": "", "RateLimit-Policy": ""}, body: `{"ok": true}`})

	closed := newFixture(t, designConfig, ginrl.WithStore(failingStore{}), ginrl.WithLogger(quiet), ginrl.WithFailOpen(false))
	closed.check(closed.do("GET", "/api/search", "192.0.2.1:1"), want{status: 503, headers: map[string]string{
		"Retry-After": "1", "Content-Type": "application/json", "RateLimit": "",
	}, body: `{"detail": "Rate limiter unavailable"}`})
	if closed.calls.Load() != 0 {
		t.Fatal("fail-closed ran the handler")
	}
}

func TestObserverAndLegacyHeaders(t *testing.T) {
	var events []core.Event
	f := newFixture(t, designConfig,
		ginrl.WithHeaders(core.HeadersLegacy),
		ginrl.WithObserver(func(e core.Event) { events = append(events, e) }))
	f.check(f.do("GET", "/mcp", "192.0.2.1:1"), want{status: 200, headers: map[string]string{
		"X-RateLimit-Limit": "300", "X-RateLimit-Remaining": "299", "X-RateLimit-Reset": "60", "RateLimit": "",
	}})
	if len(events) != 1 || events[0].Rule != "mcp" || !events[0].Allowed || events[0].Cost != 1 {
		t.Fatalf("events: got %+v, want one allowed mcp event", events)
	}
}

// TestSameAsNetHTTP sends the same requests to this adapter and to
// nethttp, each with its own store on its own clock, and wants the same
// status, headers (but Date) and body every time.
func TestSameAsNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    []ginrl.Option
		n    []nethttp.Option
	}{
		{"memstore", nil, nil},
		{"fail-closed",
			[]ginrl.Option{ginrl.WithStore(failingStore{}), ginrl.WithFailOpen(false), ginrl.WithLogger(quiet)},
			[]nethttp.Option{nethttp.WithStore(failingStore{}), nethttp.WithFailOpen(false), nethttp.WithLogger(quiet)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, designConfig, tc.a...)
			clock := core.NewManualClock(time.Unix(1_700_000_040, 0))
			n := append([]nethttp.Option{nethttp.WithStore(memstore.New(memstore.WithClock(clock)))}, tc.n...)
			std := nethttp.New(config(t, designConfig), n...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", itoa(len(okBody))) // as Gin's c.Data
				_, _ = w.Write(okBody)
			}))
			for i := range 12 {
				for _, path := range []string{"/api/search", "/api/kb/x/reindex", "/health", "/nowhere"} {
					got, want := f.do("GET", path, "192.0.2.1:1"), serve(std, "GET", path, "192.0.2.1:1")
					if got.Code != want.Code || !maps.EqualFunc(got.Header(), want.Header(), slices.Equal) || got.Body.String() != want.Body.String() {
						t.Fatalf("request %d %s: got %d %v %q, want %d %v %q", i, path, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
					}
				}
			}
		})
	}
}

// TestDotSegmentsDoNotExempt: Gin serves "/files/../health" from the
// "/files/*filepath" handler, so it must be counted, not treated as the
// exempt "/health".
func TestDotSegmentsDoNotExempt(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: files
      paths: ["/files/*"]
      limit: "1/minute"
  exempt_paths: ["/health"]
`), "dots.yaml")
	if err != nil {
		t.Fatal(err)
	}
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(ginrl.New(cfg))
	served := ""
	r.GET("/files/*filepath", func(c *gin.Context) { served = "files"; c.Status(http.StatusOK) })
	r.GET("/health", func(c *gin.Context) { served = "health"; c.Status(http.StatusOK) })
	do := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		r.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w
	}
	// "/files/../health" is three segments as written ("*" is one), so no
	// rule matches it either way: it counts under the default limit.
	w := do("/files/../health")
	if served != "files" {
		t.Fatalf("Gin served %q; this test expects the raw path to reach /files/*filepath", served)
	}
	if got := w.Header().Get("RateLimit-Policy"); w.Code != 200 || !strings.HasPrefix(got, `"default"`) {
		t.Fatalf("/files/../health: %d with RateLimit-Policy %q; want it counted under default, not exempt", w.Code, got)
	}
	// "/files/x/../../health" as written starts with /files/x: still not exempt.
	if w := do("/files/x/../../health"); w.Header().Get("RateLimit-Policy") == "" {
		t.Fatal("/files/x/../../health passed as exempt")
	}
	if w := do("/files/../files/a"); w.Code != 200 || !strings.HasPrefix(w.Header().Get("RateLimit-Policy"), `"files"`) {
		t.Fatalf("/files/../files/a: %d, %q; want counted under files", w.Code, w.Header().Get("RateLimit-Policy"))
	}
	if w := do("/health"); w.Header().Get("RateLimit-Policy") != "" {
		t.Fatal("/health itself is not exempt")
	}
}

// TestRouteTemplateUsed: ginrl passes c.FullPath(), so a parameterized
// route is answered once.
func TestRouteTemplateUsed(t *testing.T) {
	cfg := config(t, designConfig)
	gin.SetMode(gin.TestMode)
	r := gin.New()
	r.Use(ginrl.New(cfg))
	r.POST("/api/kb/:kb/reindex", func(c *gin.Context) { c.Status(http.StatusOK) })
	for _, kb := range []string{"a", "b", "c"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/api/kb/"+kb+"/reindex", nil))
	}
	if n := cfg.CachedRoutes(); n != 1 {
		t.Fatalf("%d cached routes after three requests to one route, want 1", n)
	}
}
