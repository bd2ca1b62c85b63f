package ginrl_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/ginrl"
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
// counted is the one the client gets (Gin's c.Writer.Status() once the
// handlers ran), however the handler sets it.
func TestCountByOutcomeStatus(t *testing.T) {
	for _, c := range []struct {
		name    string
		h       gin.HandlerFunc
		status  int
		counted bool
	}{
		{"nothing written", func(*gin.Context) {}, 200, false},
		{"201", func(c *gin.Context) { c.Status(201) }, 201, false},
		{"401", func(c *gin.Context) { c.String(401, "no") }, 401, true},
		{"aborted with 403", func(c *gin.Context) { c.AbortWithStatus(403) }, 403, true},
		{"an error, 500", func(c *gin.Context) { _ = c.AbortWithError(500, errors.New("boom")) }, 500, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			var events []core.Event
			r := gin.New()
			r.Use(ginrl.New(core.NewLimiter(adaptertest.Config(t, loginYAML), core.WithObserver(func(ev core.Event) { events = append(events, ev) }))))
			r.POST("/login", c.h)
			rec := httptest.NewRecorder()
			r.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/login", nil))
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
// ordinary path, whether or not the configuration has rules counted by
// outcome; under such a rule one more when the status counts (the
// context of the count).
func TestCountByOutcomeAllocs(t *testing.T) {
	if adaptertest.Race {
		t.Skip("allocations are not exact under the race detector")
	}
	bench := strings.Replace(adaptertest.ExampleConfig, `limit: "10/second"`, `limit: "2000000000/hour"`, 1)
	failures := strings.Replace(bench, `limit: "2000000000/hour"`, `limit: "2000000000/hour"
      count: failures`, 1)
	allocs := func(status int, mw ...gin.HandlerFunc) float64 {
		e := gin.New()
		e.Use(mw...)
		e.GET("/api/search", func(c *gin.Context) { c.Data(status, "application/json", okBody) })
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
		if got := allocs(c.status, ginrl.New(adaptertest.Config(t, c.yaml))) - allocs(c.status); got != c.extra {
			t.Errorf("%s: %v allocations more than the handler alone, want %v", c.name, got, c.extra)
		}
	}
}
