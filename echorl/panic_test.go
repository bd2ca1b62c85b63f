package echorl_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/echorl"
)

// TestPanicCounted: under a rule that counts failures, a handler that
// panics before writing is counted as the 500 a recovery middleware answers, and
// one that panics after committing 401 as that 401: a client that makes
// the handler panic (closing its connection under a streaming proxy)
// still uses up the limit, and the request after the limit is refused
// before the handler.
func TestPanicCounted(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      count: failures
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := echo.New()
	e.Use(echorl.New(cfg))
	runs := 0
	e.GET("/login", func(c echo.Context) error {
		runs++
		if c.QueryParam("after") != "" {
			c.Response().WriteHeader(http.StatusUnauthorized)
		}
		panic(http.ErrAbortHandler)
	})
	var codes []int
	for _, q := range []string{"", "?after=1", ""} {
		w := httptest.NewRecorder()
		func() {
			defer func() { _ = recover() }() // the panic goes on through the middleware
			e.ServeHTTP(w, httptest.NewRequest("GET", "/login"+q, nil))
		}()
		codes = append(codes, w.Code)
	}
	if runs != 2 || codes[2] != http.StatusTooManyRequests {
		t.Fatalf("handler ran %d times, answers %v; want 2 runs, both panics counted, then 429", runs, codes)
	}
}
