package fiberrl_test

import (
	"fmt"
	"io"
	"net/http/httptest"

	"github.com/gofiber/fiber/v2"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/fiberrl"
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
	app := fiber.New()
	app.Use(fiberrl.New(cfg,
		fiberrl.WithKeyFunc(fiberrl.HeaderKey("X-API-Key")), // else the client IP
		fiberrl.WithBypass(func(c *fiber.Ctx) bool { return c.Get("X-API-Key") == "ops" }),
	))
	app.Get("/api/search", func(c *fiber.Ctx) error { return c.SendString(`{"results": []}`) })

	for range 3 {
		req := httptest.NewRequest("GET", "/api/search", nil)
		req.Header.Set("X-API-Key", "k-123")
		resp, err := app.Test(req)
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, resp.Header.Get("RateLimit-Policy"), string(body))
	}
	// Output:
	// 200 "search";q=2;w=60 {"results": []}
	// 200 "search";q=2;w=60 {"results": []}
	// 429 "search";q=2;w=60 {"detail": "Rate limit exceeded for 'search' requests"}
}
