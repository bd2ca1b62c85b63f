package benchmarks

import (
	"cmp"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	_ "time/tzdata" // Europe/Berlin, on machines without a zone database

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/ginrl"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

// featuresConfig is the example configuration (adaptertest.ExampleConfig)
// with a search limit no run reaches (2,000,000,000 per hour), the search
// rule's lines followed by rule and the file by top, YAML at their
// indentation ("" for none).
func featuresConfig(tb testing.TB, rule, top string) *core.Config {
	yaml := strings.Replace(adaptertest.ExampleConfig, `limit: "10/second"`, `limit: "2000000000/hour"`+rule, 1)
	return adaptertest.Config(tb, yaml+top)
}

// kbPath is the path of the rows keyed by a parameter: the search rule's
// path there is "/api/kb/{kb}/search" (kbConfig).
const kbPath = "/api/kb/kb-01/search"

// kbConfig is featuresConfig with the search rule on "/api/kb/{kb}/search",
// its lines followed by rule.
func kbConfig(tb testing.TB, rule string) *core.Config {
	yaml := strings.Replace(adaptertest.ExampleConfig, `paths: ["/api/search"]`, `paths: ["/api/kb/{kb}/search"]`, 1)
	yaml = strings.Replace(yaml, `limit: "10/second"`, `limit: "2000000000/hour"`+rule, 1)
	return adaptertest.Config(tb, yaml)
}

// featureLists returns the allow and ban sections of the lists row: 10,000
// banned IPv4 /24s (100.0.0.0/24 … 100.39.15.0/24) and 10,000 allowed IPv6
// /48s (2001:db8:0::/48 …), as YAML under rate_limit.
func featureLists() string {
	var ban, allow strings.Builder
	for i := range 10000 {
		if i > 0 {
			ban.WriteString(", ")
			allow.WriteString(", ")
		}
		fmt.Fprintf(&ban, `"100.%d.%d.0/24"`, i/256, i%256)
		fmt.Fprintf(&allow, `"2001:db8:%x::/48"`, i)
	}
	return "  ban:\n    networks: [" + ban.String() + "]\n  allow:\n    networks: [" + allow.String() + "]\n"
}

// statusHandler answers status with a small JSON body, as jsonHandler does
// with 200.
func statusHandler(status int) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(jsonBody)
	})
}

// A featureRow is one row of BenchmarkFeatures: a handler serving GET
// path (default /api/search) from addr (default 192.0.2.1:1234), the status and a header
// value (name: part of the value) an admitted request gets, and the row it
// is compared with; uncounted when the request is not counted (its
// RateLimit header's remaining stays the same from one request to the
// next).
type featureRow struct {
	name, base string
	path, addr string
	status     int
	header     [2]string
	uncounted  bool
	build      func(tb testing.TB) http.Handler
}

// featureRows are BenchmarkFeatures' rows; see it.
var featureRows = []featureRow{
	{name: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "", ""))(jsonHandler)
	}},
	{name: "plan", base: "baseline", status: 200, header: [2]string{"RateLimit-Policy", "q=1999999999;"}, build: func(tb testing.TB) http.Handler {
		cfg := featuresConfig(tb, "", "  tiers:\n    pro:\n      rules:\n        search: \"1999999999/hour\"\n")
		return nethttp.New(cfg, nethttp.WithPlan(func(*http.Request) string { return "pro" }))(jsonHandler)
	}},
	{name: "plan-cached", base: "plan", status: 200, header: [2]string{"RateLimit-Policy", "q=1999999999;"}, build: func(tb testing.TB) http.Handler {
		cfg := featuresConfig(tb, "", "  tiers:\n    pro:\n      rules:\n        search: \"1999999999/hour\"\n")
		lim := core.NewLimiter(cfg, core.WithLimitCache(0, 0))
		return nethttp.New(lim, nethttp.WithPlan(func(*http.Request) string { return "pro" }))(jsonHandler)
	}},
	{name: "lists", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		h := nethttp.New(featuresConfig(tb, "", featureLists()))(jsonHandler)
		// The lists apply: a banned client gets 403, an allowed one passes
		// uncounted (no rate-limit header).
		for _, c := range []struct {
			addr   string
			status int
			header bool
		}{{"100.39.15.7:1234", 403, false}, {"[2001:db8:270f::1]:1234", 200, false}, {"192.0.2.1:1234", 200, true}} {
			r := httptest.NewRequest("GET", "/api/search", nil)
			r.RemoteAddr = c.addr
			w := &sink{h: make(http.Header)}
			h.ServeHTTP(w, r)
			if w.code != c.status || (w.h.Get("RateLimit") != "") != c.header {
				tb.Fatalf("lists: %s got %d, RateLimit %q; want %d, a RateLimit header %v", c.addr, w.code, w.h.Get("RateLimit"), c.status, c.header)
			}
		}
		return h
	}},
	{name: "baseline-ipv6", addr: "[2001:db8:ffff::1]:1234", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "", ""))(jsonHandler)
	}},
	{name: "lists-ipv6", base: "baseline-ipv6", addr: "[2001:db8:ffff::1]:1234", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "", featureLists()))(jsonHandler)
	}},
	{name: "penalty", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "\n      penalty: {after: 10, within: 1m, ban: 15m}", ""))(jsonHandler)
	}},
	{name: "lease", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "\n      consistency: lease", ""))(jsonHandler)
	}},
	{name: "wait", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "\n      wait: 2s", ""))(jsonHandler)
	}},
	{name: "count-failures-200", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, uncounted: true, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "\n      count: failures", ""))(statusHandler(200))
	}},
	{name: "count-failures-401", base: "baseline", status: 401, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "\n      count: failures", ""))(statusHandler(401))
	}},
	{name: "clear-on-success-200", base: "count-failures-200", status: 200, header: [2]string{"RateLimit", `"search"`}, uncounted: true, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "\n      count: failures\n      clear_on_success: true", ""))(statusHandler(200))
	}},
	{name: "calendar", base: "baseline", status: 200, header: [2]string{"RateLimit-Policy", `"search";q=2000000000;w=`}, build: func(tb testing.TB) http.Handler {
		yaml := strings.Replace(adaptertest.ExampleConfig, `limit: "10/second"`, `limit: "2000000000/day"`+"\n      window: calendar\n      timezone: Europe/Berlin", 1)
		return nethttp.New(adaptertest.Config(tb, yaml))(jsonHandler)
	}},
	// A rule charged by response against the same rule taking the same
	// cost before the handler: the added cost of the peek, the charge and
	// the Decision the handler reports its cost through. (A cost of 100
	// under 2,000,000,000 an hour: 20,000,000 requests, more than a run
	// sends.)
	{name: "token-bucket-100", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "\n      algorithm: token_bucket\n      weights:\n        /api/search: 100", ""))(jsonHandler)
	}},
	{name: "cost-response", base: "token-bucket-100", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		report := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if !core.SetCost(r.Context(), 100) {
				panic("cost-response: the rule does not charge by response")
			}
			jsonHandler(w, r)
		})
		return nethttp.New(featuresConfig(tb, "\n      algorithm: token_bucket\n      cost: response", ""))(report)
	}},
	{name: "concurrent", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		h := nethttp.New(featuresConfig(tb, "\n      concurrent: 64", ""))(jsonHandler)
		// The slot is taken and given back: 65 requests in a row are all
		// admitted.
		r := httptest.NewRequest("GET", "/api/search", nil)
		r.RemoteAddr = "192.0.2.1:1234"
		for i := range 65 {
			w := &sink{h: make(http.Header)}
			h.ServeHTTP(w, r)
			if w.code != 200 {
				tb.Fatalf("concurrent: request %d got %d: a slot was not given back", i, w.code)
			}
		}
		return h
	}},
	{name: "denied-handler", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		denied := func(w http.ResponseWriter, r *http.Request, d *core.Decision) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(d.Status())
			fmt.Fprintf(w, `{"type": "about:blank", "status": %d}`, d.Status())
		}
		return nethttp.New(featuresConfig(tb, "", ""), nethttp.WithDeniedHandler(denied))(jsonHandler)
	}},
	{name: "decision-context", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		read := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if d, ok := nethttp.DecisionOf(r); !ok || d.Rule == nil {
				panic("decision-context: no Decision in the request's context")
			}
			jsonHandler(w, r)
		})
		return nethttp.New(core.NewLimiter(featuresConfig(tb, "", ""), core.WithDecisionContext(true)))(read)
	}},
	{name: "key-ip", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "\n      key: ip", ""))(jsonHandler)
	}},
	// A rule stacked on every request's own (one store call for both):
	// the added cost of the second take, the listing of both in the
	// headers and the Decision's record of them.
	{name: "stack", base: "baseline", status: 200, header: [2]string{"RateLimit", `, "global";r=`}, build: func(tb testing.TB) http.Handler {
		yaml := strings.Replace(adaptertest.ExampleConfig, "  rules:\n", "  rules:\n    - name: global\n      stack: true\n      paths: [\"/api/**\"]\n      limit: \"2000000000/hour\"\n", 1)
		yaml = strings.Replace(yaml, `limit: "10/second"`, `limit: "2000000000/hour"`, 1)
		return nethttp.New(adaptertest.Config(tb, yaml))(jsonHandler)
	}},
	{name: "baseline-kb", path: kbPath, status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(kbConfig(tb, ""))(jsonHandler)
	}},
	{name: "key-user-param", base: "baseline-kb", path: kbPath, status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(kbConfig(tb, "\n      key: user+param:kb"))(jsonHandler)
	}},
	{name: "baseline-again", base: "baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return nethttp.New(featuresConfig(tb, "", ""))(jsonHandler)
	}},
	{name: "gin-baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return ginFeatures(ginrl.New(featuresConfig(tb, "", "")), false)
	}},
	{name: "gin-decision-context", base: "gin-baseline", status: 200, header: [2]string{"RateLimit", `"search"`}, build: func(tb testing.TB) http.Handler {
		return ginFeatures(ginrl.New(core.NewLimiter(featuresConfig(tb, "", ""), core.WithDecisionContext(true))), true)
	}},
}

// ginFeatures serves GET /api/search with Gin behind mw, the handler
// reading the Decision back (ginrl.DecisionOf) when read is set.
func ginFeatures(mw gin.HandlerFunc, read bool) http.Handler {
	gin.SetMode(gin.ReleaseMode)
	e := gin.New()
	e.Use(mw)
	e.GET("/api/search", func(c *gin.Context) {
		if read {
			if d, ok := ginrl.DecisionOf(c); !ok || d.Rule == nil {
				panic("gin-decision-context: no Decision in the gin.Context")
			}
		}
		c.Data(http.StatusOK, "application/json", jsonBody)
	})
	return e
}

// featureServer is a row's handler with its request and writer.
type featureServer struct {
	row featureRow
	h   http.Handler
	r   *http.Request
	w   *sink
}

func newFeatureServer(tb testing.TB, row featureRow) *featureServer {
	r := httptest.NewRequest("GET", cmp.Or(row.path, "/api/search"), nil)
	r.RemoteAddr = cmp.Or(row.addr, "192.0.2.1:1234")
	s := &featureServer{row: row, h: row.build(tb), r: r, w: &sink{h: make(http.Header)}}
	s.serve()
	s.check(tb)
	first := remaining(s.w.h.Get("RateLimit"))
	s.serve()
	s.check(tb)
	if second := remaining(s.w.h.Get("RateLimit")); (first == second) != row.uncounted {
		tb.Fatalf("%s: remaining %s, then %s: want the request counted %v", row.name, first, second, !row.uncounted)
	}
	return s
}

// remaining returns the r parameter of a RateLimit header value.
func remaining(h string) string {
	_, r, _ := strings.Cut(h, ";r=")
	r, _, _ = strings.Cut(r, ";")
	return r
}

func (s *featureServer) serve() {
	clear(s.w.h)
	s.w.code = 0
	s.h.ServeHTTP(s.w, s.r)
}

// check fails tb unless the last response is the row's: its status, its
// header holding the expected text.
func (s *featureServer) check(tb testing.TB) {
	if got := s.w.h.Get(s.row.header[0]); s.w.code != s.row.status || !strings.Contains(got, s.row.header[1]) {
		tb.Fatalf("%s: status %d, %s %q; want %d and %q in it", s.row.name, s.w.code, s.row.header[0], got, s.row.status, s.row.header[1])
	}
}

// BenchmarkFeatures measures what the customer features cost an admitted
// request through nethttp: GET /api/search from one client IP
// (192.0.2.1), the example configuration with a search limit no run
// reaches (2,000,000,000 per hour), the default memory store, a writer
// that keeps nothing (its header map cleared each time), a handler
// writing a small JSON body.
//
//   - baseline: that configuration and nethttp.New(cfg).
//   - plan: a tiers section whose plan pro gives search 1,999,999,999
//     per hour, and nethttp.WithPlan resolving every request to pro
//     (the pro variant of the rule, its own counter).
//   - plan-cached: plan with core.WithLimitCache(0, 0), compared with
//     it: the caller's plan found in the cache (a hash, a lock, a map
//     lookup) instead of the resolver called, which here costs nothing
//     (an application's resolver that queries a database costs more).
//   - lists: 10,000 banned IPv4 /24s and 10,000 allowed IPv6 /48s, the
//     client in none of them (both lists looked up, then counted).
//   - baseline-ipv6, lists-ipv6: the baseline and lists with an IPv6
//     client (2001:db8:ffff::1), in none of the lists either.
//   - penalty: the search rule with penalty {after: 10, within: 1m, ban:
//     15m}: one more store call, the ban's check.
//   - wait: the search rule with wait: 2s, every request admitted at
//     once (nothing held: one atomic load more than the baseline).
//   - count-failures-200: the search rule with count: failures, the
//     handler answering 200: a Peek before the handler, the status
//     recorded, nothing counted.
//   - count-failures-401: the same, the handler answering 401: the Peek,
//     then a Take once it has answered.
//   - clear-on-success-200: count-failures-200 with clear_on_success:
//     true, compared with it: the Reset of the caller's failures once the
//     handler has answered.
//   - calendar: the search rule with window: calendar, timezone:
//     Europe/Berlin and 2,000,000,000 per calendar day: the period kept
//     per policy (no time-zone arithmetic within it), and the
//     RateLimit-Policy value of the period.
//   - concurrent: the search rule with concurrent: 64 beside its limit:
//     a slot of the memory store taken before the limit's count and
//     given back by Complete once the handler has answered (the
//     request's status recorded, its Decision holding the slot).
//   - denied-handler: nethttp.WithDeniedHandler with a problem+json
//     body, on an admitted request (it should cost nothing).
//   - decision-context: core.WithDecisionContext(true), the handler
//     reading the Decision back (nethttp.DecisionOf).
//   - key-ip: the search rule with key: ip, counted under "ip:192.0.2.1"
//     (the baseline, without a key function, counts under "192.0.2.1").
//   - baseline-kb: the baseline with the search rule on
//     "/api/kb/{kb}/search", GET /api/kb/kb-01/search.
//   - key-user-param: that rule with key: user+param:kb, counted under
//     "ip:192.0.2.1|p:kb-01" (no key function: the user part is the
//     client IP): the parameter read from the path and the key built.
//   - baseline-again: the baseline's middleware built a second time, the
//     same in every way: what it "adds" is what the method cannot tell
//     from nothing.
//   - gin-baseline, gin-decision-context: the baseline and
//     decision-context through a Gin engine and ginrl (Gin's Keys map is
//     made too).
//
// Every row is a separate benchmark (time, B/op, allocs/op); interleaved
// serves the rows in blocks of 256 requests each, every row once per
// round in an order shuffled each round (so that no row always follows
// the same one, whose traces in the caches it would pay for), timed block
// by block, one op being one request of each row, and reports what each
// row adds to its baseline (<row>-added-ns: its time per request minus
// its baseline's), measured microseconds apart so that the load of a
// shared machine weighs on both alike.
func BenchmarkFeatures(b *testing.B) {
	for _, row := range featureRows {
		b.Run(row.name, func(b *testing.B) {
			s := newFeatureServer(b, row)
			settle()
			b.ReportAllocs()
			for b.Loop() {
				s.serve()
			}
			s.check(b)
		})
	}
	b.Run("interleaved", func(b *testing.B) {
		servers := make([]*featureServer, len(featureRows))
		index := map[string]int{}
		for i, row := range featureRows {
			servers[i] = newFeatureServer(b, row)
			index[row.name] = i
		}
		serve := make([]func(), len(servers))
		for i, s := range servers {
			serve[i] = s.serve
		}
		spent, n := interleave(b, serve)
		for i, s := range servers {
			s.check(b)
			if s.row.base != "" {
				b.ReportMetric(float64(spent[i]-spent[index[s.row.base]])/float64(n), s.row.name+"-added-ns")
			}
		}
	})
}
