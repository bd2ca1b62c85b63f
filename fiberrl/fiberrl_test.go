package fiberrl_test

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/fiberrl"
	"github.com/rlkit/rlkit/nethttp"
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

// routes are the fixture's Fiber routes, each with the middleware on the
// route (so that Fiber knows the template); any other path reaches a
// catch-all app.Use with the middleware, so that rules are checked both
// with a route template and without.
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

// fixture is a Fiber app with the middleware over a handler that counts
// its calls, with a memory store on a manual clock set at the start of a
// minute.
type fixture struct {
	t     *testing.T
	app   *fiber.App
	calls atomic.Int64
	clock *core.ManualClock
}

func newFixture(t *testing.T, yaml string, opts ...fiberrl.Option) *fixture {
	f := &fixture{t: t, clock: core.NewManualClock(time.Unix(1_700_000_040, 0))}
	opts = append([]fiberrl.Option{fiberrl.WithStore(memstore.New(memstore.WithClock(f.clock)))}, opts...)
	f.app = fiber.New()
	mw := fiberrl.New(config(t, yaml), opts...)
	handler := func(c *fiber.Ctx) error {
		f.calls.Add(1)
		c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
		return c.Send(okBody)
	}
	for _, r := range routes {
		f.app.All(r, mw, handler)
	}
	f.app.Use(mw, handler)
	return f
}

// do serves one request from peer through the app's fasthttp handler and
// reads back the response as written on the wire. (app.Test, used by
// TestSameAsNetHTTP, always connects from 0.0.0.0.)
func (f *fixture) do(method, path, peer string, hdr ...string) *httptest.ResponseRecorder {
	f.t.Helper()
	var req fasthttp.Request
	req.Header.SetMethod(method)
	req.SetRequestURI(path)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Add(hdr[i], hdr[i+1])
	}
	var ctx fasthttp.RequestCtx
	ctx.Init(&req, net.TCPAddrFromAddrPort(netip.MustParseAddrPort(peer)), nil)
	f.app.Handler()(&ctx)
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(ctx.Response.String())), nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return record(resp)
}

// record copies a response parsed from the wire into a recorder, so that
// responses from Fiber and net/http compare field by field. Date is
// dropped.
func record(resp *http.Response) *httptest.ResponseRecorder {
	defer resp.Body.Close()
	w := httptest.NewRecorder()
	maps.Copy(w.Header(), resp.Header)
	w.Header().Del("Date")
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
	return w
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
		fiberrl.WithBypass(func(c *fiber.Ctx) bool { return c.Get("X-Role") == "super-admin" }),
		fiberrl.WithKeyFunc(func(c *fiber.Ctx) (string, error) {
			if c.Get("X-Broken") != "" {
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
		fiberrl.WithKeyFunc(func(*fiber.Ctx) (string, error) { return "", errors.New("no session") }),
		fiberrl.WithErrorHandler(func(c *fiber.Ctx, err error) error {
			got = err
			return fiber.NewError(http.StatusForbidden, "go away") // to Fiber's error handler
		}))
	f.check(f.do("GET", "/api/search", "192.0.2.1:1"), want{status: 403, body: "go away"})
	if got == nil || got.Error() != "no session" || f.calls.Load() != 0 {
		t.Fatalf("error handler saw %v, handler ran %d times; want the key error and 0", got, f.calls.Load())
	}
}

func TestPerUserIsolationAndKeyFuncs(t *testing.T) {
	verify := func(_ *fiber.Ctx, tok string) (string, error) {
		if tok == "bad" {
			return "", errors.New("invalid token")
		}
		return tok, nil
	}
	f := newFixture(t, designConfig, fiberrl.WithKeyFunc(fiberrl.JWTSubject(verify)))
	for range 10 {
		f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer alice"), want{status: 200})
	}
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer alice"), want{status: 429})
	// Same IP, other user; and the anonymous IP bucket: both untouched.
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "bearer bob"), want{status: 200, headers: map[string]string{"RateLimit": `"search";r=9;t=1`}})
	f.check(f.do("GET", "/api/search", "192.0.2.1:1"), want{status: 200, headers: map[string]string{"RateLimit": `"search";r=9;t=1`}})
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer bad"), want{status: 401})

	h := newFixture(t, designConfig, fiberrl.WithKeyFunc(fiberrl.HeaderKey("x-api-key")))
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
	app := fiber.New()
	hk := fiberrl.HeaderKey("x-api-key")
	jwt := fiberrl.JWTSubject(func(_ *fiber.Ctx, tok string) (string, error) { return tok, nil })
	app.Get("/", func(c *fiber.Ctx) error {
		a, _ := hk(c)
		b, _ := jwt(c)
		seen = append(seen, a, b)
		return nil
	})
	for _, hdr := range []http.Header{
		{"X-API-KEY": {"k1"}, "Authorization": {"Bearer alice"}},
		{"Authorization": {"Basic xyz"}},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header = hdr
		if _, err := app.Test(r); err != nil {
			t.Fatal(err)
		}
	}
	if want := []string{"X-Api-Key:k1", "sub:alice", "", ""}; !slices.Equal(seen, want) {
		t.Fatalf("identities: got %q, want %q", seen, want)
	}
}

func TestTrustedProxies(t *testing.T) {
	f := newFixture(t, designConfig, fiberrl.WithClientIP(core.ClientIPConfig{
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
	app := fiber.New()
	app.Use(fiberrl.New(nilCfg))
	app.Get("/", func(c *fiber.Ctx) error { return c.SendStatus(http.StatusNoContent) })
	resp, err := app.Test(httptest.NewRequest("GET", "/", nil))
	if err != nil {
		t.Fatal(err)
	}
	if w := record(resp); w.Code != 204 || len(w.Header()) != 0 {
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
	open := newFixture(t, designConfig, fiberrl.WithStore(failingStore{}), fiberrl.WithLogger(quiet))
	open.check(open.do("GET", "/api/search", "192.0.2.1:1"), want{status: 200, headers: map[string]string{"RateLimit": "", "RateLimit-Policy": ""}, body: `{"ok": true}`})

	closed := newFixture(t, designConfig, fiberrl.WithStore(failingStore{}), fiberrl.WithLogger(quiet), fiberrl.WithFailOpen(false))
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
		fiberrl.WithHeaders(core.HeadersLegacy),
		fiberrl.WithObserver(func(e core.Event) { events = append(events, e) }))
	f.check(f.do("GET", "/mcp", "192.0.2.1:1"), want{status: 200, headers: map[string]string{
		"X-RateLimit-Limit": "300", "X-RateLimit-Remaining": "299", "X-RateLimit-Reset": "60", "RateLimit": "",
	}})
	if len(events) != 1 || events[0].Rule != "mcp" || !events[0].Allowed || events[0].Cost != 1 {
		t.Fatalf("events: got %+v, want one allowed mcp event", events)
	}
}

// TestSameAsNetHTTP sends the same requests to this adapter, through
// app.Test (fasthttp's server and a connection), and to nethttp, each with
// its own store on its own clock, and wants the same status, headers (but
// Date) and body every time.
func TestSameAsNetHTTP(t *testing.T) {
	for _, tc := range []struct {
		name string
		a    []fiberrl.Option
		n    []nethttp.Option
	}{
		{"memstore", nil, nil},
		{"fail-closed",
			[]fiberrl.Option{fiberrl.WithStore(failingStore{}), fiberrl.WithFailOpen(false), fiberrl.WithLogger(quiet)},
			[]nethttp.Option{nethttp.WithStore(failingStore{}), nethttp.WithFailOpen(false), nethttp.WithLogger(quiet)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, designConfig, tc.a...)
			clock := core.NewManualClock(time.Unix(1_700_000_040, 0))
			n := append([]nethttp.Option{nethttp.WithStore(memstore.New(memstore.WithClock(clock)))}, tc.n...)
			std := nethttp.New(config(t, designConfig), n...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.Header().Set("Content-Length", itoa(len(okBody))) // as net/http's server adds it
				_, _ = w.Write(okBody)
			}))
			for i := range 12 {
				for _, path := range []string{"/api/search", "/api/kb/x/reindex", "/health", "/nowhere"} {
					resp, err := f.app.Test(httptest.NewRequest("GET", path, nil))
					if err != nil {
						t.Fatal(err)
					}
					got, want := record(resp), serve(std, "GET", path, "0.0.0.0:0") // app.Test's peer
					if got.Code != want.Code || !maps.EqualFunc(got.Header(), want.Header(), slices.Equal) || got.Body.String() != want.Body.String() {
						t.Fatalf("request %d %s: got %d %v %q, want %d %v %q", i, path, got.Code, got.Header(), got.Body, want.Code, want.Header(), want.Body)
					}
				}
			}
		})
	}
}

// keepingStore keeps every key it is given, as a store with a deny cache
// does.
type keepingStore struct {
	core.Store
	keys []string
}

func (s *keepingStore) Take(ctx context.Context, key string, p *core.Policy, cost int64) (core.Result, error) {
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
	app.Use(fiberrl.New(config(t, designConfig), fiberrl.WithStore(store),
		fiberrl.WithClientIP(core.ClientIPConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("0.0.0.0/32")}}),
		fiberrl.WithKeyFunc(func(c *fiber.Ctx) (string, error) {
			if c.Get("Authorization") != "" {
				return jwt(c)
			}
			return c.Get("X-User"), nil // fasthttp's memory
		})))
	app.Get("/*", func(c *fiber.Ctx) error { return c.SendString("ok") })
	var wantKeys, wantTokens []string
	for i := range 30 {
		r := httptest.NewRequest("GET", "/api/item"+itoa(i), nil)
		switch n := itoa(1000 + i); i % 3 {
		case 0:
			r.Header.Set("X-User", "user-"+n)
			wantKeys = append(wantKeys, "user-"+n)
		case 1:
			r.Header.Set("X-Forwarded-For", "203.0.113."+itoa(i)+", 0.0.0.0")
			wantKeys = append(wantKeys, "203.0.113."+itoa(i))
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
	cfg := config(t, designConfig)
	app := fiber.New(fiber.Config{DisableStartupMessage: true})
	app.Post("/api/kb/:kb/reindex", fiberrl.New(cfg), func(c *fiber.Ctx) error { return c.SendStatus(http.StatusOK) })
	for _, kb := range []string{"a", "b", "c"} {
		if _, err := app.Test(httptest.NewRequest("POST", "/api/kb/"+kb+"/reindex", nil)); err != nil {
			t.Fatal(err)
		}
	}
	if n := cfg.CachedRoutes(); n != 1 {
		t.Fatalf("%d cached routes after three requests to one route, want 1", n)
	}
}
