package core

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/rlkit/rlkit/core/store"
)

// refParam matches a router parameter: ":name" or "{name}".
var refParam = regexp.MustCompile(`^(:[A-Za-z_][A-Za-z0-9_]*|\{[A-Za-z_][A-Za-z0-9_]*\})$`)

// refWild reports whether a pattern segment is the one-segment wildcard.
func refWild(seg string) bool { return seg == "*" || refParam.MatchString(seg) }

// refMatch is a slow, obvious matcher: the trimmed path has as many
// segments as the pattern, each equal to its pattern segment or, for '*',
// ":name" or "{name}", non-empty; a last pattern segment "**" takes any
// number of the path's (none included).
func refMatch(pattern, path string) bool {
	split := func(p string) []string {
		p = trimSlash(p)
		if p == "/" {
			return nil
		}
		return strings.Split(p[1:], "/")
	}
	if path == "" || path[0] != '/' {
		return false
	}
	ps, qs := split(pattern), split(path)
	if n := len(ps); n > 0 && ps[n-1] == "**" {
		ps = ps[:n-1]
		if len(qs) < len(ps) {
			return false
		}
		qs = qs[:len(ps)]
	}
	if len(ps) != len(qs) {
		return false
	}
	for i := range ps {
		if refWild(ps[i]) && qs[i] == "" || !refWild(ps[i]) && ps[i] != qs[i] {
			return false
		}
	}
	return true
}

func FuzzPattern(f *testing.F) {
	seeds := [][2]string{
		{"/", "/"},
		{"/", ""},
		{"/", "//"},
		{"/api/search", "/api/search/"},
		{"/api/search/", "/api/search"},
		{"/api/kb/*/reindex", "/api/kb/kb-01/reindex"},
		{"/api/kb/*/reindex", "/api/kb/a/b/reindex"},
		{"/api/kb/*/reindex", "/api/kb//reindex"},
		{"/api/kb/*/docs/*/reindex", "/api/kb/x/docs/y/reindex"},
		{"/api/kb/*/docs/upload/batch", "/api/kb/x/docs/upload/batch/"},
		{"/*", "/x"},
		{"/*", "/"},
		{"/*/*", "/a//"},
		{"/a/*", "/a/*"},
		{"/검색/*", "/검색/문서"},
		{"/a", "a"},
		{"", "/"},
		{"a", "a"},
		{"//", "/"},
		{"/a//b", "/a//b"},
		{"/api/*x", "/api/yx"},
		{"/a?b", "/a?b"},
		{"/a#", "/a#"},
		{"/a\x00", "/a\x00"},
		{"/\xff/*", "/\xff/\xfe"},
		{"/" + strings.Repeat("*/", 40) + "*", "/" + strings.Repeat("x/", 40) + "x"},
		// Router syntax: parameters, and what must be refused.
		{"/api/items/:id", "/api/items/7"},
		{"/api/items/:id", "/api/items/7/x"},
		{"/api/things/{id}", "/api/things/7"},
		{"/api/things/{id}/", "/api/things//"},
		{"/:a/{b}/c", "/x/y/c"},
		{"/v1/items:batchGet", "/v1/items:batchGet"},
		{"/a/a:b", "/a/a"},
		{"/files/*path", "/files/a/b"},
		{"/files/{path...}", "/files/a"},
		{"/users/:id?", "/users"},
		{"/a/{$}", "/a/"},
		{"/a/+", "/a/b"},
		{"/a/:id<int>", "/a/1"},
		{"/a/{id:[0-9]+}", "/a/1"},
		{"/a/{id}.json", "/a/1.json"},
		{"/f/:from-:to", "/f/a-b"},
		{"/a/:", "/a/:"},
		{"/a/{}", "/a/{}"},
		// Catch-alls, and "**" where it is refused.
		{"/api/admin/**", "/api/admin"},
		{"/api/admin/**", "/api/admin/"},
		{"/api/admin/**", "/api/admin/x/y"},
		{"/api/admin/**", "/api/administrator"},
		{"/api/admin/**", "/api/admin//"},
		{"/**", "/"},
		{"/**", ""},
		{"/**", "///"},
		{"/api/*/files/**", "/api/v1/files/a/b"},
		{"/api/*/files/**", "/api//files/a"},
		{"/api/kb/:id/**", "/api/kb/k1"},
		{"/a/**/b", "/a/x/b"},
		{"/a/**x", "/a/**x"},
		{"/a/x**", "/a/x**"},
		{"/a/**/", "/a/b/"},
		{"/**/**", "/a"},
		{"/a/***", "/a/b"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pat, path string) {
		p, err := compilePattern(pat)
		if err != nil {
			if p.raw != "" || p.prefix != "" || p.segs != nil {
				t.Errorf("compilePattern(%q) = %+v with error %v, want the zero pattern", pat, p, err)
			}
			return
		}
		if pat[0] != '/' || strings.Contains(pat, "//") || strings.ContainsAny(pat, "?#") {
			t.Errorf("compilePattern(%q) accepted a pattern it must reject", pat)
		}
		for _, s := range p.segs {
			if s == "" || s != "*" && strings.Contains(s, "*") {
				t.Errorf("compilePattern(%q) kept segment %q", pat, s)
			}
		}
		// A segment in router syntax is a parameter or refused: only a
		// literal segment may hold ':' (after its first byte), '{', '}' or
		// start with '+'.
		wild := p.rest
		if p.rest != strings.HasSuffix(pat, "/**") {
			t.Errorf("compilePattern(%q).rest = %v", pat, p.rest)
		}
		segs := strings.Split(trimSlash(pat)[1:], "/")
		if p.rest {
			segs = segs[:len(segs)-1]
		}
		for _, s := range segs {
			switch {
			case refWild(s):
				wild = true
			case s != "" && (s[0] == ':' || s[0] == '+' && strings.Trim(s[1:], "0123456789") == "") || strings.ContainsAny(s, "{}*"):
				t.Errorf("compilePattern(%q) accepted the segment %q", pat, s)
			}
		}
		if p.literal == wild {
			t.Errorf("compilePattern(%q).literal = %v, want %v", pat, p.literal, !wild)
		}
		if !p.match(trimSlash(pat)) && !strings.Contains(pat, "*") {
			t.Errorf("compilePattern(%q) does not match its own path", pat)
		}
		got := p.match(trimSlash(path))
		if want := refMatch(pat, path); got != want {
			t.Errorf("compilePattern(%q).match(%q) = %v, want %v", pat, path, got, want)
		}
		if !wild {
			if want := trimSlash(path) == trimSlash(pat); got != want {
				t.Errorf("compilePattern(%q) (no '*').match(%q) = %v, want %v", pat, path, got, want)
			}
		}
		// A pattern overlaps itself, and one that matches it.
		if !p.overlaps(&p) {
			t.Errorf("compilePattern(%q) does not overlap itself", pat)
		}
		if q, err := compilePattern(path); err == nil && got && !p.overlaps(&q) {
			t.Errorf("%q matches %q but the patterns do not overlap", pat, path)
		}
		// Against a literal pattern (one path), covering and overlapping
		// are matching: they are exact.
		if q, err := compilePattern(path); err == nil && q.literal && (p.covers(&q) != got || p.overlaps(&q) != got || q.overlaps(&p) != got) {
			t.Errorf("%q matches %q: %v, but covers it %v, overlaps it %v and %v", pat, path, got, p.covers(&q), p.overlaps(&q), q.overlaps(&p))
		}
		if !p.covers(&p) {
			t.Errorf("compilePattern(%q) does not cover itself", pat)
		}
	})
}

// configSeeds are realistic and hostile configurations.
var configSeeds = []string{
	// Keys per rule.
	"rate_limit:\n  enabled: true\n  default_key: ip\n  rules:\n    - name: login\n      paths: [/login]\n      limit: 5/m\n      key: ip\n      penalty: {after: 3, within: 1m, ban: 15m}\n    - name: kb\n      paths: [\"/kb/{kb}/search\", /v2/:org/kb/:kb]\n      limit: 9/s\n      key: user+param:kb\n    - name: api\n      paths: [/api/*]\n      limit: 9/s\n      key: ip + header:x-api-key\n  tiers:\n    pro:\n      rules:\n        kb: 20/s\n",
	"rate_limit:\n  default_key: param:kb\n  rules:\n    - name: a\n      paths: [/a/:kb, /b/*, /c/:kb/:kb]\n      limit: 1/s\n      key: \"param:kb+param:kb+user+ip+header:\"\n    - name: b\n      paths: [/b]\n      limit: 1/s\n      key: [ip]\n    - name: c\n      paths: [/c]\n      limit: 1/s\n      key: \"user++header:A|B+user:x+IP\"\n",
	// Plans (tiers).
	"rate_limit:\n  enabled: true\n  rules:\n    - name: s\n      paths: [/s, /s/b]\n      limit: 9/s\n      algorithm: gcra\n      weights: {/s/b: 3}\n  tiers:\n    free:\n      default: 5/m\n      rules:\n        s: {limit: [2/s, 9/m], burst: 4}\n    pro:\n      rules:\n        s: 20/s\n    x: {}\n",
	"rate_limit:\n  tiers:\n    custom: {}\n    a b: {rules: {s: 1/s}}\n    p:\n      rules:\n        default: 1/s\n        s:\n",
	"rate_limit:\n  enabled: true\n  exempt_paths: [\"/health/{$}\", /docs/:page]\n  rules:\n    - name: items\n      paths: [/api/items/:id, \"/api/things/{id}\", /v1/items:batchGet]\n      limit: 10/s\n      weights: {\"/api/items/{id}\": 2}\n    - name: files\n      paths: [\"/files/*path\", \"/static/{path...}\", \"/users/:id?\", /a/+, \"/b/{id:[0-9]+}\"]\n      limit: 1/s\n",
	// Catch-alls in paths, weights and exempt paths, and "**" where it is
	// refused.
	"rate_limit:\n  enabled: true\n  exempt_paths: [/health, \"/static/**\", \"/docs/*/**\"]\n  rules:\n    - name: admin\n      paths: [\"/api/admin/**\"]\n      limit: 5/m\n    - name: files\n      paths: [\"/api/*/files/**\", /api/kb/:id/**]\n      limit: 10/s\n      weights: {\"/api/*/files/upload/**\": 3, \"/api/kb/*\": 2}\n    - name: all\n      paths: [\"/**\"]\n      limit: 100/s\n",
	"rate_limit:\n  exempt_paths: [\"/a/**/b\", \"/**/\"]\n  rules:\n    - name: a\n      paths: [\"/a/**x\", \"/a/x**\", \"/**/**\", /b/**]\n      limit: 1/s\n      weights: {\"/b/**/c\": 2, \"/c/**\": 2}\n    - name: b\n      paths: [/b/c/**, /b]\n      limit: 1/s\n",
	"rate_limit:\n  enabled: true\n",
	"rate_limit: {}\n",
	"rate_limit:\n  enabled: true\n  algorithm: gcra\n  headers: legacy\n  failure: closed\n  default: [10/second, 500/hour]\n  exempt_paths: []\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [/a, /a/*]\n      methods: [GET]\n      limit: 10/s\n      algorithm: token_bucket\n      burst: 20\n      weights: {/a/*: 20}\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [/a]\n      methods: [GET]\n      limit: 1/s\n    - name: b\n      paths: [/a]\n      methods: [POST]\n      limit: 1/s\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: &p [/a]\n      limit: 1/s\n    - name: b\n      paths: *p\n      limit: 1/s\n",
	"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: &c [*b, *b, *b, *b]\nrate_limit: *c\n",
	"rate_limit:\n  enabled: true\n  enabled: false\n",
	"rate_limit:\n  enabled: maybe\n  burst: ten\n  rules: {}\n",
	"rate_limit:\n  rules:\n    - limits: 10/second\n      name: search\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [\"\", a, /a*, //, /a//b, \"/a?b\"]\n      limit: [0/s, -1/s, 1/fortnight, 3000000000/s, 1/213504d]\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [/a]\n      limit: [1/s, 2/m, 3/h, 4/d, 5/2d]\n      weights: {/b: 0, /a: 99}\n",
	"rate_limit:\n  enabled: true\n---\nrate_limit:\n  enabled: false\n",
	"",
	"# only a comment\n",
	"---\n",
	"~\n",
	"[]\n",
	"\xef\xbb\xbfrate_limit: {enabled: true}\n",
	"rate_limit:\n\tenabled: true\n",
	"rate_limit: {enabled: !!bool true, default: !!str 10/s}\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [/a]\n      limit: 1/s\n      burst: !!int 0x10\n      algorithm: gcra\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [/a]\n      limit: 1/s\n      burst: 99999999999999999999\n",
	"rate_limit:\n  rules:\n    - name: default\n      paths: [/]\n      limit: 1/s\n    - name: default\n      paths: [/]\n      limit: 1/s\n",
	"rate_limit:\n  rules:\n    - - - - - []\n",
	"rate_limit:\n  rules:\n    - {? [a]: b}\n",
	"rate_limit:\n  rules:\n    - name: !!binary aGVsbG8=\n      paths: [/a]\n      limit: 1/s\n",
	"rate_limit: {rules: [{name: a, paths: [/a], limit: 1/s, weights: {/a: 1, /a: 1}}]}\n",
	"{\"rate_limit\": {\"enabled\": true, \"rules\": [{\"name\": \"a\", \"paths\": [\"/a\"], \"limit\": \"1/s\"}]}}",
	"rate_limit:\n  default: &d 10/second\n",
	"rate_limit: !custom {enabled: true}\n",
	"%YAML 1.2\n---\nrate_limit: {}\n",
	"%TAG ! tag:example.com,2000:\n---\nrate_limit: !foo {}\n",
	"rate_limit: [\n",
	"\x00\x01\x02",
	// A tag whose %-escape decodes to bytes that are not UTF-8: the YAML
	// parser names no line for it.
	"!%a0",
	"rate_limit:\n  enabled: !<%ff> true\n",
	// Text that is not UTF-8, or that YAML forbids.
	"rate_limit:\n  enabled: true\n  # caf\xe9 au lait\n",
	"rate_limit:\n  default: \"10/s\x00\"\n",
	"rate_limit: {} # \x1b[31m\n",
	"rate_limit: {}\n\x7f\u0080\u0085\n",
	"rate_limit: {}\n# a\u2028b\u2029\n",
	"rate_limit: {}\n# \uffff\ufffe\ufffd\n",
	"rate_limit: {}\n\ufeff# x\n",
	"\ufeff\ufeffrate_limit: {}\n",
	"rate_limit:\r  enabled: true\r  # \x01\r",
	"rate_limit:\r\n  enabled: true\r\n  # \xed\xa0\x80\r\n",
	"\xff\xfer\x00a\x00t\x00e\x00_\x00l\x00i\x00m\x00i\x00t\x00:\x00 \x00{\x00}\x00\n\x00",
	"\xfe\xff\x00r",
	"rate_limit: {}\n# \xe2\x82",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [\"/caf\xe9\"]\n      limit: 1/s\n",
	// Paths an earlier rule, the same rule or exempt_paths covers.
	"rate_limit:\n  rules:\n    - name: kb\n      paths: [/api/kb/*/x]\n      limit: 1/s\n    - name: k1\n      paths: [/api/kb/k1/x]\n      limit: 1/s\n",
	"rate_limit:\n  rules:\n    - name: r\n      paths: [/d/*]\n      methods: [GET]\n      limit: 1/s\n    - name: w\n      paths: [/d/*]\n      methods: [PUT]\n      limit: 1/s\n    - name: m\n      paths: [/d/m, /d/n/o]\n      methods: [GET, PUT]\n      limit: 1/s\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [/a/b, /a/*, /a/*/]\n      limit: 1/s\n",
	"rate_limit:\n  rules:\n    - name: h\n      paths: [/health, /s/*]\n      limit: 1/s\n  exempt_paths: [/s/*]\n",
	// Allow and ban lists, and a penalty.
	"rate_limit:\n  enabled: true\n  allow:\n    identities: [sub:ops, 203.0.113.9, \"X-Api-Key:hmac:0123456789abcdef0123456789abcdef\"]\n    networks: [10.0.0.0/8, 2001:db8::/32, 192.0.2.1]\n  ban:\n    networks: [198.51.100.0/24, \"::ffff:203.0.113.0/120\"]\n",
	"rate_limit:\n  ban:\n    networks: [10.0.0.0/8, 10.1.0.0/16]\n  allow:\n    networks: [10.2.0.0/16, 10.0.0.1/8]\n    identities: [\"\", sha256:00]\n",
	"rate_limit:\n  rules:\n    - name: login\n      paths: [/login]\n      limit: 5/m\n      penalty: {after: 10, within: 1m, ban: 15m}\n    - name: x\n      paths: [/x]\n      limit: 5/m\n      penalty: {after: 0, within: 1ms, ban: x}\n",
	// Costs known after the response, and what they cannot be.
	"rate_limit:\n  enabled: true\n  rules:\n    - name: llm\n      paths: [/v1/chat]\n      limit: 100000/hour\n      algorithm: token_bucket\n      cost: response\n    - name: s\n      paths: [/s]\n      limit: 5/m\n      algorithm: sliding_window\n      cost: response\n",
	"rate_limit:\n  rules:\n    - name: a\n      paths: [/a]\n      limit: 5/m\n      cost: response\n    - name: b\n      paths: [/b]\n      limit: 5/m\n      algorithm: gcra\n      cost: response\n      count: failures\n      weights: {/b: 2}\n    - name: c\n      paths: [/c]\n      limit: 5/m\n      cost: [response]\n    - name: d\n      paths: [/d]\n      limit: 5/m\n      cost: request\n",
	// Counting by outcome, and clearing failures on a success.
	"rate_limit:\n  rules:\n    - name: login\n      paths: [/login]\n      limit: 5/m\n      count: failures\n      clear_on_success: true\n    - name: x\n      paths: [/x]\n      limit: 5/m\n      count: successes\n      clear_on_success: yes\n    - name: y\n      paths: [/y]\n      limit: 5/m\n      clear_on_success: [true]\n",
	// A rule's wait and its queue.
	"rate_limit:\n  enabled: true\n  rules:\n    - name: r\n      paths: [/r]\n      limit: 5/s\n      algorithm: gcra\n      wait: 2s\n      wait_queue: 20\n    - name: s\n      paths: [/s]\n      limit: 5/s\n      wait: 500ms\n  tiers:\n    pro:\n      rules:\n        r: 10/s\n",
	"rate_limit:\n  mode: shadow\n  rules:\n    - name: a\n      paths: [/a]\n      limit: 1/s\n      wait: 1min\n      wait_queue: 1000\n    - name: b\n      paths: [/b]\n      limit: 1/s\n      count: failures\n      wait: 61s\n    - name: c\n      paths: [/c]\n      limit: 1/s\n      wait_queue: 0\n    - name: d\n      paths: [/d]\n      limit: 1/s\n      wait: -1ns\n      wait_queue: x\n",
	// Concurrency limits, alone and with limits, their lease, their wait
	// for a slot, and the fields a rule without a limit may not have.
	"rate_limit:\n  enabled: true\n  rules:\n    - name: r\n      paths: [/r]\n      concurrent: 2\n    - name: s\n      paths: [/s]\n      limit: 5/s\n      concurrent: 3\n      lease: 2m\n  tiers:\n    pro:\n      rules:\n        r: 10/s\n",
	"rate_limit:\n  enabled: true\n  rules:\n    - name: r\n      paths: [/r]\n      concurrent: 1\n      wait: 2s\n      wait_queue: 5\n    - name: s\n      paths: [/s]\n      concurrent: 2\n      mode: shadow\n      wait: 1s\n    - name: t\n      paths: [/t]\n      limit: 1/s\n      concurrent: 1\n      wait: 500ms\n",
	"rate_limit:\n  rules:\n    - name: r\n      paths: [/r]\n      concurrent: 0\n      lease: 0s\n    - name: s\n      paths: [/s]\n      concurrent: -1\n      burst: 2\n      weights: {/s: 2}\n      count: failures\n    - name: t\n      paths: [/t]\n      limit: 1/s\n      lease: 1d\n      concurrent: x\n",
	"rate_limit:\n  rules:\n    - name: k1\n      paths: [/api/kb/k1/x]\n      limit: 1/s\n    - name: kb\n      paths: [/api/kb/*/x, /api/*/k1/x]\n      limit: 1/s\n    - name: g\n      paths: [/d/*]\n      methods: [GET]\n      limit: 1/s\n    - name: any\n      paths: [/d/a]\n      limit: 1/s\n    - name: gp\n      paths: [/d/b]\n      methods: [GET, PUT]\n      limit: 1/s\n  exempt_paths: [/d/c]\n",
}

func FuzzParseConfig(f *testing.F) {
	example, err := os.ReadFile(filepath.Join("testdata", "ratelimit.yaml"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(example)
	f.Add([]byte(strings.Replace(string(example), "enabled: true", "enabled: false", 1)))
	f.Add([]byte(strings.Replace(string(example), `"10/second"`, `["10/second", "500/hour"]`, 1)))
	f.Add([]byte(strings.Replace(string(example), "10\n", "31\n", 1)))
	f.Add([]byte(strings.Replace(string(example), "  default:", "  algorithm: token_bucket\n  default:", 1)))
	f.Add(example[:len(example)/2])
	f.Add([]byte(llmConfig))
	f.Add([]byte(strings.Replace(llmConfig, "Europe/Berlin", "Europe/Berln", 1)))
	f.Add([]byte(strings.Replace(llmConfig, `["3/day", "5/month"]`, `["3/minute", "5/2months"]`, 1)))
	f.Add([]byte(strings.Replace(llmConfig, "window: calendar", "window: weekly\n      algorithm: gcra", 1)))
	f.Add([]byte(strings.Replace(string(example), `"10/second"`, `"1000/month"`, 1)))
	f.Add([]byte(strings.Replace(string(example), "  default:", "  default_window: calendar\n  default_timezone: Local\n  default:", 1)))
	f.Add([]byte(strings.Replace(string(example), "  default:", "  consistency: lease\n  lease_block: 50\n  default:", 1)))
	f.Add([]byte(strings.Replace(string(example), "  default:", "  consistency: eventual\n  lease_block: 0\n  default:", 1)))
	for _, s := range configSeeds {
		f.Add([]byte(s))
	}
	paths := []string{"/", "", "/api/search", "/api/kb/kb-01/docs/upload/batch", "/api/kb/a/b/reindex", "/mcp/", "/health", "x"}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseConfig(data, "f.yaml")
		if (c == nil) == (err == nil) {
			t.Fatalf("ParseConfig = %v, %v; want exactly one of a Config and an error", c, err)
		}
		// Bad text is the one error, at the first bad character.
		if line, col, bad := refBadText(data); bad {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Line != line || ce.Column != col || strings.Contains(err.Error(), "\n") {
				t.Fatalf("ParseConfig(%q) error = %v, want one error at line %d, column %d", data, err, line, col)
			}
			return
		}
		if err != nil && strings.Contains(err.Error(), "invalid YAML") &&
			(strings.Contains(err.Error(), "Unicode") || strings.Contains(err.Error(), "control char")) {
			t.Fatalf("ParseConfig(%q) = %v: the YAML parser found bad text that checkText let through", data, err)
		}
		// Every error of the YAML parser names its line.
		if ce := (*ConfigError)(nil); errors.As(err, &ce) && strings.HasPrefix(ce.Msg, "invalid YAML") && ce.Line == 0 {
			t.Fatalf("ParseConfig(%q) = %v: no line", data, err)
		}
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("ParseConfig error %T %q is not a *ConfigError", err, err)
			}
			leaves := []error{err}
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				leaves = j.Unwrap()
			}
			for _, e := range leaves {
				ce, ok := e.(*ConfigError)
				if !ok {
					t.Errorf("joined error %T %q is not a *ConfigError", e, e)
					continue
				}
				if ce.File != "f.yaml" || ce.Line < 0 || ce.Column != 0 || ce.Msg == "" {
					t.Errorf("ConfigError %+v: want File f.yaml, Line >= 0, no Column (text is good) and a message", ce)
				}
				if !strings.HasPrefix(ce.Error(), "rate-limit config f.yaml") {
					t.Errorf("ConfigError text %q does not name the file", ce.Error())
				}
				if utf8.ValidString(string(data)) && !utf8.ValidString(ce.Error()) {
					t.Errorf("ConfigError text %q is not valid UTF-8", ce.Error())
				}
			}
			return
		}
		checkCompiled(t, c, paths)
	})
}

// refBadText finds the first character a configuration may not hold, by
// another route than checkText: lines split on "\r\n", "\r" and "\n",
// characters counted in each line.
func refBadText(data []byte) (line, col int, bad bool) {
	s := strings.TrimPrefix(string(data), "\ufeff")
	if strings.HasPrefix(s, "\xff\xfe") || strings.HasPrefix(s, "\xfe\xff") {
		return 1, 1, true
	}
	s = strings.ReplaceAll(s, "\r\n", "\n")
	s = strings.ReplaceAll(s, "\r", "\n")
	for i, l := range strings.Split(s, "\n") {
		col := 0
		for off, r := range l {
			col++
			invalid := r == utf8.RuneError && !strings.HasPrefix(l[off:], "\ufffd")
			if invalid || unicode.IsControl(r) && r != '\t' || r == 0xfeff || r == 0x2028 || r == 0x2029 || r == 0xfffe || r == 0xffff {
				return i + 1, col, true
			}
		}
	}
	return 0, 0, false
}

// checkCompiled checks the invariants of a compiled configuration.
func checkCompiled(t *testing.T, c *Config, paths []string) {
	t.Helper()
	if c.Default() == nil || c.Default().Name != DefaultRuleName {
		t.Fatalf("Default() = %v, want the default rule", c.Default())
	}
	seen := map[string]bool{}
	for _, r := range append(c.Rules(), c.Default()) {
		if seen[r.Name] {
			t.Errorf("two rules named %q", r.Name)
		}
		seen[r.Name] = true
		if r.conc != nil {
			if err := r.conc.Validate(); err != nil || r.conc.Name != r.Name {
				t.Errorf("rule %q: concurrency %q: %v", r.Name, r.conc.Name, err)
			}
		}
		if err := r.Policy.Validate(); err != nil && (r.conc == nil || r.rated()) {
			t.Errorf("rule %q: %v", r.Name, err)
		}
		if !r.rated() && (len(r.weights) > 0 || r.penalty != nil || r.byOutcome()) {
			t.Errorf("rule %q has no limit, and weights, a penalty or a count by outcome", r.Name)
		}
		if r.Policy.Name != r.Name {
			t.Errorf("rule %q has policy %q", r.Name, r.Policy.Name)
		}
		for _, w := range r.weights {
			if w.cost < 1 || w.cost > r.Policy.Capacity() {
				t.Errorf("rule %q: weight %d outside [1, %d]", r.Name, w.cost, r.Policy.Capacity())
			}
		}
		if len(r.policyValue) != 1 || len(r.body) == 0 {
			t.Errorf("rule %q was not prepared", r.Name)
		}
		for _, p := range r.Paths() {
			if p == "" || p[0] != '/' || strings.Contains(p, "//") {
				t.Errorf("rule %q: accepted path %q", r.Name, p)
			}
		}
	}
	// Every plan has a variant of every rule and of the default: the
	// rule's name, paths and weights, a policy of its own.
	for _, plan := range c.Plans() {
		for _, r := range append(c.Rules(), c.Default()) {
			v := c.PlanRule(plan, r.Name)
			if v == nil || v.Name != r.Name || v.Plan() != plan || v.Policy.Name != r.Name+"@"+plan || v.Shadow() != r.Shadow() || v.Policy.Algorithm != r.Policy.Algorithm {
				t.Fatalf("plan %q, rule %q: variant %+v", plan, r.Name, v)
			}
			if err := v.Policy.Validate(); err != nil && v.rated() || v.conc != r.conc {
				t.Errorf("plan %q, rule %q: %v, or another concurrency limit", plan, r.Name, err)
			}
			if _, over := v.heaviest(v.Policy.Capacity()); over || len(v.policyValue) != 1 || !slices.Equal(v.Paths(), r.Paths()) {
				t.Errorf("plan %q, rule %q: a weight over the capacity, unprepared, or other paths", plan, r.Name)
			}
		}
	}
	// Every listed network holds its own first address; no allowed one is
	// banned.
	if ls := c.lists; ls != nil {
		for _, p := range ls.banNets.list {
			if !c.banned(p.Addr()) {
				t.Errorf("ban.networks %v: its address is not banned", p)
			}
		}
		for _, p := range ls.allowNets.list {
			if !c.allowsIP(p.Addr()) || c.banned(p.Addr()) {
				t.Errorf("allow.networks %v: allowed %v, banned %v", p, c.allowsIP(p.Addr()), c.banned(p.Addr()))
			}
		}
	}
	// A rule's key reads each parameter it names from every path of the
	// rule, at a segment that path names so.
	for _, r := range append(c.Rules(), c.Default()) {
		if r.key == nil {
			if r.Key() != "user" {
				t.Errorf("rule %q: no key, Key() %q", r.Name, r.Key())
			}
			continue
		}
		if len(r.key.parts) == 0 || len(r.key.parts) > maxKeyParts || r.Key() == "user" {
			t.Errorf("rule %q: key %q of %d parts", r.Name, r.Key(), len(r.key.parts))
		}
		for _, p := range r.key.parts {
			if p.kind != keyParam {
				continue
			}
			if len(p.pos) != len(r.paths) {
				t.Fatalf("rule %q: param:%s at %d positions for %d paths", r.Name, p.name, len(p.pos), len(r.paths))
			}
			for i := range r.paths {
				if pat := &r.paths[i]; p.pos[i] < 0 || p.pos[i] >= len(pat.names) || pat.names[p.pos[i]] != p.name {
					t.Errorf("rule %q: param:%s at segment %d of %q", r.Name, p.name, p.pos[i], pat.raw)
				}
			}
		}
	}
	for _, r := range c.Rules() {
		if r.clear && r.count != countFailures {
			t.Errorf("rule %q clears on success but counts %s", r.Name, r.Count())
		}
		// A wait is within its bounds, on a rule that refuses before the
		// handler; none, no queue.
		if w := r.wait; w < 0 || w > maxWait || (w == 0) != (r.waitQueue == 0) || w != 0 && (r.shadow || r.byOutcome() || r.waitQueue < 1 || r.waitQueue > maxWaitQueue) {
			t.Errorf("rule %q: wait %v, queue %d, shadow %v, count %s", r.Name, w, r.waitQueue, r.shadow, r.Count())
		}
		if pn := r.penalty; pn != nil {
			for _, pr := range []*Rule{pn.ban, pn.denials} {
				if err := pr.Policy.Validate(); err != nil || !strings.HasPrefix(pr.Name, r.Name+"!") {
					t.Errorf("rule %q: penalty policy %q: %v", r.Name, pr.Name, err)
				}
			}
		}
	}
	for _, p := range paths {
		r, cost := c.Match("GET", Path(p))
		if r == nil || cost < 1 || cost > r.Policy.Capacity() {
			t.Errorf("Match(GET, %q) = %v, %d", p, r, cost)
		}
		c.Exempt(Path(p))
	}
	for _, r := range c.Rules() {
		for _, p := range r.Paths() {
			if m, _ := c.Match("GET", Path(strings.ReplaceAll(p, "*", "x"))); m == nil {
				t.Errorf("Match(%q) = nil", p)
			}
		}
	}
	// No path of a rule is shadowed: with every '*' a segment no pattern
	// names ("*x") and one of the rule's methods (or, for a rule of every
	// method, one too long for any rule to name), it is not exempt and the
	// rule applies. Paths that other spellings (dot segments, escapes)
	// could reach otherwise are left out.
	simple := regexp.MustCompile(`^(/([A-Za-z0-9_-]+|\*))+/?$`)
	for _, r := range c.Rules() {
		methods := r.methods
		if len(methods) == 0 {
			methods = []string{"NOSUCHMETHODNAMED"}
		}
		for _, p := range r.Paths() {
			if !simple.MatchString(p) {
				continue
			}
			path := Path(strings.ReplaceAll(p, "*", "*x"))
			if c.Exempt(path) {
				t.Errorf("rule %q: path %q loaded, but %q is exempt", r.Name, p, path)
			}
			if !slices.ContainsFunc(methods, func(m string) bool { got, _ := c.Match(m, path); return got == r }) {
				t.Errorf("rule %q: path %q loaded, but another rule takes %q for each of %v", r.Name, p, path, methods)
			}
		}
	}
}

// FuzzRuleKeyParam: a parameter's value counts under one key however the
// path spells it (each of its bytes escaped or not, a dot segment before
// it, plain or escaped, a trailing slash; in any case behind a router
// that ignores case),
// and no two values share a key.
func FuzzRuleKeyParam(f *testing.F) {
	for _, seed := range []string{"k1", "a|b", "a%7Cb", "%", "%2", "%zz", "%252F", "x y", "é", "p:1", "..", ".", "K1", "\x00", strings.Repeat("k", 200)} {
		f.Add(seed, uint64(0))
		f.Add(seed, uint64(0x5555))
	}
	cfg, err := NewConfig(Spec{Enabled: true, Rules: []RuleSpec{{Name: "kb", Paths: []string{"/kb/{kb}/search"}, Limit: []string{"1/s"}, Key: "param:kb"}}})
	if err != nil {
		f.Fatal(err)
	}
	l := NewLimiter(cfg)
	key := func(p Path, fold bool) string {
		d, _ := (&Flow[int]{Limiter: l, FoldCase: fold}).Decide(context.Background(), 0, "GET", p, "")
		if d.Rule == nil || d.Rule.Name != "kb" {
			return ""
		}
		return d.Key
	}
	f.Fuzz(func(t *testing.T, v string, mask uint64) {
		if v == "" || v == "." || v == ".." || strings.ContainsAny(v, "/?#") {
			return
		}
		// v as sent is the value decoded once: escape every '%' of it.
		plain := strings.ReplaceAll(v, "%", "%25")
		want := key(Path("/kb/"+plain+"/search"), false)
		if want == "" || len(want) > store.MaxKeyLen {
			t.Fatalf("%q: key %q, want one of at most %d bytes", v, want, store.MaxKeyLen)
		}
		var b strings.Builder
		for i := 0; i < len(v); i++ {
			if c := v[i]; mask>>(i%64)&1 == 1 || c == '%' {
				fmt.Fprintf(&b, "%%%02X", c)
			} else {
				b.WriteByte(c)
			}
		}
		for _, p := range []string{"/kb/" + b.String() + "/search", "/kb/x/../" + b.String() + "/search/", "/kb/x/%2e%2E/" + b.String() + "/search", "/kb/" + b.String() + "/./search"} {
			if got := key(Path(p), false); got != want {
				t.Errorf("%q: %s counts under %q, %s under %q", v, plain, want, p, got)
			}
		}
		// Behind a router that ignores case: as the value in lower case.
		lower := strings.ReplaceAll(asciiCase(v, 'A', 'a'), "%", "%25")
		if got, want := key(Path("/KB/"+asciiCase(b.String(), 'a', 'A')+"/SEARCH"), true), key(Path("/kb/"+lower+"/search"), false); got != want {
			t.Errorf("%q folded: %q, want %q", v, got, want)
		}
		// Another value, another key.
		if other := key(Path("/kb/"+plain+"x/search"), false); other == want {
			t.Errorf("%q and %q share the key %q", v, v+"x", want)
		}
	})
}

// asciiCase is s with the ASCII letters from..from+25 moved to to..to+25:
// ('A', 'a') lowers, ('a', 'A') raises, and no other byte changes.
func asciiCase(s string, from, to byte) string {
	b := []byte(s)
	for i, c := range b {
		if from <= c && c <= from+25 {
			b[i] = c - from + to
		}
	}
	return string(b)
}
