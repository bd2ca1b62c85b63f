package benchmarks

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/didip/tollbooth/v7"
	tollboothlimiter "github.com/didip/tollbooth/v7/limiter"
	"github.com/sethvargo/go-limiter/httplimit"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululestdlib "github.com/ulule/limiter/v3/drivers/middleware/stdlib"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/nethttp"
)

var jsonBody = []byte(`{"ok": true}`)

// jsonHandler is what an API endpoint minimally does: set Content-Type and
// write a small JSON body.
var jsonHandler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(200)
	_, _ = w.Write(jsonBody)
})

// rlkitConfig is the configuration of every rlkit adapter here: one rule for
// /api/search with quota q (fixed window), limiting on, the client IP as the
// key.
func rlkitConfig(tb testing.TB, q quota) *core.Config {
	cfg, err := core.NewConfig(core.Spec{
		Enabled: true,
		Rules:   []core.RuleSpec{{Name: "search", Paths: []string{"/api/search"}, Limit: []string{algo.Limit{Count: q.Count, Period: q.Period}.String()}}},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// An httpImpl is one net/http rate-limit middleware with quota q, keyed by
// the client IP (r.RemoteAddr: no proxy headers trusted), on a fresh store.
// header is a rate-limit header it writes on an allowed request, checked
// after the benchmark loop ("" for bare).
type httpImpl struct {
	name   string
	header string
	build  func(tb testing.TB, q quota) func(http.Handler) http.Handler
}

var httpImpls = []httpImpl{
	{
		name:   "rlkit-nethttp",
		header: "RateLimit",
		build: func(tb testing.TB, q quota) func(http.Handler) http.Handler {
			return nethttp.New(rlkitConfig(tb, q))
		},
	},
	{
		name:   "sethvargo-httplimit",
		header: "X-RateLimit-Limit",
		build: func(tb testing.TB, q quota) func(http.Handler) http.Handler {
			store, err := memorystore.New(&memorystore.Config{Tokens: uint64(q.Count), Interval: q.Period})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = store.Close(tb.Context()) })
			mw, err := httplimit.NewMiddleware(store, httplimit.IPKeyFunc())
			if err != nil {
				tb.Fatal(err)
			}
			return mw.Handle
		},
	},
	{
		name:   "ulule-stdlib",
		header: "X-RateLimit-Limit",
		build: func(tb testing.TB, q quota) func(http.Handler) http.Handler {
			lim := ulule.New(ululemem.NewStore(), ulule.Rate{Period: q.Period, Limit: q.Count})
			return ululestdlib.NewMiddleware(lim).Handler
		},
	},
	{
		name:   "throttled-http",
		header: "X-RateLimit-Limit",
		build: func(tb testing.TB, q quota) func(http.Handler) http.Handler {
			st, err := throttledmem.NewCtx(maxKeys)
			if err != nil {
				tb.Fatal(err)
			}
			rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
				MaxRate:  throttled.PerDuration(int(q.Count), q.Period),
				MaxBurst: int(q.Count) - 1,
			})
			if err != nil {
				tb.Fatal(err)
			}
			mw := &throttled.HTTPRateLimiterCtx{RateLimiter: rl, VaryBy: &throttled.VaryBy{RemoteAddr: true}}
			return mw.RateLimit
		},
	},
	{
		name:   "tollbooth",
		header: "RateLimit-Limit",
		build: func(tb testing.TB, q quota) func(http.Handler) http.Handler {
			lmt := tollbooth.NewLimiter(q.perSecond(), &tollboothlimiter.ExpirableOptions{DefaultExpirationTTL: time.Hour})
			lmt.SetBurst(int(q.Count))
			lmt.SetIPLookups([]string{"RemoteAddr"}) // its default trusts X-Forwarded-For first
			return func(h http.Handler) http.Handler { return tollbooth.LimitHandler(lmt, h) }
		},
	},
}

// BenchmarkNetHTTP measures net/http rate-limit middleware on an allowed
// request through an httptest.ResponseRecorder, one client IP, quota
// unreached (2,000,000,000 per hour), every middleware writing its
// rate-limit headers:
//
//   - bare: the handler alone (the baseline);
//   - rlkit-nethttp: nethttp.New with one rule on the default memory store,
//     client-IP key, RateLimit-Policy and RateLimit written;
//   - sethvargo-httplimit: httplimit.NewMiddleware over memorystore with
//     httplimit.IPKeyFunc(), X-RateLimit-* written;
//   - ulule-stdlib: ulule/limiter's stdlib middleware over its memory store,
//     X-RateLimit-* written;
//   - throttled-http: throttled's HTTPRateLimiterCtx (GCRA, memstore),
//     varying by RemoteAddr, X-RateLimit-* written;
//   - tollbooth: tollbooth.LimitHandler, IP from RemoteAddr only,
//     X-Rate-Limit-* and RateLimit-* written.
//
// A middleware's cost is its row minus bare.
func BenchmarkNetHTTP(b *testing.B) {
	run := func(b *testing.B, h http.Handler, header string) {
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		b.ReportAllocs()
		for b.Loop() {
			h.ServeHTTP(httptest.NewRecorder(), r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d: the limit was reached", w.Code)
		}
		if header != "" && w.Header().Get(header) == "" {
			b.Fatalf("no %s header: the row must write its rate-limit headers", header)
		}
	}
	b.Run("bare", func(b *testing.B) { run(b, jsonHandler, "") })
	for _, im := range httpImpls {
		b.Run(im.name, func(b *testing.B) { run(b, im.build(b, unreached)(jsonHandler), im.header) })
	}
}
