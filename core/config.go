package core

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// DefaultLimit is the limit of requests no rule matches, unless the
// configuration says otherwise.
const DefaultLimit = "120/minute"

// DefaultRuleName is the name of the rule that applies when no rule matches.
const DefaultRuleName = "default"

// DefaultExemptPaths never touch a counter unless the configuration lists
// its own exempt_paths.
var DefaultExemptPaths = []string{"/health", "/ready", "/docs", "/redoc", "/openapi.json"}

// HeaderStyle selects the rate-limit headers written on limited responses.
type HeaderStyle uint8

const (
	// HeadersDraft writes the IETF httpapi draft headers:
	//   RateLimit-Policy: "<rule>";q=<count>;w=<window seconds>
	//   RateLimit: "<rule>";r=<remaining>;t=<seconds to reset>
	// with one list item per limit of the rule. It is the default.
	HeadersDraft HeaderStyle = iota
	// HeadersLegacy writes X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds until reset) for the deciding limit.
	HeadersLegacy
	// HeadersNone writes no rate-limit headers (Retry-After still goes on 429s).
	HeadersNone
)

var headerStyleNames = [...]string{"draft", "legacy", "none"}

func (s HeaderStyle) String() string {
	if int(s) < len(headerStyleNames) {
		return headerStyleNames[s]
	}
	return "headers(" + strconv.Itoa(int(s)) + ")"
}

// Spec is a rate-limit configuration as written: the rate_limit section of
// the YAML file, or a literal in code. NewConfig checks and compiles it.
type Spec struct {
	// Enabled turns limiting on. When false every request passes untouched.
	Enabled bool
	// Algorithm is the default for rules that name none, and for the
	// default limit: fixed_window (when empty), sliding_window,
	// token_bucket or gcra.
	Algorithm string
	// Rules are tried in order; the first whose paths match applies.
	Rules []RuleSpec
	// Default is the limit (or limits) of requests no rule matches;
	// empty means DefaultLimit.
	Default []string
	// ExemptPaths never touch a counter. nil means DefaultExemptPaths; an
	// empty non-nil slice exempts nothing.
	ExemptPaths []string
	// Headers is draft (when empty), legacy or none.
	Headers string
	// Failure is what a request gets when the store fails: open (when
	// empty: it passes) or closed (503).
	Failure string
}

// RuleSpec is one rule as written.
type RuleSpec struct {
	Name string
	// Paths are patterns; '*' matches exactly one path segment.
	Paths []string
	// Methods, when set, restrict the rule to these HTTP methods.
	Methods []string
	// Limit holds one or more limits ("10/second"); all must admit.
	Limit []string
	// Algorithm overrides the configuration's default.
	Algorithm string
	// Burst is the capacity of token_bucket and gcra rules (0 = the count).
	Burst int64
	// Weights give the cost of one request on a path (default 1), first
	// match in order.
	Weights []WeightSpec
}

// WeightSpec is the cost of one request on paths matching Path.
type WeightSpec struct {
	Path string
	Cost int64
}

// ConfigError is one problem in a configuration. It names where the problem
// is (file and line when known, rule, field) and the value at fault. A
// configuration with several problems yields all of them, joined with
// errors.Join; errors.As finds the first.
type ConfigError struct {
	File  string // "" for a Spec built in code
	Line  int    // 0 when unknown
	Rule  string // the rule's name, or "rules[i]" when it has none; "" for top-level fields
	Field string // e.g. "limit", "weights", "paths[2]"
	Value string // the offending value, as written
	Msg   string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("rate-limit config")
	if e.File != "" {
		b.WriteString(" " + e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
		}
	} else if e.Line > 0 {
		b.WriteString(" line " + strconv.Itoa(e.Line))
	}
	if e.Rule != "" {
		fmt.Fprintf(&b, ": rule %q", e.Rule)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	if e.Value != "" {
		fmt.Fprintf(&b, ": value %q", e.Value)
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Config is a checked, compiled configuration. Build one with LoadConfig,
// ParseConfig or NewConfig. The zero Config (and a nil *Config) is disabled:
// every request passes. A Config is immutable and safe for concurrent use.
type Config struct {
	enabled    bool
	rules      []*Rule
	def        *Rule
	exempt     []pattern
	headers    HeaderStyle
	failClosed bool // false, the zero value, is fail-open

	routes routes // answers per (method, route); see route.go
}

// Enabled reports whether limiting is on.
func (c *Config) Enabled() bool { return c != nil && c.enabled }

// Rules returns the rules in match order, without the default rule.
func (c *Config) Rules() []*Rule {
	if c == nil {
		return nil
	}
	return c.rules
}

// Default returns the rule that applies when no rule matches.
func (c *Config) Default() *Rule {
	if c == nil {
		return nil
	}
	return c.def
}

// Headers returns the configured header style.
func (c *Config) Headers() HeaderStyle {
	if c == nil {
		return HeadersDraft
	}
	return c.headers
}

// FailOpen reports whether requests pass when the store fails.
func (c *Config) FailOpen() bool { return c == nil || !c.failClosed }

// Exempt reports whether a request for p is exempt: it never touches a
// counter and, in a program that follows the limiter, needs no
// credentials. It is exempt only when every spelling of p (see Path) is
// exempt, trailing slash included: with the default list "/health" is
// exempt, "/health/", "/health%2F", "/%68ealth" and "/x/../health" are
// not. It is the answer the limiter takes (Flow.Decide, Limiter.Decide),
// whether or not limiting is enabled.
func (c *Config) Exempt(p Path) bool {
	if c == nil {
		return false
	}
	var buf [maxSpellings]string
	return c.exemptAll(spellings(p, false, &buf))
}

// exemptAll reports whether every spelling in sp, with and without its
// trailing slash, is exempt.
func (c *Config) exemptAll(sp []string) bool {
	for _, s := range sp {
		if !c.exemptOne(s) {
			return false
		}
		if t := trimSlash(s); len(t) != len(s) && !c.exemptOne(t) {
			return false
		}
	}
	return true
}

// exemptOne reports whether one spelling matches an exempt pattern, its
// trailing slash counting: "/health" matches "/health" only, "/health/"
// matches "/health/" only. So a router that serves "/health/" by another
// handler than "/health"'s does not serve it exempt.
func (c *Config) exemptOne(path string) bool {
	t := trimSlash(path)
	slash := len(t) != len(path)
	for i := range c.exempt {
		if q := &c.exempt[i]; q.slash == slash && q.match(t) {
			return true
		}
	}
	return false
}

// Match returns the rule a request for p counts under, and its cost: the
// first rule, in order, whose methods include method and whose paths match
// a spelling of p (see Path), at the highest cost a matching spelling has
// under that rule; else the default rule at cost 1. A trailing slash is
// ignored. It does not look at exempt paths (see Exempt).
func (c *Config) Match(method string, p Path) (*Rule, int64) {
	if c == nil {
		return nil, 1
	}
	var buf [maxSpellings]string
	return c.matchAll(method, spellings(p, false, &buf))
}

// matchAll is Match for the spellings in sp.
func (c *Config) matchAll(method string, sp []string) (*Rule, int64) {
	for _, r := range c.rules {
		if !r.allows(method) {
			continue
		}
		var cost int64
		for _, s := range sp {
			if s = trimSlash(s); r.covers(s) {
				cost = max(cost, r.cost(s))
			}
		}
		if cost > 0 {
			return r, cost
		}
	}
	return c.def, 1
}

// LoadConfig reads and compiles the YAML configuration in file.
func LoadConfig(file string) (*Config, error) {
	data, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("rate-limit config: %w", err)
	}
	return ParseConfig(data, file)
}

// ParseConfig compiles a YAML configuration; file names it in errors.
// The document holds one top-level key, rate_limit (see Spec for its
// fields, in snake_case: enabled, algorithm, rules, default, exempt_paths,
// headers, failure; and per rule: name, paths, methods, limit, algorithm,
// burst, weights). Unknown fields are errors.
func ParseConfig(data []byte, file string) (*Config, error) {
	spec, lines, err := parseSpec(data, file)
	if err != nil {
		return nil, err
	}
	return compile(spec, file, lines)
}

// NewConfig checks and compiles a Spec built in code.
func NewConfig(spec Spec) (*Config, error) { return compile(spec, "", nil) }

var ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
var methodRE = regexp.MustCompile(`^[A-Z]{1,16}$`)

// lines maps a field path ("rules.2.limit", "default") to its line.
type lines map[string]int

func compile(spec Spec, file string, ln lines) (*Config, error) {
	var errs []error
	fail := func(key, rule, field, value, format string, args ...any) {
		line := ln[key]
		// A missing field ("rules.0.limit") has no line: use its parent's.
		for k := key; line == 0 && strings.Contains(k, "."); {
			k = k[:strings.LastIndexByte(k, '.')]
			line = ln[k]
		}
		errs = append(errs, &ConfigError{File: file, Line: line, Rule: rule, Field: field, Value: value, Msg: fmt.Sprintf(format, args...)})
	}
	c := &Config{enabled: spec.Enabled}

	switch spec.Headers {
	case "", "draft":
	case "legacy":
		c.headers = HeadersLegacy
	case "none":
		c.headers = HeadersNone
	default:
		fail("headers", "", "headers", spec.Headers, "want draft, legacy or none")
	}
	switch spec.Failure {
	case "", "open":
	case "closed":
		c.failClosed = true
	default:
		fail("failure", "", "failure", spec.Failure, "want open or closed")
	}
	defAlgo := FixedWindow
	if spec.Algorithm != "" {
		a, err := ParseAlgorithm(spec.Algorithm)
		if err != nil {
			fail("algorithm", "", "algorithm", spec.Algorithm, "%v", err)
		}
		defAlgo = a
	}

	limits := func(key, burstKey, rule string, vals []string, a Algorithm, burst int64) []Limit {
		if len(vals) == 0 {
			fail(key, rule, "limit", "", "no limit given")
			return nil
		}
		if len(vals) > MaxLimits {
			fail(key, rule, "limit", strings.Join(vals, ", "), "%d limits, at most %d", len(vals), MaxLimits)
			return nil
		}
		var out []Limit
		for i, v := range vals {
			l, err := ParseLimit(v)
			if err != nil {
				fail(key+"."+strconv.Itoa(i), rule, "limit", v, "%v", err)
				continue
			}
			l.Burst = burst
			if err := l.Validate(); err != nil {
				fail(burstKey, rule, "burst", strconv.FormatInt(burst, 10), "%v", err)
				continue
			}
			for _, m := range out {
				if m.Period == l.Period {
					fail(key+"."+strconv.Itoa(i), rule, "limit", v, "a second limit per %v (first: %s)", l.Period, m)
				}
			}
			out = append(out, l)
		}
		if len(out) != len(vals) {
			return nil
		}
		return out
	}

	seen := map[string]int{DefaultRuleName: -1}
	type claim struct {
		rule    string
		methods []string // nil: every method
	}
	claimed := map[string][]claim{}
	for i, rs := range spec.Rules {
		key := "rules." + strconv.Itoa(i)
		name := rs.Name
		label := name
		if label == "" {
			label = "rules[" + strconv.Itoa(i) + "]"
		}
		ok := true
		switch prev, dup := seen[name]; {
		case name == "":
			fail(key, label, "name", "", "a rule needs a name")
			ok = false
		case !ruleNameRE.MatchString(name):
			fail(key+".name", label, "name", name, "names are 1 to 64 letters, digits, '_', '.' or '-'")
			ok = false
		case dup && prev < 0:
			fail(key+".name", label, "name", name, "%q is the name of the default limit", DefaultRuleName)
			ok = false
		case dup:
			fail(key+".name", label, "name", name, "duplicate rule name (also rules[%d])", prev)
			ok = false
		}
		seen[name] = i
		a := defAlgo
		if rs.Algorithm != "" {
			var err error
			if a, err = ParseAlgorithm(rs.Algorithm); err != nil {
				fail(key+".algorithm", label, "algorithm", rs.Algorithm, "%v", err)
				ok = false
			}
		}
		if rs.Burst != 0 && a != TokenBucket && a != GCRA {
			fail(key+".burst", label, "burst", strconv.FormatInt(rs.Burst, 10), "burst applies to token_bucket and gcra only, not %v", a)
			ok = false
		}
		r := &Rule{Name: name}
		if len(rs.Paths) == 0 {
			fail(key, label, "paths", "", "a rule needs at least one path")
			ok = false
		}
		for j, p := range rs.Paths {
			pat, err := compilePattern(p)
			if err != nil {
				fail(key+".paths."+strconv.Itoa(j), label, "paths", p, "%v", err)
				ok = false
				continue
			}
			// An earlier claim shadows this one when it covers every
			// method this rule is restricted to.
			for _, other := range claimed[trimSlash(p)] {
				covered := len(other.methods) == 0 || len(rs.Methods) > 0
				for _, m := range rs.Methods {
					covered = covered && (len(other.methods) == 0 || slices.Contains(other.methods, m))
				}
				if covered {
					fail(key+".paths."+strconv.Itoa(j), label, "paths", p, "already matched by rule %q, which comes first: this path would never apply here", other.rule)
					ok = false
					break
				}
			}
			claimed[trimSlash(p)] = append(claimed[trimSlash(p)], claim{label, rs.Methods})
			r.paths = append(r.paths, pat)
		}
		for j, m := range rs.Methods {
			if !methodRE.MatchString(m) {
				fail(key+".methods."+strconv.Itoa(j), label, "methods", m, "a method is an upper-case token such as GET")
				ok = false
			}
			r.methods = append(r.methods, m)
		}
		lims := limits(key+".limit", key+".burst", label, rs.Limit, a, rs.Burst)
		if lims == nil {
			ok = false
		}
		r.Policy = &Policy{Name: name, Algorithm: a, Limits: lims}
		for _, w := range rs.Weights {
			wkey := key + ".weights." + w.Path
			pat, err := compilePattern(w.Path)
			if err != nil {
				fail(wkey, label, "weights", w.Path, "%v", err)
				ok = false
				continue
			}
			overlaps := false
			for k := range r.paths {
				overlaps = overlaps || r.paths[k].overlaps(&pat)
			}
			switch {
			case !overlaps && len(r.paths) > 0:
				fail(wkey, label, "weights", w.Path, "the pattern matches none of the rule's paths, so the weight could never apply")
				ok = false
			case w.Cost < 1:
				fail(wkey, label, "weights", strconv.FormatInt(w.Cost, 10), "weight of %q must be at least 1", w.Path)
				ok = false
			case lims != nil && w.Cost > r.Policy.Capacity():
				fail(wkey, label, "weights", strconv.FormatInt(w.Cost, 10), "weight of %q exceeds the rule's capacity %d (%s): such a request could never pass", w.Path, r.Policy.Capacity(), strings.Join(rs.Limit, ", "))
				ok = false
			}
			r.weights = append(r.weights, weight{pat: pat, cost: w.Cost})
		}
		if ok {
			r.prepare()
			c.rules = append(c.rules, r)
		}
	}

	def := spec.Default
	if len(def) == 0 {
		def = []string{DefaultLimit}
	}
	if lims := limits("default", "default", DefaultRuleName, def, defAlgo, 0); lims != nil {
		c.def = &Rule{Name: DefaultRuleName, Policy: &Policy{Name: DefaultRuleName, Algorithm: defAlgo, Limits: lims}}
		c.def.prepare()
	}

	exempt := spec.ExemptPaths
	if exempt == nil {
		exempt = DefaultExemptPaths
	}
	for j, p := range exempt {
		pat, err := compilePattern(p)
		if err != nil {
			fail("exempt_paths."+strconv.Itoa(j), "", "exempt_paths", p, "%v", err)
			continue
		}
		c.exempt = append(c.exempt, pat)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return c, nil
}

// trimBOM drops a UTF-8 byte order mark.
func trimBOM(b []byte) []byte { return bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) }
