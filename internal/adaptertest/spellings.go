package adaptertest

import "testing"

// RunPathSpellings runs the path-spelling cases against every adapter,
// then checks that each of them answers every request as adapters[0]
// does. A request path may be spelled many ways that a router or a
// handler reads as the same path, or as another one: escaped, with "%2F"
// for a slash, with a trailing slash, "//" or dot segments (plain or
// escaped), double-escaped. Every spelling is sent as written, through the
// framework's real server; a request is exempt only when every spelling
// is, and counts under the first rule any spelling matches, or the
// strictest when the spellings' first rules differ (see core.Path).
func RunPathSpellings(t *testing.T, adapters ...Adapter) {
	table := pathSpellingCases()
	for _, a := range adapters {
		t.Run(a.Name, func(t *testing.T) { run(t, a.Start, table) })
	}
	if len(adapters) > 1 {
		t.Run("Same", func(t *testing.T) { same(t, table, adapters[0], adapters[1:]...) })
	}
}

// pathSpellingCases are the hostile spellings of a path: "/api%2Fsearch" counted
// under search (not default), "/health/" and "/health%2F" counted (not
// exempt, so a failing key function answers 401), and their relatives.
func pathSpellingCases() []testCase {
	const searchAlice = "X-User:alice search 1"
	const reindexAlice = "X-User:alice reindex 1"
	const defaultAlice = "X-User:alice default 1"
	return []testCase{
		{
			name:   "SpellingsCountUnderTheirRule",
			config: ExampleConfig,
			steps: seq(
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
				// The handler reads "/api/search" (r.URL.Path): so do the rules.
				hit(get("/api%2Fsearch", alice...), ok(draft("search", 10, 1, 8, 1)...), searchAlice),
				hit(get("/api%2fsearch/", alice...), ok(draft("search", 10, 1, 7, 1)...), searchAlice),
				hit(get("/%61pi%2F%73earch", alice...), ok(draft("search", 10, 1, 6, 1)...), searchAlice),
				// Trailing slash, "//", dot segments plain and escaped.
				hit(get("/api/search/", alice...), ok(draft("search", 10, 1, 5, 1)...), searchAlice),
				hit(get("/api//search", alice...), ok(draft("search", 10, 1, 4, 1)...), searchAlice),
				hit(get("/api/x/%2e%2e/search", alice...), ok(draft("search", 10, 1, 3, 1)...), searchAlice),
				hit(get("/api/x/..%2Fsearch", alice...), ok(draft("search", 10, 1, 2, 1)...), searchAlice),
				// Decoded once, as routers do: "%252F" is the text "%2F",
				// one segment, no rule's.
				hit(get("/api%252Fsearch", alice...), ok(draft("default", 120, 60, 119, 60)...), defaultAlice),
				hit(get("/api/search%00", alice...), ok(draft("default", 120, 60, 118, 60)...), defaultAlice),
				// The rule's count is shared by every spelling.
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 1, 1)...), searchAlice),
				hit(get("/api/s%65arch", alice...), ok(draft("search", 10, 1, 0, 1)...), searchAlice),
				hit(get("/api%2Fsearch", alice...), limited("search", "1", draft("search", 10, 1, 0, 1)...), searchAlice),
				hit(get("/api/search/", alice...), limited("search", "1", draft("search", 10, 1, 0, 1)...), searchAlice),
			),
		},
		{
			name:   "SpellingsOfStarRules",
			config: ExampleConfig,
			steps: seq(
				// "%2F" inside a '*' segment: one segment as sent (a router
				// matching "/api/kb/:id/reindex" takes id "a/b"), two
				// decoded; the first rule either spelling matches applies.
				hit(get("/api/kb/a%2Fb/reindex", alice...), ok(draft("reindex", 2, 60, 1, 60)...), reindexAlice),
				hit(get("/api/kb/a%2Fb/r%65index", alice...), ok(draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				hit(get("/api/kb/k1/reindex%2F", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				// A reindex path only once cleaned with "%2F" kept, or
				// cleaned as sent.
				hit(get("/api/kb/a%2Fb/x/%2e%2e/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				hit(get("/api/kb/%2e%2e//reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				// Decoded, "x/docs" is two segments: the upload rule, at
				// the weight of a batch.
				hit(get("/api/kb/x%2Fdocs/upload/batch", alice...), ok(draft("upload", 30, 60, 20, 60)...), "X-User:alice upload 10"),
				hit(get("/api/kb/x/docs/upload%2Fbatch", alice...), ok(draft("upload", 30, 60, 10, 60)...), "X-User:alice upload 10"),
				hit(get("/api/kb/x%2Fdocs/upload", alice...), ok(draft("upload", 30, 60, 9, 60)...), "X-User:alice upload 1"),
				hit(get("/mcp%2F", alice...), ok(draft("mcp", 300, 60, 299, 60)...), "X-User:alice mcp 1"),
			),
		},
		{
			name:   "SpellingsOfExemptPaths",
			config: ExampleConfig,
			steps: seq(
				hit(get("/health", bad...), ok(), ""),
				// Not exempt: counted, so the identity is asked for, and a
				// failing key function gets 401.
				hit(get("/health/", bad...), unauthorized(), ""),
				hit(get("/health/", alice...), ok(draft("default", 120, 60, 119, 60)...), defaultAlice),
				hit(get("/health%2F", bad...), unauthorized(), ""),
				hit(get("/health%2F", alice...), ok(draft("default", 120, 60, 118, 60)...), defaultAlice),
				// "/%68ealth" decodes to "/health", but a router that
				// routes on the path as sent (Echo with RawPath, Fiber)
				// does not serve it as "/health": exempt only if every
				// spelling is, so counted.
				hit(get("/%68ealth", bad...), unauthorized(), ""),
				hit(get("/%68ealth", alice...), ok(draft("default", 120, 60, 117, 60)...), defaultAlice),
				hit(get("/files/%2e%2e/health", alice...), ok(draft("default", 120, 60, 116, 60)...), defaultAlice),
				hit(get("/health/.", alice...), ok(draft("default", 120, 60, 115, 60)...), defaultAlice),
				hit(get("/health%252F", alice...), ok(draft("default", 120, 60, 114, 60)...), defaultAlice),
				hit(get("/health%00", alice...), ok(draft("default", 120, 60, 113, 60)...), defaultAlice),
				hit(get("/docs//", alice...), ok(draft("default", 120, 60, 112, 60)...), defaultAlice),
				// The exempt paths themselves still pass, uncounted.
				hit(get("/docs", bad...), ok(), ""),
				hit(get("/openapi.json?x=/health/", bad...), ok(), ""),
			),
		},
		{
			name: "SpellingsOfExemptPathsListed",
			config: `
rate_limit:
  enabled: true
  default: "120/minute"
  exempt_paths: ["/health", "/health/", "/static/*"]
`,
			steps: seq(
				// "/health/" is exempt when it is listed as well as "/health".
				hit(get("/health/", bad...), ok(), ""),
				hit(get("/static/app.js", bad...), ok(), ""),
				// Every spelling of "/static/%61pp.js" is one segment under
				// "/static": exempt. Decoded, "/static/a%2Fb" is two.
				hit(get("/static/%61pp.js", bad...), ok(), ""),
				hit(get("/static/a%2Fb", bad...), unauthorized(), ""),
				hit(get("/static/a%2Fb", alice...), ok(draft("default", 120, 60, 119, 60)...), defaultAlice),
				hit(get("/static/app.js/", alice...), ok(draft("default", 120, 60, 118, 60)...), defaultAlice),
			),
		},
		{
			name: "SpellingsWithRoutes",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
    - name: reindex
      paths: ["/api/kb/*/reindex"]
      limit: "2/minute"
  default: "120/minute"
  exempt_paths: ["/health", "/internal/*"]
`,
			setup: func(s *Setup) {
				s.Routes = []string{"/api/search", "/api/kb/:id/reindex", "/internal/:what", "/health"}
			},
			steps: seq(
				// Twice each, so that the route's cached answer is used.
				hit(get("/internal/metrics", bad...), ok(), ""),
				hit(get("/internal/metrics", bad...), ok(), ""),
				// Routers that match on the path as sent (net/http's
				// ServeMux, Echo, Fiber) hand this to "/internal/:what",
				// whose answer is "exempt"; decoded it is "/internal/a/b",
				// which is not. The route answer is not used.
				hit(get("/internal/a%2Fb", bad...), unauthorized(), ""),
				hit(get("/internal/a%2Fb", alice...), ok(draft("default", 120, 60, 119, 60)...), defaultAlice),
				hit(get("/internal/%6Detrics", bad...), ok(), ""),
				hit(get("/health", bad...), ok(), ""),
				hit(get("/%68ealth", alice...), ok(draft("default", 120, 60, 118, 60)...), defaultAlice),
				hit(get("/api/search", alice...), ok(draft("search", 10, 1, 9, 1)...), searchAlice),
				hit(get("/api%2Fsearch", alice...), ok(draft("search", 10, 1, 8, 1)...), searchAlice),
				hit(get("/api/kb/a%2Fb/reindex", alice...), ok(draft("reindex", 2, 60, 1, 60)...), reindexAlice),
				hit(get("/api/kb/k1/reindex", alice...), ok(draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				hit(get("/api/kb/k1/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				hit(get("/api/kb/k%31/reindex%2F", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), reindexAlice),
			),
		},
		{
			// An earlier generous rule cannot be picked by spelling a
			// strict rule's path oddly: "/api/kb/k1%2F../reindex" reaches
			// the reindex route of routers that match it as sent (Echo,
			// Fiber), and reads "/api/kb/reindex" (kb_read's) decoded and
			// cleaned. It counts under the stricter rule, reindex.
			name: "SpellingsPickTheStricterRule",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: kb_read
      paths: ["/api/kb/*"]
      limit: "100/minute"
    - name: reindex
      paths: ["/api/kb/*/reindex"]
      limit: "2/minute"
`,
			steps: seq(
				hit(do("POST", "/api/kb/k1/reindex", alice...), ok(draft("reindex", 2, 60, 1, 60)...), reindexAlice),
				hit(do("POST", "/api/kb/k1%2F../reindex", alice...), ok(draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				hit(do("POST", "/api/kb/k1%2f%2e%2e/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				hit(do("POST", "/api/kb/k1", alice...), ok(draft("kb_read", 100, 60, 99, 60)...), "X-User:alice kb_read 1"),
			),
		},
	}
}
