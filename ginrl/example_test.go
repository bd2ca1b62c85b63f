package ginrl_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/ginrl"
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
	r := gin.New()
	r.Use(ginrl.New(cfg,
		ginrl.WithKeyFunc(ginrl.HeaderKey("X-API-Key")), // else the client IP
		ginrl.WithBypass(func(c *gin.Context) bool { return c.GetHeader("X-API-Key") == "ops" }),
	))
	r.GET("/api/search", func(c *gin.Context) { c.String(http.StatusOK, `{"results": []}`) })

	for range 3 {
		req := httptest.NewRequest("GET", "/api/search", nil)
		req.Header.Set("X-API-Key", "k-123")
		w := httptest.NewRecorder()
		r.ServeHTTP(w, req)
		fmt.Println(w.Code, w.Header().Get("RateLimit-Policy"), w.Body)
	}
	// Output:
	// 200 "search";q=2;w=60 {"results": []}
	// 200 "search";q=2;w=60 {"results": []}
	// 429 "search";q=2;w=60 {"detail": "Rate limit exceeded for 'search' requests"}
}
