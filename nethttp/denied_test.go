package nethttp_test

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

// exampleAt returns the example configuration and a memory store whose
// clock stands at the start of a minute (reindex: two requests a minute).
func exampleAt(t *testing.T) (*core.Config, core.Option) {
	mem := memstore.New(memstore.WithClock(store.NewManualClock(time.Unix(1_700_000_040, 0))))
	t.Cleanup(func() { _ = mem.Close() })
	return adaptertest.Config(t, adaptertest.ExampleConfig), core.WithStore(mem)
}

// TestDeniedHandler: the handler gets the Decision, finds the rate-limit
// headers and Retry-After already set, and may change them; the handler
// behind the middleware does not run.
func TestDeniedHandler(t *testing.T) {
	var got *core.Decision
	var seen http.Header
	cfg, at := exampleAt(t)
	mw := nethttp.New(core.NewLimiter(cfg, at), nethttp.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d *core.Decision) {
		got, seen = d, w.Header().Clone()
		w.Header().Del("Retry-After")
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusTeapot)
		_, _ = w.Write([]byte("slow down"))
	}))
	served := 0
	h := mw(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served++ }))
	for range 2 {
		if w := adaptertest.Serve(h, "GET", "/api/kb/a/reindex"); w.Code != http.StatusOK || got != nil {
			t.Fatalf("allowed: status %d, denied handler called: %v", w.Code, got != nil)
		}
	}
	w := adaptertest.Serve(h, "GET", "/api/kb/a/reindex")
	if served != 2 {
		t.Errorf("handler ran %d times, want 2", served)
	}
	if got == nil || got.Allowed || got.Status() != http.StatusTooManyRequests || got.Rule.Name != "reindex" || got.Result.Remaining != 0 {
		t.Fatalf("denied handler got %+v, want reindex's 429", got)
	}
	if seen.Get("Retry-After") != "60" || seen.Get("Ratelimit") != `"reindex";r=0;t=60` || seen.Get("Ratelimit-Policy") != `"reindex";q=2;w=60` || len(seen) != 3 {
		t.Errorf("headers before the denied handler: %v, want the rate-limit headers and Retry-After: 60", seen)
	}
	if w.Code != http.StatusTeapot || w.Body.String() != "slow down" || w.Header().Get("Content-Type") != "text/plain" ||
		w.Header().Values("Retry-After") != nil || w.Header().Get("Ratelimit") == "" {
		t.Errorf("response: %d %v %q, want the handler's", w.Code, w.Header(), w.Body)
	}
}

// TestDecisionOf: the handler finds its request's Decision only
// core.WithDecisionContext(true).
func TestDecisionOf(t *testing.T) {
	for _, on := range []bool{false, true} {
		var got *core.Decision
		var found bool
		cfg, at := exampleAt(t)
		h := nethttp.New(core.NewLimiter(cfg, core.WithDecisionContext(on), at))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			got, found = nethttp.DecisionOf(r)
		}))
		adaptertest.Serve(h, "GET", "/api/search")
		if found != on || (got != nil) != on {
			t.Fatalf("WithDecisionContext(%v): DecisionOf = %v, %v", on, got, found)
		}
		if on && (got.Rule.Name != "search" || got.Result.Remaining != 9 || !got.Allowed) {
			t.Errorf("DecisionOf = %+v, want search with 9 remaining", got)
		}
	}
	if d, ok := nethttp.DecisionOf(httptest.NewRequest("GET", "/", nil)); d != nil || ok {
		t.Errorf("DecisionOf a request the middleware never saw = %v, %v", d, ok)
	}
}

// TestAllocs pins what the middleware allocates per request: the default
// (and a denied handler, which an allowed request never reaches) as much
// as before these options (the RateLimit value; a denial adds
// Retry-After), core.WithDecisionContext(true) three more (the Decision, the
// context, the request's copy).
func TestAllocs(t *testing.T) {
	denied := nethttp.WithDeniedHandler(func(w http.ResponseWriter, _ *http.Request, _ *core.Decision) { w.WriteHeader(429) })
	tests := []struct {
		name string
		path string
		lim  []core.Option
		opts []nethttp.Option
		want float64
	}{
		{"default", "/api/search", nil, nil, 1},
		{"WithDecisionContext(false)", "/api/search", []core.Option{core.WithDecisionContext(false)}, nil, 1},
		{"WithDeniedHandler", "/api/search", nil, []nethttp.Option{denied}, 1},
		{"core.WithDecisionContext(true)", "/api/search", []core.Option{core.WithDecisionContext(true)}, nil, 4},
		{"denied", "/api/kb/a/reindex", nil, nil, 2},
		{"denied WithDeniedHandler", "/api/kb/a/reindex", nil, []nethttp.Option{denied}, 3}, // the Decision's copy
	}
	for _, tt := range tests {
		_, at := exampleAt(t) // Retry-After 60, never the shared "1"
		h := nethttp.New(core.NewLimiter(adaptertest.BenchConfig(t), append(tt.lim, at)...), tt.opts...)(emptyHandler)
		r := httptest.NewRequest("GET", tt.path, nil)
		r.RemoteAddr = "192.0.2.1:1234"
		w := &discardWriter{h: make(http.Header)}
		for range 3 { // reindex is spent
			clear(w.h)
			h.ServeHTTP(w, r)
		}
		n := testing.AllocsPerRun(100, func() {
			clear(w.h)
			h.ServeHTTP(w, r)
		})
		if n != tt.want {
			t.Errorf("%s: %v allocations per request, want %v", tt.name, n, tt.want)
		}
	}
}
