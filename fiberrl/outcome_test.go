package fiberrl_test

import (
	"errors"
	"fmt"
	"net"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/fiberrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

const loginYAML = `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "100/minute"
      count: failures
`

// TestCountByOutcomeStatus: under a rule counted by failures, the status
// counted is the one the client gets, also when the handler returns an
// error that Fiber's default error handler answers: the code of a
// *fiber.Error in the error's chain, else 500. The codes cross 400, so
// that each one tells.
func TestCountByOutcomeStatus(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       fiber.Handler
		status  int
		counted bool
	}{
		{"nothing written", func(*fiber.Ctx) error { return nil }, 200, false},
		{"302", func(c *fiber.Ctx) error { return c.Redirect("/", 302) }, 302, false},
		{"401", func(c *fiber.Ctx) error { return c.SendStatus(401) }, 401, true},
		{"fiber.Error 401", func(*fiber.Ctx) error { return fiber.ErrUnauthorized }, 401, true},
		{"fiber.Error 302", func(*fiber.Ctx) error { return fiber.NewError(302) }, 302, false},
		{"a wrapped fiber.Error 302", func(*fiber.Ctx) error { return fmt.Errorf("login: %w", fiber.NewError(302)) }, 302, false},
		{"a set status, then an error", func(c *fiber.Ctx) error { c.Status(302); return errors.New("boom") }, 500, true},
		{"another error", func(*fiber.Ctx) error { return errors.New("boom") }, 500, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var events []core.Event
			app := fiber.New()
			app.Use(fiberrl.New(core.NewLimiter(adaptertest.Config(t, loginYAML), core.WithObserver(func(ev core.Event) { events = append(events, ev) }))))
			app.Post("/login", c.h)
			resp, err := app.Test(httptest.NewRequest("POST", "/login", nil))
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, c.status)
			}
			want := int64(0)
			if c.counted {
				want = 1
			}
			if len(events) != 1 || events[0].Outcome != core.OutcomeAllowed || events[0].Cost != want {
				t.Fatalf("events %+v, want one allowed event of cost %d", events, want)
			}
		})
	}
}

// TestCountByOutcomeAllocs pins the allocations per request of the
// middleware over a JSON handler, beside the handler alone: none on the
// ordinary path, whether or not the configuration has rules counted by
// outcome; under such a rule one when the status counts (the context of
// the count).
func TestCountByOutcomeAllocs(t *testing.T) {
	if adaptertest.Race {
		t.Skip("allocations are not exact under the race detector")
	}
	bench := strings.Replace(adaptertest.ExampleConfig, `limit: "10/second"`, `limit: "2000000000/hour"`, 1)
	failures := strings.Replace(bench, `limit: "2000000000/hour"`, `limit: "2000000000/hour"
      count: failures`, 1)
	allocs := func(status int, mw ...any) float64 {
		app := fiber.New()
		if len(mw) > 0 {
			app.Use(mw...)
		}
		app.Get("/api/search", func(c *fiber.Ctx) error {
			c.Response().Header.SetContentType(fiber.MIMEApplicationJSON)
			return c.Status(status).Send(okBody)
		})
		h := app.Handler()
		var req fasthttp.Request
		req.Header.SetMethod(fiber.MethodGet)
		req.SetRequestURI("/api/search")
		var ctx fasthttp.RequestCtx
		ctx.Init(&req, &net.TCPAddr{IP: net.ParseIP("192.0.2.1"), Port: 1234}, nil)
		return testing.AllocsPerRun(200, func() {
			ctx.Response.Reset()
			h(&ctx)
		})
	}
	for _, c := range []struct {
		name   string
		yaml   string
		status int
		extra  float64
	}{
		{"every request counted", bench, 200, 0},
		{"every request counted, answered 401", bench, 401, 0},
		{"failures counted, answered 200", failures, 200, 0},
		{"failures counted, answered 401", failures, 401, 1},
	} {
		if got := allocs(c.status, fiberrl.New(adaptertest.Config(t, c.yaml))) - allocs(c.status); got != c.extra {
			t.Errorf("%s: %v allocations more than the handler alone, want %v", c.name, got, c.extra)
		}
	}
}
