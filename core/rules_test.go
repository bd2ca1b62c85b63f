package core

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// oneRule compiles a configuration whose only rule, "r", has the given paths.
func oneRule(t testing.TB, paths ...string) *Config {
	t.Helper()
	c, err := NewConfig(Spec{Enabled: true, Rules: []RuleSpec{{Name: "r", Paths: paths, Limit: []string{"10/second"}}}})
	if err != nil {
		t.Fatalf("NewConfig(paths %q): unexpected error %v", paths, err)
	}
	return c
}

func TestPatternMatch(t *testing.T) {
	long := "/" + strings.Repeat("segment/", 2000) + "end"
	tests := []struct {
		pattern string
		path    string
		want    bool
	}{
		// The root.
		{"/", "/", true},
		{"/", "", false},
		{"/", "/a", false},
		{"/", "//", true},  // one trailing slash is dropped: "//" is "/"
		{"/", "///", true}, // cleaned to "/"

		// Literal paths and trailing slashes on either side.
		{"/a", "/a", true},
		{"/a", "/a/", true},
		{"/a/", "/a", true},
		{"/a/", "/a/", true},
		{"/a", "/a//", true}, // cleaned to "/a"
		{"/a", "/ab", false},
		{"/ab", "/a", false},
		{"/a", "/a/b", false},
		{"/a/b", "/a", false},
		{"/a", "/A", false},
		{"/a/b/c", "/a/b/c", true},
		{"/a/b/c", "/a/b/c/", true},
		{"/a/b/c", "/a/b/d", false},

		// Paths with no leading slash never match.
		{"/a", "a", false},
		{"/a", "a/", false},
		{"/*", "a", false},
		{"/", "a", false},
		{"/a", " /a", false},

		// Wildcards: exactly one non-empty segment.
		{"/*", "/x", true},
		{"/*", "/x/", true},
		{"/*", "/", false},
		{"/*", "/x/y", false},
		{"/a/*", "/a/x", true},
		{"/a/*", "/a/", false},
		{"/a/*", "/a", false},
		{"/a/*", "/a//", false},
		{"/a/*/b", "/a/x/b", true},
		{"/a/*/b", "/a//b", false},
		{"/a/*/b", "/a/x/y/b", false},
		{"/a/*/b", "/a/x/b/c", false},
		{"/*/*", "/x/y", true},
		{"/*/*", "/x", false},
		{"/*/*", "/x//", false},
		{"/*/b/*", "/a/b/c", true},
		{"/*/b/*", "/a/c/c", false},
		{"/a/*", "/a/*", true},
		{"/a/*", "/a/%2F", true},
		{"/a/*", "/a/..", true}, // as written: a router that does not clean serves it from "/a/:x"
		{"/a/*/b", "/a/x/../b", false},
		// Spellings that a router may still send to the handler cannot dodge the rule.
		{"/api/kb/*/reindex", "/api/kb/x/./reindex", true},
		{"/api/kb/*/reindex", "/health/../api/kb/x/reindex", true},
		{"/api/kb/*/reindex", "/api//kb/x/reindex", true},

		// Unicode segments compare byte for byte.
		{"/검색", "/검색", true},
		{"/검색", "/검색/", true},
		{"/검색/*", "/검색/문서", true},
		{"/*/docs", "/ünïcödé/docs", true},
		{"/café", "/cafe\u0301", false}, // no normalisation
		{"/emoji/*", "/emoji/🦀", true},
		{"/a", "/a\x00", false},

		// Very long paths.
		{"/segment/*", long, false},
		{"/*", long, false},
		{long, long, true},
		{long, long + "/", true},
		{long, long + "x", false},
		{long + "/*", long + "/x", true},
		{"/" + strings.Repeat("*/", 50) + "*", "/" + strings.Repeat("x/", 50) + "x", true},
		{"/" + strings.Repeat("*/", 50) + "*", "/" + strings.Repeat("x/", 51) + "x", false},
		{"/" + strings.Repeat("*/", 50) + "*", "/" + strings.Repeat("x/", 49) + "x", false},

		// Router syntax: ":name" and "{name}" are '*'.
		{"/api/items/:id", "/api/items/7", true},
		{"/api/items/:id", "/api/items/7/", true},
		{"/api/items/:id", "/api/items/7/x", false},
		{"/api/items/:id", "/api/items", false},
		{"/api/items/:id", "/api/items/", false},
		{"/api/items/:id", "/api/items/:id", true},
		{"/api/things/{id}", "/api/things/7", true},
		{"/api/things/{id}", "/api/things/7/x", false},
		{"/api/things/{id}", "/api/things", false},
		{"/:a/{b}/*/c", "/x/y/z/c", true},
		{"/:a/{b}/*/c", "/x/y/c", false},
		{"/:_x9", "/anything", true},
		{"/{Item_ID}/x", "/7/x", true},
		{"/{Item_ID}/x", "/7/X", false},
		// ':' after a segment's first byte is a literal.
		{"/v1/items:batchGet", "/v1/items:batchGet", true},
		{"/v1/items:batchGet", "/v1/items", false},
		{"/v1/items:batchGet", "/v1/x", false},
		{"/a/a:b", "/a/a:b", true},
		{"/a/a:b", "/a/a", false},
		{"/a/a:b", "/a/x:b", false},

		// The catch-all: the prefix itself and everything below it.
		{"/api/admin/**", "/api/admin", true},
		{"/api/admin/**", "/api/admin/", true},
		{"/api/admin/**", "/api/admin/x", true},
		{"/api/admin/**", "/api/admin/x/", true},
		{"/api/admin/**", "/api/admin/x/y", true},
		{"/api/admin/**", "/api/admin/x/y/z/w", true},
		{"/api/admin/**", "/api/admin//x", true},
		{"/api/admin/**", "/api/admin/..", true}, // as sent, like '*'
		{"/api/admin/**", "/api/admin/%2F", true},
		{"/api/admin/**", "/api/administrator", false},
		{"/api/admin/**", "/api/administrator/x", false},
		{"/api/admin/**", "/api/admi", false},
		{"/api/admin/**", "/api/adminx/y", false},
		{"/api/admin/**", "/api", false},
		{"/api/admin/**", "/api/", false},
		{"/api/admin/**", "/", false},
		{"/api/admin/**", "", false},
		{"/api/admin/**", "api/admin/x", false},
		{"/api/admin/**", "/API/admin/x", false},
		{"/api/admin/**", "/x/api/admin", false},
		// No spelling escapes it.
		{"/api/admin/**", "/api/admin%2Fx", true},
		{"/api/admin/**", "/api%2Fadmin/x", true},
		{"/api/admin/**", "/api/x/../admin/y", true},
		{"/api/admin/**", "/api/%61dmin/y", true},
		{"/api/admin/**", "/api//admin/y/", true},
		// Every path.
		{"/**", "/", true},
		{"/**", "/x", true},
		{"/**", "/x/", true},
		{"/**", "/x/y/z", true},
		{"/**", "//", true},
		{"/**", "", false},
		{"/**", "x", false},
		{"/**", long, true},
		// One-segment wildcards before it.
		{"/api/*/files/**", "/api/v1/files", true},
		{"/api/*/files/**", "/api/v1/files/", true},
		{"/api/*/files/**", "/api/v1/files/a", true},
		{"/api/*/files/**", "/api/v1/files/a/b/c", true},
		{"/api/*/files/**", "/api/v1/filesx", false},
		{"/api/*/files/**", "/api/v1", false},
		{"/api/*/files/**", "/api/files", false},
		{"/api/*/files/**", "/api//files/a", false},
		{"/api/*/files/**", "/api/v1/v2/files/a", false},
		{"/api/kb/:id/**", "/api/kb/k1", true},
		{"/api/kb/:id/**", "/api/kb/k1/docs/d1/reindex", true},
		{"/api/kb/:id/**", "/api/kb", false},
		{"/api/kb/:id/**", "/api/kb/", false},
		{"/*/**", "/x", true},
		{"/*/**", "/x/y", true},
		{"/*/**", "/", false},
		{"/{a}/*/**", "/x/y/z", true},
		{"/{a}/*/**", "/x", false},
		{"/검색/**", "/검색/문서/x", true},
		{"/검색/**", "/검색x", false},
		{"/segment/**", long, true},
		{"/" + strings.Repeat("segment/", 2000) + "**", long, true},
		{"/" + strings.Repeat("segment/", 2001) + "**", long, false},
	}
	for _, tt := range tests {
		c := oneRule(t, tt.pattern)
		r, _ := c.Match("GET", Path(tt.path))
		if got := r.Name == "r"; got != tt.want {
			t.Errorf("pattern %.40q: Match(%.60q) = %q, want match %v", tt.pattern, tt.path, r.Name, tt.want)
		}
		// The compiled pattern agrees with Config.Match.
		p, err := compilePattern(tt.pattern)
		if err != nil {
			t.Fatalf("compilePattern(%.40q): %v", tt.pattern, err)
		}
		got := false // some spelling matches (see Config.Match)
		var buf [maxSpellings]string
		for _, s := range spellings(Path(tt.path), &buf) {
			got = got || p.match(trimSlash(s))
		}
		if got != tt.want {
			t.Errorf("compilePattern(%.40q).match(%.60q) = %v, want %v", tt.pattern, tt.path, got, tt.want)
		}
	}
}

func TestPatternFirstRuleWins(t *testing.T) {
	c, err := NewConfig(Spec{Rules: []RuleSpec{
		{Name: "specific", Paths: []string{"/api/kb/special/reindex"}, Limit: []string{"1/s"}},
		{Name: "wild", Paths: []string{"/api/kb/*/reindex"}, Limit: []string{"1/s"}},
		{Name: "wider", Paths: []string{"/api/*/*/reindex"}, Limit: []string{"1/s"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[Path]string{
		"/api/kb/special/reindex": "specific",
		"/api/kb/other/reindex":   "wild",
		"/api/xx/other/reindex":   "wider",
		"/api/kb/reindex":         "default",
	}
	for path, want := range tests {
		if r, _ := c.Match("GET", path); r.Name != want {
			t.Errorf("Match(%q) = %q, want %q", path, r.Name, want)
		}
	}
}

func TestPatternWeightsFirstMatch(t *testing.T) {
	c, err := NewConfig(Spec{Rules: []RuleSpec{{
		Name:  "kb",
		Paths: []string{"/kb/*", "/kb/*/*"},
		Limit: []string{"100/minute"},
		Weights: []WeightSpec{
			{Path: "/kb/big", Cost: 50},
			{Path: "/kb/*", Cost: 5},
			{Path: "/kb/*/bulk", Cost: 20},
		},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[Path]int64{
		"/kb/big":      50,
		"/kb/big/":     50,
		"/kb/small":    5,
		"/kb/x/bulk":   20,
		"/kb/x/bulk/":  20,
		"/kb/x/single": 1,
	}
	for path, want := range tests {
		r, cost := c.Match("POST", path)
		if r.Name != "kb" || cost != want {
			t.Errorf("Match(%q) = (%q, %d), want (%q, %d)", path, r.Name, cost, "kb", want)
		}
	}
}

func TestCompilePatternErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "empty path"},
		{"a", "path must start with '/'"},
		{"*", "path must start with '/'"},
		{" /a", "path must start with '/'"},
		{"/a?b", "path must not hold a query or fragment"},
		{"/a#b", "path must not hold a query or fragment"},
		{"//", "empty path segment ('//')"},
		{"///", "empty path segment ('//')"},
		{"//a", "empty path segment ('//')"},
		{"/a//b", "empty path segment ('//')"},
		{"/a//", "empty path segment ('//')"},
		{"/a*", `'*' must be a whole segment, not part of "a*"`},
		{"/a/b*c", `'*' must be a whole segment, not part of "b*c"`},
		{"/*a-b", `'*' must be a whole segment, not part of "*a-b"`},

		// Router syntax that is not one whole segment of any value.
		{"/files/*path", `"*path" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /files/** to match every depth`},
		{"/*a/b", `"*a" is a router's catch-all, which rlkit writes "**": "**" is allowed only as the last segment, where it matches any number of segments`},
		{"/a/*1", `"*1" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /a/** to match every depth`},
		{"/a/+", `"+" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /a/** to match every depth`},
		{"/a/+2", `"+2" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /a/** to match every depth`},
		{"/files/{path...}", `"{path...}" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /files/** to match every depth`},
		{"/a/:p*", `":p*" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /a/** to match every depth`},
		{"/a/:p+/b", `":p+" is a router's catch-all, which rlkit writes "**": "**" is allowed only as the last segment, where it matches any number of segments`},
		{"/:p*", `":p*" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /** to match every depth`},
		{"/api/*/files/*path", `"*path" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /api/*/files/** to match every depth`},
		{"/a/*path/**", `"*path" is a router's catch-all, which rlkit writes "**": "**" is allowed only as the last segment, where it matches any number of segments`},

		// The catch-all "**" anywhere but as the whole last segment.
		{"/a/**/b", `"**" is allowed only as the last segment, where it matches any number of segments`},
		{"/**/a", `"**" is allowed only as the last segment, where it matches any number of segments`},
		{"/**/**", `"**" is allowed only as the last segment, where it matches any number of segments`},
		{"/a/**x", `"**" is allowed only as the last segment, on its own, not as part of "**x"`},
		{"/a/x**", `"**" is allowed only as the last segment, on its own, not as part of "x**"`},
		{"/a/***", `"**" is allowed only as the last segment, on its own, not as part of "***"`},
		{"/a/**x/b", `"**" is allowed only as the last segment, on its own, not as part of "**x"`},
		{"/a/:id**", `"**" is allowed only as the last segment, on its own, not as part of ":id**"`},
		{"/a/**/", `"**" is allowed only as the last segment, with no trailing slash after it: write "/a/**"`},
		{"/**/", `"**" is allowed only as the last segment, with no trailing slash after it: write "/**"`},
		{"/a//**", "empty path segment ('//')"},
		{"/a/**?x", `"**" is allowed only as the last segment, on its own, not as part of "**?x"`},
		{"/a/**#", `"**" is allowed only as the last segment, on its own, not as part of "**#"`},
		{"/a?x/**", "path must not hold a query or fragment"},
		{"/users/:id?", `":id?" is an optional parameter, and rlkit has none: '*', ':name' or '{name}' stands for exactly one segment; list both depths (/users, /users/*)`},
		{"/:id?", `":id?" is an optional parameter, and rlkit has none: '*', ':name' or '{name}' stands for exactly one segment; list both depths (/, /*)`},
		{"/a/{$}", `"{$}" is an end anchor, and rlkit needs none: a pattern always matches the whole path; write "/a/"`},
		{"/a/:id<int>", `":id<int>" constrains its value, and rlkit does not: '*', ':name' or '{name}' stands for exactly one segment of any value; write '*' to count every value`},
		{`/a/:id(\d+)`, `":id(\\d+)" constrains its value, and rlkit does not: '*', ':name' or '{name}' stands for exactly one segment of any value; write '*' to count every value`},
		{"/a/{id:[0-9]+}", `"{id:[0-9]+}" constrains its value, and rlkit does not: '*', ':name' or '{name}' stands for exactly one segment of any value; write '*' to count every value`},
		{"/a/{id}.json", `"{id}.json" holds a parameter in part of a segment, and rlkit matches whole segments only: '*', ':name' or '{name}' stands for exactly one segment; write '*' to count every value`},
		{"/a/x{id}", `"x{id}" holds a parameter in part of a segment, and rlkit matches whole segments only: '*', ':name' or '{name}' stands for exactly one segment; write '*' to count every value`},
		{"/f/:from-:to", `":from-:to" holds a parameter in part of a segment, and rlkit matches whole segments only: '*', ':name' or '{name}' stands for exactly one segment; write '*' to count every value`},
		{"/v1/{name}:cancel", `"{name}:cancel" holds a parameter in part of a segment, and rlkit matches whole segments only: '*', ':name' or '{name}' stands for exactly one segment; write '*' to count every value`},
		{"/a/:", `":" is a parameter without a valid name (an ASCII letter or '_', then letters, digits or '_'): '*', ':name' or '{name}' stands for exactly one segment`},
		{"/a/:1", `":1" is a parameter without a valid name (an ASCII letter or '_', then letters, digits or '_'): '*', ':name' or '{name}' stands for exactly one segment`},
		{"/a/{}", `"{}" is a parameter without a valid name (an ASCII letter or '_', then letters, digits or '_'): '*', ':name' or '{name}' stands for exactly one segment`},
		{"/a/{-x}", `"{-x}" is a parameter without a valid name (an ASCII letter or '_', then letters, digits or '_'): '*', ':name' or '{name}' stands for exactly one segment`},
		// The segment is judged before the query: "?" there is optional.
		{"/a/:id?x", `":id?x" holds a parameter in part of a segment, and rlkit matches whole segments only: '*', ':name' or '{name}' stands for exactly one segment; write '*' to count every value`},
	}
	for _, tt := range tests {
		_, err := compilePattern(tt.in)
		if err == nil || err.Error() != tt.want {
			t.Errorf("compilePattern(%q) error = %v, want %q", tt.in, err, tt.want)
		}
	}
}

func TestPatternOverlaps(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"/a", "/a", true},
		{"/a", "/b", false},
		{"/a/*", "/a/b", true},
		{"/*/b", "/a/*", true},
		{"/a/*", "/a/b/c", false},
		{"/", "/", true},
		{"/", "/*", false},

		// Catch-alls, on either side (each row is checked both ways).
		{"/**", "/", true},
		{"/**", "/a/b/c", true},
		{"/**", "/**", true},
		{"/**", "/*/*", true},
		{"/a/**", "/a", true},
		{"/a/**", "/a/b/c", true},
		{"/a/**", "/*", true},
		{"/a/**", "/*/b", true},
		{"/a/**", "/b", false},
		{"/a/**", "/b/a", false},
		{"/a/**", "/", false},
		{"/a/b/**", "/a", false},
		{"/a/b/**", "/a/*", true},
		{"/a/b/**", "/a/c/d", false},
		{"/a/**", "/a/**", true},
		{"/a/**", "/b/**", false},
		{"/a/**", "/*/b/**", true},
		{"/a/b/**", "/*/c/**", false},
		{"/a/*/c/**", "/*/b/**", true},
		{"/a/*/c/**", "/a/b/d", false},
		{"/*/**", "/", false},
		{"/*/**", "/x", true},
	}
	for _, tt := range tests {
		a, err := compilePattern(tt.a)
		if err != nil {
			t.Fatal(err)
		}
		b, err := compilePattern(tt.b)
		if err != nil {
			t.Fatal(err)
		}
		if got := a.overlaps(&b); got != tt.want {
			t.Errorf("%q overlaps %q = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := b.overlaps(&a); got != tt.want {
			t.Errorf("%q overlaps %q = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestMatchAllocs(t *testing.T) {
	c := loadExample(t)
	paths := []Path{"/api/search", "/api/kb/kb-01/docs/upload/batch", "/api/kb/a/b/reindex", "/other/"}
	for _, p := range paths {
		allocs := testing.AllocsPerRun(100, func() { c.Match("POST", p) })
		if allocs != 0 {
			t.Errorf("Match(%q): %v allocations, want 0", p, allocs)
		}
	}
}

func BenchmarkMatch(b *testing.B) {
	// Measures rule matching alone over the example configuration, for a path that
	// falls through every rule to the default.
	c := loadExample(b)
	b.ReportAllocs()
	for b.Loop() {
		c.Match("POST", "/api/kb/a/b/reindex")
	}
}

func ExampleConfig_Match() {
	c, _ := ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: reindex
      paths: ["/api/kb/*/reindex"]
      limit: "2/minute"
`), "example.yaml")
	for _, p := range []Path{"/api/kb/kb-01/reindex", "/api/kb/a/b/reindex", "/api/kb/a%2Fb/reindex", "/api%2Fkb/k1/reindex/"} {
		r, cost := c.Match("POST", p)
		fmt.Println(p, r.Name, cost)
	}
	// Output:
	// /api/kb/kb-01/reindex reindex 1
	// /api/kb/a/b/reindex default 1
	// /api/kb/a%2Fb/reindex reindex 1
	// /api%2Fkb/k1/reindex/ reindex 1
}

// TestRouterSyntaxIsStar pins that ":name" and "{name}" compile to the
// pattern '*' gives, keeping the text as written, and that the route cache
// decides a route for such a rule as for '*'.
func TestRouterSyntaxIsStar(t *testing.T) {
	for _, tt := range []struct{ router, star string }{
		{"/api/items/:id", "/api/items/*"},
		{"/api/things/{id}", "/api/things/*"},
		{"/:a/{b}/x/", "/*/*/x/"},
		{"/v1/:name/a:b", "/v1/*/a:b"},
	} {
		p, err := compilePattern(tt.router)
		if err != nil {
			t.Fatalf("compilePattern(%q): %v", tt.router, err)
		}
		q, _ := compilePattern(tt.star)
		if p.raw != tt.router || p.prefix != q.prefix || !slices.Equal(p.segs, q.segs) || p.literal != q.literal || p.slash != q.slash {
			t.Errorf("compilePattern(%q) = %+v, want %+v but raw %q", tt.router, p, q, tt.router)
		}
		if !p.covers(&q) || !q.covers(&p) {
			t.Errorf("%q and %q do not cover each other", tt.router, tt.star)
		}
	}
	c := oneRule(t, "/api/items/:id")
	if got := c.Rules()[0].Paths(); !slices.Equal(got, []string{"/api/items/:id"}) {
		t.Errorf("Paths() = %q, want the text as written", got)
	}
	for _, route := range []string{"/api/items/:id", "/api/items/{id}"} {
		a := c.routeAnswer("GET", "/api/items/7", route)
		if a == nil || a.rule == nil || a.rule.Name != "r" || a.cost != 1 {
			t.Errorf("routeAnswer(GET, /api/items/7, %q) = %+v, want rule r at cost 1", route, a)
		}
	}
	if a := c.routeAnswer("GET", "/api/items/7/x", "/api/items/:id/x"); a == nil || a.rule == nil || a.rule.Name != DefaultRuleName {
		t.Errorf("routeAnswer(GET, /api/items/7/x) = %+v, want the default rule", a)
	}
}

// TestPatternRelationsExact checks covers, overlaps and matchRoute against
// matching itself, for every pattern of up to three segments of "a", "b"
// and '*', with and without a catch-all, over every path of up to four
// segments of "a", "b", "c" (a value no pattern names) and "" (an empty
// segment, which only a catch-all matches): p covers q exactly when every
// path q matches p matches, they overlap exactly when some path matches
// both, and a route of "a", "b" and ":" segments gets always, never or
// undecided exactly as all, none or some of its paths match. The paths
// are deep enough to hold a witness of each false answer.
func TestPatternRelationsExact(t *testing.T) {
	// seqs is every sequence of up to maxLen items of alphabet.
	seqs := func(alphabet []string, maxLen int) [][]string {
		out := [][]string{nil}
		for start := 0; start < len(out); start++ {
			if s := out[start]; len(s) < maxLen {
				for _, a := range alphabet {
					out = append(out, append(slices.Clip(s), a))
				}
			}
		}
		return out
	}
	var pats []pattern
	for _, segs := range seqs([]string{"a", "b", "*"}, 3) {
		for _, tail := range []string{"", "/**"} {
			raw := "/" + strings.Join(segs, "/") + tail
			if raw == "//**" {
				raw = "/**"
			}
			p, err := compilePattern(raw)
			if err != nil {
				t.Fatalf("compilePattern(%q): %v", raw, err)
			}
			pats = append(pats, p)
		}
	}
	seen := map[string]bool{}
	var paths []string
	for _, segs := range seqs([]string{"a", "b", "c", ""}, 4) {
		if p := trimSlash("/" + strings.Join(segs, "/")); !seen[p] {
			seen[p] = true
			paths = append(paths, p)
		}
	}
	matches := make([][]bool, len(pats))
	for i := range pats {
		matches[i] = make([]bool, len(paths))
		for j, path := range paths {
			matches[i][j] = pats[i].match(path)
		}
	}
	for i := range pats {
		for k := range pats {
			p, q := &pats[i], &pats[k]
			covers, overlaps := true, false
			for j := range paths {
				covers = covers && (!matches[k][j] || matches[i][j])
				overlaps = overlaps || matches[k][j] && matches[i][j]
			}
			if got := p.covers(q); got != covers {
				t.Errorf("%q covers %q = %v, want %v", p.raw, q.raw, got, covers)
			}
			if got := p.overlaps(q); got != overlaps {
				t.Errorf("%q overlaps %q = %v, want %v", p.raw, q.raw, got, overlaps)
			}
		}
	}
	// Routes: each parameter takes "a", "b" and "c".
	routes := 0
	for _, segs := range seqs([]string{"a", "b", ":"}, 4) {
		var fill func(i int, path []string) []string // the route's paths
		fill = func(i int, path []string) []string {
			if i == len(segs) {
				return []string{"/" + strings.Join(path, "/")}
			}
			if segs[i] != ":" {
				return fill(i+1, append(path, segs[i]))
			}
			var out []string
			for _, v := range []string{"a", "b", "c"} {
				out = append(out, fill(i+1, append(slices.Clip(path), v))...)
			}
			return out
		}
		routePaths := fill(0, nil)
		for i := range pats {
			n := 0
			for _, path := range routePaths {
				if pats[i].match(path) {
					n++
				}
			}
			want := undecided
			switch n {
			case 0:
				want = never
			case len(routePaths):
				want = always
			}
			if got := pats[i].matchRoute(segs); got != want {
				t.Errorf("%q matchRoute(%q) = %v, want %v", pats[i].raw, segs, got, want)
			}
			routes++
		}
	}
	if len(pats) != 80 || len(paths) != 276 || routes != 80*121 {
		t.Fatalf("%d patterns, %d paths, %d route checks", len(pats), len(paths), routes)
	}
}
