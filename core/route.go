package core

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/rlkit/rlkit/core/internal/addrhash"
)

// A route is a router's template for the paths of one handler: segments
// separated by '/', where ":name" or "{name}" stands for exactly one
// non-empty segment of any value ("/api/kb/:id/reindex",
// "/api/kb/{id}/reindex"). That is the form of Gin, Echo, Fiber and
// net/http's patterns (without their method and host). A template with a
// catch-all ("*", "*name", "{name...}", "+"), an optional parameter
// (":name?") or an anchor ("{$}") is not used: such requests are matched by
// their path.
//
// A route lets the limiter find the rule once per (method, route) instead
// of once per request. It never changes which rule applies: a route is
// used only for a clean path (its only spelling, see Path) that is
// literally one of the route's paths, and only when every rule, weight and
// exempt pattern gives the same answer for every path the route matches
// (a catch-all pattern, "/api/admin/**", does for "/api/admin/:id/:x", not
// for "/api/:area", one of whose values is "admin"); otherwise (a rule
// naming one value of a parameter, an escaped or unclean path) the request
// is matched by every spelling of its path. A catch-all template's paths
// have no fixed depth: its requests are always matched by path.

// routeAnswer is what a (method, route) pair decides, or that it does not.
type routeAnswer struct {
	decided bool // false: match by path
	exempt  bool
	rule    *Rule
	cost    int64
	segs    []string // the route's segments, to check a path against
	literal string   // the route itself when it has no parameter, else ""
	upper   bool     // the route has an ASCII upper-case letter
	// cleanLiteral: literal is not "" and clean, so a path that fits is.
	cleanLiteral bool
}

// fits reports whether path (a clean one) is one of the route's paths: the same
// number of segments, the literal ones equal, the parameters non-empty. A
// router may hand over a route for a path that is not literally one of its
// own (case-insensitive or trailing-slash-tolerant matching); such a
// request is matched by its path, as without a route.
func (a *routeAnswer) fits(path string) bool {
	if a.literal != "" {
		return path == a.literal
	}
	if path == "" || path[0] != '/' {
		return false
	}
	rest := path[1:]
	if len(a.segs) == 0 {
		return rest == ""
	}
	for i, seg := range a.segs {
		cur, next, more := strings.Cut(rest, "/")
		if cur == "" || seg != ":" && cur != seg {
			return false
		}
		if !more {
			return i == len(a.segs)-1
		}
		rest = next
	}
	return false
}

// match is what a request counts under: its enforced rule and its rule
// in shadow mode (see Spec.Mode), each with the request's cost under it;
// either may be nil.
type match struct {
	rule, shadow     *Rule
	cost, shadowCost int64
}

// decide returns what a request for p counts under, or exempt: from the
// route's answer when one applies, else from the spellings of p (Exempt,
// then Match; and the rules in shadow mode apart). route is the
// framework's template, or ""; fold says whether the router ignores ASCII
// case (see Flow.FoldCase).
func (c *Config) decide(method string, p Path, route string, fold bool) (m match, exempt bool) {
	path := string(p)
	a := c.routeAnswer(method, path, route)
	// A route's answer is worked out case by case: without regard to case
	// it holds only when neither the route nor a pattern has an upper-case
	// letter (the path then fits the route only as written).
	if a == nil || fold && (c.upper || a.upper) {
		return c.matchPath(method, p, fold)
	}
	// A path that fits a route whose only path is clean is that path: it
	// need not be checked again.
	if !a.cleanLiteral && !clean(path) {
		return c.matchEvery(method, p, fold)
	}
	if a.exempt {
		return match{}, true
	}
	m.rule, m.cost = a.rule, a.cost
	if c.shadows != nil || c.shadowDef != nil {
		m.shadow, m.shadowCost = matchIn(c.shadows, c.shadowDef, method, []string{path}, fold)
	}
	return m, false
}

// matchSpellings returns what a request whose path has the spellings sp
// counts under, or exempt: Exempt, then Match, and the rules in shadow
// mode apart.
func (c *Config) matchSpellings(method string, sp []string, fold bool) (m match, exempt bool) {
	if c.exemptAll(sp) {
		return match{}, true
	}
	m.rule, m.cost = c.matchAll(method, sp, fold)
	if c.shadows != nil || c.shadowDef != nil {
		m.shadow, m.shadowCost = matchIn(c.shadows, c.shadowDef, method, sp, fold)
	}
	return m, false
}

// matchEvery is matchSpellings for every spelling of p.
func (c *Config) matchEvery(method string, p Path, fold bool) (match, bool) {
	var buf [maxSpellings]string
	return c.matchSpellings(method, spellings(p, &buf), fold)
}

// matchPath is matchSpellings for the spellings of p, through the
// answers kept for recent paths as sent (see pathAnswers): a path seen
// before, clean or not, is one lookup.
func (c *Config) matchPath(method string, p Path, fold bool) (match, bool) {
	path := string(p)
	std, ok := standardMethod(method)
	if !ok || len(path) > maxPathAnswer {
		return c.matchEvery(method, p, fold)
	}
	h := pathHash(std, path, fold)
	pa := &c.routes.paths
	i := h >> (64 - pathSlotBits)
	if e := pa.answers[i].Load(); e != nil && e.path == path && e.method == std && e.fold == fold {
		return e.m, e.exempt
	}
	if seen := &pa.seen[i]; seen.Load() != h {
		seen.Store(h)
		return c.matchEvery(method, p, fold)
	}
	// Seen twice in a row: the answer is kept, worked out from the copy it
	// is kept with (so that it is that copy's even if the adapter's memory
	// changed meanwhile).
	kept := strings.Clone(path)
	m, exempt := c.matchEvery(method, Path(kept), fold)
	pa.answers[i].Store(&pathAnswer{path: kept, method: std, fold: fold, m: m, exempt: exempt})
	return m, exempt
}

// pathHash is the hash of (method, path, fold) in pathAnswers, whose slot
// is its top pathSlotBits. method is one of standardMethod's, which differ
// in their first two letters; the product spreads them, and fold, over
// the slot's bits, so that a path asked by two methods takes two slots
// (but for a chance of 1 in 512).
func pathHash(method, path string, fold bool) uint64 {
	h := maphash.String(pathSeed, path) ^ uint64(method[0])<<8 ^ uint64(method[1])
	if fold {
		h ^= 1 << 16
	}
	return h * 0x9E3779B97F4A7C15 // odd: distinct hashes stay distinct
}

// pathAnswers keeps what recent paths as sent (clean or not, of a
// standard method, at most maxPathAnswer bytes) count under, for the
// requests whose route gives no answer (a router that names no route, a
// middleware mounted on a prefix, as Fiber's app.Use): a direct-mapped
// table by a seeded hash of (method, path, case folding),
// so that a lookup is one load and a comparison of the path, and its size
// is fixed. A slot holds an immutable entry, replaced whole, with its own
// copy of the path (an adapter's path may point into memory the framework
// reuses). A (method, path) is only remembered by its hash (seen) the
// first time its slot sees it, and gets an entry the second, so that a
// path seen once costs no allocation: a client sending a new path with
// every request makes the limiter match each, as without the table, and
// allocates nothing.
type pathAnswers struct {
	answers [1 << pathSlotBits]atomic.Pointer[pathAnswer]
	seen    [1 << pathSlotBits]atomic.Uint64
}

const (
	pathSlotBits = 9
	// maxPathAnswer is the longest path kept.
	maxPathAnswer = 256
)

// pathSeed seeds the hash of pathAnswers, so that no client can choose
// paths that share a slot.
var pathSeed = maphash.MakeSeed()

type pathAnswer struct {
	path, method string
	fold, exempt bool
	m            match
}

// routeAnswer returns the answer of route for a request for path, or nil
// when the path is to be matched. The answer holds for path only when path
// is clean (its only spelling; see decide).
func (c *Config) routeAnswer(method, path, route string) *routeAnswer {
	// A route without parameters serves only its own path; any other (a
	// mount prefix such as Fiber's app.Use gives) is not looked up.
	if route == "" || route != path && !hasParam(route) {
		return nil
	}
	m, ok := standardMethod(method)
	if !ok {
		return nil
	}
	if a := c.route(m, route); a.decided && a.fits(path) {
		return a
	}
	return nil
}

// routes caches the answers of one Config: a map from route to its answers
// per method, replaced whole on every insertion (copy on write), so that a
// lookup is one map read without a lock. Routes come from a program's
// router: a few hundred at most, each inserted once per method.
//
// In front of the map, recent holds the last entry found in each slot,
// by the address of its route's string: a router hands over the same
// string (its own copy of the template) for every request of a route, so
// that a lookup is then one load and a few comparisons, without hashing
// the route. An entry holds the string it was found by, so the address
// stands for that string while the entry is there.
type routes struct {
	mu     sync.Mutex // serializes insertions
	m      atomic.Pointer[map[string][]*routeEntry]
	recent [64]atomic.Pointer[routeEntry]
	paths  pathAnswers // answers by path, when the route gives none
}

// routeEntry is the answer for (method, route), route as the first
// request for it spelled it.
type routeEntry struct {
	route, method string
	answer        *routeAnswer
}

// maxRoutes bounds the cache; past it, routes are matched by path.
const maxRoutes = 10_000

// route returns the answer for (method, route). method is one of
// standardMethod's.
func (c *Config) route(method, route string) *routeAnswer {
	addr := unsafe.StringData(route)
	slot := &c.routes.recent[addrhash.Slot(unsafe.Pointer(addr), 6)]
	if e := slot.Load(); e != nil && unsafe.StringData(e.route) == addr && len(e.route) == len(route) && e.method == method {
		return e.answer
	}
	if m := c.routes.m.Load(); m != nil {
		for _, e := range (*m)[route] {
			if e.method == method {
				if unsafe.StringData(e.route) == addr {
					slot.Store(e) // found by its address next time
				}
				return e.answer
			}
		}
	}
	a := c.answerRoute(method, route)
	c.routes.mu.Lock()
	defer c.routes.mu.Unlock()
	old := c.routes.m.Load()
	if old != nil && len(*old) >= maxRoutes {
		return a
	}
	next := make(map[string][]*routeEntry, 1+func() int {
		if old == nil {
			return 0
		}
		return len(*old)
	}())
	if old != nil {
		for k, v := range *old {
			next[k] = v
		}
	}
	for _, e := range next[route] {
		if e.method == method {
			return e.answer // inserted meanwhile
		}
	}
	// A new slice: readers may hold the old one.
	e := &routeEntry{route: route, method: method, answer: a}
	next[route] = append(append([]*routeEntry(nil), next[route]...), e)
	c.routes.m.Store(&next)
	slot.Store(e)
	return a
}

// answerRoute works out what every path of route gets under method.
func (c *Config) answerRoute(method, route string) *routeAnswer {
	if route == "" || route[0] != '/' || strings.Contains(route, "//") {
		return &routeAnswer{}
	}
	var segs []string
	if body := trimSlash(route)[1:]; body != "" {
		segs = strings.Split(body, "/")
	}
	for i, s := range segs {
		switch {
		case s == "" || s == ":" || s == "{}" || s == "." || s == "..",
			strings.ContainsAny(s, "*?+"), strings.Contains(s, "..."), s == "{$}":
			return &routeAnswer{}
		case isParam(s):
			segs[i] = ":" // one segment, any value
		case strings.ContainsAny(s, "{}"):
			return &routeAnswer{}
		}
	}
	a := &routeAnswer{decided: true, segs: segs, upper: hasUpperASCII(route)}
	if !slices.Contains(segs, ":") {
		a.literal = trimSlash(route)
		a.cleanLiteral = clean(a.literal)
	}
	for i := range c.exempt {
		if c.exempt[i].slash {
			continue // matches only paths with a trailing slash, which never use a route
		}
		switch c.exempt[i].matchRoute(segs) {
		case undecided:
			return &routeAnswer{}
		case always:
			a.exempt = true
		}
	}
	for _, r := range c.enforced {
		if !r.allows(method) {
			continue
		}
		m := never
		for i := range r.paths {
			switch r.paths[i].matchRoute(segs) {
			case undecided:
				return &routeAnswer{}
			case always:
				m = always
			}
		}
		if m == never {
			continue
		}
		a.rule, a.cost = r, 1
		for i := range r.weights {
			switch r.weights[i].pat.matchRoute(segs) {
			case undecided:
				return &routeAnswer{}
			case always:
				a.cost = r.weights[i].cost
				return a
			}
		}
		return a
	}
	a.rule, a.cost = c.enfDef, 1
	return a
}

type routeMatch uint8

const (
	never routeMatch = iota
	always
	undecided // depends on a parameter's value
)

// matchRoute tells whether p matches the paths of a route with segments
// segs (":" marks a parameter). A catch-all of p takes the route's
// segments past p's own, whatever they are.
func (p *pattern) matchRoute(segs []string) routeMatch {
	if len(p.segs) != len(segs) && !(p.rest && len(p.segs) < len(segs)) {
		return never
	}
	depends := false
	for i, ps := range p.segs {
		switch ts := segs[i]; {
		case ts == ":":
			if ps != "*" {
				depends = true
			}
		case ps != "*" && ps != ts:
			return never // a literal differs: no path of the route matches
		}
	}
	if depends {
		return undecided
	}
	return always
}

// isParam reports whether a route segment is a one-segment parameter.
func isParam(s string) bool {
	return s[0] == ':' || len(s) > 2 && s[0] == '{' && s[len(s)-1] == '}'
}

// hasParam reports whether a route template may hold a parameter. (A
// loop: strings.ContainsAny builds a set on every call, and this runs for
// every request of a middleware mounted on a prefix, as Fiber's app.Use.)
func hasParam(route string) bool {
	for i := 0; i < len(route); i++ {
		if c := route[i]; c == ':' || c == '{' {
			return true
		}
	}
	return false
}

// standardMethod returns the constant for a standard HTTP method, so that
// the route cache holds no caller's memory and cannot grow with made-up
// methods (routers hand other methods to middleware too: Echo runs it
// before its 405); other methods are matched by path.
func standardMethod(m string) (string, bool) {
	switch m {
	case "GET":
		return "GET", true
	case "HEAD":
		return "HEAD", true
	case "POST":
		return "POST", true
	case "PUT":
		return "PUT", true
	case "PATCH":
		return "PATCH", true
	case "DELETE":
		return "DELETE", true
	case "OPTIONS":
		return "OPTIONS", true
	}
	return "", false
}

// CachedRoutes returns how many (method, route) pairs the configuration
// has answered once and for all (see Flow.Decide): a way to check that an
// adapter passes its router's templates.
func (c *Config) CachedRoutes() int {
	if c == nil {
		return 0
	}
	m := c.routes.m.Load()
	if m == nil {
		return 0
	}
	n := 0
	for _, e := range *m {
		n += len(e)
	}
	return n
}
