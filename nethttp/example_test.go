package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/nethttp"
)

func ExampleNew() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, `{"results": []}`) })
	handler := nethttp.New(cfg,
		nethttp.WithKeyFunc(nethttp.HeaderKey("X-API-Key")), // else the client IP
		nethttp.WithBypass(func(r *http.Request) bool { return r.Header.Get("X-API-Key") == "ops" }),
	)(api)

	for range 3 {
		req := httptest.NewRequest("GET", "/api/search", nil)
		req.Header.Set("X-API-Key", "k-123")
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Body)
	}
	// Output:
	// 200 "search";q=2;w=60 {"results": []}
	// 200 "search";q=2;w=60 {"results": []}
	// 429 "search";q=2;w=60 {"detail": "Rate limit exceeded for 'search' requests"}
}

// An RFC 9457 problem for every refused request, and the remaining quota
// in the body of every allowed one.
func ExampleWithDeniedHandler() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0)) // the start of a minute
	api := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		d, _ := nethttp.DecisionOf(r) // core.WithDecisionContext(true)
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"results": [], "remaining": %d}`, d.Result.Remaining)
	})
	handler := nethttp.New(
		core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock))), core.WithDecisionContext(true)),
		nethttp.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d *core.Decision) {
			// RateLimit-Policy, RateLimit and Retry-After are set already.
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(d.Status())
			fmt.Fprintf(w, `{"type": "about:blank", "title": %q, "status": %d, "detail": "retry in %s seconds"}`,
				http.StatusText(d.Status()), d.Status(), w.Header().Get("Retry-After"))
		}),
	)(api)

	for range 3 {
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, httptest.NewRequest("GET", "/api/search", nil))
		fmt.Println(w.Code, w.Header().Get("Content-Type"), w.Header().Get("Retry-After"), w.Body)
	}
	// Output:
	// 200 application/json  {"results": [], "remaining": 1}
	// 200 application/json  {"results": [], "remaining": 0}
	// 429 application/problem+json 60 {"type": "about:blank", "title": "Too Many Requests", "status": 429, "detail": "retry in 60 seconds"}
}
