package echorl_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/echorl"
)

// TestPanicCounted: a handler that panics before writing is counted as
// the 500 a recovery middleware answers, and one that panics after
// committing 200 as that 200: under a rule that counts successes, the
// first is not counted and the others are, so a client that makes the
// handler panic once its answer is on the way (closing its connection
// under a streaming proxy) still uses up the limit, and the request
// after the limit is refused before the handler.
func TestPanicCounted(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      count: successes
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
			c.Response().WriteHeader(http.StatusOK)
		}
		panic(http.ErrAbortHandler)
	})
	var codes []int
	for _, q := range []string{"", "?after=1", "?after=1", "?after=1"} {
		w := httptest.NewRecorder()
		func() {
			defer func() { _ = recover() }() // the panic goes on through the middleware
			e.ServeHTTP(w, httptest.NewRequest("GET", "/login"+q, nil))
		}()
		codes = append(codes, w.Code)
	}
	if runs != 3 || codes[3] != http.StatusTooManyRequests {
		t.Fatalf("handler ran %d times, answers %v; want 3 runs (the panic before writing not counted, the two after writing 200 counted), then 429", runs, codes)
	}
}
