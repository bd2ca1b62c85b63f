package adaptertest

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/clientip"
)

// Request helpers.

func do(method, path string, header ...string) req { return req{method, path, header} }

func get(path string, header ...string) req { return do(http.MethodGet, path, header...) }

var (
	alice      = []string{UserHeader, "alice"}
	bob        = []string{UserHeader, "bob"}
	bad        = []string{UserHeader, BadUser}
	superAdmin = []string{RoleHeader, SuperAdmin}
)

func with(h ...[]string) []string { return slices.Concat(h...) }

// Response helpers.

const jsonType = "application/json"

func ok(rl ...string) want {
	return want{http.StatusOK, headers(rl, hType, jsonType, hLength, strconv.Itoa(len(OKBody))), OKBody}
}

func limited(rule, retryAfter string, rl ...string) want {
	body := `{"detail": "Rate limit exceeded for '` + rule + `' requests"}`
	return want{http.StatusTooManyRequests, headers(rl, hRetry, retryAfter, hType, jsonType, hLength, strconv.Itoa(len(body))), body}
}

func headOK(rl ...string) want { w := ok(rl...); w.body = ""; return w }

func headLimited(rule, retryAfter string, rl ...string) want {
	w := limited(rule, retryAfter, rl...)
	w.body = ""
	return w
}

func unavailable() want {
	const body = `{"detail": "Rate limiter unavailable"}`
	return want{http.StatusServiceUnavailable, headers(nil, hRetry, "1", hType, jsonType, hLength, strconv.Itoa(len(body))), body}
}

func unauthorized() want {
	const body = `{"detail": "Unauthorized"}`
	return want{http.StatusUnauthorized, headers(nil, hType, jsonType, hLength, strconv.Itoa(len(body))), body}
}

func headers(pairs []string, more ...string) map[string]string {
	h := map[string]string{}
	for _, p := range [][]string{pairs, more} {
		for i := 0; i+1 < len(p); i += 2 {
			h[p[i]] = p[i+1]
		}
	}
	return h
}

// draft is the draft headers of a one-limit rule.
func draft(rule string, q, w, r, t int) []string {
	return []string{
		hPolicy, fmt.Sprintf(`"%s";q=%d;w=%d`, rule, q, w),
		hRateLimit, fmt.Sprintf(`"%s";r=%d;t=%d`, rule, r, t),
	}
}

// legacy is the X-RateLimit-* headers.
func legacy(limit, remaining, reset int) []string {
	return []string{hLimit, strconv.Itoa(limit), hRemaining, strconv.Itoa(remaining), hReset, strconv.Itoa(reset)}
}

// Step helpers.

func hit(r req, w want, take string) step { return step{req: r, want: w, take: take} }

func advance(d time.Duration) step { return step{adv: d} }

// swapped is the line a configuration swapped in logs.
const swapped = "INFO rlkit: rate-limit config swapped in (kept and new_terms rules keep their counts; afresh and added rules start from zero)"

// shadowDenied marks the last store call of s as a shadow rule's denial.
func shadowDenied(s step) step { s.shadowDenied = true; return s }

// swap swaps the configuration in yaml in (a case with limiter set).
func swap(yaml string) step { return step{swap: yaml} }

// times repeats a step n times; f gets the repetition's index.
func times(n int, f func(i int) step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = f(i)
	}
	return out
}

// seq flattens steps and slices of steps.
func seq(parts ...any) []step {
	var out []step
	for _, p := range parts {
		switch p := p.(type) {
		case step:
			out = append(out, p)
		case []step:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("seq: %T", p))
		}
	}
	return out
}

func ptr[T any](v T) *T { return &v }

// cases is the table. Identities: "X-User:<name>" for X-User (HeaderKey's
// form), "127.0.0.1" for anonymous requests over loopback.
func cases() []testCase {
	const searchAlice = "X-User:alice search 1"
	return []testCase{
		{
			name: "FirstMatch",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: write
      methods: [POST, PUT]
      paths: ["/api/items/*"]
      limit: "5/minute"
    - name: items
      paths: ["/api/items/*"]
      limit: "20/minute"
    - name: kb
      paths: ["/api/kb/*/reindex"]
      limit: "2/minute"
    - name: special
      paths: ["/api/docs/special"]
      limit: "3/minute"
    - name: docs
      paths: ["/api/docs/*"]
      limit: "4/minute"
  default: "120/minute"
`,
			steps: seq(
				// A method-restricted rule comes first for its methods only.
				hit(do("POST", "/api/items/1", alice...), ok(draft("write", 5, 60, 4, 60)...), "X-User:alice write 1"),
				hit(get("/api/items/1", alice...), ok(draft("items", 20, 60, 19, 60)...), "X-User:alice items 1"),
				hit(do("PUT", "/api/items/2", alice...), ok(draft("write", 5, 60, 3, 60)...), "X-User:alice write 1"),
				hit(do("DELETE", "/api/items/2", alice...), ok(draft("items", 20, 60, 18, 60)...), "X-User:alice items 1"),
				// A wildcard: one count for every kb. (A literal rule after it,
				// "/api/kb/pinned/reindex", would never apply: the config
				// refuses it, see core's TestConfigShadowedPaths.)
				hit(get("/api/kb/pinned/reindex", alice...), ok(draft("kb", 2, 60, 1, 60)...), "X-User:alice kb 1"),
				hit(get("/api/kb/other/reindex", alice...), ok(draft("kb", 2, 60, 0, 60)...), "X-User:alice kb 1"),
				// A literal before a wildcard wins for its path only.
				hit(get("/api/docs/special", alice...), ok(draft("special", 3, 60, 2, 60)...), "X-User:alice special 1"),
				hit(get("/api/docs/other", alice...), ok(draft("docs", 4, 60, 3, 60)...), "X-User:alice docs 1"),
				hit(get("/api/elsewhere", alice...), ok(draft("default", 120, 60, 119, 60)...), "X-User:alice default 1"),
			),
		},
		{
			name:   "Wildcards",
			config: ExampleConfig,
			steps: seq(
				hit(get("/api/kb/kb-01/reindex", alice...), ok(draft("reindex", 2, 60, 1, 60)...), "X-User:alice reindex 1"),
				hit(get("/api/kb/kb-01/docs/d-9/reindex", alice...), ok(draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				// '*' is one segment: not two, not none, not an empty one.
				hit(get("/api/kb/a/b/reindex", alice...), ok(draft("default", 120, 60, 119, 60)...), "X-User:alice default 1"),
				hit(get("/api/kb/reindex", alice...), ok(draft("default", 120, 60, 118, 60)...), "X-User:alice default 1"),
				hit(get("/api/kb//reindex", alice...), ok(draft("default", 120, 60, 117, 60)...), "X-User:alice default 1"),
				// Spellings of a reindex path count against reindex (spent).
				hit(get("/api/kb/kb-02/reindex/", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				hit(get("/api/kb/kb-01//reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				hit(get("/api/kb/a%2Fb/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				hit(get("/api/kb/x/../kb-03/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				// Escapes and dot segments: the path rules see is the one
				// the handler serves.
				hit(get("/api/s%65arch", alice...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
				hit(get("/api/./search", alice...), ok(draft("search", 10, 1, 8, 1)...), searchAlice),
				hit(get("/mcp/", alice...), ok(draft("mcp", 300, 60, 299, 60)...), "X-User:alice mcp 1"),
				hit(get("/mcp/x", alice...), ok(draft("default", 120, 60, 116, 60)...), "X-User:alice default 1"),
				// The query is no part of the path; paths are case-sensitive.
				hit(get("/api/search?q=a/b&r=%2F", alice...), ok(draft("search", 10, 1, 7, 1)...), searchAlice),
				hit(get("/mcp?x", alice...), ok(draft("mcp", 300, 60, 298, 60)...), "X-User:alice mcp 1"),
				hit(get("/API/search", alice...), ok(draft("default", 120, 60, 115, 60)...), "X-User:alice default 1"),
			),
		},
		{
			name:   "Weights",
			config: ExampleConfig,
			steps: seq(
				hit(do("POST", "/api/kb/kb-01/docs/upload", alice...), ok(draft("upload", 30, 60, 29, 60)...), "X-User:alice upload 1"),
				hit(do("POST", "/api/kb/kb-01/docs/upload/batch", alice...), ok(draft("upload", 30, 60, 19, 60)...), "X-User:alice upload 10"),
				hit(do("POST", "/api/kb/kb-02/docs/upload/batch", alice...), ok(draft("upload", 30, 60, 9, 60)...), "X-User:alice upload 10"),
				// 9 left: a batch (10) is denied and consumes nothing.
				hit(do("POST", "/api/kb/kb-01/docs/upload/batch", alice...), limited("upload", "60", draft("upload", 30, 60, 9, 60)...), "X-User:alice upload 10"),
				hit(do("POST", "/api/kb/kb-02/docs/upload", alice...), ok(draft("upload", 30, 60, 8, 60)...), "X-User:alice upload 1"),
				advance(20*time.Second),
				hit(do("POST", "/api/kb/kb-01/docs/upload/batch", alice...), limited("upload", "40", draft("upload", 30, 60, 8, 40)...), "X-User:alice upload 10"),
				advance(40*time.Second),
				hit(do("POST", "/api/kb/kb-01/docs/upload/batch", alice...), ok(draft("upload", 30, 60, 20, 60)...), "X-User:alice upload 10"),
				hit(do("POST", "/api/kb/kb-02/docs/upload/batch", alice...), ok(draft("upload", 30, 60, 10, 60)...), "X-User:alice upload 10"),
				hit(do("POST", "/api/kb/kb-03/docs/upload/batch", alice...), ok(draft("upload", 30, 60, 0, 60)...), "X-User:alice upload 10"),
				// Batches spent the rule: a single upload is denied too.
				hit(do("POST", "/api/kb/kb-04/docs/upload", alice...), limited("upload", "60", draft("upload", 30, 60, 0, 60)...), "X-User:alice upload 1"),
			),
		},
		{
			name: "Default",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
  default: ["5/second", "100/minute"]
`,
			steps: seq(
				times(5, func(i int) step {
					return hit(get("/api/other/"+strconv.Itoa(i)), ok(
						hPolicy, `"default-1s";q=5;w=1, "default-1m";q=100;w=60`,
						hRateLimit, fmt.Sprintf(`"default-1s";r=%d;t=1, "default-1m";r=%d;t=60`, 4-i, 99-i),
					), "127.0.0.1 default 1")
				}),
				hit(get("/"), limited("default", "1",
					hPolicy, `"default-1s";q=5;w=1, "default-1m";q=100;w=60`,
					hRateLimit, `"default-1s";r=0;t=1, "default-1m";r=95;t=60`,
				), "127.0.0.1 default 1"),
				// A rule's own counter is untouched by the default's.
				hit(get("/api/search"), ok(draft("search", 10, 1, 9, 1)...), "127.0.0.1 search 1"),
				advance(time.Second),
				hit(get("/x"), ok(
					hPolicy, `"default-1s";q=5;w=1, "default-1m";q=100;w=60`,
					hRateLimit, `"default-1s";r=4;t=1, "default-1m";r=94;t=59`,
				), "127.0.0.1 default 1"),
			),
		},
		{
			name:   "ExemptPaths",
			config: ExampleConfig,
			steps: seq(
				// Exempt paths touch no counter and never ask for the
				// identity: even a failing key function passes.
				hit(get("/health", bad...), ok(), ""),
				hit(get("/ready", alice...), ok(), ""),
				hit(get("/docs"), ok(), ""),
				hit(get("/redoc"), ok(), ""),
				hit(get("/openapi.json"), ok(), ""),
				hit(do("POST", "/health", alice...), ok(), ""),
				// Only the exempt paths themselves (other spellings: see
				// pathSpellingCases).
				hit(get("/healthz", alice...), ok(draft("default", 120, 60, 119, 60)...), "X-User:alice default 1"),
				hit(get("/health/live", alice...), ok(draft("default", 120, 60, 118, 60)...), "X-User:alice default 1"),
				// Not a path that only cleaning makes exempt: a router that
				// does not clean it (Gin's, Echo's) serves it elsewhere.
				hit(get("/files/../health", alice...), ok(draft("default", 120, 60, 117, 60)...), "X-User:alice default 1"),
				hit(get("/files/x/../../health", alice...), ok(draft("default", 120, 60, 116, 60)...), "X-User:alice default 1"),
				hit(get("/docs/x", bad...), unauthorized(), ""),
			),
		},
		{
			name: "ExemptNothing",
			config: `
rate_limit:
  enabled: true
  default: "120/minute"
  exempt_paths: []
`,
			steps: seq(
				hit(get("/health"), ok(draft("default", 120, 60, 119, 60)...), "127.0.0.1 default 1"),
			),
		},
		{
			name:   "SuperAdminBypass",
			config: ExampleConfig,
			steps: seq(
				times(20, func(int) step { return hit(get("/api/search", with(alice, superAdmin)...), ok(), "") }),
				// The bypass comes before the key function.
				hit(get("/api/search", with(bad, superAdmin)...), ok(), ""),
				hit(get("/api/search", superAdmin...), ok(), ""),
				// Nothing was counted; other roles are limited.
				hit(get("/api/search", with(alice, []string{RoleHeader, "admin"})...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 8, 1)...), searchAlice),
				hit(get("/api/search"), ok(draft("search", 10, 1, 9, 1)...), "127.0.0.1 search 1"),
			),
		},
		{
			// The application keeps the limiter it gave New and swaps
			// configurations while serving: a rule keeps counting across
			// swaps, its mode's and its count's too (4 spent of 10 per
			// second leave 2 of 6). A rule in shadow mode counts beside
			// the enforced rule (the default when none other matches),
			// writes no header and denies nothing.
			name:    "ApplicationLimiterReloads",
			config:  ExampleConfig,
			limiter: true,
			logs: []string{
				swapped, "WARN rlkit: rate-limit config swapped in with enforced rules now in shadow mode: they deny nothing",
				swapped, swapped, swapped,
				"WARN rlkit: shadow rule would deny", // once: the clock stands still
			},
			steps: seq(
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
				swap(strings.Replace(ExampleConfig, `limit: "10/second"`, `limit: "10/second"
      mode: shadow`, 1)),
				hit(get("/api/search", alice...), ok(draft("default", 120, 60, 119, 60)...), "X-User:alice default 1; "+searchAlice),
				swap(ExampleConfig),
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 7, 1)...), searchAlice),
				swap(strings.Replace(ExampleConfig, `limit: "10/second"`, `limit: "6/second"`, 1)),
				hit(get("/api/search", alice...), ok(draft("search", 6, 1, 2, 1)...), searchAlice),
				swap(strings.Replace(ExampleConfig, `    - name: search
      paths: ["/api/search"]
      limit: "10/second"`, `    - name: strict
      paths: ["/api/search"]
      limit: "1/second"
      mode: shadow
    - name: search
      paths: ["/api/search"]
      limit: "6/second"`, 1)),
				hit(get("/api/search", alice...), ok(draft("search", 6, 1, 1, 1)...), searchAlice+"; X-User:alice strict 1"),
				shadowDenied(hit(get("/api/search", alice...), ok(draft("search", 6, 1, 0, 1)...), searchAlice+"; X-User:alice strict 1")),
				shadowDenied(hit(get("/api/search", alice...), limited("search", "1", draft("search", 6, 1, 0, 1)...), searchAlice+"; X-User:alice strict 1")),
			),
		},
		{
			name:   "PerUserIsolation",
			config: ExampleConfig,
			steps: seq(
				times(10, func(i int) step {
					return hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9-i, 1)...), searchAlice)
				}),
				hit(get("/api/search", alice...), limited("search", "1", draft("search", 10, 1, 0, 1)...), searchAlice),
				hit(get("/api/search", bob...), ok(draft("search", 10, 1, 9, 1)...), "X-User:bob search 1"),
				hit(get("/api/search", UserHeader, "Alice"), ok(draft("search", 10, 1, 9, 1)...), "X-User:Alice search 1"),
				// Anonymous requests count under the client IP; a client
				// that is not a trusted proxy cannot pick it.
				hit(get("/api/search"), ok(draft("search", 10, 1, 9, 1)...), "127.0.0.1 search 1"),
				hit(get("/api/search", "X-Forwarded-For", "203.0.113.5"), ok(draft("search", 10, 1, 8, 1)...), "127.0.0.1 search 1"),
				hit(get("/api/search", UserHeader, ""), ok(draft("search", 10, 1, 7, 1)...), "127.0.0.1 search 1"),
				hit(get("/api/search", alice...), limited("search", "1", draft("search", 10, 1, 0, 1)...), searchAlice),
				hit(get("/api/search", bob...), ok(draft("search", 10, 1, 8, 1)...), "X-User:bob search 1"),
				// Two lines: the first counts. Spaces around a value are no part of it.
				hit(get("/api/search", with(bob, alice)...), ok(draft("search", 10, 1, 7, 1)...), "X-User:bob search 1"),
				hit(get("/api/search", UserHeader, "  bob  "), ok(draft("search", 10, 1, 6, 1)...), "X-User:bob search 1"),
				hit(get("/api/search", UserHeader, "böb"), ok(draft("search", 10, 1, 9, 1)...), "X-User:böb search 1"),
				// A header identity is stored as its keyed hash, however long.
				hit(get("/api/search", UserHeader, strings.Repeat("x", 200)), ok(draft("search", 10, 1, 9, 1)...), keyer.Key(adapter.HeaderIdentity("X-User", strings.Repeat("x", 200)))+" search 1"),
			),
		},
		{
			name:   "TrustedProxy",
			config: ExampleConfig,
			setup: func(s *Setup) {
				s.ClientIP = clientip.Config{TrustedProxies: []netip.Prefix{
					netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"),
				}}
			},
			steps: seq(
				hit(get("/api/search", "X-Forwarded-For", "203.0.113.5"), ok(draft("search", 10, 1, 9, 1)...), "203.0.113.5 search 1"),
				// The rightmost untrusted hop, not the leftmost.
				hit(get("/api/search", "X-Forwarded-For", "198.51.100.1, 203.0.113.5"), ok(draft("search", 10, 1, 8, 1)...), "203.0.113.5 search 1"),
				hit(get("/api/search", "X-Forwarded-For", "203.0.113.6"), ok(draft("search", 10, 1, 9, 1)...), "203.0.113.6 search 1"),
				// Several header lines read as one list.
				hit(get("/api/search", "X-Forwarded-For", "203.0.113.6", "X-Forwarded-For", "203.0.113.5"), ok(draft("search", 10, 1, 7, 1)...), "203.0.113.5 search 1"),
				// Trusted hops (another proxy) are skipped; a spoofed
				// leftmost value changes nothing.
				hit(get("/api/search", "X-Forwarded-For", "198.51.100.1, 203.0.113.5, 10.0.0.9"), ok(draft("search", 10, 1, 6, 1)...), "203.0.113.5 search 1"),
				hit(get("/api/search"), ok(draft("search", 10, 1, 9, 1)...), "127.0.0.1 search 1"),
				hit(get("/api/search", with(alice, []string{"X-Forwarded-For", "203.0.113.5"})...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
			),
		},
		{
			name:   "TrustedProxyForwarded",
			config: ExampleConfig,
			setup: func(s *Setup) {
				s.ClientIP = clientip.Config{
					TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
					Header:         clientip.Forwarded,
				}
			},
			steps: seq(
				hit(get("/api/search", "Forwarded", `for=198.51.100.1, for="[2001:db8::1]:4711"`), ok(draft("search", 10, 1, 9, 1)...), "2001:db8:: search 1"), // its /64
				hit(get("/api/search", "Forwarded", "for=198.51.100.1", "Forwarded", "for=203.0.113.9;proto=https"), ok(draft("search", 10, 1, 9, 1)...), "203.0.113.9 search 1"),
				// X-Forwarded-For is not the configured header.
				hit(get("/api/search", "X-Forwarded-For", "203.0.113.9"), ok(draft("search", 10, 1, 9, 1)...), "127.0.0.1 search 1"),
			),
		},
		{
			name:   "TrustedProxyXRealIP",
			config: ExampleConfig,
			setup: func(s *Setup) {
				s.ClientIP = clientip.Config{
					TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
					Header:         clientip.XRealIP,
				}
			},
			steps: seq(
				hit(get("/api/search", "X-Real-IP", "203.0.113.9"), ok(draft("search", 10, 1, 9, 1)...), "203.0.113.9 search 1"),
				// Two lines: neither is believed.
				hit(get("/api/search", "X-Real-IP", "203.0.113.9", "X-Real-IP", "203.0.113.10"), ok(draft("search", 10, 1, 9, 1)...), "127.0.0.1 search 1"),
			),
		},
		{
			name:   "Disabled",
			config: "rate_limit:\n  enabled: false\n  default: \"1/hour\"\n  exempt_paths: []\n",
			steps: seq(
				times(3, func(int) step { return hit(get("/api/search", alice...), ok(), "") }),
				hit(get("/api/search"), ok(), ""),
				hit(get("/api/search", bad...), ok(), ""),
				hit(do("POST", "/x", superAdmin...), ok(), ""),
			),
		},
		{
			name: "NilConfig",
			steps: seq(
				times(3, func(int) step { return hit(get("/api/search", alice...), ok(), "") }),
				hit(get("/api/search", bad...), ok(), ""),
			),
		},
		{
			name:   "Exact429",
			config: ExampleConfig,
			steps: seq(
				times(10, func(i int) step {
					return hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9-i, 1)...), searchAlice)
				}),
				advance(250*time.Millisecond),
				hit(get("/api/search", alice...), limited("search", "1", draft("search", 10, 1, 0, 1)...), searchAlice),
				advance(750*time.Millisecond),
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
				// A minute window: Retry-After counts down in whole
				// seconds, rounded up.
				hit(do("POST", "/api/kb/k/reindex", alice...), ok(draft("reindex", 2, 60, 1, 59)...), "X-User:alice reindex 1"),
				hit(do("POST", "/api/kb/k/reindex", alice...), ok(draft("reindex", 2, 60, 0, 59)...), "X-User:alice reindex 1"),
				advance(14*time.Second),
				hit(do("POST", "/api/kb/k/reindex", alice...), limited("reindex", "45", draft("reindex", 2, 60, 0, 45)...), "X-User:alice reindex 1"),
				advance(44500*time.Millisecond),
				hit(do("POST", "/api/kb/k/reindex", alice...), limited("reindex", "1", draft("reindex", 2, 60, 0, 1)...), "X-User:alice reindex 1"),
				advance(500*time.Millisecond),
				hit(do("POST", "/api/kb/k/reindex", alice...), ok(draft("reindex", 2, 60, 1, 60)...), "X-User:alice reindex 1"),
			),
		},
		{
			name:   "LegacyHeaders",
			config: ExampleConfig + "  headers: legacy\n",
			steps: seq(
				times(10, func(i int) step {
					return hit(get("/api/search", alice...), ok(legacy(10, 9-i, 1)...), searchAlice)
				}),
				hit(get("/api/search", alice...), limited("search", "1", legacy(10, 0, 1)...), searchAlice),
				hit(do("POST", "/api/kb/k/docs/upload/batch", alice...), ok(legacy(30, 20, 60)...), "X-User:alice upload 10"),
			),
		},
		{
			// Each limit of a rule with several is its own list item, named
			// "<rule>-<window>".
			name: "DraftHeadersSeveralLimits",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: burst
      paths: ["/b"]
      limit: ["3/second", "5/minute"]
`,
			steps: seq(
				times(3, func(i int) step {
					return hit(get("/b", alice...), ok(
						hPolicy, `"burst-1s";q=3;w=1, "burst-1m";q=5;w=60`,
						hRateLimit, fmt.Sprintf(`"burst-1s";r=%d;t=1, "burst-1m";r=%d;t=60`, 2-i, 4-i),
					), "X-User:alice burst 1")
				}),
				hit(get("/b", alice...), limited("burst", "1",
					hPolicy, `"burst-1s";q=3;w=1, "burst-1m";q=5;w=60`,
					hRateLimit, `"burst-1s";r=0;t=1, "burst-1m";r=2;t=60`,
				), "X-User:alice burst 1"),
				advance(time.Second),
				hit(get("/b", alice...), ok(
					hPolicy, `"burst-1s";q=3;w=1, "burst-1m";q=5;w=60`,
					hRateLimit, `"burst-1s";r=2;t=1, "burst-1m";r=1;t=59`,
				), "X-User:alice burst 1"),
			),
		},
		{
			name: "LegacyHeadersSeveralLimits",
			config: `
rate_limit:
  enabled: true
  headers: legacy
  rules:
    - name: burst
      paths: ["/b"]
      limit: ["3/second", "5/minute"]
`,
			steps: seq(
				// The deciding limit is the one with the fewest units left.
				hit(get("/b", alice...), ok(legacy(3, 2, 1)...), "X-User:alice burst 1"),
				hit(get("/b", alice...), ok(legacy(3, 1, 1)...), "X-User:alice burst 1"),
				hit(get("/b", alice...), ok(legacy(3, 0, 1)...), "X-User:alice burst 1"),
				hit(get("/b", alice...), limited("burst", "1", legacy(3, 0, 1)...), "X-User:alice burst 1"),
				advance(time.Second),
				hit(get("/b", alice...), ok(legacy(5, 1, 59)...), "X-User:alice burst 1"),
				hit(get("/b", alice...), ok(legacy(5, 0, 59)...), "X-User:alice burst 1"),
				hit(get("/b", alice...), limited("burst", "59", legacy(5, 0, 59)...), "X-User:alice burst 1"),
			),
		},
		{
			name:   "WithHeadersLegacy",
			config: ExampleConfig,
			setup:  func(s *Setup) { s.Headers = ptr(core.HeadersLegacy) },
			steps: seq(
				hit(get("/api/search", alice...), ok(legacy(10, 9, 1)...), searchAlice),
			),
		},
		{
			name:   "WithHeadersNone",
			config: ExampleConfig,
			setup:  func(s *Setup) { s.Headers = ptr(core.HeadersNone) },
			steps: seq(
				times(2, func(int) step { return hit(get("/api/kb/k/reindex", alice...), ok(), "X-User:alice reindex 1") }),
				// A 429 still says when to retry.
				hit(get("/api/kb/k/reindex", alice...), limited("reindex", "60"), "X-User:alice reindex 1"),
			),
		},
		{
			name:   "WithHeadersDraftOverConfigNone",
			config: ExampleConfig + "  headers: none\n",
			setup:  func(s *Setup) { s.Headers = ptr(core.HeadersDraft) },
			steps: seq(
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
			),
		},
		{
			name:   "ConfigHeadersNone",
			config: ExampleConfig + "  headers: none\n",
			steps: seq(
				hit(get("/api/search", alice...), ok(), searchAlice),
			),
		},
		{
			name:   "KeyFuncError",
			config: ExampleConfig,
			steps: seq(
				hit(get("/api/search", bad...), unauthorized(), ""),
				hit(do("POST", "/api/kb/k/docs/upload/batch", bad...), unauthorized(), ""),
				hit(get("/anything", bad...), unauthorized(), ""),
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
			),
		},
		{
			name:     "FailOpen",
			config:   ExampleConfig,
			failing:  true,
			warnings: 1, // the second failure falls within the warn interval
			steps: seq(
				hit(get("/api/search", alice...), ok(), searchAlice),
				hit(get("/api/search"), ok(), "127.0.0.1 search 1"),
				hit(get("/health"), ok(), ""),
			),
		},
		{
			name:     "FailClosed",
			config:   ExampleConfig + "  failure: closed\n",
			failing:  true,
			warnings: 1,
			steps: seq(
				hit(get("/api/search", alice...), unavailable(), searchAlice),
				hit(do("POST", "/api/kb/k/docs/upload/batch"), unavailable(), "127.0.0.1 upload 10"),
				// What never reaches the store is unaffected.
				hit(get("/health"), ok(), ""),
				hit(get("/api/search", superAdmin...), ok(), ""),
				hit(get("/api/search", bad...), unauthorized(), ""),
			),
		},
		{
			name:     "WithFailOpenFalse",
			config:   ExampleConfig,
			setup:    func(s *Setup) { s.FailOpen = ptr(false) },
			failing:  true,
			warnings: 1,
			steps:    seq(hit(get("/api/search", alice...), unavailable(), searchAlice)),
		},
		{
			name:     "WithFailOpenTrue",
			config:   ExampleConfig + "  failure: closed\n",
			setup:    func(s *Setup) { s.FailOpen = ptr(true) },
			failing:  true,
			warnings: 2,
			steps: seq(
				hit(get("/api/search", alice...), ok(), searchAlice),
				advance(10*time.Second), // one warning per interval
				hit(get("/api/search", alice...), ok(), searchAlice),
			),
		},
		{
			name: "RouteTemplates",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: pinned
      paths: ["/api/kb/pinned/reindex"]
      limit: "5/minute"
    - name: reindex
      paths: ["/api/kb/*/reindex", "/api/kb/*/docs/*/reindex"]
      limit: "2/minute"
    - name: upload
      paths: ["/api/kb/*/docs/upload", "/api/kb/*/docs/upload/batch"]
      limit: "30/minute"
      weights:
        "/api/kb/*/docs/upload/batch": 10
    - name: write
      methods: [POST]
      paths: ["/api/items/*"]
      limit: "5/minute"
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
  default: "120/minute"
  exempt_paths: ["/health", "/internal/*", "/api/users/me"]
`,
			setup: func(s *Setup) {
				s.Routes = []string{
					"/api/search",
					"/api/kb/:id/reindex",
					"/api/kb/:id/docs/:doc/reindex",
					"/api/kb/:id/docs/upload",
					"/api/kb/:id/docs/upload/batch",
					"/api/items/:id",
					"/health",
					"/internal/:what",
					"/api/users/:id",
				}
			},
			steps: seq(
				// A route whose paths the rules split (pinned) is matched
				// by path; the others by their template. Twice each, so a
				// cached answer is used too.
				hit(get("/api/kb/pinned/reindex", alice...), ok(draft("pinned", 5, 60, 4, 60)...), "X-User:alice pinned 1"),
				hit(get("/api/kb/kb-01/reindex", alice...), ok(draft("reindex", 2, 60, 1, 60)...), "X-User:alice reindex 1"),
				hit(get("/api/kb/pinned/reindex", alice...), ok(draft("pinned", 5, 60, 3, 60)...), "X-User:alice pinned 1"),
				hit(get("/api/kb/kb-01/docs/d1/reindex", alice...), ok(draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				hit(get("/api/kb/kb-02/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				hit(do("POST", "/api/kb/kb-01/docs/upload/batch", alice...), ok(draft("upload", 30, 60, 20, 60)...), "X-User:alice upload 10"),
				hit(do("POST", "/api/kb/kb-01/docs/upload", alice...), ok(draft("upload", 30, 60, 19, 60)...), "X-User:alice upload 1"),
				hit(do("POST", "/api/kb/kb-02/docs/upload/batch", alice...), ok(draft("upload", 30, 60, 9, 60)...), "X-User:alice upload 10"),
				// One route, two methods, two rules.
				hit(do("POST", "/api/items/1", alice...), ok(draft("write", 5, 60, 4, 60)...), "X-User:alice write 1"),
				hit(get("/api/items/1", alice...), ok(draft("default", 120, 60, 119, 60)...), "X-User:alice default 1"),
				hit(do("POST", "/api/items/2", alice...), ok(draft("write", 5, 60, 3, 60)...), "X-User:alice write 1"),
				hit(get("/api/items/2", alice...), ok(draft("default", 120, 60, 118, 60)...), "X-User:alice default 1"),
				// Exempt through a route, with a failing key function.
				hit(get("/health", bad...), ok(), ""),
				hit(get("/internal/metrics", bad...), ok(), ""),
				hit(get("/internal/metrics", bad...), ok(), ""),
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 8, 1)...), searchAlice),
				// Paths the catch-all serves.
				hit(get("/api/kb/a/b/reindex", alice...), ok(draft("default", 120, 60, 117, 60)...), "X-User:alice default 1"),
				hit(get("/api/other", alice...), ok(draft("default", 120, 60, 116, 60)...), "X-User:alice default 1"),
				// Spellings a router may hand to a route that is not
				// literally theirs: matched by path.
				hit(get("/api/search/", alice...), ok(draft("search", 10, 1, 7, 1)...), searchAlice),
				hit(get("/API/search", alice...), ok(draft("default", 120, 60, 115, 60)...), "X-User:alice default 1"),
				hit(get("/api/kb//reindex", alice...), ok(draft("default", 120, 60, 114, 60)...), "X-User:alice default 1"),
				hit(get("/api/kb/kb-01/docs/upload/", alice...), ok(draft("upload", 30, 60, 8, 60)...), "X-User:alice upload 1"),
				hit(get("/api/kb/a%2Fb/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				// As sent it reads as reindex's path, decoded as pinned's:
				// the stricter, reindex (spent), applies.
				hit(get("/api/kb/p%69nned/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
				hit(get("/api/s%65arch", alice...), ok(draft("search", 10, 1, 6, 1)...), searchAlice),
				// A weighted request denied through its route.
				hit(do("POST", "/api/kb/kb-03/docs/upload/batch", alice...), limited("upload", "60", draft("upload", 30, 60, 8, 60)...), "X-User:alice upload 10"),
				// An exempt path naming one value of a route parameter
				// exempts that value only, before and after the route is
				// cached.
				hit(get("/api/users/me", bad...), ok(), ""),
				hit(get("/api/users/u1", alice...), ok(draft("default", 120, 60, 113, 60)...), "X-User:alice default 1"),
				hit(get("/api/users/me", bad...), ok(), ""),
				hit(get("/api/users/u2", alice...), ok(draft("default", 120, 60, 112, 60)...), "X-User:alice default 1"),
				// A route handed over for a dotted path ("/internal/:what"
				// for "/internal/..") does not make it exempt.
				hit(get("/internal/..", alice...), ok(draft("default", 120, 60, 111, 60)...), "X-User:alice default 1"),
			),
		},
		{
			name:   "Head",
			config: ExampleConfig,
			steps: seq(
				times(2, func(i int) step {
					return hit(do("HEAD", "/api/kb/k/reindex", alice...), headOK(draft("reindex", 2, 60, 1-i, 60)...), "X-User:alice reindex 1")
				}),
				hit(do("HEAD", "/api/kb/k/reindex", alice...), headLimited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), "X-User:alice reindex 1"),
			),
		},
		{
			name: "Concurrency",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: hot
      paths: ["/hot"]
      limit: "100/minute"
`,
			run: func(e *env) { concurrency(e, "/hot", "hot", 100) },
		},
		{
			name: "ConcurrencyRoute",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: hot
      paths: ["/api/kb/*/reindex"]
      limit: "100/minute"
`,
			setup: func(s *Setup) { s.Routes = []string{"/api/kb/:id/reindex"} },
			run:   func(e *env) { concurrency(e, "/api/kb/kb-01/reindex", "hot", 100) },
		},
	}
}

// concurrency sends 64 goroutines × 4 requests for one user to one rule
// with the given limit through the real server: exactly limit are
// admitted, each remaining count from limit-1 down to 0 is seen exactly
// once, and every other request gets the exact 429.
func concurrency(e *env, path, rule string, limit int) {
	const workers, each = 64, 4
	type result struct {
		resp *Response
		err  error
	}
	results := make(chan result, workers*each)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for range each {
				resp, err := e.send(get(path, alice...))
				results <- result{resp, err}
			}
		})
	}
	wg.Wait()
	close(results)
	deny := limited(rule, "60", draft(rule, limit, 60, 0, 60)...)
	seen := make([]int, limit)
	admitted, denied := 0, 0
	for r := range results {
		if r.err != nil {
			e.t.Fatal(r.err)
		}
		if r.resp.Status != http.StatusOK {
			denied++
			checkResponse(e.t, "denied request", r.resp, deny)
			continue
		}
		admitted++
		state := r.resp.Header.Get(hRateLimit)
		var n int
		if _, err := fmt.Sscanf(state, `"`+rule+`";r=%d;t=60`, &n); err != nil || n < 0 || n >= limit {
			e.t.Fatalf("admitted request: RateLimit %q", state)
		}
		seen[n]++
		checkResponse(e.t, "admitted request", r.resp, ok(draft(rule, limit, 60, n, 60)...))
	}
	if admitted != limit || denied != workers*each-limit {
		e.t.Fatalf("got %d admitted, %d denied; want %d, %d", admitted, denied, limit, workers*each-limit)
	}
	if n := e.served.Load(); n != int64(limit) {
		e.t.Fatalf("the handler ran %d times, want %d", n, limit)
	}
	for n, c := range seen {
		if c != 1 {
			e.t.Fatalf("remaining %d seen %d times, want once", n, c)
		}
	}
	takes, events := e.rec.drain()
	wantTake := "X-User:alice " + rule + " 1"
	if len(takes) != workers*each || strings.Count(strings.Join(takes, "\n"), wantTake) != workers*each {
		e.t.Fatalf("store calls: got %d (%q...), want %d of %q", len(takes), takes[:min(len(takes), 3)], workers*each, wantTake)
	}
	allowed := 0
	for _, ev := range events {
		if ev.Allowed {
			allowed++
		}
	}
	if len(events) != workers*each || allowed != limit {
		e.t.Fatalf("observer: got %d events, %d allowed; want %d, %d", len(events), allowed, workers*each, limit)
	}
}
