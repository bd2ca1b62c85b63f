package fiberrl_test

import (
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/gofiber/fiber/v2/middleware/recover"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/fiberrl"
)

// TestPanicCounted: under a rule that counts failures, a handler that
// panics is counted as the 500 Fiber's recover middleware answers: a
// client that makes the handler panic still uses up the limit, and the
// request after the limit is refused before the handler.
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
	app := fiber.New()
	app.Use(recover.New(), fiberrl.New(cfg))
	runs := 0
	app.Get("/login", func(c *fiber.Ctx) error {
		runs++
		panic("boom")
	})
	var codes []int
	for range 3 {
		resp, err := app.Test(httptest.NewRequest("GET", "/login", nil))
		if err != nil {
			t.Fatal(err)
		}
		codes = append(codes, resp.StatusCode)
	}
	if runs != 2 || codes[0] != 500 || codes[1] != 500 || codes[2] != 429 {
		t.Fatalf("handler ran %d times, answers %v; want 2 runs answered 500 and counted, then 429", runs, codes)
	}
}
