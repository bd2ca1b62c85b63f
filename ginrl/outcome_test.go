package ginrl_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
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
			r.Use(ginrl.New(adaptertest.Config(t, loginYAML), ginrl.WithObserver(func(ev core.Event) { events = append(events, ev) })))
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
