package echorl_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/echorl"
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
	e := echo.New()
	e.Use(echorl.New(cfg,
		echorl.WithKeyFunc(echorl.HeaderKey("X-API-Key")), // else the client IP
		echorl.WithBypass(func(c echo.Context) bool { return c.Request().Header.Get("X-API-Key") == "ops" }),
	))
	e.GET("/api/search", func(c echo.Context) error { return c.String(http.StatusOK, `{"results": []}`) })

	for range 3 {
		req := httptest.NewRequest("GET", "/api/search", nil)
		req.Header.Set("X-API-Key", "k-123")
		w := httptest.NewRecorder()
		e.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Body)
	}
	// Output:
	// 200 "search";q=2;w=60 {"results": []}
	// 200 "search";q=2;w=60 {"results": []}
	// 429 "search";q=2;w=60 {"detail": "Rate limit exceeded for 'search' requests"}
}
