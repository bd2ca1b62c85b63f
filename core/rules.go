package core

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// A pattern is a path with '*' standing for exactly one non-empty segment:
// "/api/kb/*/reindex" matches "/api/kb/kb-01/reindex", not
// "/api/kb/a/b/reindex" nor "/api/kb//reindex". It is matched against
// each spelling of a request path (see Path). In a rule a trailing slash,
// the pattern's or the path's, is ignored; in exempt_paths it counts (see
// Config.exemptOne).
type pattern struct {
	raw     string
	prefix  string   // literal text before the first '*' (all of it when literal), without a trailing slash
	segs    []string // "*" is the wildcard
	literal bool     // no '*': matching is string equality
	slash   bool     // raw ends in '/' and is not "/"
}

func compilePattern(p string) (pattern, error) {
	if p == "" {
		return pattern{}, errors.New("empty path")
	}
	if p[0] != '/' {
		return pattern{}, errors.New("path must start with '/'")
	}
	if strings.ContainsAny(p, "?#") {
		return pattern{}, errors.New("path must not hold a query or fragment")
	}
	if strings.Contains(p, "//") {
		return pattern{}, errors.New("empty path segment ('//')")
	}
	pat := pattern{raw: p, slash: p != "/" && p[len(p)-1] == '/'}
	body := trimSlash(p)[1:]
	if body != "" {
		pat.segs = strings.Split(body, "/")
	}
	for _, s := range pat.segs {
		switch {
		case s == "":
			return pattern{}, errors.New("empty path segment ('//')")
		case s != "*" && strings.Contains(s, "*"):
			return pattern{}, fmt.Errorf("'*' must be a whole segment, not part of %q", s)
		}
	}
	pat.prefix = trimSlash(p)
	if i := strings.IndexByte(pat.prefix, '*'); i >= 0 {
		pat.prefix = pat.prefix[:i]
	} else {
		pat.literal = true
	}
	return pat, nil
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
		return rest == ""
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
	return false
}

// overlaps reports whether some path matches both p and q.
func (p *pattern) overlaps(q *pattern) bool {
	if len(p.segs) != len(q.segs) {
		return false
	}
	for i, s := range p.segs {
		if s != "*" && q.segs[i] != "*" && s != q.segs[i] {
			return false
		}
	}
	return true
}

// covers reports whether every path that matches q also matches p: both
// have as many segments, and each segment of p is '*' or q's segment. It
// is exact: '*' matches any non-empty segment and no segment of a pattern
// is empty, so when p does not cover q some path matches q and not p.
func (p *pattern) covers(q *pattern) bool {
	if len(p.segs) != len(q.segs) {
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
	Policy  *Policy
	paths   []pattern
	methods []string
	weights []weight

	// Precomputed responses and header values; see headers.go.
	limitNames  []string // each limit's item name in the draft headers
	policyValue []string // RateLimit-Policy
	limitValue  []string // X-RateLimit-Limit
	body        []byte   // the 429 body
	bodyLength  []string // its Content-Length
}

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

// covers reports whether one of the rule's paths matches path (already
// passed through trimSlash), with fold without regard to ASCII case.
func (r *Rule) covers(path string, fold bool) bool {
	for i := range r.paths {
		if r.paths[i].matchCase(path, fold) {
			return true
		}
	}
	return false
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
