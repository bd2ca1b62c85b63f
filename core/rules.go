package core

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

// A pattern is a path with '*' standing for exactly one non-empty segment:
// "/api/kb/*/reindex" matches "/api/kb/kb-01/reindex", not
// "/api/kb/a/b/reindex" nor "/api/kb//reindex". A segment written in
// router syntax, ":name" (Gin, Echo, Fiber, httprouter) or "{name}"
// (net/http, chi, gorilla/mux), is the same one-segment wildcard, so
// "/api/items/:id" and "/api/items/{id}" mean "/api/items/*". A name is an
// ASCII letter or '_' followed by letters, digits and '_'. Only a whole
// segment is a parameter: ':' inside a segment is a literal character
// ("/v1/items/a:b", "/v1/items:batchGet"). Router forms that match any
// number of segments, an optional one, part of one, or only some values
// are refused (see routerSegment). It is matched against each spelling of
// a request path (see Path). In a rule a trailing slash, the pattern's or
// the path's, is ignored; in exempt_paths it counts (see
// Config.exemptOne), but for a catch-all.
//
// A last segment "**" is the catch-all: it matches the path before it
// and everything below, at any depth, so "/api/admin/**" matches
// "/api/admin", "/api/admin/x" and "/api/admin/x/y", not
// "/api/administrator"; "/**" matches every path. The segments before it
// are matched as in any pattern ("/api/*/files/**"). "**" anywhere else is
// refused. It is kept apart from segs (rest), so that matching stays one
// pass over the path with no backtracking.
type pattern struct {
	raw     string   // as written
	prefix  string   // literal text before the first wildcard (all of it when literal), without a trailing slash
	segs    []string // "*" is the wildcard, however it was written; without the catch-all
	literal bool     // no wildcard: matching is string equality
	slash   bool     // raw ends in '/' and is not "/"
	rest    bool     // raw ends in "/**": segs, then any number of segments (none included)
	// names holds, by segment, the name of a wildcard written ":name" or
	// "{name}" ("" for '*' and literal segments); nil when the pattern
	// names none. A rule's key reads parameters by name (see keyPart).
	names []string
}

func compilePattern(p string) (pattern, error) {
	if p == "" {
		return pattern{}, errors.New("empty path")
	}
	if p[0] != '/' {
		return pattern{}, errors.New("path must start with '/'")
	}
	if strings.Contains(p, "//") {
		return pattern{}, errors.New("empty path segment ('//')")
	}
	pat := pattern{raw: p, slash: p != "/" && p[len(p)-1] == '/'}
	body := trimSlash(p)[1:]
	if body != "" {
		pat.segs = strings.Split(body, "/")
	}
	if n := len(pat.segs); n > 0 && pat.segs[n-1] == "**" {
		if pat.slash {
			return pattern{}, fmt.Errorf(`"**" is allowed only as the last segment, with no trailing slash after it: write %q`, trimSlash(p))
		}
		pat.segs, pat.rest = pat.segs[:n-1], true
	}
	// Segments first, so that ":id?" is told apart from a query.
	first := -1 // index of the first wildcard
	for i, s := range pat.segs {
		wild, err := routerSegment(s, pat.segs[:i], i == len(pat.segs)-1 && !pat.rest)
		if err != nil {
			return pattern{}, err
		}
		if wild {
			if s != "*" {
				if pat.names == nil {
					pat.names = make([]string, len(pat.segs))
				}
				pat.names[i] = paramName(s)
			}
			pat.segs[i] = "*"
			if first < 0 {
				first = i
			}
		}
	}
	if strings.ContainsAny(p, "?#") {
		return pattern{}, errors.New("path must not hold a query or fragment")
	}
	switch {
	case first < 0 && !pat.rest:
		pat.literal = true
		pat.prefix = trimSlash(p)
	case first < 0:
		// Only the catch-all: the literal segments before it, without
		// their slash, which "/api/admin" needs and "/api/administrator"
		// passes (the segments then tell them apart).
		pat.prefix = "/" + strings.Join(pat.segs, "/")
	default:
		pat.prefix = "/" + strings.Join(pat.segs[:first], "/")
		if first > 0 {
			pat.prefix += "/"
		}
	}
	return pat, nil
}

// oneSegment is the wildcard rule, told in every refusal of routerSegment.
const oneSegment = "'*', ':name' or '{name}' stands for exactly one segment"

// onlyLast is the catch-all rule, told when "**", or a router's catch-all,
// stands before the last segment.
const onlyLast = `"**" is allowed only as the last segment, where it matches any number of segments`

// routerSegment tells whether the path segment s (non-empty), which
// follows the segments before (and is the pattern's last when last), is
// the one-segment wildcard: "*", ":name" or "{name}". It refuses "**"
// (which compilePattern takes only as the last segment) and a segment in a
// router's syntax that would not mean here what it means there: catch-alls
// ("*name", "+", Fiber's "*1" and "+1", "{name...}", Express's ":name*"
// and ":name+"), each told to write "**" instead, optional
// parameters (":name?"), net/http's end anchor "{$}", constraints
// ("{id:[0-9]+}", ":id<int>", ":id(\\d+)"), parameters in part of a
// segment ("{id}.json", ":from-:to") and parameters without a valid name
// (":", "{}", ":1"). Any other segment is a literal, including one with
// ':' after its first byte ("a:b", "v1:batchGet").
func routerSegment(s string, before []string, last bool) (bool, error) {
	// base is the path up to s, for the messages: made only for one, so
	// that a path of many segments compiles in linear time.
	base := func() string {
		if len(before) == 0 {
			return "/"
		}
		return "/" + strings.Join(before, "/") + "/"
	}
	catchAll := func() (bool, error) {
		if !last {
			return false, fmt.Errorf("%q is a router's catch-all, which rlkit writes \"**\": %s", s, onlyLast)
		}
		return false, fmt.Errorf("%q is a router's catch-all, which rlkit writes \"**\": %s; write %s** to match every depth", s, oneSegment, base())
	}
	constraint := func() (bool, error) {
		return false, fmt.Errorf("%q constrains its value, and rlkit does not: %s of any value; write '*' to count every value", s, oneSegment)
	}
	part := func() (bool, error) {
		return false, fmt.Errorf("%q holds a parameter in part of a segment, and rlkit matches whole segments only: %s; write '*' to count every value", s, oneSegment)
	}
	noName := func() (bool, error) {
		return false, fmt.Errorf("%q is a parameter without a valid name (an ASCII letter or '_', then letters, digits or '_'): %s", s, oneSegment)
	}
	switch {
	case s == "*":
		return true, nil
	case s == "**":
		return false, errors.New(onlyLast)
	case strings.Contains(s, "**"):
		return false, fmt.Errorf(`"**" is allowed only as the last segment, on its own, not as part of %q`, s)
	case s[0] == '*' && (nameLen(s[1:]) == len(s)-1 || strings.Trim(s[1:], "0123456789") == ""),
		s[0] == '+' && strings.Trim(s[1:], "0123456789") == "":
		return catchAll()
	case s[0] == ':':
		n := nameLen(s[1:])
		switch rest := s[1+n:]; {
		case n == 0:
			return noName()
		case rest == "":
			return true, nil
		case rest == "*" || rest == "+":
			return catchAll()
		case rest == "?":
			b := base()
			return false, fmt.Errorf("%q is an optional parameter, and rlkit has none: %s; list both depths (%s, %s*)", s, oneSegment, trimSlash(b), b)
		case rest[0] == '<' || rest[0] == '(':
			return constraint()
		}
		return part()
	case s == "{$}":
		return false, fmt.Errorf("%q is an end anchor, and rlkit needs none: a pattern always matches the whole path; write %q", s, base())
	case s[0] == '{' && s[len(s)-1] == '}':
		in := s[1 : len(s)-1]
		n := nameLen(in)
		switch {
		case n > 0 && n == len(in):
			return true, nil
		case strings.HasSuffix(in, "..."):
			return catchAll()
		case n > 0 && in[n] == ':':
			return constraint()
		case n == 0:
			return noName()
		}
		return part()
	case strings.ContainsAny(s, "{}"):
		return part()
	case strings.Contains(s, "*"):
		return false, fmt.Errorf("'*' must be a whole segment, not part of %q", s)
	}
	return false, nil
}

// paramName is the name of a wildcard segment ":name" or "{name}".
func paramName(s string) string {
	if s[0] == ':' {
		return s[1:]
	}
	return s[1 : len(s)-1]
}

// param returns the index of the segment named name, and whether the
// pattern has exactly one; n is how many segments bear the name.
func (p *pattern) param(name string) (i, n int) {
	i = -1
	for j, s := range p.names {
		if s == name {
			if n == 0 {
				i = j
			}
			n++
		}
	}
	return i, n
}

// nameLen is the length of the parameter name s starts with: an ASCII
// letter or '_', then letters, digits and '_'; 0 when s starts with none.
func nameLen(s string) int {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '_' && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (i == 0 || c < '0' || c > '9') {
			return i
		}
	}
	return len(s)
}

// trimSlash drops one trailing slash, except from "/".
func trimSlash(p string) string {
	if len(p) > 1 && p[len(p)-1] == '/' {
		return p[:len(p)-1]
	}
	return p
}

// match reports whether path (already passed through trimSlash) matches.
func (p *pattern) match(path string) bool { return p.matchCase(path, false) }

// matchCase is match, with fold without regard to ASCII case.
func (p *pattern) matchCase(path string, fold bool) bool {
	if p.literal {
		return equalCase(path, p.prefix, fold)
	}
	if len(path) < len(p.prefix) || !equalCase(path[:len(p.prefix)], p.prefix, fold) || path == "" || path[0] != '/' {
		return false
	}
	rest := path[1:]
	if len(p.segs) == 0 {
		return rest == "" || p.rest
	}
	for i, seg := range p.segs {
		cur, next, more := strings.Cut(rest, "/")
		if seg == "*" {
			if cur == "" {
				return false
			}
		} else if !equalCase(cur, seg, fold) {
			return false
		}
		if !more {
			return i == len(p.segs)-1
		}
		rest = next
	}
	// Every segment matched, and the path goes on: only a catch-all takes
	// the rest, whatever it holds.
	return p.rest
}

// overlaps reports whether some path matches both p and q: their
// segments agree ('*' with any, a literal with itself) as far as both
// have segments, and the longer is as long as the other or the other ends
// in a catch-all, which takes the longer's remaining segments. It is
// exact, as covers is.
func (p *pattern) overlaps(q *pattern) bool {
	n := min(len(p.segs), len(q.segs))
	if len(p.segs) > n && !q.rest || len(q.segs) > n && !p.rest {
		return false
	}
	for i, s := range p.segs[:n] {
		if s != "*" && q.segs[i] != "*" && s != q.segs[i] {
			return false
		}
	}
	return true
}

// covers reports whether every path that matches q also matches p: each
// segment of p is '*' or q's segment, and either both have as many
// segments and p's catch-all, if q has one, or p has fewer segments and a
// catch-all. It is exact: '*' matches any non-empty segment and no segment
// of a pattern is empty, so when p does not cover q some path matches q
// and not p: one that differs from a literal of p where q has '*' or
// another literal, one no deeper than q's own segments when p has more,
// or one deeper than p when q has a catch-all and p none.
func (p *pattern) covers(q *pattern) bool {
	if len(p.segs) != len(q.segs) && !(p.rest && len(p.segs) < len(q.segs)) || q.rest && !p.rest {
		return false
	}
	for i, s := range p.segs {
		if s != "*" && s != q.segs[i] {
			return false
		}
	}
	return true
}

type weight struct {
	pat  pattern
	cost int64
}

// Rule is one compiled rule of a Config: the paths it covers, the policy
// its requests count against, and the cost of each path.
type Rule struct {
	Name    string
	Policy  *store.Policy
	paths   []pattern
	methods []string
	weights []weight
	shadow  bool
	plan    string   // see Plan
	index   int      // in Config.rules (the default: len), for a tier's variants
	penalty *penalty // nil: none (see penalty.go)
	count   countMode
	clear   bool // a success clears the key's failures (RuleSpec.ClearOnSuccess)
	// wait is how long a request may be held for room instead of
	// refused (0: never), and waitQueue how many of one key at most (see
	// wait.go).
	wait      time.Duration
	waitQueue int
	conc      *store.Concurrency // nil: no concurrency limit (see inflight.go)
	key       *ruleKey           // what it counts per; nil: the caller (see key.go)
	stack     bool               // counted beside the rule that applies (RuleSpec.Stack; see stack.go)
	block     int64              // lease mode: the largest block a process holds of a key; 0: exact (see blocks.go)

	// Precomputed responses and header values; see headers.go.
	rateItems   []string        // the start of each limit's item in the RateLimit header
	policyValue []string        // RateLimit-Policy (of a calendar rule, before a decision)
	calendar    *calendarPolicy // RateLimit-Policy of a calendar rule, per period; nil for others
	limitValue  []string        // X-RateLimit-Limit
	body        []byte          // the 429 body
	bodyLength  []string        // its Content-Length
}

// Shadow reports whether the rule is in shadow mode: it counts requests
// and reports the ones it would deny, but denies none (see Spec.Mode).
func (r *Rule) Shadow() bool { return r.shadow }

// Paths returns the rule's path patterns, in configuration order.
func (r *Rule) Paths() []string {
	out := make([]string, len(r.paths))
	for i, p := range r.paths {
		out[i] = p.raw
	}
	return out
}

// allows reports whether the rule applies to method.
func (r *Rule) allows(method string) bool {
	if len(r.methods) == 0 {
		return true
	}
	for _, m := range r.methods {
		if m == method {
			return true
		}
	}
	return false
}

// pathOf returns the index of the first of the rule's paths that
// matches path (already passed through trimSlash), with fold without
// regard to ASCII case; -1 when none does.
func (r *Rule) pathOf(path string, fold bool) int {
	for i := range r.paths {
		if r.paths[i].matchCase(path, fold) {
			return i
		}
	}
	return -1
}

// MatchSpelling returns the first of the rule's path patterns (as
// written) that matches spelling, one spelling of a request path as
// Path.Spellings gives it, a trailing slash ignored, and the spelling's
// cost under the rule (its weight, else 1); with fold, without regard to
// ASCII case (see Flow.FoldCase). ok is false when no path of the rule
// matches (always for the default rule, which has none). It does not look
// at the rule's methods. It explains which spelling a rule of MatchRules
// matched, for tools; the limiter does not call it.
func (r *Rule) MatchSpelling(spelling string, fold bool) (pattern string, cost int64, ok bool) {
	t := trimSlash(spelling)
	i := r.pathOf(t, fold)
	if i < 0 {
		return "", 0, false
	}
	return r.paths[i].raw, r.cost(t, fold), true
}

// cost is the weight of path under r: the first weight pattern that
// matches (with fold without regard to ASCII case), else 1.
func (r *Rule) cost(path string, fold bool) int64 {
	for i := range r.weights {
		if r.weights[i].pat.matchCase(path, fold) {
			return r.weights[i].cost
		}
	}
	return 1
}

// stricter reports whether r at cost admits fewer requests per unit of
// time than q at qcost: the lowest rate among each rule's limits, Count /
// (cost × Period), compared; on a tie, r is not stricter.
func (r *Rule) stricter(cost int64, q *Rule, qcost int64) bool {
	return r.rate(cost) < q.rate(qcost)
}

// rate is the lowest rate among r's limits for requests of cost, per
// nanosecond.
func (r *Rule) rate(cost int64) float64 {
	lowest := math.Inf(1)
	for _, l := range r.Policy.Limits {
		lowest = min(lowest, float64(l.Count)/float64(cost)/float64(l.Period))
	}
	return lowest
}

// hasUpper reports whether a path or weight pattern of r holds an ASCII
// upper-case letter.
func (r *Rule) hasUpper() bool {
	for i := range r.paths {
		if hasUpperASCII(r.paths[i].raw) {
			return true
		}
	}
	for i := range r.weights {
		if hasUpperASCII(r.weights[i].pat.raw) {
			return true
		}
	}
	return false
}
