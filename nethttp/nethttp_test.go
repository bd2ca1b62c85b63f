package nethttp_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
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

func config(t testing.TB, yaml string) *core.Config {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// fixture is the middleware over a handler that counts its calls, with a
// memory store on a manual clock set at the start of a minute.
type fixture struct {
	t     *testing.T
	h     http.Handler
	calls atomic.Int64
	clock *core.ManualClock
}

func newFixture(t *testing.T, yaml string, opts ...nethttp.Option) *fixture {
	f := &fixture{t: t, clock: core.NewManualClock(time.Unix(1_700_000_040, 0))}
	opts = append([]nethttp.Option{nethttp.WithStore(memstore.New(memstore.WithClock(f.clock)))}, opts...)
	f.h = nethttp.New(config(t, yaml), opts...)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"ok": true}`)
	}))
	return f
}

func (f *fixture) do(method, path, peer string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = peer
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
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
	w := f.do("GET", "/api/search", "192.0.2.1:1234")
	f.check(w, want{status: 429, headers: map[string]string{
		"RateLimit-Policy": `"search";q=10;w=1`,
		"RateLimit":        `"search";r=0;t=1`,
		"Retry-After":      "1",
		"Content-Type":     "application/json",
		"Content-Length":   itoa(len(denyBody)),
	}, body: denyBody})
	if n := f.calls.Load(); n != 10 {
		t.Fatalf("handler ran %d times, want 10", n)
	}
	// The next window admits again.
	f.clock.Advance(750 * time.Millisecond)
	f.check(f.do("GET", "/api/search", "192.0.2.1:1234"), want{status: 200})
}

func itoa(i int) string { return strconv.Itoa(i) }

func TestWeights(t *testing.T) {
	f := newFixture(t, designConfig)
	for i := range 3 {
		f.check(f.do("POST", "/api/kb/kb-01/docs/upload/batch", "192.0.2.1:1"), want{status: 200, headers: map[string]string{
			"RateLimit": `"upload";r=` + itoa(20-10*i) + `;t=60`,
		}})
	}
	// 30 of 30 spent: a single upload is denied too; the rule is shared.
	f.check(f.do("POST", "/api/kb/other/docs/upload", "192.0.2.1:1"), want{status: 429, headers: map[string]string{
		"Retry-After": "60",
	}, body: `{"detail": "Rate limit exceeded for 'upload' requests"}`})
}

func TestFirstMatchAndDefault(t *testing.T) {
	f := newFixture(t, designConfig)
	for i, c := range []struct{ path, policy string }{
		{"/api/kb/kb-01/reindex", `"reindex";q=2;w=60`},
		{"/api/kb/kb-01/docs/d-9/reindex", `"reindex";q=2;w=60`},
		{"/api/kb/a/b/reindex", `"default";q=120;w=60`}, // '*' is one segment
		{"/api/kb/a%2Fb/reindex", `"reindex";q=2;w=60`}, // an encoded slash stays in its segment, as routers see it
		{"/mcp", `"mcp";q=300;w=60`},
		{"/api/anything", `"default";q=120;w=60`},
	} {
		w := f.do("GET", c.path, "192.0.2."+strconv.Itoa(10+i)+":1") // a client per row
		f.check(w, want{status: 200, headers: map[string]string{"RateLimit-Policy": c.policy}})
	}
}

func TestExemptAndBypassTouchNoCounter(t *testing.T) {
	f := newFixture(t, designConfig,
		nethttp.WithBypass(func(r *http.Request) bool { return r.Header.Get("X-Role") == "super-admin" }),
		nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
			if r.Header.Get("X-Broken") != "" {
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
	// A failing key function: 401.
	f.check(f.do("GET", "/api/search", "192.0.2.3:1", "X-Broken", "1"), want{status: 401, body: `{"detail": "Unauthorized"}`})
}

func TestPerUserIsolationAndKeyFuncs(t *testing.T) {
	verify := func(_ *http.Request, tok string) (string, error) {
		if tok == "bad" {
			return "", errors.New("invalid token")
		}
		return tok, nil
	}
	f := newFixture(t, designConfig, nethttp.WithKeyFunc(nethttp.JWTSubject(verify)))
	for range 10 {
		f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer alice"), want{status: 200})
	}
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer alice"), want{status: 429})
	// Same IP, other user; and the anonymous IP bucket: both untouched.
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "bearer bob"), want{status: 200, headers: map[string]string{"RateLimit": `"search";r=9;t=1`}})
	f.check(f.do("GET", "/api/search", "192.0.2.1:1"), want{status: 200, headers: map[string]string{"RateLimit": `"search";r=9;t=1`}})
	f.check(f.do("GET", "/api/search", "192.0.2.1:1", "Authorization", "Bearer bad"), want{status: 401})

	h := newFixture(t, designConfig, nethttp.WithKeyFunc(nethttp.HeaderKey("x-api-key")))
	for range 10 {
		h.do("GET", "/api/search", "192.0.2.1:1", "X-Api-Key", "k1")
	}
	h.check(h.do("GET", "/api/search", "192.0.2.9:1", "X-Api-Key", "k1"), want{status: 429})
	h.check(h.do("GET", "/api/search", "192.0.2.1:1", "X-Api-Key", "k2"), want{status: 200})
}

func TestTrustedProxies(t *testing.T) {
	f := newFixture(t, designConfig, nethttp.WithClientIP(core.ClientIPConfig{
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
	h := nethttp.New(nilCfg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) }))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 204 || len(w.Header()) != 0 {
		t.Fatalf("nil config: got %d %v, want 204 and no headers", w.Code, w.Header())
	}
}

type failingStore struct{}

func (failingStore) Take(context.Context, string, *core.Policy, int64) (core.Result, error) {
	return core.Result{}, errors.New("store down")
}
func (failingStore) Reset(context.Context, string, *core.Policy) error {
	return errors.New("store down")
}

func TestFailOpenAndClosed(t *testing.T) {
	open := newFixture(t, designConfig, nethttp.WithStore(failingStore{}))
	open.check(open.do("GET", "/api/search", "192.0.2.1:1"), want{status: 200, headers: map[string]string{"RateLimit": "", "RateLimit-Policy": ""}, body: `{"ok": true}`})

	closed := newFixture(t, designConfig, nethttp.WithStore(failingStore{}), nethttp.WithFailOpen(false))
	closed.check(closed.do("GET", "/api/search", "192.0.2.1:1"), want{status: 503, headers: map[string]string{
		"Retry-After": "1", "Content-Type": "application/json", "RateLimit": "",
	}, body: `{"detail": "Rate limiter unavailable"}`})
	if closed.calls.Load() != 0 {
		t.Fatal("fail-closed ran the handler")
	}
}

// TestConcurrencyOverLoopback sends many concurrent requests through a real
// server: exactly the limit is admitted.
func TestConcurrencyOverLoopback(t *testing.T) {
	cfg := config(t, "rate_limit:\n  enabled: true\n  rules:\n    - name: hot\n      paths: [\"/hot\"]\n      limit: \"50/hour\"\n")
	clock := core.NewManualClock(time.Unix(1_700_000_000, 0)) // no window boundary mid-test
	store := memstore.New(memstore.WithClock(clock))
	srv := httptest.NewServer(nethttp.New(cfg, nethttp.WithStore(store))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	client := srv.Client()
	var ok, limited, other atomic.Int64
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for range 6 {
				resp, err := client.Get(srv.URL + "/hot")
				if err != nil {
					other.Add(1)
					continue
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case 429:
					limited.Add(1)
				default:
					other.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 50 || limited.Load() != 32*6-50 || other.Load() != 0 {
		t.Fatalf("got %d admitted, %d limited, %d other; want 50, %d, 0", ok.Load(), limited.Load(), other.Load(), 32*6-50)
	}
}

// TestRoutePattern: inside a ServeMux handler the middleware finds the rule
// by the route (r.Pattern), with the same answers as by path.
func TestRoutePattern(t *testing.T) {
	clock := core.NewManualClock(time.Unix(1_700_000_040, 0))
	store := memstore.New(memstore.WithClock(clock))
	limit := nethttp.New(config(t, designConfig), nethttp.WithStore(store), nethttp.WithKeyFunc(nethttp.HeaderKey("X-User")))
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
	cfg := config(t, designConfig)
	mux := http.NewServeMux()
	mux.Handle("POST /api/kb/{kb}/reindex", nethttp.New(cfg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	for _, kb := range []string{"a", "b", "c"} {
		mux.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/api/kb/"+kb+"/reindex", nil))
	}
	if n := cfg.CachedRoutes(); n != 1 {
		t.Fatalf("%d cached routes after three requests to one route, want 1", n)
	}
}
