package nethttp_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/rlkit/rlkit/core"
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
