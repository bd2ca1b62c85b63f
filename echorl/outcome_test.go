package echorl_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/echorl"
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
// error that Echo's default error handler answers: an *echo.HTTPError's
// code (the code of one it holds as Internal), 500 for any other error
// (a wrapped *echo.HTTPError too: Echo does not unwrap), and the status
// already written when the response is committed. The codes cross 400,
// so that each one tells.
func TestCountByOutcomeStatus(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       echo.HandlerFunc
		status  int
		counted bool
	}{
		{"nothing written", func(echo.Context) error { return nil }, 200, false},
		{"204", func(c echo.Context) error { return c.NoContent(204) }, 204, false},
		{"401", func(c echo.Context) error { return c.String(401, "no") }, 401, true},
		{"HTTPError 401", func(echo.Context) error { return echo.ErrUnauthorized }, 401, true},
		{"HTTPError 400 holding a 302", func(echo.Context) error {
			return echo.NewHTTPError(400).SetInternal(echo.NewHTTPError(302))
		}, 302, false},
		{"HTTPError 302", func(echo.Context) error { return echo.NewHTTPError(302) }, 302, false},
		{"a wrapped HTTPError 302", func(echo.Context) error { return fmt.Errorf("login: %w", echo.NewHTTPError(302)) }, 500, true},
		{"another error", func(echo.Context) error { return errors.New("boom") }, 500, true},
		{"committed 200, then an error", func(c echo.Context) error {
			_ = c.String(200, "ok")
			return errors.New("late")
		}, 200, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			var events []core.Event
			e := echo.New()
			e.Use(echorl.New(adaptertest.Config(t, loginYAML), echorl.WithObserver(func(ev core.Event) { events = append(events, ev) })))
			e.POST("/login", c.h)
			rec := httptest.NewRecorder()
			e.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
			if rec.Code != c.status {
				t.Fatalf("status %d, want %d", rec.Code, c.status)
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
