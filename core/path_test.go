package core

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
	"testing"
)

// TestSpellings: the spellings of a path, in order (as sent, segment-
// decoded, decoded, then each cleaned), without repeats.
func TestSpellings(t *testing.T) {
	for _, c := range []struct {
		path Path
		want []string
	}{
		// Clean paths, and paths no pattern can match, are one spelling.
		{"/api/search", []string{"/api/search"}},
		{"/", []string{"/"}},
		{"", []string{""}},
		{"*", []string{"*"}},
		{"/a/.b/..c/c.", []string{"/a/.b/..c/c."}},
		{"/a+b;c=d:@", []string{"/a+b;c=d:@"}},
		// Trailing slash, "//", dot segments.
		{"/api/search/", []string{"/api/search/", "/api/search"}},
		{"/api//search", []string{"/api//search", "/api/search"}},
		{"//", []string{"//", "/"}},
		{"/api/./search", []string{"/api/./search", "/api/search"}},
		{"/files/../health", []string{"/files/../health", "/health"}},
		{"/..", []string{"/..", "/"}},
		// Escapes: an encoded slash stays in its segment in the second
		// spelling, not in the decoded one.
		{"/api%2Fsearch", []string{"/api%2Fsearch", "/api/search"}},
		{"/api%2fsearch", []string{"/api%2fsearch", "/api/search"}},
		{"/api/s%65arch", []string{"/api/s%65arch", "/api/search"}},
		{"/api/kb/a%2Fb/reindex", []string{"/api/kb/a%2Fb/reindex", "/api/kb/a/b/reindex"}},
		{"/api/kb/a%2Fb/r%65index", []string{"/api/kb/a%2Fb/r%65index", "/api/kb/a%2Fb/reindex", "/api/kb/a/b/reindex"}},
		{"/health%2F", []string{"/health%2F", "/health/", "/health"}},
		{"/%68ealth", []string{"/%68ealth", "/health"}},
		{"/caf%C3%A9", []string{"/caf%C3%A9", "/café"}},
		// Encoded dots are resolved once decoded.
		{"/files/%2e%2e/health", []string{"/files/%2e%2e/health", "/files/../health", "/health"}},
		{"/x/..%2F..%2Fhealth", []string{"/x/..%2F..%2Fhealth", "/x/../../health", "/health"}},
		// Decoded once: "%252F" is the text "%2F".
		{"/api%252Fsearch", []string{"/api%252Fsearch", "/api%2Fsearch"}},
		{"/api%25252F", []string{"/api%25252F", "/api%252F"}},
		// Invalid escapes stay as they are.
		{"/a%zz/b", []string{"/a%zz/b"}},
		{"/health%", []string{"/health%"}},
		{"/a%4", []string{"/a%4"}},
		{"/a%4g%41", []string{"/a%4g%41", "/a%4gA"}},
		{"/%%41", []string{"/%%41", "/%A"}},
		// NUL is an ordinary byte.
		{"/health%00", []string{"/health%00", "/health\x00"}},
		{"/health\x00", []string{"/health\x00"}},
	} {
		var buf [maxSpellings]string
		if got := spellings(c.path, &buf); !slices.Equal(got, c.want) {
			t.Errorf("spellings(%q) = %q, want %q", c.path, got, c.want)
		}
		// The fast path: a clean path is one spelling, without parsing.
		if clean(string(c.path)) && len(c.want) != 1 {
			t.Errorf("clean(%q) = true, but it has %d spellings", c.path, len(c.want))
		}
	}
}

// spellingsConfig is the example configuration with a few more exempt paths, so
// that exemption by every spelling can be seen.
const spellingsConfig = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
    - name: upload
      paths: ["/api/kb/*/docs/upload", "/api/kb/*/docs/upload/batch"]
      limit: "30/minute"
      weights:
        "/api/kb/*/docs/upload/batch": 10
    - name: reindex
      paths: ["/api/kb/*/reindex", "/api/kb/*/docs/*/reindex"]
      limit: "2/minute"
    - name: mcp
      paths: ["/mcp"]
      limit: "300/minute"
  default: "120/minute"
  exempt_paths: ["/health", "/ready", "/ready/", "/static/*", "/café", "/docs/"]
`

// TestExemptAndMatchBySpellings: a path is exempt only when every spelling
// is, and counts under the first rule any spelling matches.
func TestExemptAndMatchBySpellings(t *testing.T) {
	cfg, err := ParseConfig([]byte(spellingsConfig), "spellings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   Path
		exempt bool
		rule   string
		cost   int64
	}{
		{"/health", true, "default", 1},
		{"/ready", true, "default", 1},
		{"/static/app.js", true, "default", 1},
		// A trailing slash counts for exempt paths: "/ready/" is listed
		// with "/ready", "/health/" is not.
		{"/ready/", true, "default", 1},
		{"/health/", false, "default", 1},
		{"/docs/", false, "default", 1}, // listed, but "/docs" is not
		{"/docs", false, "default", 1},
		{"/static/app.js/", false, "default", 1},
		{"/health//", false, "default", 1},
		// Escapes: exempt only if exempt as sent too.
		{"/health%2F", false, "default", 1},
		{"/%68ealth", false, "default", 1},
		{"/static/a%2Fb", false, "default", 1},   // decoded, two segments
		{"/static/%61pp.js", true, "default", 1}, // "%61pp.js" is one segment too
		{"/caf%C3%A9", false, "default", 1},      // "/café" as sent by a client: listed decoded only
		{"/café", true, "default", 1},
		// Dot segments, plain and encoded.
		{"/x/../health", false, "default", 1},
		{"/files/%2e%2e/health", false, "default", 1},
		{"/static/../health", false, "default", 1},
		{"/health/.", false, "default", 1},
		// Decoded once; invalid escapes and NUL are bytes like others.
		{"/health%252F", false, "default", 1},
		{"/health%", false, "default", 1},
		{"/health%zz", false, "default", 1},
		{"/health%00", false, "default", 1},
		{"/health\x00", false, "default", 1},

		// Rules: any spelling.
		{"/api/search", false, "search", 1},
		{"/api%2Fsearch", false, "search", 1},
		{"/api%2fsearch/", false, "search", 1},
		{"/api/search/", false, "search", 1},
		{"/api//search", false, "search", 1},
		{"/api/./search", false, "search", 1},
		{"/api/x/../search", false, "search", 1},
		{"/api/x/%2e%2e/search", false, "search", 1},
		{"/api/x/..%2Fsearch", false, "search", 1},
		{"/api/s%65arch", false, "search", 1},
		{"/%61pi%2F%73earch", false, "search", 1},
		{"/api%252Fsearch", false, "default", 1}, // one segment "api%2Fsearch"
		{"/api/search%00", false, "default", 1},
		{"/api/search%zz", false, "default", 1},
		{"/API/search", false, "default", 1}, // case-sensitive
		// An encoded slash never takes a request out of a '*' rule.
		{"/api/kb/a%2Fb/reindex", false, "reindex", 1},
		{"/api/kb/a%2Fb/r%65index", false, "reindex", 1},
		{"/api/kb/a%2Fb/docs/c%2Fd/reindex", false, "reindex", 1},
		// Only cleaned with "%2F" kept (RFC 3986 normalization: "%2e"
		// decoded, "%2F" not) is it a reindex path.
		{"/api/kb/a%2Fb/x/%2e%2e/reindex", false, "reindex", 1},
		// Only cleaned as sent (Gin with UseRawPath and RemoveExtraSlash
		// routes it to "/api/kb/:id/reindex", id "..") is it one.
		{"/api/kb/%2e%2e//reindex", false, "reindex", 1},
		// Nor does it hide a rule the decoded path reaches.
		{"/api/kb/x%2Fdocs/upload", false, "upload", 1},
		{"/api/kb/x%2Fdocs/upload/batch", false, "upload", 10},
		{"/api/kb/x/docs/upload%2Fbatch", false, "upload", 10},
		{"/mcp%2F", false, "mcp", 1},
		// An exempt spelling does not exempt: counted by the others.
		{"/api/search/../../health", false, "default", 1},
		{"/health/../api/search", false, "search", 1},
	} {
		if got := cfg.Exempt(c.path); got != c.exempt {
			t.Errorf("Exempt(%q) = %v, want %v", c.path, got, c.exempt)
		}
		r, cost := cfg.Match("GET", c.path)
		if r.Name != c.rule || cost != c.cost {
			t.Errorf("Match(%q) = %s, %d; want %s, %d", c.path, r.Name, cost, c.rule, c.cost)
		}
		// The limiter takes the same decision.
		wantRule := c.rule
		if c.exempt {
			wantRule = "<exempt>"
		}
		gotRule := "<exempt>"
		if r, cost := cfg.decideRule("GET", c.path, "", false); r != nil {
			gotRule = r.Name
			if cost != c.cost {
				t.Errorf("decide(%q): cost %d, want %d", c.path, cost, c.cost)
			}
		}
		if gotRule != wantRule {
			t.Errorf("decide(%q): %s, want %s", c.path, gotRule, wantRule)
		}
	}
}

// TestExemptWithAndWithoutTrailingSlash: a spelling with a trailing slash
// is exempt only when it is exempt without it too (a router that ignores
// trailing slashes serves "/x/../" as "/x/.."), though cleaning resolves
// it to an exempt path.
func TestExemptWithAndWithoutTrailingSlash(t *testing.T) {
	slashOnly := mustParse(t, "rate_limit:\n  exempt_paths: [\"/x/*/\", \"/\"]\n")
	both := mustParse(t, "rate_limit:\n  exempt_paths: [\"/x/*/\", \"/x/*\", \"/\"]\n")
	for _, c := range []struct {
		path            Path
		slashOnly, both bool
	}{
		{"/", true, true},
		{"/x/a/", false, true},
		{"/x/a", false, true},
		{"/x/../", false, true},
		{"/x/..//", false, false},
	} {
		if got := slashOnly.Exempt(c.path); got != c.slashOnly {
			t.Errorf("exempt [/x/*/, /]: Exempt(%q) = %v, want %v", c.path, got, c.slashOnly)
		}
		if got := both.Exempt(c.path); got != c.both {
			t.Errorf("exempt [/x/*/, /x/*, /]: Exempt(%q) = %v, want %v", c.path, got, c.both)
		}
	}
}

// catchAllConfig has catch-alls in rules, weights and exempt_paths.
const catchAllConfig = `
rate_limit:
  enabled: true
  rules:
    - name: admin
      paths: ["/api/admin/**"]
      limit: "5/minute"
    - name: files
      paths: ["/api/*/files/**"]
      limit: "100/minute"
      weights:
        "/api/*/files/upload/**": 3
    - name: kb
      paths: ["/api/kb/:id/**"]
      limit: "50/minute"
      weights:
        "/api/kb/*/bulk": 10
        "/api/kb/**": 2
  default: "120/minute"
  exempt_paths: ["/health", "/static/**", "/docs/*/**"]
`

// TestCatchAllBySpellings: a catch-all matches its prefix and every path
// below it, in rules, weights and exempt paths, by every spelling: in
// exempt_paths with or without a trailing slash, and only when every
// spelling is below it.
func TestCatchAllBySpellings(t *testing.T) {
	cfg := mustParse(t, catchAllConfig)
	for _, c := range []struct {
		path   Path
		exempt bool
		rule   string
		cost   int64
	}{
		{"/static", true, "default", 1},
		{"/static/", true, "default", 1},
		{"/static/app.js", true, "default", 1},
		{"/static/app.js/", true, "default", 1},
		{"/static/css/a/b.css", true, "default", 1},
		{"/static//a", true, "default", 1},
		{"/static/./a", true, "default", 1},
		{"/static/a%2Fb", true, "default", 1},
		{"/staticx", false, "default", 1},
		{"/staticx/a", false, "default", 1},
		{"/STATIC/a", false, "default", 1},
		{"/static%2Fa", false, "default", 1}, // as sent, one segment "static%2Fa"
		{"/%73tatic/a", false, "default", 1},
		{"/static/..", false, "default", 1},
		{"/static/../api/admin", false, "admin", 1},
		{"/static/%2e%2e/api/admin/x", false, "admin", 1},
		{"/static/..%2F..%2Fapi/admin", false, "admin", 1},
		{"/docs/v1", true, "default", 1},
		{"/docs/v1/", true, "default", 1},
		{"/docs/v1/a/b", true, "default", 1},
		{"/docs", false, "default", 1},
		{"/docs/", false, "default", 1},
		{"/docs//x", false, "default", 1}, // as sent, an empty first segment

		{"/api/admin", false, "admin", 1},
		{"/api/admin/", false, "admin", 1},
		{"/api/admin/users/7/roles", false, "admin", 1},
		{"/api/admin%2Fusers", false, "admin", 1},
		{"/api/x/../admin", false, "admin", 1},
		{"/api/administrator", false, "default", 1},
		{"/api/v1/files", false, "files", 1},
		{"/api/v1/files/a/b", false, "files", 1},
		{"/api/v1/files/upload", false, "files", 3},
		{"/api/v1/files/upload/a/b/", false, "files", 3},
		{"/api/v1/files%2Fupload/a", false, "files", 3}, // decoded, an upload
		{"/api/kb/k1", false, "kb", 2},
		{"/api/kb/k1/bulk", false, "kb", 10},
		{"/api/kb/k1/bulk/", false, "kb", 10},
		{"/api/kb/k1/bulk/x", false, "kb", 2},
		{"/api/kb/k1/docs/d/reindex", false, "kb", 2},
		{"/api/kb", false, "default", 1},
	} {
		if got := cfg.Exempt(c.path); got != c.exempt {
			t.Errorf("Exempt(%q) = %v, want %v", c.path, got, c.exempt)
		}
		if r, cost := cfg.Match("GET", c.path); r.Name != c.rule || cost != c.cost {
			t.Errorf("Match(%q) = %s, %d; want %s, %d", c.path, r.Name, cost, c.rule, c.cost)
		}
		wantRule := c.rule
		if c.exempt {
			wantRule = "<exempt>"
		}
		gotRule := "<exempt>"
		if r, cost := cfg.decideRule("GET", c.path, "", false); r != nil {
			gotRule = r.Name
			if cost != c.cost {
				t.Errorf("decide(%q): cost %d, want %d", c.path, cost, c.cost)
			}
		}
		if gotRule != wantRule {
			t.Errorf("decide(%q): %s, want %s", c.path, gotRule, wantRule)
		}
	}
	// Folding case: rules below a catch-all match without regard to
	// case, exempt paths still exactly.
	for _, c := range []struct {
		path Path
		rule string
		cost int64
	}{
		{"/API/Admin", "admin", 1},
		{"/api/ADMIN/x/Y", "admin", 1},
		{"/Api/V1/Files/Upload/x", "files", 3},
		{"/api/KB/k1/BULK", "kb", 10},
		{"/api/adminx", "default", 1},
		{"/Static/a", "default", 1},
	} {
		if r, cost := cfg.MatchFoldCase("GET", c.path); r.Name != c.rule || cost != c.cost {
			t.Errorf("MatchFoldCase(%q) = %s, %d; want %s, %d", c.path, r.Name, cost, c.rule, c.cost)
		}
		if r, cost := cfg.decideRule("GET", c.path, "", true); r == nil || r.Name != c.rule || cost != c.cost {
			t.Errorf("decide(%q, fold) = %v, %d; want %s, %d", c.path, r, cost, c.rule, c.cost)
		}
	}
	if cfg.Exempt("/Static/a") {
		t.Error("Exempt(/Static/a) = true, want false")
	}
	every := mustParse(t, "rate_limit:\n  enabled: true\n  exempt_paths: [\"/**\"]\n")
	for p, want := range map[Path]bool{"/": true, "/x": true, "/x/": true, "/a/b%2Fc/..": true, "//": true, "": false, "*": false} {
		if got := every.Exempt(p); got != want {
			t.Errorf("exempt_paths [/**]: Exempt(%q) = %v, want %v", p, got, want)
		}
	}
	// Clean paths cost no allocation below a catch-all either.
	for _, p := range []Path{"/api/admin/x/y", "/api/kb/k1/bulk", "/static/a/b"} {
		if n := testing.AllocsPerRun(100, func() { cfg.decideRule("GET", p, "", false); cfg.Match("GET", p) }); n != 0 {
			t.Errorf("decide(%q): %v allocations, want 0", p, n)
		}
	}
}

// TestCatchAllRoutes: a route's cached answer holds for every path of the
// route when catch-alls are about, and a route whose paths they split, or
// whose template is itself a catch-all, is matched by path: with the
// route or without, every spelling of every path gets the same answer.
func TestCatchAllRoutes(t *testing.T) {
	cfg := mustParse(t, catchAllConfig)
	for _, c := range []struct {
		route   string
		decided bool
		exempt  bool
		rule    string
		cost    int64
	}{
		{"/api/admin", true, false, "admin", 1},
		{"/api/admin/:section", true, false, "admin", 1},
		{"/api/admin/{section}/:id/x", true, false, "admin", 1},
		{"/api/:area", false, false, "", 0}, // "/api/admin" is one value of :area
		{"/api/:area/files/:f", false, false, "", 0},
		{"/api/v1/files/:f", false, false, "", 0},      // "upload" is one value of :f, a weight's
		{"/api/v1/files/:dir/:f", false, false, "", 0}, // and of :dir
		{"/api/v1/files/upload", true, false, "files", 3},
		{"/api/v1/files/upload/:f/:g", true, false, "files", 3},
		{"/api/v1/files/x/:f", true, false, "files", 1},
		{"/api/kb/:id", false, false, "", 0}, // "files" is one value of :id, the files rule's
		{"/api/kb/:id/bulk", false, false, "", 0},
		{"/api/kb/k1/bulk", true, false, "kb", 10},
		{"/api/kb/k1/bulk/:x", true, false, "kb", 2},
		{"/api/kb/k1/:op", false, false, "", 0},
		{"/static/:file", true, true, "", 0},
		{"/static/css/:a/:b", true, true, "", 0},
		{"/static", true, true, "", 0},
		{"/docs/:v", true, true, "", 0},
		{"/docs", true, false, "default", 1},
		{"/:top/:file", false, false, "", 0},
		{"/other/:x", true, false, "default", 1},
		// Catch-all templates: never decided by their template.
		{"/static/*filepath", false, false, "", 0},
		{"/static/{path...}", false, false, "", 0},
		{"/api/admin/*", false, false, "", 0},
		{"/api/admin/+", false, false, "", 0},
		{"/api/admin/**", false, false, "", 0},
	} {
		a := cfg.route("GET", c.route)
		got := fmt.Sprintf("decided=%v exempt=%v", a.decided, a.exempt)
		want := fmt.Sprintf("decided=%v exempt=%v", c.decided, c.exempt)
		if a.decided && !a.exempt {
			got += fmt.Sprintf(" rule=%s cost=%d", a.rule.Name, a.cost)
			want += fmt.Sprintf(" rule=%s cost=%d", c.rule, c.cost)
		}
		if got != want {
			t.Errorf("route %q: got %s, want %s", c.route, got, want)
		}
	}
	routes := map[string][]string{
		"/api/admin":                 {"/api/admin"},
		"/api/admin/:section":        {"/api/admin/users", "/api/admin/x"},
		"/api/:area":                 {"/api/admin", "/api/administrator", "/api/kb"},
		"/api/v1/files/:dir/:f":      {"/api/v1/files/upload/a", "/api/v1/files/x/a"},
		"/api/kb/:id/:op":            {"/api/kb/k1/bulk", "/api/kb/k1/x"},
		"/static/:file":              {"/static/app.js", "/static/x"},
		"/:top/:file":                {"/static/a", "/docs/a", "/api/admin", "/other/a"},
		"/static/*filepath":          {"/static/", "/static/a", "/static/a/b"},
		"/static/{path...}":          {"/static/", "/static/a/b/c"},
		"/api/admin/*":               {"/api/admin/", "/api/admin/a/b"},
		"/files/*":                   {"/files/a", "/files/a/b"},
		"/docs/{v}/{rest...}":        {"/docs/v1/", "/docs/v1/a/b"},
		"/api/kb/:id/*rest":          {"/api/kb/k1/bulk", "/api/kb/k1/bulk/x"},
		"/api/admin/{section}/:id/x": {"/api/admin/a/b/x"},
	}
	variants := func(p string) []string {
		return []string{
			p, p + "/", p + "//", strings.Replace(p, "/", "//", 1),
			strings.Replace(p, "/", "%2F", 2), strings.Replace(p, "/", "%2f", 1),
			strings.Replace(p, "a", "%61", 1), "/x/.." + p, "/x/%2e%2e" + p, p + "/.", p + "/x/..", p + "/..",
			strings.ToUpper(p),
		}
	}
	checked := 0
	for route, paths := range routes {
		for _, p := range paths {
			for _, v := range variants(p) {
				for _, fold := range []bool{false, true} {
					for _, method := range []string{"GET", "POST"} {
						r1, c1 := cfg.decideRule(method, Path(v), route, fold)
						r2, c2 := cfg.decideRule(method, Path(v), "", fold)
						if r1 != r2 || c1 != c2 {
							t.Errorf("%s %q (fold %v) with route %q: %v %d; without: %v %d", method, v, fold, route, r1, c1, r2, c2)
						}
						checked++
					}
				}
			}
		}
	}
	if checked < 1000 {
		t.Fatalf("%d decisions checked", checked)
	}
}

// TestFirstRuleAnySpelling: the rule is the first, in rule order, that
// some spelling matches, whichever spelling it is; its cost is the highest
// a matching spelling has under it.
// TestStrictestRuleWhenSpellingsDisagree: when spellings of one request
// first match different rules, it counts under the strictest of them, so that a
// client cannot pick an earlier, more generous rule by spelling a strict
// rule's path oddly; among equally strict rules, the earliest.
func TestStrictestRuleWhenSpellingsDisagree(t *testing.T) {
	cfg := mustParse(t, "rate_limit:\n  enabled: true\n  rules:\n"+
		"    - {name: kb_read, paths: [\"/api/kb/*\"], limit: 100/minute}\n"+
		"    - {name: reindex, paths: [\"/api/kb/*/reindex\"], limit: 2/minute}\n"+
		"    - name: batch\n      paths: [\"/api/b/*\", \"/api/b/*/*\"]\n      limit: 100/minute\n      weights: {\"/api/b/*/*\": 60}\n"+
		"    - {name: other, paths: [\"/api/b\"], limit: 10/minute}\n")
	for _, c := range []struct {
		path Path
		rule string
		cost int64
	}{
		{"/api/kb/k1/reindex", "reindex", 1},
		{"/api/kb/k1", "kb_read", 1},
		// Echo and Fiber serve it as /api/kb/:id/reindex; decoded and
		// cleaned it is /api/kb/reindex, which kb_read matches first.
		{"/api/kb/k1%2F../reindex", "reindex", 1},
		{"/api/kb/k1%2f%2e%2e/reindex", "reindex", 1},
		// batch at cost 60 admits 1.67 a minute: stricter than other.
		{"/api/b/x%2F..", "batch", 60},
		// One spelling: the first rule that matches, whatever the others.
		{"/api/kb/reindex", "kb_read", 1},
	} {
		if r, cost := cfg.Match("POST", c.path); r.Name != c.rule || cost != c.cost {
			t.Errorf("Match(%q) = %s at %d, want %s at %d", c.path, r.Name, cost, c.rule, c.cost)
		}
	}
	// An exception before a general, stricter rule: every spelling's first
	// rule is the exception, so a trailing slash or an escape keeps it.
	exception := mustParse(t, "rate_limit:\n  enabled: true\n  rules:\n"+
		"    - {name: bulk, paths: [\"/api/bulk/*\"], limit: 1000/minute}\n"+
		"    - {name: general, paths: [\"/api/*/*\"], limit: 10/minute}\n")
	for _, p := range []Path{"/api/bulk/x", "/api/bulk/x/", "/api/bulk/%78", "/api//bulk/x"} {
		if r, _ := exception.Match("GET", p); r.Name != "bulk" {
			t.Errorf("Match(%q) = %s, want bulk (the first rule of every spelling)", p, r.Name)
		}
		if r, _ := exception.MatchFoldCase("GET", p); r.Name != "bulk" {
			t.Errorf("MatchFoldCase(%q) = %s, want bulk", p, r.Name)
		}
	}
	// Equally strict: the earliest.
	tie := mustParse(t, "rate_limit:\n  enabled: true\n  rules:\n"+
		"    - {name: first, paths: [\"/*\"], limit: 1/s}\n"+
		"    - {name: second, paths: [/a/b], limit: 60/minute}\n")
	if r, _ := tie.Match("GET", "/a%2Fb"); r.Name != "first" {
		t.Errorf("Match(/a%%2Fb) with two equally strict rules = %s, want first", r.Name)
	}
}

func TestFirstRuleAnySpelling(t *testing.T) {
	decodedFirst := mustParse(t, "rate_limit:\n  enabled: true\n  rules:\n"+
		"    - {name: two, paths: [/a/b], limit: 1/s}\n"+
		"    - {name: one, paths: [\"/*\"], limit: 1/s}\n")
	sentFirst := mustParse(t, "rate_limit:\n  enabled: true\n  rules:\n"+
		"    - {name: one, paths: [\"/*\"], limit: 1/s}\n"+
		"    - {name: two, paths: [/a/b], limit: 1/s}\n")
	for cfg, want := range map[*Config]string{decodedFirst: "two", sentFirst: "one"} {
		if r, _ := cfg.Match("GET", "/a%2Fb"); r.Name != want {
			t.Errorf("Match(/a%%2Fb) = %s, want %s", r.Name, want)
		}
	}
	weighted := mustParse(t, "rate_limit:\n  enabled: true\n  rules:\n"+
		"    - name: kb\n      paths: [\"/kb/*\", \"/kb/*/*\"]\n      limit: 10/s\n      weights: {\"/kb/*/*\": 5}\n")
	for p, want := range map[Path]int64{"/kb/a": 1, "/kb/a/b": 5, "/kb/a%2Fb": 5, "/kb/a%2Fb/": 5, "/kb/a/..": 5} {
		if r, cost := weighted.Match("GET", p); r.Name != "kb" || cost != want {
			t.Errorf("Match(%q) = %s, %d; want kb, %d", p, r.Name, cost, want)
		}
	}
}

// TestURLPath: the path net/http routers read, as sent when the request
// had escapes that are not the default ones.
func TestURLPath(t *testing.T) {
	for _, c := range []struct {
		target string
		want   Path
	}{
		{"/api/search", "/api/search"},
		{"/api/search/?q=%2F", "/api/search/"},
		{"/api%2Fsearch", "/api%2Fsearch"},
		{"/api/kb/a%2fb/reindex", "/api/kb/a%2fb/reindex"},
		{"/%68ealth", "/%68ealth"},
		{"/api/kb/a%2Fb{/reindex", "/api/kb/a%2Fb{/reindex"}, // RawPath kept though EscapedPath drops it
		// Default escapes: every net/http router reads u.Path.
		{"/a%20b", "/a b"},
		{"/caf%C3%A9", "/café"},
		// A '%' in u.Path is escaped again: decoded once it is u.Path.
		{"/api%252Fsearch", "/api%252Fsearch"},
		{"/100%25", "/100%25"},
		{"", ""},
		{"*", "*"},
	} {
		u, err := url.ParseRequestURI(c.target)
		if c.target == "" {
			u, err = &url.URL{}, nil
		}
		if err != nil {
			t.Fatalf("%q: %v", c.target, err)
		}
		got := URLPath(u)
		if got != c.want {
			t.Errorf("URLPath(%q) = %q, want %q", c.target, got, c.want)
		}
		if d := decode(string(got), false); d != u.Path {
			t.Errorf("URLPath(%q) = %q decodes to %q, want u.Path %q", c.target, got, d, u.Path)
		}
	}
	// A RawPath that no longer decodes to Path (a middleware changed only
	// Path) is not used: handlers read Path.
	u := &url.URL{Path: "/api/search", RawPath: "/health%2F"}
	if got := URLPath(u); got != "/api/search" {
		t.Errorf("URLPath with a stale RawPath = %q, want %q", got, "/api/search")
	}
	u, _ = url.Parse("/api/kb/kb-01/docs/upload")
	if n := testing.AllocsPerRun(100, func() { _ = URLPath(u) }); n != 0 {
		t.Errorf("URLPath of a clean path: %v allocations, want 0", n)
	}
}

// TestDecodesTo agrees with decode on every escape form.
func TestDecodesTo(t *testing.T) {
	for _, raw := range []string{"", "/", "/a%2Fb", "/a%2fb%41", "/%", "/%4", "/%zz", "/%%41", "/a%00", "/caf%C3%A9", "/x%252F"} {
		d := decode(raw, false)
		if !decodesTo(raw, d) {
			t.Errorf("decodesTo(%q, %q) = false, want true", raw, d)
		}
		for _, other := range []string{d + "x", strings.TrimSuffix(d, d[max(0, len(d)-1):]), raw + "%"} {
			if other != d && decodesTo(raw, other) {
				t.Errorf("decodesTo(%q, %q) = true, want false", raw, other)
			}
		}
	}
}

// TestSpellingAllocs: a clean path, or one whose only other spelling is
// a substring (a trailing slash), allocates nothing; the worst case a few
// copies, however long the path.
func TestSpellingAllocs(t *testing.T) {
	cfg, err := ParseConfig([]byte(spellingsConfig), "spellings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []Path{"/api/search", "/api/kb/kb-01/docs/upload/batch", "/health", "/other/", "/api/kb/a/b/reindex"} {
		if n := testing.AllocsPerRun(100, func() { cfg.decideRule("POST", p, "", false) }); n != 0 {
			t.Errorf("decide(%q): %v allocations, want 0", p, n)
		}
	}
	for _, n := range []int{10, 10_000} {
		seg := "a%2F..%2F%2e%2e//./x/"
		long := Path("/" + strings.Repeat(seg, n) + "api/search")
		allocs := testing.AllocsPerRun(10, func() {
			if r, _ := cfg.decideRule("GET", long, "", false); r == nil || r.Name != "default" {
				t.Fatalf("decide(%d segments) = %v, want default", n, r)
			}
		})
		if allocs > 8 { // two decodings, three cleanings (path.Clean makes two)
			t.Errorf("decide of a path %d bytes long: %v allocations, want at most 8", len(long), allocs)
		}
	}
}

// TestRouteSameAnswerAnySpelling: for every spelling of a route's paths,
// the decision with the route is the decision without it: a route answer
// is used only where it is the answer every spelling gives.
func TestRouteSameAnswerAnySpelling(t *testing.T) {
	cfg, err := ParseConfig([]byte(spellingsConfig+"\n"), "spellings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	routes := map[string][]string{
		"/health":                       {"/health"},
		"/ready":                        {"/ready"},
		"/static/:file":                 {"/static/app.js", "/static/x"},
		"/api/search":                   {"/api/search"},
		"/api/kb/:id/reindex":           {"/api/kb/k1/reindex", "/api/kb/docs/reindex"},
		"/api/kb/:id/docs/upload/batch": {"/api/kb/k1/docs/upload/batch"},
		"/:a/:b":                        {"/api/search", "/health/x", "/static/x"},
		"/:a":                           {"/health", "/mcp", "/ready", "/docs"},
		"/docs":                         {"/docs"}, // only "/docs/" is listed
	}
	variants := func(p string) []string {
		return []string{
			p, p + "/", p + "//", strings.Replace(p, "/", "//", 1),
			strings.Replace(p, "/", "%2F", 2), strings.Replace(p, "/", "%2f", 1),
			strings.Replace(p, "a", "%61", 1), strings.Replace(p, "e", "%65", 1),
			"/x/.." + p, "/x/%2e%2e" + p, p + "/.", p + "/x/..", "/." + p,
			p + "%00", p + "%", p + "%2F",
		}
	}
	checked := 0
	for route, paths := range routes {
		for _, p := range paths {
			for _, v := range variants(p) {
				for _, method := range []string{"GET", "POST"} {
					r1, c1 := cfg.decideRule(method, Path(v), route, false)
					r2, c2 := cfg.decideRule(method, Path(v), "", false)
					if r1 != r2 || c1 != c2 {
						t.Errorf("%s %q with route %q: %v %d; without: %v %d", method, v, route, r1, c1, r2, c2)
					}
					checked++
				}
			}
		}
	}
	if cfg.CachedRoutes() == 0 || checked < 300 {
		t.Fatalf("%d routes cached, %d decisions checked", cfg.CachedRoutes(), checked)
	}
}

// FuzzSpellings: any path gives at most maxSpellings distinct spellings,
// the first the path itself; no spelling matches a stricter rule than the
// one the path counts under;
// and a route never changes the decision. Under the example configuration
// and under one of catch-alls.
func FuzzSpellings(f *testing.F) {
	for _, s := range []string{
		"/api/search", "/api%2Fsearch", "/health/", "/health%2F", "/%68ealth", "/api/kb/a%2Fb/reindex",
		"/files/%2e%2e/health", "/a%252F", "/%", "/a%zz", "/x%00", "//", "/..", "", "*", "/static/a%2Fb/", "/static/a%2Fb",
		"/static", "/static/", "/static/../api/admin", "/api/admin%2Fx", "/api/v1/files/upload/a", "/docs/v/../..",
	} {
		f.Add(s)
	}
	cfgs := []*Config{mustParse(f, spellingsConfig), mustParse(f, catchAllConfig)}
	f.Fuzz(func(t *testing.T, p string) {
		for _, cfg := range cfgs {
			checkSpellings(t, cfg, p)
		}
	})
}

// checkSpellings is FuzzSpellings for one path under cfg.
func checkSpellings(t *testing.T, cfg *Config, p string) {
	var buf [maxSpellings]string
	sp := spellings(Path(p), &buf)
	if len(sp) < 1 || len(sp) > maxSpellings || sp[0] != p || clean(p) && len(sp) != 1 {
		t.Fatalf("spellings(%q) = %q", p, sp)
	}
	for _, route := range []string{"/:a", "/api/search", "/api/kb/:id/reindex"} {
		r1, c1 := cfg.decideRule("GET", Path(p), route, true)
		r2, c2 := cfg.decideRule("GET", Path(p), "", true)
		if r1 != r2 || c1 != c2 {
			t.Fatalf("%q folded, with route %q: %v %d; without: %v %d", p, route, r1, c1, r2, c2)
		}
	}
	rule, cost := cfg.Match("GET", Path(p))
	matched := rule == cfg.def
	for _, s := range sp {
		matched = matched || rule.pathOf(trimSlash(s), false) >= 0
		if !clean(s) {
			continue // its own spellings would decode it again
		}
		if r, c := cfg.Match("GET", Path(s)); r != cfg.def && r != rule && (rule == cfg.def || r.rate(c) < rule.rate(cost)) {
			t.Fatalf("%q counts under %s, but its spelling %q matches %s, which is stricter", p, rule.Name, s, r.Name)
		}
		if cfg.Exempt(Path(p)) && !cfg.Exempt(Path(s)) {
			t.Fatalf("%q is exempt, but not its spelling %q", p, s)
		}
	}
	if !matched {
		t.Fatalf("%q counts under %s, which none of its spellings %q matches", p, rule.Name, sp)
	}
	for _, route := range []string{"/:a", "/:a/:b", "/api/kb/:id/reindex", "/static/:f", "/health", "/api/admin/:x", "/static/*filepath", "/static/{p...}"} {
		r1, c1 := cfg.decideRule("GET", Path(p), route, false)
		r2, c2 := cfg.decideRule("GET", Path(p), "", false)
		if r1 != r2 || c1 != c2 {
			t.Fatalf("%q with route %q: %v %d; without: %v %d", p, route, r1, c1, r2, c2)
		}
	}
}

// TestFoldCase: behind a router that ignores case (Flow.FoldCase), rules
// and weights match every spelling without regard to ASCII case, whichever
// case the pattern is written in, and exempt paths still match exactly;
// without folding, paths are case-sensitive. A route's answer is used
// only where it gives the same.
func TestFoldCase(t *testing.T) {
	cfg, err := ParseConfig([]byte(strings.Replace(spellingsConfig, "  default:", `    - name: users
      paths: ["/api/Users", "/api/Users/*"]
      limit: "3/second"
      weights:
        "/api/Users/*": 2
  default:`, 1)), "spellings.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path  Path
		route string
		fold  bool
		rule  string // "" for exempt
		cost  int64
	}{
		{"/api/search", "", true, "search", 1},
		{"/API/search", "", true, "search", 1},
		{"/API/search", "", false, "default", 1},
		{"/API/search", "/api/search", true, "search", 1},
		{"/Api%2FSearch", "", true, "search", 1},
		{"/%41PI/search", "", true, "search", 1},
		{"/api/KB/x/docs/upload/BATCH", "", true, "upload", 10},
		{"/api/Users", "", true, "users", 1},
		{"/api/users", "", true, "users", 1},
		{"/api/users", "/api/users", true, "users", 1},
		{"/API/USERS", "", true, "users", 1},
		{"/api/users/7", "/api/users/:id", true, "users", 2},
		{"/api/users", "", false, "default", 1},
		{"/api/Users", "/api/Users", false, "users", 1},
		{"/health", "", true, "", 0},
		{"/health", "/health", true, "", 0},
		{"/HEALTH", "", true, "default", 1},
		{"/Health", "", false, "default", 1},
		{"/caf%C3%A9", "", true, "default", 1}, // "é" is no ASCII letter
	} {
		rule, cost := cfg.decideRule("GET", c.path, c.route, c.fold)
		name := ""
		if rule != nil {
			name = rule.Name
		}
		if name != c.rule || cost != c.cost {
			t.Errorf("decide(%q, route %q, fold %v) = %q at %d, want %q at %d", c.path, c.route, c.fold, name, cost, c.rule, c.cost)
		}
		if c.route == "" && c.rule != "" {
			match := cfg.Match
			if c.fold {
				match = cfg.MatchFoldCase
			}
			if r, cost := match("GET", c.path); r.Name != c.rule || cost != c.cost {
				t.Errorf("Match(%q, fold %v) = %q at %d, want %q at %d", c.path, c.fold, r.Name, cost, c.rule, c.cost)
			}
		}
	}
	// Patterns all in lower case: a route's answer is used, unless the
	// route itself has upper case (Fiber serves "/API/search" by it).
	lower := mustParse(t, "rate_limit:\n  enabled: true\n  rules:\n    - {name: search, paths: [/api/search], limit: 1/s}\n")
	for _, c := range []struct {
		path, route string
		fold        bool
		rule        string
	}{
		{"/API/search", "/API/search", true, "search"},
		{"/API/search", "/API/search", false, "default"},
		{"/api/search", "/api/search", true, "search"},
	} {
		if r, _ := lower.decideRule("GET", Path(c.path), c.route, c.fold); r.Name != c.rule {
			t.Errorf("lower-case patterns: decide(%q, route %q, fold %v) = %s, want %s", c.path, c.route, c.fold, r.Name, c.rule)
		}
	}
	// A clean path costs no allocation, folded or not.
	if n := testing.AllocsPerRun(100, func() { cfg.decideRule("GET", "/API/Search", "", true) }); n != 0 {
		t.Errorf("decide(/API/Search, fold): %v allocations, want 0", n)
	}
}

func ExamplePath() {
	cfg, _ := ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
  exempt_paths: ["/health"]
`), "example.yaml")
	for _, p := range []Path{"/health", "/health/", "/%68ealth", "/api%2Fsearch", "/api//search/"} {
		r, _ := cfg.Match("GET", p)
		fmt.Printf("%-14s exempt=%-5v rule=%s\n", p, cfg.Exempt(p), r.Name)
	}
	// Output:
	// /health        exempt=true  rule=default
	// /health/       exempt=false rule=default
	// /%68ealth      exempt=false rule=default
	// /api%2Fsearch  exempt=false rule=search
	// /api//search/  exempt=false rule=search
}

// decideRule is decide's enforced rule and cost, nil when exempt.
func (c *Config) decideRule(method string, p Path, route string, fold bool) (*Rule, int64) {
	m, exempt := c.decide(method, p, route, fold)
	if exempt {
		return nil, 0
	}
	return m.rule, m.cost
}
