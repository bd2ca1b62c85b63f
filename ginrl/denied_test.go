package ginrl_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/ginrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// exampleAt returns a memory store whose clock stands at the start of a
// minute, for the example configuration (reindex: two requests a minute).
func exampleAt(t *testing.T) core.Option {
	mem := memstore.New(memstore.WithClock(store.NewManualClock(time.Unix(1_700_000_040, 0))))
	t.Cleanup(func() { _ = mem.Close() })
	return core.WithStore(mem)
}

// TestDeniedHandler: the handler gets the Decision with the rate-limit
// headers and Retry-After already set, and the chain is aborted after it.
func TestDeniedHandler(t *testing.T) {
	var got *core.Decision
	var seen http.Header
	r := gin.New()
	r.Use(ginrl.New(core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), exampleAt(t)), ginrl.WithDeniedHandler(func(c *gin.Context, d *core.Decision) {
		got, seen = d, c.Writer.Header().Clone()
		c.String(http.StatusTooManyRequests, "slow down")
	})))
	served := 0
	r.GET("/api/kb/:id/reindex", func(c *gin.Context) { served++ })
	for range 3 {
		adaptertest.Serve(r, "GET", "/api/kb/a/reindex")
	}
	w := adaptertest.Serve(r, "GET", "/api/kb/a/reindex")
	if served != 2 {
		t.Errorf("handler ran %d times, want 2", served)
	}
	if got == nil || got.Status() != http.StatusTooManyRequests || got.Rule.Name != "reindex" {
		t.Fatalf("denied handler got %+v, want reindex's 429", got)
	}
	if seen.Get("Retry-After") != "60" || seen.Get("Ratelimit") != `"reindex";r=0;t=60` || len(seen) != 3 {
		t.Errorf("headers before the denied handler: %v, want the rate-limit headers and Retry-After: 60", seen)
	}
	if w.Code != http.StatusTooManyRequests || w.Body.String() != "slow down" || w.Header().Get("Retry-After") != "60" {
		t.Errorf("response: %d %v %q, want the handler's", w.Code, w.Header(), w.Body)
	}
}

// TestDecisionOf: the handler finds its request's Decision, the same in
// c (DecisionOf, c.Get(DecisionKey)) and in the request's context, only
// core.WithDecisionContext(true).
func TestDecisionOf(t *testing.T) {
	for _, on := range []bool{false, true} {
		var got, inReq, inKeys *core.Decision
		var found bool
		r := gin.New()
		r.Use(ginrl.New(core.NewLimiter(adaptertest.Config(t, adaptertest.ExampleConfig), core.WithDecisionContext(on), exampleAt(t))))
		r.GET("/api/search", func(c *gin.Context) {
			got, found = ginrl.DecisionOf(c)
			inReq, _ = core.FromContext(c.Request.Context())
			v, _ := c.Get(ginrl.DecisionKey)
			inKeys, _ = v.(*core.Decision)
		})
		adaptertest.Serve(r, "GET", "/api/search")
		if found != on || (got != nil) != on || inReq != got || inKeys != got {
			t.Fatalf("WithDecisionContext(%v): DecisionOf = %p, %v; request context %p; c.Get %p", on, got, found, inReq, inKeys)
		}
		if on && (got.Rule.Name != "search" || got.Result.Remaining != 9) {
			t.Errorf("DecisionOf = %+v, want search with 9 remaining", got)
		}
	}
}

// TestAllocs pins what the middleware adds to Gin's own allocations per
// request: by default (and with a denied handler, which an allowed request
// never reaches) one, the RateLimit value, as before these options;
// core.WithDecisionContext(true) five more (the Decision, Gin's Keys map, the
// context, the request's copy).
func TestAllocs(t *testing.T) {
	if adaptertest.Race {
		t.Skip("the race detector makes Gin's context pool drop contexts")
	}
	denied := ginrl.WithDeniedHandler(func(c *gin.Context, _ *core.Decision) { c.Status(429) })
	allocs := func(mw ...gin.HandlerFunc) float64 {
		e := gin.New()
		e.Use(mw...)
		e.GET("/api/search", func(c *gin.Context) { c.Data(http.StatusOK, "application/json", okBody) })
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		e.ServeHTTP(w, r)
		return testing.AllocsPerRun(100, func() {
			clear(w.h)
			e.ServeHTTP(w, r)
		})
	}
	bare := allocs()
	for _, tt := range []struct {
		name string
		lim  []core.Option
		opts []ginrl.Option
		want float64
	}{
		{"default", nil, nil, 1},
		{"WithDecisionContext(false)", []core.Option{core.WithDecisionContext(false)}, nil, 1},
		{"WithDeniedHandler", nil, []ginrl.Option{denied}, 1},
		{"core.WithDecisionContext(true)", []core.Option{core.WithDecisionContext(true)}, nil, 6},
	} {
		if n := allocs(ginrl.New(core.NewLimiter(adaptertest.BenchConfig(t), tt.lim...), tt.opts...)) - bare; n != tt.want {
			t.Errorf("%s: %v allocations more than Gin's own, want %v", tt.name, n, tt.want)
		}
	}
}
