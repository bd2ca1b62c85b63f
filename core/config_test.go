package core

import (
	"bytes"
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
)

// yamlLines joins its arguments into a YAML document, one argument a line,
// so that line N of the document is argument N.
func yamlLines(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// mustParse compiles a YAML configuration or fails the test.
func mustParse(t testing.TB, doc string) *Config {
	t.Helper()
	c, err := ParseConfig([]byte(doc), "t.yaml")
	if err != nil {
		t.Fatalf("ParseConfig: unexpected error:\n%v", err)
	}
	return c
}

// loadExample loads the example configuration (testdata/ratelimit.yaml).
func loadExample(t testing.TB) *Config {
	t.Helper()
	c, err := LoadConfig(filepath.Join("testdata", "ratelimit.yaml"))
	if err != nil {
		t.Fatalf("LoadConfig: unexpected error:\n%v", err)
	}
	return c
}

func limits(t testing.TB, ss ...string) []algo.Limit {
	t.Helper()
	var out []algo.Limit
	for _, s := range ss {
		l, err := algo.ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func checkPolicy(t *testing.T, r *Rule, name string, a algo.Algorithm, want ...algo.Limit) {
	t.Helper()
	if r == nil {
		t.Fatalf("rule %q is nil", name)
	}
	if r.Name != name {
		t.Errorf("rule name = %q, want %q", r.Name, name)
	}
	p := r.Policy
	if p == nil {
		t.Fatalf("rule %q has no policy", name)
	}
	if p.Name != name {
		t.Errorf("rule %q: Policy.Name = %q, want %q", name, p.Name, name)
	}
	if p.Algorithm != a {
		t.Errorf("rule %q: Policy.Algorithm = %v, want %v", name, p.Algorithm, a)
	}
	if !slices.Equal(p.Limits, want) {
		t.Errorf("rule %q: Policy.Limits = %v, want %v", name, p.Limits, want)
	}
	if err := p.Validate(); err != nil {
		t.Errorf("rule %q: Policy.Validate() = %v, want nil", name, err)
	}
}

func TestExampleConfig(t *testing.T) {
	c := loadExample(t)
	if !c.Enabled() {
		t.Errorf("Enabled() = false, want true")
	}
	if got := c.Headers(); got != HeadersDraft {
		t.Errorf("Headers() = %v, want %v", got, HeadersDraft)
	}
	if !c.FailOpen() {
		t.Errorf("FailOpen() = false, want true")
	}
	var names []string
	for _, r := range c.Rules() {
		names = append(names, r.Name)
	}
	if want := []string{"search", "upload", "reindex", "mcp"}; !slices.Equal(names, want) {
		t.Fatalf("rule names = %q, want %q", names, want)
	}
	rs := c.Rules()
	checkPolicy(t, rs[0], "search", algo.FixedWindow, algo.Limit{Count: 10, Period: time.Second})
	checkPolicy(t, rs[1], "upload", algo.FixedWindow, algo.Limit{Count: 30, Period: time.Minute})
	checkPolicy(t, rs[2], "reindex", algo.FixedWindow, algo.Limit{Count: 2, Period: time.Minute})
	checkPolicy(t, rs[3], "mcp", algo.FixedWindow, algo.Limit{Count: 300, Period: time.Minute})
	checkPolicy(t, c.Default(), "default", algo.FixedWindow, algo.Limit{Count: 120, Period: time.Minute})

	paths := [][]string{
		{"/api/search"},
		{"/api/kb/*/docs/upload", "/api/kb/*/docs/upload/batch"},
		{"/api/kb/*/reindex", "/api/kb/*/docs/*/reindex"},
		{"/mcp"},
	}
	for i, r := range rs {
		if got := r.Paths(); !slices.Equal(got, paths[i]) {
			t.Errorf("rule %q: Paths() = %q, want %q", r.Name, got, paths[i])
		}
	}
	if got := c.Default().Paths(); len(got) != 0 {
		t.Errorf("default rule: Paths() = %q, want none", got)
	}
}

func TestExampleConfigMatch(t *testing.T) {
	c := loadExample(t)
	tests := []struct {
		method string
		path   Path
		rule   string
		cost   int64
	}{
		{"GET", "/api/search", "search", 1},
		{"POST", "/api/search", "search", 1},
		{"GET", "/api/search/", "search", 1},
		{"GET", "/api/search/x", "default", 1},
		{"GET", "/api/searchx", "default", 1},
		{"GET", "/api", "default", 1},
		{"POST", "/api/kb/kb-01/docs/upload", "upload", 1},
		{"POST", "/api/kb/kb-01/docs/upload/", "upload", 1},
		{"POST", "/api/kb/kb-01/docs/upload/batch", "upload", 10},
		{"POST", "/api/kb/kb-01/docs/upload/batch/", "upload", 10},
		{"POST", "/api/kb//docs/upload", "default", 1},
		{"POST", "/api/kb/kb-01/reindex", "reindex", 1},
		{"POST", "/api/kb/a/b/reindex", "default", 1},
		{"POST", "/api/kb//reindex", "default", 1},
		{"POST", "/api/kb/reindex", "default", 1},
		{"POST", "/api/kb/x/docs/y/reindex", "reindex", 1},
		{"POST", "/api/kb/x/docs//reindex", "default", 1},
		{"POST", "/mcp", "mcp", 1},
		{"POST", "/mcp/", "mcp", 1},
		{"POST", "/mcp/tools", "default", 1},
		{"GET", "/other", "default", 1},
		{"GET", "/", "default", 1},
		{"GET", "", "default", 1},
		// Matching ignores exempt paths: that is Exempt's job.
		{"GET", "/health", "default", 1},
	}
	for _, tt := range tests {
		r, cost := c.Match(tt.method, tt.path)
		if r == nil {
			t.Errorf("Match(%q, %q) rule = nil, want %q", tt.method, tt.path, tt.rule)
			continue
		}
		if r.Name != tt.rule || cost != tt.cost {
			t.Errorf("Match(%q, %q) = (%q, %d), want (%q, %d)", tt.method, tt.path, r.Name, cost, tt.rule, tt.cost)
		}
	}
	if r, _ := c.Match("GET", "/nowhere"); r != c.Default() {
		t.Errorf("Match of an unmatched path = %p, want Default() %p", r, c.Default())
	}
}

func TestExampleConfigExempt(t *testing.T) {
	c := loadExample(t)
	tests := []struct {
		path Path
		want bool
	}{
		{"/health", true},
		{"/health/", false}, // a router may serve it by another handler than /health's
		{"/ready", true},
		{"/docs", true},
		{"/docs/", false},
		{"/redoc", true},
		{"/openapi.json", true},
		{"/healthz", false},
		{"/health/live", false},
		{"/docs/x", false},
		{"/Health", false},
		{"health", false},
		{"/api/search", false},
		{"/", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := c.Exempt(tt.path); got != tt.want {
			t.Errorf("Exempt(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

func TestConfigMethods(t *testing.T) {
	c := mustParse(t, yamlLines(
		"rate_limit:",
		"  enabled: true",
		"  rules:",
		"    - name: search-write",
		"      paths: [/api/search]",
		"      methods: [POST, PUT]",
		"      limit: 1/second",
		"    - name: search-read",
		"      paths: [/api/search]",
		"      methods: [GET]",
		"      limit: 10/second",
		"    - name: search",
		"      paths: [/api/search]",
		"      limit: 5/second",
	))
	tests := []struct{ method, rule string }{
		{"POST", "search-write"},
		{"PUT", "search-write"},
		{"GET", "search-read"},
		{"DELETE", "search"},
		{"HEAD", "search-read"}, // GET covers HEAD
		{"post", "search"},      // methods compare exactly
	}
	for _, tt := range tests {
		if r, _ := c.Match(tt.method, "/api/search"); r.Name != tt.rule {
			t.Errorf("Match(%q, /api/search) = %q, want %q", tt.method, r.Name, tt.rule)
		}
	}

	only := mustParse(t, yamlLines(
		"rate_limit:",
		"  rules:",
		"    - name: upload",
		"      paths: [/upload]",
		"      methods: [POST]",
		"      limit: 1/second",
	))
	for method, want := range map[string]string{"POST": "upload", "GET": "default"} {
		if r, _ := only.Match(method, "/upload"); r.Name != want {
			t.Errorf("Match(%q, /upload) = %q, want %q", method, r.Name, want)
		}
	}
}

func TestConfigListLimit(t *testing.T) {
	c := mustParse(t, yamlLines(
		"rate_limit:",
		"  rules:",
		"    - name: api",
		"      paths: [/api/*]",
		`      limit: ["10/second", "500/hour"]`,
		`  default: ["100/minute", "1000/day"]`,
	))
	checkPolicy(t, c.Rules()[0], "api", algo.FixedWindow, limits(t, "10/second", "500/hour")...)
	checkPolicy(t, c.Default(), "default", algo.FixedWindow, limits(t, "100/minute", "1000/day")...)

	block := mustParse(t, yamlLines(
		"rate_limit:",
		"  rules:",
		"    - name: api",
		"      paths:",
		"        - /api/*",
		"      limit:",
		"        - 10/second",
		"        - 500/hour",
		"        - 2000/day",
		"        - 10000/7d",
	))
	checkPolicy(t, block.Rules()[0], "api", algo.FixedWindow, limits(t, "10/second", "500/hour", "2000/day", "10000/7d")...)
}

func TestConfigAlgorithms(t *testing.T) {
	c := mustParse(t, yamlLines(
		"rate_limit:",
		"  algorithm: sliding_window",
		"  rules:",
		"    - name: a",
		"      paths: [/a]",
		"      limit: 10/second",
		"    - name: b",
		"      paths: [/b]",
		"      limit: 10/second",
		"      algorithm: token_bucket",
		"      burst: 20",
		"    - name: c",
		"      paths: [/c]",
		"      limit: [10/second, 100/minute]",
		"      algorithm: gcra",
		"      burst: 15",
		"    - name: d",
		"      paths: [/d]",
		"      limit: 10/second",
		"      algorithm: fixed_window",
		"    - name: e",
		"      paths: [/e]",
		"      limit: 10/second",
		"      algorithm: token_bucket",
	))
	rs := c.Rules()
	checkPolicy(t, rs[0], "a", algo.SlidingWindow, algo.Limit{Count: 10, Period: time.Second})
	checkPolicy(t, rs[1], "b", algo.TokenBucket, algo.Limit{Count: 10, Period: time.Second, Burst: 20})
	checkPolicy(t, rs[2], "c", algo.GCRA, algo.Limit{Count: 10, Period: time.Second, Burst: 15}, algo.Limit{Count: 100, Period: time.Minute, Burst: 15})
	checkPolicy(t, rs[3], "d", algo.FixedWindow, algo.Limit{Count: 10, Period: time.Second})
	checkPolicy(t, rs[4], "e", algo.TokenBucket, algo.Limit{Count: 10, Period: time.Second})
	checkPolicy(t, c.Default(), "default", algo.SlidingWindow, algo.Limit{Count: 120, Period: time.Minute})
	if got, want := rs[1].Policy.Capacity(), int64(20); got != want {
		t.Errorf("token bucket capacity = %d, want %d", got, want)
	}

	// A weight may reach the burst of a token bucket, not beyond.
	burst := mustParse(t, yamlLines(
		"rate_limit:",
		"  rules:",
		"    - name: b",
		"      paths: [/b, /b/big]",
		"      limit: 10/second",
		"      algorithm: token_bucket",
		"      burst: 20",
		"      weights: {/b/big: 20}",
	))
	if r, cost := burst.Match("GET", "/b/big"); r.Name != "b" || cost != 20 {
		t.Errorf("Match(/b/big) = (%q, %d), want (%q, %d)", r.Name, cost, "b", 20)
	}
}

func TestConfigOptions(t *testing.T) {
	tests := []struct {
		name     string
		lines    []string
		headers  HeaderStyle
		failOpen bool
	}{
		{"defaults", nil, HeadersDraft, true},
		{"draft", []string{"  headers: draft"}, HeadersDraft, true},
		{"legacy", []string{"  headers: legacy"}, HeadersLegacy, true},
		{"none", []string{"  headers: none"}, HeadersNone, true},
		{"open", []string{"  failure: open"}, HeadersDraft, true},
		{"closed", []string{"  failure: closed"}, HeadersDraft, false},
		{"both", []string{"  headers: legacy", "  failure: closed"}, HeadersLegacy, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := mustParse(t, yamlLines(append([]string{"rate_limit:", "  enabled: true"}, tt.lines...)...))
			if got := c.Headers(); got != tt.headers {
				t.Errorf("Headers() = %v, want %v", got, tt.headers)
			}
			if got := c.FailOpen(); got != tt.failOpen {
				t.Errorf("FailOpen() = %v, want %v", got, tt.failOpen)
			}
		})
	}
	for s, want := range map[HeaderStyle]string{HeadersDraft: "draft", HeadersLegacy: "legacy", HeadersNone: "none", 7: "headers(7)"} {
		if got := s.String(); got != want {
			t.Errorf("HeaderStyle(%d).String() = %q, want %q", uint8(s), got, want)
		}
	}
}

func TestConfigExemptPaths(t *testing.T) {
	absent := mustParse(t, "rate_limit:\n  enabled: true\n")
	for _, p := range DefaultExemptPaths {
		if !absent.Exempt(Path(p)) {
			t.Errorf("exempt_paths absent: Exempt(%q) = false, want true", p)
		}
	}
	empty := mustParse(t, "rate_limit:\n  enabled: true\n  exempt_paths: []\n")
	for _, p := range DefaultExemptPaths {
		if empty.Exempt(Path(p)) {
			t.Errorf("exempt_paths []: Exempt(%q) = true, want false", p)
		}
	}
	own := mustParse(t, "rate_limit:\n  exempt_paths: [/status, /static/*]\n")
	for p, want := range map[Path]bool{"/status": true, "/static/app.js": true, "/static/a/b": false, "/health": false} {
		if got := own.Exempt(p); got != want {
			t.Errorf("own exempt_paths: Exempt(%q) = %v, want %v", p, got, want)
		}
	}
	spec, err := NewConfig(Spec{Enabled: true, ExemptPaths: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Exempt("/health") {
		t.Errorf("Spec.ExemptPaths = []string{}: Exempt(/health) = true, want false")
	}
	def, err := NewConfig(Spec{Enabled: true})
	if err != nil {
		t.Fatal(err)
	}
	if !def.Exempt("/health") {
		t.Errorf("Spec.ExemptPaths = nil: Exempt(/health) = false, want true")
	}
}

func TestConfigDisabled(t *testing.T) {
	var nilConfig *Config
	configs := map[string]*Config{
		"enabled: false":  mustParse(t, "rate_limit:\n  enabled: false\n"),
		"enabled absent":  mustParse(t, "rate_limit:\n  default: 1/second\n"),
		"empty section":   mustParse(t, "rate_limit: {}\n"),
		"nil *Config":     nilConfig,
		"zero Config":     {},
		"NewConfig(Spec)": func() *Config { c, _ := NewConfig(Spec{}); return c }(),
	}
	for name, c := range configs {
		if c.Enabled() {
			t.Errorf("%s: Enabled() = true, want false", name)
		}
		if !c.FailOpen() {
			t.Errorf("%s: FailOpen() = false, want true", name)
		}
		if got := c.Headers(); got != HeadersDraft {
			t.Errorf("%s: Headers() = %v, want draft", name, got)
		}
	}
	// A nil or zero Config answers every question without panicking.
	for name, c := range map[string]*Config{"nil *Config": nilConfig, "zero Config": {}} {
		if c.Exempt("/health") {
			t.Errorf("%s: Exempt(/health) = true, want false", name)
		}
		if r, cost := c.Match("GET", "/api/search"); r != nil || cost != 1 {
			t.Errorf("%s: Match = (%v, %d), want (nil, 1)", name, r, cost)
		}
		if c.Rules() != nil || c.Default() != nil {
			t.Errorf("%s: Rules() = %v, Default() = %v, want nil, nil", name, c.Rules(), c.Default())
		}
	}
	// A disabled configuration is still checked.
	if _, err := ParseConfig([]byte("rate_limit:\n  enabled: false\n  default: 0/second\n"), "t.yaml"); err == nil {
		t.Errorf("a disabled configuration with a bad default: ParseConfig succeeded, want an error")
	}
}

func TestConfigYAMLForms(t *testing.T) {
	// A byte order mark, comments, a single limit as a string, block lists,
	// a document start marker and CRLF line ends are all fine.
	docs := []string{
		"\xef\xbb\xbfrate_limit:\n  enabled: true\n",
		"# rate limits\n---\nrate_limit: # the section\n  enabled: true # on\n...\n",
		"rate_limit:\r\n  enabled: true\r\n  rules:\r\n    - name: a\r\n      paths: [/a]\r\n      limit: 1/s\r\n",
		`{"rate_limit": {"enabled": true, "rules": [{"name": "a", "paths": ["/a"], "limit": ["1/s"]}]}}`,
	}
	for _, d := range docs {
		c, err := ParseConfig([]byte(d), "t.yaml")
		if err != nil {
			t.Errorf("ParseConfig(%q): unexpected error %v", d, err)
			continue
		}
		if !c.Enabled() {
			t.Errorf("ParseConfig(%q): Enabled() = false, want true", d)
		}
	}
}

// checkConfigError asserts that err is the joined *ConfigErrors whose
// texts are want, in order.
func checkConfigError(t *testing.T, err error, want ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("got no error, want:\n%s", strings.Join(want, "\n"))
	}
	if got := err.Error(); got != strings.Join(want, "\n") {
		t.Errorf("error text:\n got %q\nwant %q", got, strings.Join(want, "\n"))
	}
	var ce *ConfigError
	if !errors.As(err, &ce) {
		t.Errorf("errors.As(%T, *ConfigError) = false, want true", err)
	} else if ce.Error() != want[0] {
		t.Errorf("errors.As found %q, want the first error %q", ce.Error(), want[0])
	}
}

const (
	unknownSection = `unknown field (want enabled, algorithm, rules, default, default_window, default_timezone, default_key, exempt_paths, headers, failure, mode, tiers, allow, ban, consistency or lease_block)`
	unknownRule    = `unknown field (want name, paths, methods, limit, algorithm, window, timezone, burst, weights, mode, count, cost, clear_on_success, penalty, wait, wait_queue, concurrent, lease, key, stack, consistency or lease_block)`
	unknownAlgo    = `(want fixed_window, sliding_window, token_bucket or gcra)`
	unitsWanted    = `(want second, minute, hour or day)`
	shadowed       = `which comes first: this path would never apply here`
	anchors        = `YAML anchors and aliases are not supported`
)

func TestConfigErrors(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			"unknown top-level key",
			yamlLines("rate_limit:", "  enabled: true", "ratelimit: {}"),
			[]string{`rate-limit config t.yaml:3: field "ratelimit": unknown field (want rate_limit)`},
		},
		{
			"only an unknown top-level key",
			yamlLines("limits:", "  enabled: true"),
			[]string{`rate-limit config t.yaml:1: field "limits": unknown field (want rate_limit)`},
		},
		{
			"missing rate_limit",
			yamlLines("# nothing here", "{}"),
			[]string{`rate-limit config t.yaml:2: field "rate_limit": missing section`},
		},
		{
			"rate_limit is null",
			yamlLines("rate_limit:"),
			[]string{`rate-limit config t.yaml:1: field "rate_limit": want a mapping`},
		},
		{
			"rate_limit is a list",
			yamlLines("rate_limit: [1, 2]"),
			[]string{`rate-limit config t.yaml:1: field "rate_limit": want a mapping`},
		},
		{
			"document is a scalar",
			yamlLines("hello"),
			[]string{`rate-limit config t.yaml:1: value "hello": want a mapping`},
		},
		{
			"unknown field in the section",
			yamlLines("rate_limit:", "  enabled: true", "  enable: true", "  rule: []"),
			[]string{
				`rate-limit config t.yaml:3: field "enable": ` + unknownSection,
				`rate-limit config t.yaml:4: field "rule": ` + unknownSection,
			},
		},
		{
			"unknown field in a rule, before its name",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - limits: 10/second",
				"      name: search",
				"      paths: [/api/search]",
				"      limit: 10/second",
			),
			[]string{`rate-limit config t.yaml:3: rule "search": field "limits": ` + unknownRule},
		},
		{
			"unknown field in a rule with no name",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - paths: [/a]",
				"      limit: 1/s",
				"      weight: {/a: 1}",
			),
			// The unknown field does not stop the check: the rule has no
			// name either.
			[]string{
				`rate-limit config t.yaml:3: rule "rules[0]": field "name": a rule needs a name`,
				`rate-limit config t.yaml:5: rule "rules[0]": field "weight": ` + unknownRule,
			},
		},
		{
			"bad limit string",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: search",
				"      paths: [/api/search]",
				"      limit: 10/fortnight",
			),
			[]string{`rate-limit config t.yaml:5: rule "search": field "limit": value "10/fortnight": limit "10/fortnight": unknown unit "fortnight" ` + unitsWanted},
		},
		{
			"bad limit in a list",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: search",
				"      paths: [/api/search]",
				"      limit:",
				"        - 10/second",
				"        - 500/hour",
				"        - 10",
			),
			[]string{`rate-limit config t.yaml:8: rule "search": field "limit": value "10": limit "10": want "N/unit", e.g. "10/second"`},
		},
		{
			"zero count",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", `      limit: "0/second"`),
			[]string{`rate-limit config t.yaml:5: rule "a": field "limit": value "0/second": limit "0/second": count "0" is not a positive integer`},
		},
		{
			"negative count",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", `      limit: "-1/second"`),
			[]string{`rate-limit config t.yaml:5: rule "a": field "limit": value "-1/second": limit "-1/second": count "-1" is not a positive integer`},
		},
		{
			"limit is a number",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 10"),
			[]string{`rate-limit config t.yaml:5: rule "a": field "limit": value "10": limit "10": want "N/unit", e.g. "10/second"`},
		},
		{
			"limit is a mapping",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: {count: 10}"),
			[]string{`rate-limit config t.yaml:5: rule "a": field "limit": want a string or a list of strings`},
		},
		{
			"missing limit",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]"),
			[]string{`rate-limit config t.yaml:3: rule "a": field "limit": no limit given`},
		},
		{
			"empty limit list",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: []"),
			[]string{`rate-limit config t.yaml:5: rule "a": field "limit": no limit given`},
		},
		{
			"bad default",
			yamlLines("rate_limit:", "  default: 120/fortnight"),
			[]string{`rate-limit config t.yaml:2: rule "default": field "limit": value "120/fortnight": limit "120/fortnight": unknown unit "fortnight" ` + unitsWanted},
		},
		{
			"weight above the limit",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: upload",
				`      paths: ["/api/kb/*/docs/upload", "/api/kb/*/docs/upload/batch"]`,
				`      limit: "30/minute"`,
				"      weights:",
				`        "/api/kb/*/docs/upload/batch": 31`,
			),
			[]string{`rate-limit config t.yaml:7: rule "upload": field "weights": value "31": weight of "/api/kb/*/docs/upload/batch" exceeds the rule's capacity 30 (30/minute): such a request could never pass`},
		},
		{
			"weight above the smallest of several limits",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: api",
				"      paths: [/api/*]",
				"      limit: [500/hour, 10/second]",
				"      weights: {/api/bulk: 11}",
			),
			[]string{`rate-limit config t.yaml:6: rule "api": field "weights": value "11": weight of "/api/bulk" exceeds the rule's capacity 10 (500/hour, 10/second): such a request could never pass`},
		},
		{
			"weight above the burst",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: b",
				"      paths: [/b]",
				"      limit: 100/second",
				"      algorithm: token_bucket",
				"      burst: 5",
				"      weights: {/b: 6}",
			),
			[]string{`rate-limit config t.yaml:8: rule "b": field "weights": value "6": weight of "/b" exceeds the rule's capacity 5 (100/second): such a request could never pass`},
		},
		{
			"weight 0",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 1/s", "      weights:", "        /a: 0"),
			[]string{`rate-limit config t.yaml:7: rule "a": field "weights": value "0": weight of "/a" must be at least 1`},
		},
		{
			"negative weight",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 1/s", "      weights:", "        /a: -3"),
			[]string{`rate-limit config t.yaml:7: rule "a": field "weights": value "-3": weight of "/a" must be at least 1`},
		},
		{
			"weight is not an integer",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 10/s", "      weights:", "        /a: 2.5"),
			[]string{`rate-limit config t.yaml:7: rule "a": field "weights": value "2.5": want an integer`},
		},
		{
			"weight pattern matching none of the rule's paths",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: upload",
				`      paths: ["/api/kb/*/docs/upload"]`,
				"      limit: 30/minute",
				"      weights:",
				`        "/api/kb/*/docs/upload/batch": 10`,
				`        "/api/kb/*/docs/upload": 2`,
			),
			[]string{`rate-limit config t.yaml:7: rule "upload": field "weights": value "/api/kb/*/docs/upload/batch": the pattern matches none of the rule's paths, so the weight could never apply`},
		},
		{
			"bad weight pattern",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 10/s", "      weights:", "        a: 2"),
			[]string{`rate-limit config t.yaml:7: rule "a": field "weights": value "a": path must start with '/'`},
		},
		{
			"duplicate rule names",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: search",
				"      paths: [/api/search]",
				"      limit: 10/second",
				"    - name: search",
				"      paths: [/api/find]",
				"      limit: 10/second",
			),
			[]string{`rate-limit config t.yaml:6: rule "search": field "name": value "search": duplicate rule name (also rules[0])`},
		},
		{
			"a rule named default",
			yamlLines("rate_limit:", "  rules:", "    - name: default", "      paths: [/a]", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:3: rule "default": field "name": value "default": "default" is the name of the default limit`},
		},
		{
			"a rule with no name",
			yamlLines("rate_limit:", "  rules:", "    - paths: [/a]", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:3: rule "rules[0]": field "name": a rule needs a name`},
		},
		{
			"a bad rule name",
			yamlLines("rate_limit:", "  rules:", "    - name: my rule", "      paths: [/a]", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:3: rule "my rule": field "name": value "my rule": names are 1 to 64 letters, digits, '_', '.' or '-'`},
		},
		{
			"a rule name with a quote",
			yamlLines("rate_limit:", "  rules:", `    - name: 'a"b'`, "      paths: [/a]", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:3: rule "a\"b": field "name": value "a\"b": names are 1 to 64 letters, digits, '_', '.' or '-'`},
		},
		{
			"empty paths list",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: []", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:3: rule "a": field "paths": a rule needs at least one path`},
		},
		{
			"missing paths",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:3: rule "a": field "paths": a rule needs at least one path`},
		},
		{
			"paths is a string",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: /a", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:4: rule "a": field "paths": value "/a": want a list of strings`},
		},
		{
			"empty path string",
			yamlLines("rate_limit:", "  rules:", "    - name: a", `      paths: ["/a", ""]`, "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:4: rule "a": field "paths": empty path`},
		},
		{
			"path without a leading slash",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths:", "        - /a", "        - api/search", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:6: rule "a": field "paths": value "api/search": path must start with '/'`},
		},
		{
			"star inside a segment",
			yamlLines("rate_limit:", "  rules:", "    - name: a", `      paths: ["/api/x*"]`, "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:4: rule "a": field "paths": value "/api/x*": '*' must be a whole segment, not part of "x*"`},
		},
		{
			"router catch-alls and optional parameters",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: files",
				"      paths:",
				`        - "/files/*path"`,
				`        - "/static/{path...}"`,
				`        - "/users/:id?"`,
				`        - "/a/+"`,
				`        - "/api/v1:batchGet"`,
				"      limit: 1/s",
			),
			[]string{
				`rate-limit config t.yaml:5: rule "files": field "paths": value "/files/*path": "*path" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /files/** to match every depth`,
				`rate-limit config t.yaml:6: rule "files": field "paths": value "/static/{path...}": "{path...}" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /static/** to match every depth`,
				`rate-limit config t.yaml:7: rule "files": field "paths": value "/users/:id?": ":id?" is an optional parameter, and rlkit has none: '*', ':name' or '{name}' stands for exactly one segment; list both depths (/users, /users/*)`,
				`rate-limit config t.yaml:8: rule "files": field "paths": value "/a/+": "+" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /a/** to match every depth`,
			},
		},
		{
			"router syntax in weights and exempt_paths",
			yamlLines(
				"rate_limit:",
				"  exempt_paths: [/health, \"/docs/{$}\"]",
				"  rules:",
				"    - name: a",
				"      paths: [/a/:id]",
				"      limit: 10/s",
				"      weights:",
				`        "/a/{id:[0-9]+}": 2`,
			),
			[]string{
				`rate-limit config t.yaml:2: field "exempt_paths": value "/docs/{$}": "{$}" is an end anchor, and rlkit needs none: a pattern always matches the whole path; write "/docs/"`,
				`rate-limit config t.yaml:8: rule "a": field "weights": value "/a/{id:[0-9]+}": "{id:[0-9]+}" constrains its value, and rlkit does not: '*', ':name' or '{name}' stands for exactly one segment of any value; write '*' to count every value`,
			},
		},
		{
			"a catch-all anywhere but last, in paths, weights and exempt_paths",
			yamlLines(
				"rate_limit:",
				`  exempt_paths: [/health, "/static/**/x"]`,
				"  rules:",
				"    - name: admin",
				"      paths:",
				`        - "/api/admin/**"`,
				`        - "/api/**/admin"`,
				`        - "/api/x**"`,
				`        - "/api/y/**/"`,
				"      limit: 10/s",
				"      weights:",
				`        "/api/admin/**x": 2`,
				`        "/api/admin/**/bulk": 3`,
				"    - name: files",
				`      paths: ["/files/*path"]`,
				"      limit: 10/s",
			),
			[]string{
				`rate-limit config t.yaml:2: field "exempt_paths": value "/static/**/x": "**" is allowed only as the last segment, where it matches any number of segments`,
				`rate-limit config t.yaml:7: rule "admin": field "paths": value "/api/**/admin": "**" is allowed only as the last segment, where it matches any number of segments`,
				`rate-limit config t.yaml:8: rule "admin": field "paths": value "/api/x**": "**" is allowed only as the last segment, on its own, not as part of "x**"`,
				`rate-limit config t.yaml:9: rule "admin": field "paths": value "/api/y/**/": "**" is allowed only as the last segment, with no trailing slash after it: write "/api/y/**"`,
				`rate-limit config t.yaml:12: rule "admin": field "weights": value "/api/admin/**x": "**" is allowed only as the last segment, on its own, not as part of "**x"`,
				`rate-limit config t.yaml:13: rule "admin": field "weights": value "/api/admin/**/bulk": "**" is allowed only as the last segment, where it matches any number of segments`,
				`rate-limit config t.yaml:15: rule "files": field "paths": value "/files/*path": "*path" is a router's catch-all, which rlkit writes "**": '*', ':name' or '{name}' stands for exactly one segment; write /files/** to match every depth`,
			},
		},
		{
			"a catch-all weight outside the rule's paths",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: admin",
				`      paths: ["/api/admin/**", "/api/users/*"]`,
				"      limit: 10/s",
				"      weights:",
				`        "/api/admin/export/**": 5`,
				`        "/api/users/*/**": 2`,
				`        "/api/**": 3`,
				`        "/api/other/**": 4`,
				`        "/api/users/**": 5`,
			),
			[]string{
				`rate-limit config t.yaml:10: rule "admin": field "weights": value "/api/other/**": the pattern matches none of the rule's paths, so the weight could never apply`,
			},
		},
		{
			"a router parameter is '*' to the shadowing check",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: first",
				`      paths: ["/api/items/:id"]`,
				"      limit: 1/s",
				"    - name: second",
				`      paths: ["/api/items/{item}", "/api/items/7"]`,
				"      limit: 1/s",
			),
			[]string{
				`rate-limit config t.yaml:7: rule "second": field "paths": value "/api/items/{item}": already matched by rule "first" (path "/api/items/:id", line 4), ` + shadowed,
				`rate-limit config t.yaml:7: rule "second": field "paths": value "/api/items/7": already matched by "/api/items/{item}" (line 7), a path of the same rule: this path is redundant`,
			},
		},
		{
			"double slash in a path",
			yamlLines("rate_limit:", "  rules:", "    - name: a", `      paths: ["/api//x", "//", "/b//"]`, "      limit: 1/s"),
			[]string{
				`rate-limit config t.yaml:4: rule "a": field "paths": value "/api//x": empty path segment ('//')`,
				`rate-limit config t.yaml:4: rule "a": field "paths": value "//": empty path segment ('//')`,
				`rate-limit config t.yaml:4: rule "a": field "paths": value "/b//": empty path segment ('//')`,
			},
		},
		{
			"query in a path",
			yamlLines("rate_limit:", "  rules:", "    - name: a", `      paths: ["/a?x=1"]`, "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:4: rule "a": field "paths": value "/a?x=1": path must not hold a query or fragment`},
		},
		{
			"the same path in two rules",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: first",
				"      paths: [/a, /b]",
				"      limit: 1/s",
				"    - name: second",
				"      paths: [/c, /b/]",
				"      limit: 1/s",
			),
			[]string{`rate-limit config t.yaml:7: rule "second": field "paths": value "/b/": already matched by rule "first" (path "/b", line 4), ` + shadowed},
		},
		{
			"the same path in two rules, the first covering every method",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: first",
				"      paths: [/a]",
				"      methods: [GET, POST]",
				"      limit: 1/s",
				"    - name: second",
				"      paths: [/a]",
				"      methods: [POST]",
				"      limit: 1/s",
			),
			[]string{`rate-limit config t.yaml:8: rule "second": field "paths": value "/a": already matched by rule "first" (path "/a", line 4), ` + shadowed},
		},
		{
			"the same path in two rules, the first for all methods",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: first",
				"      paths: [/a]",
				"      limit: 1/s",
				"    - name: second",
				"      paths: [/a]",
				"      methods: [POST]",
				"      limit: 1/s",
			),
			[]string{`rate-limit config t.yaml:7: rule "second": field "paths": value "/a": already matched by rule "first" (path "/a", line 4), ` + shadowed},
		},
		{
			"bad method",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      methods: [GET, post]", "      limit: 1/s"),
			[]string{`rate-limit config t.yaml:5: rule "a": field "methods": value "post": a method is an upper-case token such as GET`},
		},
		{
			"unknown algorithm at the top level",
			yamlLines("rate_limit:", "  algorithm: leaky_bucket"),
			[]string{`rate-limit config t.yaml:2: field "algorithm": value "leaky_bucket": unknown algorithm "leaky_bucket" ` + unknownAlgo},
		},
		{
			"unknown algorithm in a rule",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 1/s", "      algorithm: leaky_bucket"),
			[]string{`rate-limit config t.yaml:6: rule "a": field "algorithm": value "leaky_bucket": unknown algorithm "leaky_bucket" ` + unknownAlgo},
		},
		{
			"burst on fixed_window",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 1/s", "      burst: 5"),
			[]string{`rate-limit config t.yaml:6: rule "a": field "burst": value "5": burst applies to token_bucket and gcra only, not fixed_window`},
		},
		{
			"burst on a sliding window by default",
			yamlLines("rate_limit:", "  algorithm: sliding_window", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 1/s", "      burst: 5"),
			[]string{`rate-limit config t.yaml:7: rule "a": field "burst": value "5": burst applies to token_bucket and gcra only, not sliding_window`},
		},
		{
			"burst out of range",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 1/s", "      algorithm: gcra", "      burst: 3000000000"),
			[]string{`rate-limit config t.yaml:7: rule "a": field "burst": value "3000000000": burst 3000000000 out of range [0, 2147483647]`},
		},
		{
			`burst: "ten"`,
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 1/s", "      algorithm: gcra", `      burst: "ten"`),
			[]string{`rate-limit config t.yaml:7: rule "a": field "burst": value "ten": want an integer`},
		},
		{
			"bad headers",
			yamlLines("rate_limit:", "  headers: ietf"),
			[]string{`rate-limit config t.yaml:2: field "headers": value "ietf": want draft, legacy or none`},
		},
		{
			"bad failure",
			yamlLines("rate_limit:", "  failure: maybe"),
			[]string{`rate-limit config t.yaml:2: field "failure": value "maybe": want open or closed`},
		},
		{
			"bad headers and failure together",
			yamlLines("rate_limit:", "  failure: shut", "  headers: X-RateLimit"),
			[]string{
				`rate-limit config t.yaml:2: field "failure": value "shut": want open or closed`,
				`rate-limit config t.yaml:3: field "headers": value "X-RateLimit": want draft, legacy or none`,
			},
		},
		{
			`enabled: "maybe"`,
			yamlLines("rate_limit:", `  enabled: "maybe"`),
			[]string{`rate-limit config t.yaml:2: field "enabled": value "maybe": want true or false`},
		},
		{
			"enabled: yes (YAML 1.1 is not spoken)",
			yamlLines("rate_limit:", "  enabled: yes"),
			[]string{`rate-limit config t.yaml:2: field "enabled": value "yes": want true or false`},
		},
		{
			"enabled: a list",
			yamlLines("rate_limit:", "  enabled: [true]"),
			[]string{`rate-limit config t.yaml:2: field "enabled": want true or false`},
		},
		{
			"exempt_paths: a bad path",
			yamlLines("rate_limit:", "  exempt_paths:", "    - /health", "    - health"),
			[]string{`rate-limit config t.yaml:4: field "exempt_paths": value "health": path must start with '/'`},
		},
		{
			"exempt_paths: null",
			yamlLines("rate_limit:", "  exempt_paths:"),
			[]string{`rate-limit config t.yaml:2: field "exempt_paths": want a list of strings`},
		},
		{
			"rules: a mapping",
			yamlLines("rate_limit:", "  rules:", "    search: {}"),
			[]string{`rate-limit config t.yaml:3: field "rules": want a list of rules`},
		},
		{
			"a rule that is a string",
			yamlLines("rate_limit:", "  rules:", "    - search"),
			[]string{`rate-limit config t.yaml:3: rule "rules[0]": value "search": want a mapping`},
		},
		{
			"two YAML documents",
			yamlLines("rate_limit:", "  enabled: true", "---", "rate_limit:", "  enabled: false"),
			[]string{`rate-limit config t.yaml:3: more than one YAML document`},
		},
		{
			"an empty file",
			"",
			[]string{`rate-limit config t.yaml: the file is empty (want a rate_limit section)`},
		},
		{
			"a file of comments",
			yamlLines("# rate_limit:", "#   enabled: true"),
			[]string{`rate-limit config t.yaml: the file is empty (want a rate_limit section)`},
		},
		{
			"a file of white space",
			" \n\n  \n",
			[]string{`rate-limit config t.yaml: the file is empty (want a rate_limit section)`},
		},
		{
			"YAML anchors and aliases",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: a",
				"      paths: &p [/a]",
				"      limit: 1/s",
				"    - name: b",
				"      paths: *p",
				"      limit: 1/s",
			),
			[]string{
				`rate-limit config t.yaml:4: rule "a": field "paths": ` + anchors,
				`rate-limit config t.yaml:7: rule "b": field "paths": ` + anchors,
			},
		},
		{
			"an anchored scalar",
			yamlLines("rate_limit:", "  default: &d 10/second"),
			[]string{`rate-limit config t.yaml:2: field "default": ` + anchors},
		},
		{
			"a merge key",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - &base",
				"      name: a",
				"      paths: [/a]",
				"      limit: 1/s",
				"    - <<: *base",
				"      name: b",
			),
			// Rule a, of which nothing could be read, has its one error;
			// rule b, without the merge, has no paths and no limit.
			[]string{
				`rate-limit config t.yaml:3: rule "a": ` + anchors,
				`rate-limit config t.yaml:7: rule "b": field "<<": ` + unknownRule,
				`rate-limit config t.yaml:7: rule "b": field "paths": a rule needs at least one path`,
				`rate-limit config t.yaml:7: rule "b": field "limit": no limit given`,
			},
		},
		{
			"duplicate keys in the section",
			yamlLines("rate_limit:", "  enabled: false", "  enabled: true"),
			[]string{`rate-limit config t.yaml:3: field "enabled": field given twice`},
		},
		{
			"duplicate keys in a rule",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: 1/s", "      limit: 100/s"),
			[]string{`rate-limit config t.yaml:6: rule "a": field "limit": field given twice`},
		},
		{
			"duplicate top-level keys",
			yamlLines("rate_limit:", "  enabled: false", "rate_limit:", "  enabled: true"),
			[]string{`rate-limit config t.yaml:3: field "rate_limit": field given twice`},
		},
		{
			"a key that is not a string",
			yamlLines("rate_limit:", "  [enabled]: true"),
			[]string{`rate-limit config t.yaml:2: field "rate_limit": want a plain key`},
		},
		{
			"more than 4 limits",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit: [1/s, 2/m, 3/h, 4/d, 5/2d]"),
			[]string{`rate-limit config t.yaml:5: rule "a": field "limit": value "1/s, 2/m, 3/h, 4/d, 5/2d": 5 limits, at most 4`},
		},
		{
			"two limits with the same period",
			yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: [/a]", "      limit:", "        - 10/second", "        - 100/minute", "        - 20/1s"),
			[]string{`rate-limit config t.yaml:8: rule "a": field "limit": value "20/1s": a second limit per 1s (first: 10/second)`},
		},
		{
			"two default limits with the same period",
			yamlLines("rate_limit:", "  default: [60/minute, 100/60s]"),
			[]string{`rate-limit config t.yaml:2: rule "default": field "limit": value "100/60s": a second limit per 1m0s (first: 60/minute)`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.doc), "t.yaml")
			if c != nil {
				t.Errorf("ParseConfig returned a Config with an error")
			}
			checkConfigError(t, err, tt.want...)
		})
	}
}

// TestConfigInvalidYAML: the YAML parser's errors come with the line, in
// the file:line form of every other error, whether the parser names it or
// not; a tag whose %-escape is not UTF-8 is named as such.
func TestConfigInvalidYAML(t *testing.T) {
	for _, tt := range []struct {
		doc  string
		want string
	}{
		{yamlLines("rate_limit:", "  enabled: true", " rules: [", "bad"), "rate-limit config t.yaml:2: invalid YAML: yaml: did not find expected key"},
		{yamlLines("rate_limit:", "\tenabled: true"), "rate-limit config t.yaml:2: invalid YAML: yaml: found character that cannot start any token"},
		{yamlLines("rate_limit: {enabled: true"), "rate-limit config t.yaml:1: invalid YAML: yaml: did not find expected ',' or '}'"},
		{yamlLines("rate_limit:", "  default: *nowhere"), "rate-limit config t.yaml:2: invalid YAML: yaml: unknown anchor 'nowhere' referenced"},
		// The parser names no line for these.
		{"!%a0", "rate-limit config t.yaml:1: " + badTag},
		{yamlLines("rate_limit:", "  x: 1", "  y: !<%ff> x"), "rate-limit config t.yaml:3: " + badTag},
		{yamlLines("rate_limit:", "  enabled: !!str%C3 x"), "rate-limit config t.yaml:2: " + badTag},
	} {
		_, err := ParseConfig([]byte(tt.doc), "t.yaml")
		var ce *ConfigError
		if !errors.As(err, &ce) {
			t.Errorf("ParseConfig(%q) error = %v, want a *ConfigError", tt.doc, err)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("ParseConfig(%q) error = %q, want %q", tt.doc, err.Error(), tt.want)
		}
	}
}

const badTag = "invalid YAML tag: a %-escape in a tag (the text after '!') is not a UTF-8 character; a configuration needs no tags"

// TestConfigAllErrors checks that every problem is reported, each at its line.
func TestConfigAllErrors(t *testing.T) {
	doc := yamlLines(
		"rate_limit:", // 1
		"  enabled: true",
		"  rules:",
		"    - name: search", // 4
		"      paths: [/api/search]",
		"      limit: 10/fortnight", // 6
		"    - name: upload",
		"      paths: [/api/upload, /api/upload/batch]",
		"      limit: 30/minute",
		"      algorithm: leaky", // 10
		"    - name: reindex",
		"      paths: [/api/reindex]",
		"      limit: 2/minute",
		"      weights:",
		"        /api/reindex: 3", // 15
		"  default: 120/minute",
	)
	_, err := ParseConfig([]byte(doc), "t.yaml")
	want := []string{
		`rate-limit config t.yaml:6: rule "search": field "limit": value "10/fortnight": limit "10/fortnight": unknown unit "fortnight" ` + unitsWanted,
		`rate-limit config t.yaml:10: rule "upload": field "algorithm": value "leaky": unknown algorithm "leaky" ` + unknownAlgo,
		`rate-limit config t.yaml:15: rule "reindex": field "weights": value "3": weight of "/api/reindex" exceeds the rule's capacity 2 (2/minute): such a request could never pass`,
	}
	checkConfigError(t, err, want...)
	joined, ok := err.(interface{ Unwrap() []error })
	if !ok {
		t.Fatalf("error %T has no Unwrap() []error", err)
	}
	wantLines := []int{6, 10, 15}
	wantRules := []string{"search", "upload", "reindex"}
	wantFields := []string{"limit", "algorithm", "weights"}
	errs := joined.Unwrap()
	if len(errs) != len(wantLines) {
		t.Fatalf("%d errors, want %d", len(errs), len(wantLines))
	}
	for i, e := range errs {
		ce, ok := e.(*ConfigError)
		if !ok {
			t.Errorf("error %d is %T, want *ConfigError", i, e)
			continue
		}
		if ce.File != "t.yaml" || ce.Line != wantLines[i] || ce.Rule != wantRules[i] || ce.Field != wantFields[i] {
			t.Errorf("error %d at %s:%d rule %q field %q, want t.yaml:%d rule %q field %q",
				i, ce.File, ce.Line, ce.Rule, ce.Field, wantLines[i], wantRules[i], wantFields[i])
		}
	}

	// Syntax problems (here three of them, in three rules) are all
	// reported too, and do not stop the other checks: rule b, whose
	// limit is misspelled, has none.
	doc = yamlLines(
		"rate_limit:",
		"  enabled: maybe", // 2
		"  rules:",
		"    - name: a",
		"      paths: [/a]",
		"      limit: 1/s",
		"      burst: ten", // 7
		"    - name: b",
		"      paths: [/b]",
		"      limits: 1/s", // 10
	)
	_, err = ParseConfig([]byte(doc), "t.yaml")
	checkConfigError(t, err,
		`rate-limit config t.yaml:2: field "enabled": value "maybe": want true or false`,
		`rate-limit config t.yaml:7: rule "a": field "burst": value "ten": want an integer`,
		`rate-limit config t.yaml:8: rule "b": field "limit": no limit given`,
		`rate-limit config t.yaml:10: rule "b": field "limits": `+unknownRule,
	)
}

func TestLoadConfig(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope.yaml")
	_, err := LoadConfig(missing)
	if err == nil {
		t.Fatalf("LoadConfig(%q) succeeded, want an error", missing)
	}
	if !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("LoadConfig(%q) error = %v, want one wrapping fs.ErrNotExist", missing, err)
	}
	if want := "rate-limit config: open " + missing + ": no such file or directory"; err.Error() != want {
		t.Errorf("LoadConfig error:\n got %q\nwant %q", err.Error(), want)
	}

	// Errors in a loaded file name it.
	bad := filepath.Join(t.TempDir(), "bad.yaml")
	if err := os.WriteFile(bad, []byte("rate_limit:\n  headers: loud\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = LoadConfig(bad)
	checkConfigError(t, err, `rate-limit config `+bad+`:2: field "headers": value "loud": want draft, legacy or none`)
}

func TestNewConfig(t *testing.T) {
	c, err := NewConfig(Spec{
		Enabled:   true,
		Algorithm: "gcra",
		Rules: []RuleSpec{
			{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"10/second"}, Burst: 20},
			{Name: "upload", Paths: []string{"/api/upload", "/api/upload/batch"}, Limit: []string{"30/minute"},
				Weights: []WeightSpec{{Path: "/api/upload/batch", Cost: 10}}},
		},
		Default: []string{"60/minute", "1000/day"},
		Headers: "legacy",
		Failure: "closed",
	})
	if err != nil {
		t.Fatalf("NewConfig: unexpected error %v", err)
	}
	if !c.Enabled() || c.Headers() != HeadersLegacy || c.FailOpen() {
		t.Errorf("Enabled, Headers, FailOpen = %v, %v, %v; want true, legacy, false", c.Enabled(), c.Headers(), c.FailOpen())
	}
	checkPolicy(t, c.Rules()[0], "search", algo.GCRA, algo.Limit{Count: 10, Period: time.Second, Burst: 20})
	checkPolicy(t, c.Default(), "default", algo.GCRA, limits(t, "60/minute", "1000/day")...)
	if r, cost := c.Match("POST", "/api/upload/batch"); r.Name != "upload" || cost != 10 {
		t.Errorf("Match(/api/upload/batch) = (%q, %d), want (%q, %d)", r.Name, cost, "upload", 10)
	}

	// Errors from a Spec have no file and no line.
	_, err = NewConfig(Spec{
		Rules: []RuleSpec{
			{Name: "a", Paths: []string{"/a"}, Limit: []string{"x"}},
			{Name: "a", Paths: []string{"b"}},
			{Paths: []string{"/c"}, Limit: []string{"1/s"}, Weights: []WeightSpec{{Path: "/c", Cost: 2}}},
		},
		Default: []string{"1/fortnight"},
		Headers: "loud",
	})
	checkConfigError(t, err,
		`rate-limit config: field "headers": value "loud": want draft, legacy or none`,
		`rate-limit config: rule "a": field "limit": value "x": limit "x": want "N/unit", e.g. "10/second"`,
		`rate-limit config: rule "a": field "name": value "a": duplicate rule name (also rules[0])`,
		`rate-limit config: rule "a": field "paths": value "b": path must start with '/'`,
		`rate-limit config: rule "a": field "limit": no limit given`,
		`rate-limit config: rule "rules[2]": field "name": a rule needs a name`,
		`rate-limit config: rule "rules[2]": field "weights": value "2": weight of "/c" exceeds the rule's capacity 1 (1/s): such a request could never pass`,
		`rate-limit config: rule "default": field "limit": value "1/fortnight": limit "1/fortnight": unknown unit "fortnight" `+unitsWanted,
	)
	var ce *ConfigError
	if errors.As(err, &ce) && (ce.File != "" || ce.Line != 0) {
		t.Errorf("NewConfig error at %q:%d, want no file and no line", ce.File, ce.Line)
	}
}

func TestConfigErrorFormat(t *testing.T) {
	tests := []struct {
		e    ConfigError
		want string
	}{
		{ConfigError{Msg: "m"}, "rate-limit config: m"},
		{ConfigError{File: "f.yaml", Msg: "m"}, "rate-limit config f.yaml: m"},
		{ConfigError{File: "f.yaml", Line: 3, Msg: "m"}, "rate-limit config f.yaml:3: m"},
		{ConfigError{Line: 3, Msg: "m"}, "rate-limit config line 3: m"},
		{ConfigError{Rule: "r", Msg: "m"}, `rate-limit config: rule "r": m`},
		{ConfigError{Field: "f", Msg: "m"}, `rate-limit config: field "f": m`},
		{ConfigError{Value: "v", Msg: "m"}, `rate-limit config: value "v": m`},
		{ConfigError{File: "f.yaml", Line: 9, Rule: "r", Field: "f", Value: "v\n", Msg: "m"}, `rate-limit config f.yaml:9: rule "r": field "f": value "v\n": m`},
		{ConfigError{File: "f.yaml", Line: 3, Column: 14, Msg: "m"}, "rate-limit config f.yaml:3:14: m"},
		{ConfigError{Line: 3, Column: 14, Msg: "m"}, "rate-limit config line 3, column 14: m"},
		{ConfigError{File: "f.yaml", Column: 14, Msg: "m"}, "rate-limit config f.yaml: m"},
	}
	for _, tt := range tests {
		if got := tt.e.Error(); got != tt.want {
			t.Errorf("%+v.Error() = %q, want %q", tt.e, got, tt.want)
		}
	}
}

func TestConfigMethodsMayShareAPath(t *testing.T) {
	// Rules restricted to different methods split a path between them:
	// neither shadows the other.
	c := mustParse(t, yamlLines(
		"rate_limit:",
		"  rules:",
		"    - name: read",
		"      paths: [/doc]",
		"      methods: [GET, HEAD]",
		"      limit: 100/second",
		"    - name: write",
		"      paths: [/doc]",
		"      methods: [PUT, HEAD]",
		"      limit: 1/second",
		"    - name: rest",
		"      paths: [/doc]",
		"      limit: 10/second",
	))
	for method, want := range map[string]string{"GET": "read", "HEAD": "read", "PUT": "write", "DELETE": "rest"} {
		if r, _ := c.Match(method, "/doc"); r.Name != want {
			t.Errorf("Match(%q, /doc) = %q, want %q", method, r.Name, want)
		}
	}
}

func TestConfigShadowedPaths(t *testing.T) {
	const (
		redundant = `a path of the same rule: this path is redundant`
		never     = `a request for this path is never counted (the rule would count only other spellings of it, such as with a trailing slash)`
		comeFirst = `which come first: this path would never apply here`
	)
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{
			"a literal path after a '*' pattern",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: kb",
				`      paths: ["/api/kb/*/x"]`,
				"      limit: 10/second",
				"    - name: k1",
				`      paths: ["/api/kb/k1/x"]`,
				"      limit: 1/second",
			),
			[]string{`rate-limit config t.yaml:7: rule "k1": field "paths": value "/api/kb/k1/x": already matched by rule "kb" (path "/api/kb/*/x", line 4), ` + shadowed},
		},
		{
			"one path of a rule covered, another not: the covered one is an error",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: kb",
				"      paths:",
				"        - /api/kb/*/docs/*",
				"      limit: 10/second",
				"    - name: doc",
				"      paths:",
				"        - /api/doc",
				"        - /api/kb/k1/docs/d1/",
				"      limit: 1/second",
			),
			[]string{`rate-limit config t.yaml:10: rule "doc": field "paths": value "/api/kb/k1/docs/d1/": already matched by rule "kb" (path "/api/kb/*/docs/*", line 5), ` + shadowed},
		},
		{
			"a '*' pattern after an equal one, several rules apart",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: a",
				"      paths: [/a/*/b]",
				"      limit: 1/s",
				"    - name: other",
				"      paths: [/other]",
				"      limit: 1/s",
				"    - name: c",
				"      paths: [/a/*/b/]",
				"      limit: 1/s",
			),
			[]string{`rate-limit config t.yaml:10: rule "c": field "paths": value "/a/*/b/": already matched by rule "a" (path "/a/*/b", line 4), ` + shadowed},
		},
		{
			"covered for the later rule's only method",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: write",
				"      paths: [/doc/*]",
				"      methods: [PUT, POST]",
				"      limit: 1/s",
				"    - name: post",
				"      paths: [/doc/new]",
				"      methods: [POST]",
				"      limit: 1/s",
			),
			[]string{`rate-limit config t.yaml:8: rule "post": field "paths": value "/doc/new": already matched by rule "write" (path "/doc/*", line 4), ` + shadowed},
		},
		{
			"covered for each method by a different rule",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: read",
				"      paths: [/doc/*]",
				"      methods: [GET, HEAD]",
				"      limit: 100/s",
				"    - name: write",
				"      paths: [/doc/*]",
				"      methods: [PUT]",
				"      limit: 1/s",
				"    - name: mine",
				"      paths: [/doc/mine]",
				"      methods: [GET, PUT, HEAD]",
				"      limit: 1/s",
			),
			[]string{`rate-limit config t.yaml:12: rule "mine": field "paths": value "/doc/mine": already matched by rule "read" (path "/doc/*", line 4) for GET, HEAD and by rule "write" (path "/doc/*", line 8) for PUT, ` + comeFirst},
		},
		{
			"a path covered by another path of its own rule, either order",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: a",
				"      paths: [/a/*, /a/b, /c, /c/]",
				"      limit: 1/s",
				"    - name: b",
				"      paths:",
				"        - /b/x",
				"        - /b/*",
				"      limit: 1/s",
			),
			[]string{
				`rate-limit config t.yaml:4: rule "a": field "paths": value "/a/b": already matched by "/a/*" (line 4), ` + redundant,
				`rate-limit config t.yaml:4: rule "a": field "paths": value "/c/": already matched by "/c" (line 4), ` + redundant,
				`rate-limit config t.yaml:8: rule "b": field "paths": value "/b/x": already matched by "/b/*" (line 9), ` + redundant,
			},
		},
		{
			"a path under the default exempt_paths",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: health",
				"      paths: [/health/, /live]",
				"      limit: 1/s",
			),
			[]string{`rate-limit config t.yaml:4: rule "health": field "paths": value "/health/": exempt by "/health" of the default exempt_paths: ` + never + ` (list your own exempt_paths to change that)`},
		},
		{
			"a path covered by an exempt '*' pattern",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: static",
				"      paths: [/static/*, /static/img/*]",
				"      limit: 1/s",
				"  exempt_paths:",
				"    - /health",
				"    - /static/*",
			),
			[]string{`rate-limit config t.yaml:4: rule "static": field "paths": value "/static/*": exempt by exempt_paths "/static/*" (line 8): ` + never},
		},
		{
			"paths under an earlier catch-all, of another rule and of its own",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: admin",
				`      paths: ["/api/admin/**", "/api/admin/users/*", "/api/*/files/**"]`,
				"      limit: 10/s",
				"    - name: users",
				"      paths:",
				"        - /api/admin",
				"        - /api/admin/users/**",
				"        - /api/v1/files/**",
				"        - /api/v1/files",
				"        - /api/v1/other/**",
				"      limit: 1/s",
				"    - name: all",
				`      paths: ["/**"]`,
				"      limit: 100/s",
				"    - name: after",
				`      paths: ["/x/**"]`,
				"      limit: 1/s",
			),
			[]string{
				`rate-limit config t.yaml:4: rule "admin": field "paths": value "/api/admin/users/*": already matched by "/api/admin/**" (line 4), ` + redundant,
				`rate-limit config t.yaml:8: rule "users": field "paths": value "/api/admin": already matched by rule "admin" (path "/api/admin/**", line 4), ` + shadowed,
				`rate-limit config t.yaml:9: rule "users": field "paths": value "/api/admin/users/**": already matched by rule "admin" (path "/api/admin/**", line 4), ` + shadowed,
				`rate-limit config t.yaml:10: rule "users": field "paths": value "/api/v1/files/**": already matched by rule "admin" (path "/api/*/files/**", line 4), ` + shadowed,
				`rate-limit config t.yaml:11: rule "users": field "paths": value "/api/v1/files": already matched by "/api/v1/files/**" (line 10), ` + redundant,
				`rate-limit config t.yaml:18: rule "after": field "paths": value "/x/**": already matched by rule "all" (path "/**", line 15), ` + shadowed,
			},
		},
		{
			"paths under an exempt catch-all",
			yamlLines(
				"rate_limit:",
				"  rules:",
				"    - name: static",
				"      paths: [/static, /static/css/*, /static/**, /staticx/**, /public/**]",
				"      limit: 1/s",
				"  exempt_paths:",
				"    - /health",
				"    - /static/**",
				"    - /public/*/**",
			),
			[]string{
				`rate-limit config t.yaml:4: rule "static": field "paths": value "/static": exempt by exempt_paths "/static/**" (line 8): a request for this path is never counted (the rule would count only other spellings of it, that decode or clean to another path)`,
				`rate-limit config t.yaml:4: rule "static": field "paths": value "/static/css/*": exempt by exempt_paths "/static/**" (line 8): a request for this path is never counted (the rule would count only other spellings of it, that decode or clean to another path)`,
				`rate-limit config t.yaml:4: rule "static": field "paths": value "/static/**": exempt by exempt_paths "/static/**" (line 8): a request for this path is never counted (the rule would count only other spellings of it, that decode or clean to another path)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.doc), "t.yaml")
			if c != nil {
				t.Errorf("ParseConfig returned a Config with an error")
			}
			checkConfigError(t, err, tt.want...)
		})
	}

	// From a Spec: no lines.
	_, err := NewConfig(Spec{
		Rules: []RuleSpec{
			{Name: "kb", Paths: []string{"/api/kb/*/x"}, Limit: []string{"1/s"}},
			{Name: "k1", Paths: []string{"/api/kb/k1/x", "/api/kb/k1/y"}, Limit: []string{"1/s"}},
			{Name: "ready", Paths: []string{"/ready"}, Limit: []string{"1/s"}},
			{Name: "s", Paths: []string{"/s/*"}, Limit: []string{"1/s"}},
		},
	})
	checkConfigError(t, err,
		`rate-limit config: rule "k1": field "paths": value "/api/kb/k1/x": already matched by rule "kb" (path "/api/kb/*/x"), `+shadowed,
		`rate-limit config: rule "ready": field "paths": value "/ready": exempt by "/ready" of the default exempt_paths: `+never+` (list your own exempt_paths to change that)`,
	)
	_, err = NewConfig(Spec{
		Rules:       []RuleSpec{{Name: "s", Paths: []string{"/s/*", "/s/*"}, Limit: []string{"1/s"}}},
		ExemptPaths: []string{"/s/x", "/t"},
	})
	checkConfigError(t, err, `rate-limit config: rule "s": field "paths": value "/s/*": already matched by "/s/*", `+redundant)
	_, err = NewConfig(Spec{
		Rules:       []RuleSpec{{Name: "t", Paths: []string{"/t"}, Limit: []string{"1/s"}}},
		ExemptPaths: []string{"/*"},
	})
	checkConfigError(t, err, `rate-limit config: rule "t": field "paths": value "/t": exempt by exempt_paths "/*": `+never)
}

// TestConfigOverlappingPathsLoad checks paths that share requests with an
// earlier rule's, or an exempt path's, but not all of them: each still
// counts some request, so the configuration loads and the first rule
// that matches applies.
func TestConfigOverlappingPathsLoad(t *testing.T) {
	c := mustParse(t, yamlLines(
		"rate_limit:",
		"  rules:",
		"    - name: k1",
		"      paths: [/api/kb/k1/x]", // a literal before the '*' that covers it
		"      limit: 1/s",
		"    - name: kb",
		"      paths: [/api/kb/*/x, /api/*/k1/x]", // overlapping, neither covering the other
		"      limit: 1/s",
		"    - name: get",
		"      paths: [/doc/*]",
		"      methods: [GET]",
		"      limit: 1/s",
		"    - name: any",
		"      paths: [/doc/a]", // covered for GET only: it counts the other methods
		"      limit: 1/s",
		"    - name: getput",
		"      paths: [/doc/b]", // covered for GET, not for PUT
		"      methods: [GET, PUT]",
		"      limit: 1/s",
		"    - name: deeper",
		"      paths: [/doc/*/*]", // more segments than /doc/*
		"      limit: 1/s",
		"    - name: static",
		"      paths: [/static/*]", // exempt only for /static/logo.png
		"      limit: 1/s",
		"    - name: admin-deep",
		"      paths: [/api/admin/*/**]",
		"      limit: 1/s",
		"    - name: admin",
		"      paths: [/api/admin/**]", // the earlier catch-all takes all but /api/admin
		"      limit: 1/s",
		"    - name: public",
		"      paths: [/public/**]", // exempt below /public/*/ only
		"      limit: 1/s",
		"  exempt_paths: [/health, /static/logo.png, /public/*/**]",
	))
	for _, tt := range []struct{ method, path, want string }{
		{"GET", "/api/kb/k1/x", "k1"},
		{"GET", "/api/kb/k2/x", "kb"},
		{"GET", "/api/v2/k1/x", "kb"},
		{"GET", "/doc/a", "get"},
		{"POST", "/doc/a", "any"},
		{"GET", "/doc/b", "get"},
		{"PUT", "/doc/b", "getput"},
		{"GET", "/doc/a/b", "deeper"},
		{"GET", "/static/app.js", "static"},
		{"GET", "/api/admin", "admin"},
		{"GET", "/api/admin/", "admin"},
		{"GET", "/api/admin/x", "admin-deep"},
		{"GET", "/api/admin/x/y", "admin-deep"},
		{"GET", "/public", "public"},
	} {
		if r, _ := c.Match(tt.method, Path(tt.path)); r.Name != tt.want {
			t.Errorf("Match(%s, %s) = %q, want %q", tt.method, tt.path, r.Name, tt.want)
		}
	}
	if !c.Exempt("/static/logo.png") || c.Exempt("/static/app.js") {
		t.Errorf("Exempt(/static/logo.png), Exempt(/static/app.js) = %v, %v; want true, false", c.Exempt("/static/logo.png"), c.Exempt("/static/app.js"))
	}
	if !c.Exempt("/public/a") || !c.Exempt("/public/a/b/") || c.Exempt("/public") || c.Exempt("/public/") {
		t.Errorf("Exempt(/public/a, /public/a/b/, /public, /public/) = %v, %v, %v, %v; want true, true, false, false", c.Exempt("/public/a"), c.Exempt("/public/a/b/"), c.Exempt("/public"), c.Exempt("/public/"))
	}
}

func TestPatternCovers(t *testing.T) {
	for _, tt := range []struct {
		p, q string
		want bool
	}{
		{"/a/*/x", "/a/k1/x", true},
		{"/a/*/x", "/a/*/x/", true},
		{"/a/k1/x", "/a/*/x", false},
		{"/*/*", "/a/b", true},
		{"/*", "/a/b", false},
		{"/a/*", "/a", false},
		{"/", "/", true},
		{"/*", "/", false},
		{"/a", "/b", false},
		{"/a/*/c", "/a/b/*", false},

		// Catch-alls on either side.
		{"/**", "/", true},
		{"/**", "/a/*/c", true},
		{"/**", "/**", true},
		{"/**", "/a/**", true},
		{"/a/**", "/**", false},
		{"/", "/**", false},
		{"/a/**", "/a", true},
		{"/a/**", "/a/", true},
		{"/a/**", "/a/b/c", true},
		{"/a/**", "/a/*/*", true},
		{"/a/**", "/a/**", true},
		{"/a/**", "/a/*/**", true},
		{"/a/*/**", "/a/**", false}, // "/a" itself
		{"/a/*/**", "/a", false},
		{"/a/*/**", "/a/b", true},
		{"/a/**", "/*", false},
		{"/a/**", "/*/b/**", false},
		{"/*/**", "/a/b/**", true},
		{"/*/**", "/a", true},
		{"/*/**", "/", false},
		{"/a/b/**", "/a/*/c", false},
		{"/a/*/**", "/a/b/c/**", true},
		{"/a", "/a/**", false},
		{"/a/*", "/a/**", false},
		{"/a/*/*", "/a/*/**", false},
		{"/a/**", "/ab", false},
		{"/a/**", "/b/**", false},
	} {
		p, err := compilePattern(tt.p)
		if err != nil {
			t.Fatal(err)
		}
		q, err := compilePattern(tt.q)
		if err != nil {
			t.Fatal(err)
		}
		if got := p.covers(&q); got != tt.want {
			t.Errorf("%q covers %q = %v, want %v", tt.p, tt.q, got, tt.want)
		}
	}
}

func TestConfigText(t *testing.T) {
	tests := []struct {
		name string
		doc  string
		want string
	}{
		{"a Latin-1 comment", "rate_limit:\n  enabled: true\n  # caf\xe9 au lait\n", `rate-limit config t.yaml:3:8: invalid UTF-8 (byte 0xe9)`},
		{"a Latin-1 value", "rate_limit:\n  rules:\n    - name: caf\xe9\n", `rate-limit config t.yaml:3:16: invalid UTF-8 (byte 0xe9)`},
		{"columns count characters", "rate_limit:\n  # 한국어 \xff\n", `rate-limit config t.yaml:2:9: invalid UTF-8 (byte 0xff)`},
		{"a truncated sequence at the end", "rate_limit: {}\n# \xe2\x82", `rate-limit config t.yaml:2:3: invalid UTF-8 (byte 0xe2)`},
		{"an encoded surrogate", "rate_limit: {}\n# \xed\xa0\x80\n", `rate-limit config t.yaml:2:3: invalid UTF-8 (byte 0xed)`},
		{"an overlong encoding", "rate_limit: {}\n# \xc0\xaf\n", `rate-limit config t.yaml:2:3: invalid UTF-8 (byte 0xc0)`},
		{"a NUL byte", "rate_limit:\n  default: \"10/s\x00\"\n", `rate-limit config t.yaml:2:17: control character U+0000 is not allowed`},
		{"a NUL byte first", "\x00", `rate-limit config t.yaml:1:1: control character U+0000 is not allowed`},
		{"a C0 control in a comment", "rate_limit: {} # \x1b[31m\n", `rate-limit config t.yaml:1:18: control character U+001B is not allowed`},
		{"DEL", "rate_limit: {}\n\x7f\n", `rate-limit config t.yaml:2:1: control character U+007F is not allowed`},
		{"a C1 control", "rate_limit: {}\n# \u0080\n", `rate-limit config t.yaml:2:3: control character U+0080 is not allowed`},
		{"NEL, a line break to YAML 1.1", "rate_limit: {}\n# a\u0085b\n", `rate-limit config t.yaml:2:4: control character U+0085 is not allowed`},
		{"LINE SEPARATOR", "rate_limit: {}\n# a\u2028b\n", `rate-limit config t.yaml:2:4: U+2028 is not allowed: end lines with \n`},
		{"PARAGRAPH SEPARATOR", "rate_limit: {}\n# a\u2029b\n", `rate-limit config t.yaml:2:4: U+2029 is not allowed: end lines with \n`},
		{"a noncharacter", "rate_limit: {}\n# \uffff\n", `rate-limit config t.yaml:2:3: noncharacter U+FFFF is not allowed`},
		{"a byte order mark after the start", "rate_limit: {}\n\ufeff# x\n", `rate-limit config t.yaml:2:1: byte order mark U+FEFF is allowed only at the start of the file`},
		{"a byte order mark at the start is not a column", "\ufeffrate_limit: \x01\n", `rate-limit config t.yaml:1:13: control character U+0001 is not allowed`},
		{"CRLF line ends", "rate_limit:\r\n  enabled: true\r\n  # \x01\r\n", `rate-limit config t.yaml:3:5: control character U+0001 is not allowed`},
		{"CR line ends", "rate_limit:\r  enabled: true\r  # \x01\r", `rate-limit config t.yaml:3:5: control character U+0001 is not allowed`},
		{"UTF-16LE", "\xff\xfer\x00a\x00t\x00e\x00_\x00l\x00i\x00m\x00i\x00t\x00:\x00 \x00{\x00}\x00\n\x00", `rate-limit config t.yaml:1:1: the file is UTF-16 (byte order mark 0xff 0xfe): save it as UTF-8`},
		{"UTF-16BE", "\xfe\xff\x00r", `rate-limit config t.yaml:1:1: the file is UTF-16 (byte order mark 0xfe 0xff): save it as UTF-8`},
		{"UTF-16LE without a byte order mark", "r\x00a\x00", `rate-limit config t.yaml:1:2: control character U+0000 is not allowed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.doc), "t.yaml")
			if c != nil {
				t.Errorf("ParseConfig returned a Config with an error")
			}
			checkConfigError(t, err, tt.want)
		})
	}

	// What YAML allows, and a tab, still loads.
	c := mustParse(t, "\ufeffrate_limit:\r\n  enabled: true # caf\u00e9 \u20ac \U0001F600 \ufffd \u00a0\t\u2027\r\n  exempt_paths: [\"/\u00e9t\u00e9\"]\n")
	if !c.Enabled() || !c.Exempt("/\u00e9t\u00e9") {
		t.Errorf("Enabled, Exempt(/été) = %v, %v; want true, true", c.Enabled(), c.Exempt("/\u00e9t\u00e9"))
	}

	// The error carries the position as fields too.
	_, err := ParseConfig([]byte("rate_limit:\n  # caf\xe9\n"), "f.yaml")
	var ce *ConfigError
	if !errors.As(err, &ce) || ce.File != "f.yaml" || ce.Line != 2 || ce.Column != 8 {
		t.Errorf("ParseConfig error = %#v, want File f.yaml, Line 2, Column 8", ce)
	}
}

// TestGetCoversHead: a rule for GET counts HEAD, which routers serve with
// the GET handler, and a later HEAD rule for the same path is refused as
// never applying.
func TestGetCoversHead(t *testing.T) {
	cfg, err := NewConfig(Spec{Enabled: true, Rules: []RuleSpec{
		{Name: "read", Paths: []string{"/doc"}, Methods: []string{"GET"}, Limit: []string{"5/second"}},
		{Name: "write", Paths: []string{"/doc"}, Methods: []string{"POST"}, Limit: []string{"1/second"}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for method, want := range map[string]string{"GET": "read", "HEAD": "read", "POST": "write", "PUT": "default"} {
		if r, _ := cfg.Match(method, "/doc"); r.Name != want {
			t.Errorf("Match(%s, /doc) = %q, want %q", method, r.Name, want)
		}
	}
	_, err = NewConfig(Spec{Enabled: true, Rules: []RuleSpec{
		{Name: "read", Paths: []string{"/doc"}, Methods: []string{"GET"}, Limit: []string{"5/second"}},
		{Name: "head", Paths: []string{"/doc"}, Methods: []string{"HEAD"}, Limit: []string{"1/second"}},
	}})
	if err == nil || !strings.Contains(err.Error(), `rule "head": field "paths": value "/doc": already matched by rule "read"`) {
		t.Errorf("a HEAD rule after a GET rule for the same path: err = %v, want it refused as already matched", err)
	}
}

// TestConfigWarnsWithoutEnabled: a file with rules but no enabled field
// loads with limiting off, and a warning names the file; a file that says
// enabled: false, or has no rules, loads without one. Not parallel: it
// sets the default logger.
func TestConfigWarnsWithoutEnabled(t *testing.T) {
	var logged bytes.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}})))
	defer slog.SetDefault(old)
	for _, tt := range []struct {
		doc, want string
	}{
		{yamlLines("rate_limit:", "  rules:", "    - {name: a, paths: [/a], limit: 1/s}"),
			`level=WARN msg="rlkit: rate-limit config has rules but no enabled field: limiting is off (add enabled: true to turn it on, or enabled: false to say so)" file=w.yaml rules=1` + "\n"},
		{yamlLines("rate_limit:", "  enabled: false", "  rules:", "    - {name: a, paths: [/a], limit: 1/s}"), ""},
		{yamlLines("rate_limit:", "  enabled: true", "  rules:", "    - {name: a, paths: [/a], limit: 1/s}"), ""},
		{yamlLines("rate_limit:", "  default: 10/s"), ""},
	} {
		logged.Reset()
		c, err := ParseConfig([]byte(tt.doc), "w.yaml")
		if err != nil {
			t.Fatal(err)
		}
		if got := logged.String(); got != tt.want {
			t.Errorf("ParseConfig(%q) logged %q, want %q", tt.doc, got, tt.want)
		}
		if tt.want != "" && c.Enabled() {
			t.Errorf("ParseConfig(%q): Enabled() = true, want false", tt.doc)
		}
	}
}

// TestConfigOnePass: an unknown field does not stop the checks, so every
// error of the file is reported in one pass, in line order.
func TestConfigOnePass(t *testing.T) {
	_, err := ParseConfig([]byte(yamlLines(
		"rate_limit:",
		"  enabeld: true", // 2: unknown
		"  rules:",
		"    - name: a",
		"      paths: [/a]",
		"      limit: 2/s",
		"      weights: {/a: 3}", // 7: above the capacity
		"    - name: a",          // 8: duplicate
		"      paths: [/b]",
		"      limit: 1/s",
		"      burst: 5", // 11: not for a fixed window
	)), "t.yaml")
	checkConfigError(t, err,
		`rate-limit config t.yaml:2: field "enabeld": unknown field (want enabled, algorithm, rules, default, default_window, default_timezone, default_key, exempt_paths, headers, failure, mode, tiers, allow, ban, consistency or lease_block)`,
		`rate-limit config t.yaml:7: rule "a": field "weights": value "3": weight of "/a" exceeds the rule's capacity 2 (2/s): such a request could never pass`,
		`rate-limit config t.yaml:8: rule "a": field "name": value "a": duplicate rule name (also rules[0])`,
		`rate-limit config t.yaml:11: rule "a": field "burst": value "5": burst applies to token_bucket and gcra only, not fixed_window`,
	)
}
