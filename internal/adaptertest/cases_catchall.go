package adaptertest

import (
	"time"
)

// catchAllCases check catch-all paths ("/**") through every adapter: a
// rule that counts its prefix and every depth below it on one counter, a
// weight below a catch-all, an exempt catch-all (with and without a
// trailing slash, never by a spelling that leaves it), and the same
// behind route templates, including a router's own catch-all template
// ("/files/*path"), whose requests are matched by path.
func catchAllCases() []testCase {
	const (
		admin = "X-User:alice admin 1"
		files = "X-User:alice files 1"
		big   = "X-User:alice files 5"
		def   = "X-User:alice default 1"
	)
	return []testCase{
		{
			name: "CatchAll",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: admin
      paths: ["/api/admin/**"]
      limit: "5/minute"
    - name: files
      paths: ["/api/*/files/**"]
      limit: "20/minute"
      weights:
        "/api/*/files/upload/**": 5
  default: "120/minute"
  exempt_paths: ["/health", "/static/**"]
`,
			steps: seq(
				// One counter for the prefix and every depth below it.
				hit(get("/api/admin", alice...), ok(draft("admin", 5, 60, 4, 60)...), admin),
				hit(get("/api/admin/", alice...), ok(draft("admin", 5, 60, 3, 60)...), admin),
				hit(get("/api/admin/users", alice...), ok(draft("admin", 5, 60, 2, 60)...), admin),
				hit(do("POST", "/api/admin/users/7/roles", alice...), ok(draft("admin", 5, 60, 1, 60)...), admin),
				// Segments are whole: not a path below /api/admin.
				hit(get("/api/administrator", alice...), ok(draft("default", 120, 60, 119, 60)...), def),
				hit(get("/api/admin/a/b/c/d/e/f", alice...), ok(draft("admin", 5, 60, 0, 60)...), admin),
				hit(get("/api/admin/x", alice...), limited("admin", "60", draft("admin", 5, 60, 0, 60)...), admin),
				// No spelling leaves it, nor takes it into the exempt one.
				hit(get("/api%2Fadmin/x", alice...), limited("admin", "60", draft("admin", 5, 60, 0, 60)...), admin),
				hit(get("/api/x/../admin", alice...), limited("admin", "60", draft("admin", 5, 60, 0, 60)...), admin),
				hit(get("/static/../api/admin/y", alice...), limited("admin", "60", draft("admin", 5, 60, 0, 60)...), admin),
				hit(get("/static/%2e%2e/api/admin", alice...), limited("admin", "60", draft("admin", 5, 60, 0, 60)...), admin),
				// After one-segment wildcards, with a weight below it.
				hit(get("/api/v1/files", alice...), ok(draft("files", 20, 60, 19, 60)...), files),
				hit(get("/api/v1/files/a", alice...), ok(draft("files", 20, 60, 18, 60)...), files),
				hit(do("PUT", "/api/v2/files/upload/a/b", alice...), ok(draft("files", 20, 60, 13, 60)...), big),
				hit(do("PUT", "/api/v2/files/upload", alice...), ok(draft("files", 20, 60, 8, 60)...), big),
				hit(get("/api/v1/files/a/b/c", alice...), ok(draft("files", 20, 60, 7, 60)...), files),
				hit(get("/api/v1/filesx", alice...), ok(draft("default", 120, 60, 118, 60)...), def),
				// Exempt below /static, with or without a trailing slash:
				// no counter, no key function.
				hit(get("/static", bad...), ok(), ""),
				hit(get("/static/", bad...), ok(), ""),
				hit(get("/static/app.js", bad...), ok(), ""),
				hit(get("/static/css/a/site.css", bad...), ok(), ""),
				hit(get("/static/css/", bad...), ok(), ""),
				hit(get("/staticx", alice...), ok(draft("default", 120, 60, 117, 60)...), def),
				hit(get("/static/..", alice...), ok(draft("default", 120, 60, 116, 60)...), def),
				// A new window for the catch-all's one counter.
				advance(time.Minute),
				hit(get("/api/admin/x", alice...), ok(draft("admin", 5, 60, 4, 60)...), admin),
			),
		},
		{
			name: "CatchAllRoutes",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: v1
      paths: ["/api/v1"]
      limit: "1/minute"
    - name: admin-users
      paths: ["/api/admin/users/**"]
      limit: "3/minute"
    - name: admin
      paths: ["/api/admin/**"]
      limit: "5/minute"
    - name: files
      paths: ["/files/**", "/api/*/files/**"]
      limit: "20/minute"
      weights:
        "/files/big/**": 5
  default: "120/minute"
  exempt_paths: ["/health", "/public/**"]
`,
			setup: func(s *Setup) {
				s.Routes = []string{
					"/api/admin/:section",
					"/api/admin/:section/:id",
					"/api/v1/files/:name",
					"/files/*path",
					"/public/:page",
				}
			},
			steps: seq(
				// A route whose paths the catch-alls split (users is one
				// value of :section) is matched by path, twice each so
				// that a cached answer would be used.
				hit(get("/api/admin/users", alice...), ok(draft("admin-users", 3, 60, 2, 60)...), "X-User:alice admin-users 1"),
				hit(get("/api/admin/logs", alice...), ok(draft("admin", 5, 60, 4, 60)...), admin),
				hit(get("/api/admin/users", alice...), ok(draft("admin-users", 3, 60, 1, 60)...), "X-User:alice admin-users 1"),
				hit(get("/api/admin/logs", alice...), ok(draft("admin", 5, 60, 3, 60)...), admin),
				hit(get("/api/admin/users/7", alice...), ok(draft("admin-users", 3, 60, 0, 60)...), "X-User:alice admin-users 1"),
				hit(get("/api/admin/logs/7", alice...), ok(draft("admin", 5, 60, 2, 60)...), admin),
				hit(get("/api/admin/users/8/x", alice...), limited("admin-users", "60", draft("admin-users", 3, 60, 0, 60)...), "X-User:alice admin-users 1"),
				hit(get("/api/admin", alice...), ok(draft("admin", 5, 60, 1, 60)...), admin),
				// A route every path of which one catch-all takes (and
				// no shorter path without one).
				hit(get("/api/v1/files/a", alice...), ok(draft("files", 20, 60, 19, 60)...), files),
				hit(get("/api/v1/files/b", alice...), ok(draft("files", 20, 60, 18, 60)...), files),
				// The router's own catch-all template: by path, at every
				// depth, with the weight below it.
				hit(get("/files/a", alice...), ok(draft("files", 20, 60, 17, 60)...), files),
				hit(get("/files/big/x", alice...), ok(draft("files", 20, 60, 12, 60)...), big),
				hit(get("/files/a/b/c", alice...), ok(draft("files", 20, 60, 11, 60)...), files),
				hit(get("/files/big/y/z", alice...), ok(draft("files", 20, 60, 6, 60)...), big),
				hit(get("/files/big", alice...), ok(draft("files", 20, 60, 1, 60)...), big),
				hit(get("/files/big/w", alice...), limited("files", "60", draft("files", 20, 60, 1, 60)...), big),
				hit(get("/files/a", alice...), ok(draft("files", 20, 60, 0, 60)...), files),
				// Exempt through a route and through the catch-all handler.
				hit(get("/public/x", bad...), ok(), ""),
				hit(get("/public/x", bad...), ok(), ""),
				hit(get("/public/a/b", bad...), ok(), ""),
				hit(get("/publicx", alice...), ok(draft("default", 120, 60, 119, 60)...), def),
			),
		},
	}
}
