package core

import (
	"slices"
)

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
		if c.exemptOne(s) < 0 {
			return false
		}
		if t := trimSlash(s); len(t) != len(s) && c.exemptOne(t) < 0 {
			return false
		}
	}
	return true
}

// exemptOne returns the index of the first exempt pattern that matches
// one spelling, -1 when none does, its trailing slash counting: "/health" matches "/health" only, "/health/"
// matches "/health/" only. So a router that serves "/health/" by another
// handler than "/health"'s does not serve it exempt. A catch-all exempts
// every path below its prefix, with or without a trailing slash:
// "/static/**" matches "/static", "/static/", "/static/a" and
// "/static/a/".
func (c *Config) exemptOne(path string) int {
	t := trimSlash(path)
	slash := len(t) != len(path)
	for i := range c.exempt {
		if q := &c.exempt[i]; (q.slash == slash || q.rest) && q.match(t) {
			return i
		}
	}
	return -1
}

// ExemptPattern returns the exempt pattern (exempt_paths, as written)
// that matches spelling, one spelling of a path as Path.Spellings gives
// it, its trailing slash counting as Exempt counts it; ok is false when
// none does. A request is exempt when every spelling of its path has one.
// It explains Exempt's answer, for tools; the limiter does not call it.
func (c *Config) ExemptPattern(spelling string) (pattern string, ok bool) {
	if c == nil {
		return "", false
	}
	if i := c.exemptOne(spelling); i >= 0 {
		return c.exempt[i].raw, true
	}
	return "", false
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
			if !r.allows(method) || r.pathOf(s, fold) < 0 {
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

// MatchRules returns every rule a request for p counts under once it is
// counted, each with the request's cost under it, in this order: the
// rule that applies (Match's, or MatchFoldCase's with fold), the rule in
// shadow mode counted beside it (see Spec.Mode), then the stacked rules
// (RuleSpec.Stack) whose methods include method and whose paths match a
// spelling of p, in rule order. Like Match it does not look at exempt
// paths, nor at the allow and ban lists. It explains a decision, for
// tools; the limiter finds the same rules without allocating.
func (c *Config) MatchRules(method string, p Path, fold bool) (rules []*Rule, costs []int64) {
	if c == nil {
		return nil, nil
	}
	var buf [maxSpellings]string
	sp := spellings(p, &buf)
	add := func(r *Rule, cost int64) {
		if r != nil {
			rules, costs = append(rules, r), append(costs, cost)
		}
	}
	add(c.matchAll(method, sp, fold))
	if c.shadows != nil || c.shadowDef != nil {
		add(matchIn(c.shadows, c.shadowDef, method, sp, fold))
	}
	var h stackHits
	c.matchStacks(method, p, fold, &h)
	for i, r := range h.rules[:h.n] {
		add(r, h.costs[i])
	}
	return rules, costs
}

// withHead returns methods with HEAD added when it holds GET and not HEAD:
// routers serve HEAD with the GET handler, so a rule for GET counts HEAD.
func withHead(methods []string) []string {
	if slices.Contains(methods, "GET") && !slices.Contains(methods, "HEAD") {
		return append(slices.Clip(methods), "HEAD")
	}
	return methods
}
