package echorl_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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
			e.Use(echorl.New(core.NewLimiter(adaptertest.Config(t, loginYAML), core.WithObserver(func(ev core.Event) { events = append(events, ev) }))))
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

// TestCountByOutcomeAllocs pins the allocations per request of the
// middleware over a JSON handler, beside the handler alone: one on the
// ordinary path (the RateLimit value; the handler the middleware puts in
// front of the route's is built once), whether or not the configuration
// has rules counted by outcome; under such a rule one more when the status
// counts (the context of the count).
func TestCountByOutcomeAllocs(t *testing.T) {
	if adaptertest.Race {
		t.Skip("allocations are not exact under the race detector")
	}
	bench := strings.Replace(adaptertest.ExampleConfig, `limit: "10/second"`, `limit: "2000000000/hour"`, 1)
	failures := strings.Replace(bench, `limit: "2000000000/hour"`, `limit: "2000000000/hour"
      count: failures`, 1)
	allocs := func(status int, mw ...echo.MiddlewareFunc) float64 {
		e := echo.New()
		e.Use(mw...)
		e.GET("/api/search", func(c echo.Context) error { return c.JSONBlob(status, okBody) })
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		return testing.AllocsPerRun(200, func() {
			clear(w.h)
			e.ServeHTTP(w, r)
		})
	}
	for _, c := range []struct {
		name   string
		yaml   string
		status int
		extra  float64
	}{
		{"every request counted", bench, 200, 1},
		{"every request counted, answered 401", bench, 401, 1},
		{"failures counted, answered 200", failures, 200, 1},
		{"failures counted, answered 401", failures, 401, 2},
	} {
		if got := allocs(c.status, echorl.New(adaptertest.Config(t, c.yaml))) - allocs(c.status); got != c.extra {
			t.Errorf("%s: %v allocations more than the handler alone, want %v", c.name, got, c.extra)
		}
	}
}
