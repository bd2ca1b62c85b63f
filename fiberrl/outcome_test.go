package fiberrl_test

import (
	"errors"
	"fmt"
	"net/http/httptest"
	"testing"

	"github.com/gofiber/fiber/v2"

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
			app.Use(fiberrl.New(adaptertest.Config(t, loginYAML), fiberrl.WithObserver(func(ev core.Event) { events = append(events, ev) })))
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
