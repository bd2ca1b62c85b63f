package core

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/internal/clip"
	"github.com/rlkit/rlkit/core/store"
)

// defaultLimit is the limit of requests no rule matches, unless the
// configuration says otherwise.
const defaultLimit = "120/minute"

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
	// with one list item per limit of the rule. A rule with one limit
	// names its item after the rule; a rule with several names each
	// "<rule>-<window>", the window in the largest of the units s, m, h
	// and d that divides it ("api-1s", "api-5m", "api-1h"), so no name
	// repeats. It is the default.
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
	// empty means defaultLimit.
	Default []string
	// ExemptPaths never touch a counter. nil means DefaultExemptPaths; an
	// empty non-nil slice exempts nothing.
	ExemptPaths []string
	// Headers is draft (when empty), legacy or none.
	Headers string
	// Failure is what a request gets when the store fails: open (when
	// empty: it passes) or closed (503).
	Failure string
	// Mode is enforce (when empty) or shadow: the mode of every rule that
	// names none, and of the default limit. A rule in shadow mode counts
	// requests and reports each one it would deny (to the Observer as
	// OutcomeShadowDenied, and in a log line per rule at most every warn
	// interval) but denies none, and by default writes no rate-limit
	// header: roll a limit out, watch whom it would stop, then enforce it.
	Mode string
	// Tiers are the plans: each a name, and limits per rule and a
	// default that callers on that plan count under (see TierSpec).
	Tiers []TierSpec
	// Allow lists callers never limited nor counted; Ban networks refused
	// with 403 (see AllowSpec, BanSpec).
	Allow AllowSpec
	Ban   BanSpec
}

// RuleSpec is one rule as written.
type RuleSpec struct {
	Name string
	// Paths are patterns; '*' matches exactly one path segment, and so
	// does a whole segment ":name" or "{name}" (router syntax). ':' after
	// a segment's first byte is a literal ("/v1/items:batchGet").
	// Catch-alls ("*path", "{path...}", "+"), optional parameters
	// (":id?"), "{$}", constraints and parameters in part of a segment
	// are errors.
	Paths []string
	// Methods, when set, restrict the rule to these HTTP methods. GET
	// covers HEAD too: routers (net/http's ServeMux, Fiber) serve a HEAD
	// request with the GET handler, so a GET rule must count it.
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
	// Mode is enforce or shadow (see Spec.Mode); empty means the
	// configuration's.
	Mode string
	// Penalty, when not nil, refuses an identity for a while after
	// repeated denials (see PenaltySpec).
	Penalty *PenaltySpec
	// Count says which requests the rule counts, by their response
	// status: all (when empty: every request, before the handler runs),
	// failures (status 400 and above: a brute-force guard on a login,
	// which honest users, who mostly succeed, never reach) or successes
	// (below 400: a quota of what was done, not of what was tried).
	//
	// A rule that counts by outcome still refuses a request before the
	// handler runs when its counter has no room for it: the limiter asks
	// the store what a count would answer (store.Store.Peek), consuming
	// nothing, and lets the request through when it would be admitted,
	// with the rate-limit headers that count would give. Once the handler
	// has answered, the adapter hands the status to Limiter.Complete,
	// which counts the request (store.Store.Take) when the rule counts
	// that status. A request that fails is therefore counted only after
	// its answer: requests of one identity in flight together all pass
	// the check while the counter has room, and those still in the
	// handler when it fills are served and not counted (their Take is
	// denied, and a denial consumes nothing). Each time the counter
	// fills, at most C − 1 such requests pass beyond the limit, C being
	// the most requests of that identity under the rule in flight at
	// once; under a fixed window, which fills at most once per window, at
	// most limit + C − 1 requests whose outcome counts are answered in
	// one window (counting each at its cost: limit + (C − 1) × the
	// largest cost, in units). The counter itself never goes past the
	// limit.
	Count string
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
	File   string // "" for a Spec built in code
	Line   int    // 0 when unknown
	Column int    // in characters, from 1; 0 when unknown (only a bad character in the file has one)
	Rule   string // the rule's name, or "rules[i]" when it has none; "" for top-level fields
	Field  string // e.g. "limit", "weights", "paths[2]"
	Value  string // the offending value, as written
	Msg    string
}

func (e *ConfigError) Error() string {
	var b strings.Builder
	b.WriteString("rate-limit config")
	if e.File != "" {
		b.WriteString(" " + e.File)
		if e.Line > 0 {
			b.WriteString(":" + strconv.Itoa(e.Line))
			if e.Column > 0 {
				b.WriteString(":" + strconv.Itoa(e.Column))
			}
		}
	} else if e.Line > 0 {
		b.WriteString(" line " + strconv.Itoa(e.Line))
		if e.Column > 0 {
			b.WriteString(", column " + strconv.Itoa(e.Column))
		}
	}
	if e.Rule != "" {
		fmt.Fprintf(&b, ": rule %q", e.Rule)
	}
	if e.Field != "" {
		fmt.Fprintf(&b, ": field %q", e.Field)
	}
	if e.Value != "" {
		fmt.Fprintf(&b, ": value %q", clip.String(e.Value))
	}
	b.WriteString(": " + e.Msg)
	return b.String()
}

// Config is a checked, compiled configuration. Build one with LoadConfig,
// ParseConfig or NewConfig. The zero Config (and a nil *Config) is disabled:
// every request passes. A Config is immutable and safe for concurrent use.
type Config struct {
	enabled bool
	// extras: the configuration has allow or ban lists, or plans. Without
	// them a request tests this one flag (beside enabled) for them, and is
	// decided by its rules alone.
	extras     bool
	rules      []*Rule
	def        *Rule
	exempt     []pattern
	headers    HeaderStyle
	failClosed bool // false, the zero value, is fail-open
	shadow     bool // the file's mode is shadow
	// The rules of each mode, in order, and the default in its own:
	// requests are matched against each set apart (see Spec.Mode).
	enforced, shadows []*Rule
	enfDef, shadowDef *Rule
	// upper: a rule or weight pattern holds an ASCII upper-case letter, so
	// that a route's answer (worked out case by case) may differ from
	// matching without regard to case.
	upper bool

	routes routes // answers per (method, route); see route.go
	lists  *lists // allow and ban lists; nil when none (see lists.go)

	tiers map[string]*tier // by plan name; nil: no plans (see tiers.go)

	digest [sha256.Size]byte // of the file it was parsed from; zero: built in code
}

// Loaded reports whether c was parsed (ParseConfig, LoadConfig) from data:
// a watcher of the file (package reload) tells with it whether the
// limiter runs the file as it is.
func (c *Config) Loaded(data []byte) bool {
	return c != nil && c.digest != [sha256.Size]byte{} && c.digest == sha256.Sum256(data)
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

// Rule returns the rule named name ("default" for the default limit), or
// nil when there is none.
func (c *Config) Rule(name string) *Rule {
	if c == nil {
		return nil
	}
	if c.def != nil && c.def.Name == name {
		return c.def
	}
	for _, r := range c.rules {
		if r.Name == name {
			return r
		}
	}
	return nil
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
	return c.exemptAll(spellings(p, &buf))
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
// under that rule; when the first rules of p's spellings differ, the
// strictest of those (see Path); else the default rule at cost 1. A trailing slash is
// ignored. It does not look at exempt paths (see Exempt). Only enforced
// rules are matched: rules in shadow mode count beside them (see
// Spec.Mode), and when the default limit is in shadow mode, a request no
// enforced rule matches gives nil.
func (c *Config) Match(method string, p Path) (*Rule, int64) {
	if c == nil {
		return nil, 1
	}
	var buf [maxSpellings]string
	return c.matchAll(method, spellings(p, &buf), false)
}

// MatchFoldCase is Match for a router that matches paths without regard
// to ASCII case (Fiber's default; see Flow.FoldCase): rules and weights
// match every spelling without regard to ASCII case. Exempt needs no such
// variant: exempt paths match exactly either way.
func (c *Config) MatchFoldCase(method string, p Path) (*Rule, int64) {
	if c == nil {
		return nil, 1
	}
	var buf [maxSpellings]string
	return c.matchAll(method, spellings(p, &buf), true)
}

// matchAll is Match for the spellings in sp, with fold without regard to
// ASCII case: each spelling's first rule (at the highest cost a spelling
// has under it), and when they differ, the strictest of those, the
// earliest of equals; the default rule when no spelling matches a rule.
func (c *Config) matchAll(method string, sp []string, fold bool) (*Rule, int64) {
	return matchIn(c.enforced, c.enfDef, method, sp, fold)
}

// matchIn is matchAll over rules, with def for what none matches.
func matchIn(rules []*Rule, def *Rule, method string, sp []string, fold bool) (*Rule, int64) {
	var (
		firsts [maxSpellings]int // index in rules of each spelling's first rule
		costs  [maxSpellings]int64
		n      int
	)
	for _, s := range sp {
		s = trimSlash(s)
		for i, r := range rules {
			if !r.allows(method) || !r.covers(s, fold) {
				continue
			}
			if len(sp) == 1 {
				return r, r.cost(s, fold) // one spelling: its first rule
			}
			cost, k := r.cost(s, fold), 0
			for k < n && firsts[k] != i {
				k++
			}
			if k == n {
				firsts[n], n = i, n+1
			}
			costs[k] = max(costs[k], cost)
			break
		}
	}
	if n == 0 {
		return def, 1
	}
	best := 0
	for k := 1; k < n; k++ {
		r, b := rules[firsts[k]], rules[firsts[best]]
		if r.stricter(costs[k], b, costs[best]) || !b.stricter(costs[best], r, costs[k]) && firsts[k] < firsts[best] {
			best = k
		}
	}
	return rules[firsts[best]], costs[best]
}

// withHead returns methods with HEAD added when it holds GET and not HEAD:
// routers serve HEAD with the GET handler, so a rule for GET counts HEAD.
func withHead(methods []string) []string {
	if slices.Contains(methods, "GET") && !slices.Contains(methods, "HEAD") {
		return append(slices.Clip(methods), "HEAD")
	}
	return methods
}

// LoadConfig reads (ReadConfigFile) and compiles the YAML configuration
// in file.
func LoadConfig(file string) (*Config, error) {
	data, err := ReadConfigFile(file)
	if err != nil {
		return nil, err
	}
	return ParseConfig(data, file)
}

// maxConfigBytes bounds a configuration file: a file of ten thousand rules
// takes about a megabyte.
const maxConfigBytes = 4 << 20

// ReadConfigFile reads a configuration file: a regular file (a symbolic
// link to one is followed) of at most maxConfigBytes. Anything else (a
// directory, a FIFO or a device such as /dev/zero, which could block or
// never end; a larger file) is an error that says so, read no further.
func ReadConfigFile(file string) ([]byte, error) {
	fail := func(err error) ([]byte, error) { return nil, fmt.Errorf("rate-limit config: %w", err) }
	fi, err := os.Stat(file)
	if pe, ok := err.(*os.PathError); ok {
		pe.Op = "open" // what the file could not be
	}
	if err != nil {
		return fail(err)
	}
	if !fi.Mode().IsRegular() {
		return fail(fmt.Errorf("%s is not a regular file (%v)", file, fi.Mode().Type()))
	}
	f, err := os.Open(file)
	if err != nil {
		return fail(err)
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return fail(fmt.Errorf("%s is not a regular file", file)) // replaced meanwhile
	}
	data, err := io.ReadAll(io.LimitReader(f, maxConfigBytes+1))
	if err != nil {
		return fail(err)
	}
	if len(data) > maxConfigBytes {
		return fail(fmt.Errorf("%s is larger than %d bytes (maxConfigBytes)", file, maxConfigBytes))
	}
	return data, nil
}

// ParseConfig compiles a YAML configuration; file names it in errors.
// The document holds one top-level key, rate_limit (see Spec for its
// fields, in snake_case: enabled, algorithm, rules, default, exempt_paths,
// headers, failure, mode, tiers, allow (identities, networks), ban
// (networks); per rule: name, paths, methods, limit, algorithm, burst,
// weights, mode, count, penalty (after, within, ban); and per plan of
// tiers: default, rules, each rule's limits as a string, a list or
// {limit, burst}). Unknown fields are errors. data must be UTF-8 text that
// YAML allows, and none of U+2028, U+2029 or a byte order mark past the
// start: the first character breaking this is reported with its line and
// column (ConfigError.Column).
//
// A file that has rules but no enabled field loads with limiting off, as
// the field's default says; since that is seldom what its author meant,
// ParseConfig logs a warning naming the file (through slog.Default; a
// Limiter's reload logs it through its own logger).
func ParseConfig(data []byte, file string) (*Config, error) {
	return parseConfig(data, file, slog.Default())
}

// parseConfig is ParseConfig, logging its warning to log.
func parseConfig(data []byte, file string, log *slog.Logger) (*Config, error) {
	spec, lines, fieldErrs, err := parseSpec(data, file)
	if err != nil {
		return nil, err
	}
	c, err := compile(spec, file, lines)
	if c != nil {
		c.digest = sha256.Sum256(data)
	}
	if len(fieldErrs) > 0 {
		// A rule the reader could read nothing of (an alias, not a
		// mapping) has its error already: compile's would repeat it.
		unread := map[string]bool{}
		for i, rs := range spec.Rules {
			if rs.Name == "" && len(rs.Paths) == 0 && len(rs.Methods) == 0 && len(rs.Limit) == 0 && rs.Algorithm == "" && rs.Burst == 0 && len(rs.Weights) == 0 && rs.Mode == "" {
				unread["rules["+strconv.Itoa(i)+"]"] = true
			}
		}
		return nil, mergeErrors(fieldErrs, err, unread)
	}
	if err == nil && len(spec.Rules) > 0 && lines["enabled"] == 0 {
		name := file
		if name == "" {
			name = "(unnamed)"
		}
		log.Warn("rlkit: rate-limit config has rules but no enabled field: limiting is off (add enabled: true to turn it on, or enabled: false to say so)",
			slog.String("file", name), slog.Int("rules", len(spec.Rules)))
	}
	return c, err
}

// mergeErrors joins the field errors of a file with the errors compile
// found in what could be read, in line order, leaving out compile's errors
// about a field (or a whole rule) the field errors already fault, and
// about the rules in unread, of which nothing could be read: they would
// only repeat the field errors.
func mergeErrors(fieldErrs []error, compileErr error, unread map[string]bool) error {
	type at struct{ rule, field string }
	faulted := map[at]bool{}
	for _, e := range fieldErrs {
		if ce, ok := e.(*ConfigError); ok {
			faulted[at{ce.Rule, ce.Field}] = true
		}
	}
	errs := slices.Clone(fieldErrs)
	if j, ok := compileErr.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			ce, ok := e.(*ConfigError)
			if ok && (faulted[at{ce.Rule, ce.Field}] || ce.Rule != "" && faulted[at{ce.Rule, ""}] || unread[ce.Rule]) {
				continue
			}
			errs = append(errs, e)
		}
	} else if compileErr != nil {
		errs = append(errs, compileErr)
	}
	return joinErrors(errs)
}

// maxErrors bounds the problems a configuration reports: past it, the
// count of the others.
const maxErrors = 50

// joinErrors joins the problems of a configuration, in line order, at most
// maxErrors of them and a line that counts the rest.
func joinErrors(errs []error) error {
	sortByLine(errs)
	if len(errs) > maxErrors {
		errs = append(errs[:maxErrors:maxErrors], fmt.Errorf("rate-limit config: and %d more problems", len(errs)-maxErrors))
	}
	return errors.Join(errs...)
}

// sortByLine orders errors by the line they name, keeping the order of
// those on one line (or with no line).
func sortByLine(errs []error) {
	slices.SortStableFunc(errs, func(a, b error) int {
		var x, y *ConfigError
		errors.As(a, &x)
		errors.As(b, &y)
		if x == nil || y == nil {
			return 0
		}
		return x.Line - y.Line
	})
}

// NewConfig checks and compiles a Spec built in code.
func NewConfig(spec Spec) (*Config, error) { return compile(spec, "", nil) }

var ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)
var methodRE = regexp.MustCompile(`^[A-Z]{1,16}$`)

// lines maps a field path ("rules.2.limit", "default") to its line.
type lines map[string]int

// compiler collects the problems of one configuration, each with its line.
type compiler struct {
	file string
	ln   lines // nil for a Spec built in code
	errs []error

	// What the rules are compiled against.
	defAlgo algo.Algorithm // the file's algorithm
	shadow  bool           // the file's mode is shadow
	exempt  []pathClaim    // exempt_paths, compiled
	seen    map[string]int // the rule names so far, with their index
	taken   [2][]pathClaim // the paths of the rules so far, enforced [0] and shadow [1]
}

// line is the line of the field at key; a missing field ("rules.0.limit")
// has none, so its parent's is used. 0 when unknown.
func (cc *compiler) line(key string) int {
	line := cc.ln[key]
	for k := key; line == 0 && strings.Contains(k, "."); {
		k = k[:strings.LastIndexByte(k, '.')]
		line = cc.ln[k]
	}
	return line
}

// fail records a problem with the field at key.
func (cc *compiler) fail(key, rule, field, value, format string, args ...any) {
	cc.errs = append(cc.errs, &ConfigError{File: cc.file, Line: cc.line(key), Rule: rule, Field: field, Value: value, Msg: fmt.Sprintf(format, args...)})
}

// lineOf is "line N" for the field at key, or "" when lines are unknown:
// for messages that name another field than the one at fault.
func (cc *compiler) lineOf(key string) string {
	if l := cc.line(key); l > 0 {
		return "line " + strconv.Itoa(l)
	}
	return ""
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func compile(spec Spec, file string, ln lines) (*Config, error) {
	cc := &compiler{file: file, ln: ln}
	c := &Config{enabled: spec.Enabled}
	switch spec.Headers {
	case "", "draft":
	case "legacy":
		c.headers = HeadersLegacy
	case "none":
		c.headers = HeadersNone
	default:
		cc.fail("headers", "", "headers", spec.Headers, "want draft, legacy or none")
	}
	switch spec.Failure {
	case "", "open":
	case "closed":
		c.failClosed = true
	default:
		cc.fail("failure", "", "failure", spec.Failure, "want open or closed")
	}
	c.shadow = cc.mode("mode", "", spec.Mode, false)
	defAlgo := algo.FixedWindow
	if spec.Algorithm != "" {
		a, err := algo.ParseAlgorithm(spec.Algorithm)
		if err != nil {
			cc.fail("algorithm", "", "algorithm", spec.Algorithm, "%v", err)
		}
		defAlgo = a
	}

	// Exempt paths are compiled first, for the rules' paths to be checked
	// against them; their problems are reported with the others, in line
	// order.
	ex := &compiler{file: file, ln: ln}
	exempt := ex.exemptPaths(spec.ExemptPaths)
	c.exempt = make([]pattern, len(exempt))
	for i := range exempt {
		c.exempt[i] = exempt[i].pat
	}

	cc.defAlgo, cc.shadow, cc.exempt = defAlgo, c.shadow, exempt
	cc.seen = map[string]int{DefaultRuleName: -1}
	for i, rs := range spec.Rules {
		if r := cc.rule(i, rs); r != nil {
			c.rules = append(c.rules, r)
			if r.shadow {
				c.shadows = append(c.shadows, r)
			} else {
				c.enforced = append(c.enforced, r)
			}
			c.upper = c.upper || r.hasUpper()
		}
	}

	def := spec.Default
	if len(def) == 0 {
		def = []string{defaultLimit}
	}
	if lims := cc.limits("default", "default", DefaultRuleName, def, 0); lims != nil {
		c.def = &Rule{Name: DefaultRuleName, Policy: &store.Policy{Name: DefaultRuleName, Algorithm: defAlgo, Limits: lims}, shadow: c.shadow}
		c.def.prepare()
		if c.shadow {
			c.shadowDef = c.def
		} else {
			c.enfDef = c.def
		}
	}
	cc.tiers(spec.Tiers, c)
	c.lists = cc.lists(spec.Allow, spec.Ban)
	c.extras = c.lists != nil || c.tiers != nil
	cc.errs = append(cc.errs, ex.errs...)
	if len(cc.errs) > 0 {
		return nil, joinErrors(cc.errs)
	}
	return c, nil
}

// pathClaim is a compiled path of a rule or of exempt_paths, with what
// error messages say about it.
type pathClaim struct {
	key     string // its field path, for its line; "" for a default exempt path
	label   string // the rule's name (or "rules[i]")
	pat     pattern
	methods []string // the rule's methods; nil: every method
}

// exemptPaths compiles exempt_paths (nil: DefaultExemptPaths).
func (cc *compiler) exemptPaths(paths []string) []pathClaim {
	def := paths == nil
	if def {
		paths = DefaultExemptPaths
	}
	var out []pathClaim
	for j, p := range paths {
		key := "exempt_paths." + strconv.Itoa(j)
		pat, err := compilePattern(p)
		if err != nil {
			cc.fail(key, "", "exempt_paths", p, "%v", err)
			continue
		}
		if def {
			key = "" // not in the file
		}
		out = append(out, pathClaim{key: key, pat: pat})
	}
	return out
}

// rule compiles rules[i]; nil when it has a problem. Its name goes to
// cc.seen, its paths to cc.taken.
func (cc *compiler) rule(i int, rs RuleSpec) *Rule {
	key := "rules." + strconv.Itoa(i)
	name := rs.Name
	label := name
	if label == "" {
		label = "rules[" + strconv.Itoa(i) + "]"
	}
	n := len(cc.errs)
	switch prev, dup := cc.seen[name]; {
	case name == "":
		cc.fail(key, label, "name", "", "a rule needs a name")
	case !ruleNameRE.MatchString(name):
		cc.fail(key+".name", label, "name", name, "names are 1 to 64 letters, digits, '_', '.' or '-'")
	case dup && prev < 0:
		cc.fail(key+".name", label, "name", name, "%q is the name of the default limit", DefaultRuleName)
	case dup:
		cc.fail(key+".name", label, "name", name, "duplicate rule name (also rules[%d])", prev)
	}
	cc.seen[name] = i
	a := cc.defAlgo
	if rs.Algorithm != "" {
		var err error
		if a, err = algo.ParseAlgorithm(rs.Algorithm); err != nil {
			cc.fail(key+".algorithm", label, "algorithm", rs.Algorithm, "%v", err)
		}
	}
	if rs.Burst != 0 && !burstAlgorithm(a) {
		cc.fail(key+".burst", label, "burst", strconv.FormatInt(rs.Burst, 10), "burst applies to token_bucket and gcra only, not %v", a)
	}
	r := &Rule{Name: name, shadow: cc.mode(key+".mode", label, rs.Mode, cc.shadow), count: cc.countMode(key+".count", label, rs.Count)}
	set := &cc.taken[0] // a rule's paths are taken from the earlier rules of its mode
	if r.shadow {
		set = &cc.taken[1]
	}
	r.paths = cc.paths(key, label, rs, set, cc.exempt)
	for j, m := range rs.Methods {
		if !methodRE.MatchString(m) {
			cc.fail(key+".methods."+strconv.Itoa(j), label, "methods", m, "a method is an upper-case token such as GET")
		}
		r.methods = append(r.methods, m)
	}
	r.methods = withHead(r.methods)
	lims := cc.limits(key+".limit", key+".burst", label, rs.Limit, rs.Burst)
	r.Policy = &store.Policy{Name: name, Algorithm: a, Limits: lims}
	r.weights = cc.weights(key, label, rs, r)
	r.penalty = cc.penalty(key+".penalty", label, name, rs.Penalty)
	if len(cc.errs) > n || lims == nil {
		return nil
	}
	r.prepare()
	return r
}

// weights compiles the weights of the rule r at key, whose paths and
// policy are compiled (its limits nil when bad).
func (cc *compiler) weights(key, label string, rs RuleSpec, r *Rule) []weight {
	var out []weight
	for _, w := range rs.Weights {
		wkey := key + ".weights." + w.Path
		pat, err := compilePattern(w.Path)
		if err != nil {
			cc.fail(wkey, label, "weights", w.Path, "%v", err)
			continue
		}
		overlaps := false
		for k := range r.paths {
			overlaps = overlaps || r.paths[k].overlaps(&pat)
		}
		switch {
		case !overlaps && len(r.paths) > 0:
			cc.fail(wkey, label, "weights", w.Path, "the pattern matches none of the rule's paths, so the weight could never apply")
		case w.Cost < 1:
			cc.fail(wkey, label, "weights", strconv.FormatInt(w.Cost, 10), "weight of %q must be at least 1", w.Path)
		case r.Policy.Limits != nil && w.Cost > r.Policy.Capacity():
			cc.fail(wkey, label, "weights", strconv.FormatInt(w.Cost, 10), "weight of %q exceeds the rule's capacity %d (%s): such a request could never pass", w.Path, r.Policy.Capacity(), strings.Join(rs.Limit, ", "))
		}
		out = append(out, weight{pat: pat, cost: w.Cost})
	}
	return out
}

// paths compiles the paths of the rule at key and refuses each one that could
// never count a request: one that an exempt path covers, one that an
// earlier rule's path takes for every method of this rule, and one that
// another path of the same rule already covers. It appends the rule's
// paths to taken.
func (cc *compiler) paths(key, label string, rs RuleSpec, taken *[]pathClaim, exempt []pathClaim) []pattern {
	if len(rs.Paths) == 0 {
		cc.fail(key, label, "paths", "", "a rule needs at least one path")
		return nil
	}
	earlier := len(*taken)
	var out []pattern
	for j, p := range rs.Paths {
		pkey := key + ".paths." + strconv.Itoa(j)
		pat, err := compilePattern(p)
		if err != nil {
			cc.fail(pkey, label, "paths", p, "%v", err)
			continue
		}
		*taken = append(*taken, pathClaim{key: pkey, label: label, pat: pat, methods: withHead(rs.Methods)})
		out = append(out, pat)
	}
	own := (*taken)[earlier:]
	for j := range own {
		p := &own[j]
		if msg := cc.shadowed(p, exempt, (*taken)[:earlier], own, j); msg != "" {
			cc.fail(p.key, label, "paths", p.pat.raw, "%s", msg)
		}
	}
	return out
}

// shadowed says why the path p (own[j], own being its rule's paths) could never
// count a request, or returns "" when it can: exempt_paths covers it, the
// rules before it (earlier) take it for every method p's rule counts, or
// another path of its own rule covers it (of two equal paths, the second).
// A pattern covers another exactly when it matches every path the other
// matches, so these are exactly the paths no request is ever counted on.
func (cc *compiler) shadowed(p *pathClaim, exempt, earlier, own []pathClaim, j int) string {
	for k := range exempt {
		if e := &exempt[k]; e.pat.covers(&p.pat) {
			if e.key == "" {
				return fmt.Sprintf("exempt by %q of the default exempt_paths: a request for this path is never counted (the rule would count only other spellings of it, such as with a trailing slash) (list your own exempt_paths to change that)", e.pat.raw)
			}
			return fmt.Sprintf("exempt by exempt_paths %q%s: a request for this path is never counted (the rule would count only other spellings of it, such as with a trailing slash)", e.pat.raw, paren(cc.lineOf(e.key)))
		}
	}
	for k := range own {
		o := &own[k]
		if k != j && o.pat.covers(&p.pat) && (k < j || !p.pat.covers(&o.pat)) {
			return fmt.Sprintf("already matched by %q%s, a path of the same rule: this path is redundant", o.pat.raw, paren(cc.lineOf(o.key)))
		}
	}
	// The first earlier path that takes p for each method p's rule counts
	// (for all of them when it names none).
	methods := p.methods
	if len(methods) == 0 {
		methods = []string{""}
	}
	by := make([]*pathClaim, len(methods))
	for m, method := range methods {
		for k := range earlier {
			e := &earlier[k]
			if e.pat.covers(&p.pat) && (len(e.methods) == 0 || slices.Contains(e.methods, method)) {
				by[m] = e
				break
			}
		}
		if by[m] == nil {
			return ""
		}
	}
	name := func(e *pathClaim) string {
		where := fmt.Sprintf("path %q", e.pat.raw)
		if l := cc.lineOf(e.key); l != "" {
			where += ", " + l
		}
		return fmt.Sprintf("rule %q (%s)", e.label, where)
	}
	if !slices.ContainsFunc(by, func(e *pathClaim) bool { return e != by[0] }) {
		return "already matched by " + name(by[0]) + ", which comes first: this path would never apply here"
	}
	var b strings.Builder
	b.WriteString("already matched")
	for m, e := range by {
		if slices.Index(by, e) != m {
			continue // named with its first method
		}
		if m > 0 {
			b.WriteString(" and")
		}
		b.WriteString(" by " + name(e) + " for ")
		var ms []string
		for n := range by {
			if by[n] == e {
				ms = append(ms, methods[n])
			}
		}
		b.WriteString(strings.Join(ms, ", "))
	}
	b.WriteString(", which come first: this path would never apply here")
	return b.String()
}

// mode compiles a mode field at key ("" gives def): whether it is shadow.
func (cc *compiler) mode(key, rule, mode string, def bool) bool {
	switch mode {
	case "":
		return def
	case "enforce":
		return false
	case "shadow":
		return true
	}
	cc.fail(key, rule, "mode", mode, "want enforce or shadow")
	return def
}

// limits compiles a list of limits with burst; nil when one is bad.
func (cc *compiler) limits(key, burstKey, rule string, vals []string, burst int64) []algo.Limit {
	if len(vals) == 0 {
		cc.fail(key, rule, "limit", "", "no limit given")
		return nil
	}
	if len(vals) > store.MaxLimits {
		cc.fail(key, rule, "limit", strings.Join(vals, ", "), "%d limits, at most %d", len(vals), store.MaxLimits)
		return nil
	}
	var out []algo.Limit
	for i, v := range vals {
		l, err := algo.ParseLimit(v)
		if err != nil {
			cc.fail(key+"."+strconv.Itoa(i), rule, "limit", v, "%v", err)
			continue
		}
		l.Burst = burst
		if err := l.Validate(); err != nil {
			cc.fail(burstKey, rule, "burst", strconv.FormatInt(burst, 10), "%v", err)
			continue
		}
		for _, m := range out {
			if m.Period == l.Period {
				cc.fail(key+"."+strconv.Itoa(i), rule, "limit", v, "a second limit per %v (first: %s)", l.Period, m)
			}
		}
		out = append(out, l)
	}
	if len(out) != len(vals) {
		return nil
	}
	return out
}

// trimBOM drops a UTF-8 byte order mark.
func trimBOM(b []byte) []byte { return bytes.TrimPrefix(b, []byte("\xef\xbb\xbf")) }
