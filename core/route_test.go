package core

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"unsafe"

	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/store"
)

const routeConfig = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
    - name: kb
      paths: ["/api/kb/*/docs/upload", "/api/kb/*/docs/upload/batch"]
      limit: "30/minute"
      weights:
        "/api/kb/*/docs/upload/batch": 10
    - name: special
      paths: ["/api/users/admin"]
      limit: "1/minute"
    - name: users
      paths: ["/api/users/*"]
      limit: "5/minute"
    - name: login
      paths: ["/api/login"]
      methods: ["POST"]
      limit: "5/minute"
  default: "120/minute"
  exempt_paths: ["/health", "/docs/*"]
`

func TestRouteAnswers(t *testing.T) {
	cfg, err := ParseConfig([]byte(routeConfig), "route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, route string
		decided       bool
		exempt        bool
		rule          string
		cost          int64
	}{
		{"GET", "/api/search", true, false, "search", 1},
		{"GET", "/api/search/", true, false, "search", 1},
		{"GET", "/api/kb/:id/docs/upload/batch", true, false, "kb", 10},
		{"GET", "/api/kb/{id}/docs/upload", true, false, "kb", 1},
		{"GET", "/api/kb/:id/docs", true, false, "default", 1},
		{"GET", "/api/users/:id", false, false, "", 0}, // "admin" is one value of :id
		{"GET", "/api/users/admin", true, false, "special", 1},
		{"GET", "/api/users/bob", true, false, "users", 1},
		{"GET", "/api/login", true, false, "default", 1},
		{"POST", "/api/login", true, false, "login", 1},
		{"GET", "/health", true, true, "default", 1},
		{"GET", "/docs/:page", true, true, "default", 1},
		{"GET", "/docs/:page/:sub", true, false, "default", 1},
		{"GET", "/static/*filepath", false, false, "", 0},
		{"GET", "/static/*", false, false, "", 0},
		{"GET", "/x/:id?", false, false, "", 0},
		{"GET", "/a/{p...}", false, false, "", 0},
		{"GET", "/a/{$}", false, false, "", 0},
		{"GET", "/a/+", false, false, "", 0},
		{"GET", "/a/x{y}", false, false, "", 0},
		{"GET", "", false, false, "", 0},
		{"GET", "api/search", false, false, "", 0},
		{"GET", "/a//b", false, false, "", 0},
	} {
		a := cfg.route(c.method, c.route)
		got := fmt.Sprintf("decided=%v exempt=%v", a.decided, a.exempt)
		want := fmt.Sprintf("decided=%v exempt=%v", c.decided, c.exempt)
		if a.decided {
			got += fmt.Sprintf(" rule=%s cost=%d", a.rule.Name, a.cost)
			want += fmt.Sprintf(" rule=%s cost=%d", c.rule, c.cost)
		}
		if got != want {
			t.Errorf("%s %q: got %s, want %s", c.method, c.route, got, want)
		}
	}
}

func TestRouteFits(t *testing.T) {
	cfg, err := ParseConfig([]byte(routeConfig), "route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.route("GET", "/api/kb/:id/docs/upload")
	for path, want := range map[string]bool{
		"/api/kb/k1/docs/upload":       true,
		"/api/kb/k1/docs/upload/batch": false,
		"/api/kb//docs/upload":         false,
		"/api/kb/k1/docs":              false,
		"/API/kb/k1/docs/upload":       false, // a case-insensitive router's match: by path
		"":                             false,
	} {
		if got := a.fits(path); got != want {
			t.Errorf("fits(%q) = %v, want %v", path, got, want)
		}
	}
	if root := cfg.route("GET", "/"); !root.fits("/") || root.fits("/x") {
		t.Error("the root route fits other than /")
	}
}

// TestRouteSameAnswer runs random configurations (with catch-alls in
// rules, weights and exempt paths), routes and paths: a decided route
// whose path fits gives exactly the rule, cost and exemption that matching
// the path gives.
func TestRouteSameAnswer(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	seg := func(choices ...string) string { return choices[rng.IntN(len(choices))] }
	// pat is a pattern of one to three segments, one in three ending in
	// a catch-all.
	pat := func() string {
		n := 1 + rng.IntN(3)
		var b strings.Builder
		for range n {
			b.WriteString("/" + seg("a", "b", "*"))
		}
		if rng.IntN(3) == 0 {
			b.WriteString("/**")
		}
		return b.String()
	}
	// weightOf is p with its first '*' segment replaced, or its catch-all
	// replaced or dropped.
	weightOf := func(p string) string {
		segs := strings.Split(p, "/")
		for i, s := range segs {
			if s == "*" {
				segs[i] = seg("a", "b", "*")
				return strings.Join(segs, "/")
			}
		}
		if segs[len(segs)-1] == "**" {
			segs[len(segs)-1] = seg("a", "*", "**")
		}
		return strings.Join(segs, "/")
	}
	decided, checked, catchAlls := 0, 0, 0
	for iter := range 300 {
		var y strings.Builder
		y.WriteString("rate_limit:\n  enabled: true\n  rules:\n")
		seen := map[string]bool{}
		for i := range 1 + rng.IntN(4) {
			p := pat()
			if seen[p] {
				continue
			}
			seen[p] = true
			fmt.Fprintf(&y, "    - name: r%d\n      paths: [%q]\n      limit: \"100/minute\"\n", i, p)
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&y, "      weights:\n        %q: 3\n", weightOf(p))
			}
		}
		fmt.Fprintf(&y, "  exempt_paths: [%q]\n", pat())
		cfg, err := ParseConfig([]byte(y.String()), "random.yaml")
		if err != nil {
			continue // a generated config the parser refuses (a shadowed path, a weight outside its rule)
		}
		for range 20 {
			n := 1 + rng.IntN(4)
			var tmpl strings.Builder
			for range n {
				tmpl.WriteString("/" + seg("a", "b", ":p", "{q}"))
			}
			a := cfg.route("GET", tmpl.String())
			if !a.decided {
				continue
			}
			decided++
			if strings.Contains(y.String(), "**") {
				catchAlls++
			}
			for range 5 {
				path := tmpl.String()
				for strings.Contains(path, ":p") || strings.Contains(path, "{q}") {
					v := seg("a", "b", "c")
					path = strings.Replace(strings.Replace(path, ":p", v, 1), "{q}", v, 1)
				}
				if !a.fits(path) {
					t.Fatalf("config %d: %q does not fit its own route %q", iter, path, tmpl.String())
				}
				checked++
				rule, cost := cfg.Match("GET", Path(path))
				if a.exempt != cfg.Exempt(Path(path)) || rule != a.rule || cost != a.cost {
					t.Fatalf("config %d:\n%s\nroute %q, path %q: route says exempt=%v rule=%s cost=%d; path says exempt=%v rule=%s cost=%d",
						iter, y.String(), tmpl.String(), path, a.exempt, a.rule.Name, a.cost, cfg.Exempt(Path(path)), rule.Name, cost)
				}
			}
		}
	}
	if decided < 100 || checked < 500 || catchAlls < 100 {
		t.Fatalf("only %d decided routes, %d paths checked, %d decided under a catch-all", decided, checked, catchAlls)
	}
}

// TestFlow checks the order of the flow and that a route changes nothing.
func TestFlow(t *testing.T) {
	cfg, err := ParseConfig([]byte(routeConfig), "route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type req struct{ user, ip string }
	var calls []string
	f := &Flow[req]{
		Limiter: NewLimiter(cfg, WithStore(&countingStore{})),
		Key: func(r req) (string, error) {
			calls = append(calls, "key")
			if r.user == "bad" {
				return "", fmt.Errorf("bad token")
			}
			return r.user, nil
		},
		Bypass:   func(r req) bool { calls = append(calls, "bypass"); return r.user == "root" },
		ClientIP: func(r req) string { calls = append(calls, "ip"); return r.ip },
	}
	ctx := context.Background()
	for _, c := range []struct {
		r     req
		path  Path
		route string
		want  string
	}{
		{req{"u", "1.2.3.4"}, "/health", "/health", "allowed rule=<nil> calls=[]"},
		{req{"u", "1.2.3.4"}, "/docs/x", "", "allowed rule=<nil> calls=[]"},
		{req{"root", ""}, "/api/search", "/api/search", "allowed rule=<nil> calls=[bypass]"},
		{req{"bad", ""}, "/api/search", "", "error bad token calls=[bypass key]"},
		{req{"u", "1.2.3.4"}, "/api/kb/x/docs/upload/batch", "/api/kb/:id/docs/upload/batch", "allowed rule=kb cost=10 key=u calls=[bypass key]"},
		{req{"", "1.2.3.4"}, "/api/kb/x/docs/upload/batch", "", "allowed rule=kb cost=10 key=1.2.3.4 calls=[bypass key ip]"},
		{req{"u", ""}, "/api/users/admin", "/api/users/:id", "allowed rule=special cost=1 key=u calls=[bypass key]"},
		{req{"u", ""}, "/API/search", "/api/search", "allowed rule=default cost=1 key=u calls=[bypass key]"},
	} {
		calls = nil
		st := f.Limiter.store.(*countingStore)
		st.key = ""
		d, err := f.Decide(ctx, c.r, "GET", c.path, c.route)
		var got string
		switch {
		case err != nil:
			got = "error " + err.Error()
		case d.Rule == nil:
			got = fmt.Sprintf("allowed=%v rule=<nil>", d.Allowed)
			got = strings.Replace(got, "allowed=true", "allowed", 1)
		default:
			got = fmt.Sprintf("allowed rule=%s cost=%d key=%s", d.Rule.Name, d.Cost, st.key)
		}
		got += fmt.Sprintf(" calls=%v", calls)
		if got != c.want {
			t.Errorf("%+v %s (route %q): got %s, want %s", c.r, c.path, c.route, got, c.want)
		}
	}
	off := &Flow[req]{Limiter: NewLimiter(nil, WithStore(&countingStore{})), Key: f.Key}
	if d, err := off.Decide(ctx, req{"bad", ""}, "GET", "/api/search", ""); err != nil || !d.Allowed || d.Rule != nil {
		t.Errorf("limiting off: %+v, %v", d, err)
	}
}

type countingStore struct{ key string }

func (s *countingStore) Take(_ context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	s.key = key
	return store.Result{Allowed: true, Limit: p.Limits[0], Remaining: 1}, nil
}
func (s *countingStore) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.Take(ctx, key, p, cost)
}
func (s *countingStore) Reset(context.Context, string, *store.Policy) (bool, error) {
	return false, nil
}

// TestDotSegments: a path with dot segments is exempt only when it is
// exempt as written and cleaned, and counts under the first rule that
// matches either spelling; it never uses a route.
func TestDotSegments(t *testing.T) {
	cfg, err := ParseConfig([]byte(routeConfig), "route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		path   Path
		exempt bool
		rule   string
	}{
		{"/files/../health", false, "default"},
		{"/health/.", false, "default"}, // as written, not /health
		{"/./health", false, "default"},
		{"/api/kb/../docs/upload", false, "kb"}, // as written, ".." is the kb segment
		{"/api/kb/../reindex", false, "default"},
		{"/api/kb/x/../x/docs/upload/batch", false, "kb"},
		{"/api/kb/../docs/upload/batch", false, "kb"},
		{"/api/x/../search", false, "search"},
		{"/api/users/../users/admin", false, "special"},
		{"/api/users/..", false, "users"}, // as written, ".." is one segment of /api/users/*
		{"/docs/..", false, "default"},
	} {
		if got := cfg.Exempt(c.path); got != c.exempt {
			t.Errorf("Exempt(%q) = %v, want %v", c.path, got, c.exempt)
		}
		if r, _ := cfg.Match("GET", c.path); r.Name != c.rule {
			t.Errorf("Match(%q) = %s, want %s", c.path, r.Name, c.rule)
		}
	}
	// Through the flow, with a route that would otherwise decide.
	f := &Flow[string]{Limiter: NewLimiter(cfg, WithStore(&countingStore{})), ClientIP: func(string) string { return "ip" }}
	d, err := f.Decide(context.Background(), "", "GET", "/api/users/x/../admin", "/api/users/:id/../admin")
	if err != nil || d.Rule == nil || d.Rule.Name != "special" {
		t.Fatalf("dot path with a route: %+v, %v", d.Rule, err)
	}
	d, _ = f.Decide(context.Background(), "", "GET", "/files/../health", "/files/*")
	if d.Rule == nil || d.Rule.Name != "default" {
		t.Fatalf("/files/../health served by /files/*: rule %v, want counted under default", d.Rule)
	}
}

// TestRouteMethods: only standard methods use the route cache, so made-up
// methods cannot grow it.
func TestRouteMethods(t *testing.T) {
	cfg, err := ParseConfig([]byte(routeConfig), "route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	f := &Flow[string]{Limiter: NewLimiter(cfg, WithStore(&countingStore{})), ClientIP: func(string) string { return "ip" }}
	for i := range 1000 {
		if _, err := f.Decide(context.Background(), "", fmt.Sprintf("M%d", i), "/api/kb/x/reindex", "/api/kb/:id/reindex"); err != nil {
			t.Fatal(err)
		}
	}
	f.Decide(context.Background(), "", "GET", "/api/kb/x/reindex", "/api/kb/:id/reindex")
	f.Decide(context.Background(), "", "POST", "/api/kb/x/reindex", "/api/kb/:id/reindex")
	m := cfg.routes.m.Load()
	if m == nil || len(*m) != 1 || len((*m)["/api/kb/:id/reindex"]) != 2 {
		t.Fatalf("route cache %v, want one route with GET and POST", m)
	}
}

// TestRouteRecent: the answers a route's string finds by its address
// (routes.recent) are its own: a route that is the start of another one's
// string (same address, shorter), the same route under another method,
// and the same route spelled by another string all get their own answer,
// in any order, again and again.
func TestRouteRecent(t *testing.T) {
	cfg, err := ParseConfig([]byte(routeConfig), "route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.Clone("/api/users/admin")
	users, admin := s[:len("/api/users")], s // one address, two routes
	login := strings.Clone("/api/login")
	cases := []struct {
		method, path, route, want string
	}{
		{"GET", "/api/users", users, DefaultRuleName},
		{"GET", "/api/users/admin", admin, "special"},
		{"POST", "/api/login", login, "login"},
		{"GET", "/api/login", login, DefaultRuleName},
		{"GET", "/api/login", strings.Clone(login), DefaultRuleName},
		{"POST", "/api/login", strings.Clone(login), "login"},
	}
	for round := range 4 {
		for i := range cases {
			c := cases[(i*(round+1))%len(cases)]
			m, exempt := cfg.decide(c.method, Path(c.path), c.route, false)
			if exempt || m.rule == nil || m.rule.Name != c.want {
				t.Fatalf("round %d: %s %s (route %q): rule %v, exempt %v; want %s", round, c.method, c.path, c.route, m.rule, exempt, c.want)
			}
		}
	}
	if n := cfg.CachedRoutes(); n != 4 {
		t.Errorf("%d routes cached, want 4", n)
	}
}

// TestRouteLiteralEscaped: a route without parameters whose path is not
// clean (an escape) answers nothing for the path: the request is matched
// by every spelling of it, which names the rule.
func TestRouteLiteralEscaped(t *testing.T) {
	cfg, err := ParseConfig([]byte(routeConfig), "route.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if m, _ := cfg.decide("GET", "/api/s%65arch", "/api/s%65arch", false); m.rule == nil || m.rule.Name != "search" {
			t.Fatalf("GET /api/s%%65arch by its own route: rule %v, want search", m.rule)
		}
	}
}

// pathAnswerConfig has rules by method, by case, a weight, exempt paths
// and a rule in shadow mode: what a path counts under depends on all of
// them.
const pathAnswerConfig = `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/api/login"]
      methods: ["POST"]
      limit: "5/minute"
    - name: Upper
      paths: ["/API/Upper"]
      limit: "5/minute"
    - name: kb
      paths: ["/api/kb/*/docs/upload", "/api/kb/*/docs/upload/batch"]
      limit: "30/minute"
      weights:
        "/api/kb/*/docs/upload/batch": 10
    - name: watch
      mode: shadow
      paths: ["/api/*"]
      limit: "1/minute"
  default: "120/minute"
  exempt_paths: ["/health", "/docs/*"]
`

// TestPathAnswers: the answers kept for recent paths (pathAnswers) are
// each (method, path, case folding)'s own: every request, asked again and
// again in several orders, by every standard method, with and without case
// folding, gets what matching its path gives.
func TestPathAnswers(t *testing.T) {
	cfg, err := ParseConfig([]byte(pathAnswerConfig), "paths.yaml")
	if err != nil {
		t.Fatal(err)
	}
	paths := []string{"/api/login", "/API/LOGIN", "/api/upper", "/API/Upper", "/api/kb/1/docs/upload",
		"/api/kb/1/docs/upload/batch", "/health", "/HEALTH", "/docs/x", "/api/other", "/other", "/"}
	for i := range 300 {
		paths = append(paths, fmt.Sprintf("/api/kb/%d/docs/upload/batch", i), fmt.Sprintf("/p/%d", i))
	}
	methods := []string{"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
	type req struct {
		method, path string
		fold         bool
	}
	var reqs []req
	for _, p := range paths {
		for _, m := range methods {
			reqs = append(reqs, req{m, p, false}, req{m, p, true})
		}
	}
	for round := range 4 {
		for i := range reqs {
			r := reqs[(i*(2*round+1))%len(reqs)]
			wantM, wantExempt := cfg.matchSpellings(r.method, []string{r.path}, r.fold)
			if m, exempt := cfg.decide(r.method, Path(r.path), "", r.fold); m != wantM || exempt != wantExempt {
				t.Fatalf("round %d: %s %s (fold %v): %+v, exempt %v; want %+v, exempt %v", round, r.method, r.path, r.fold, m, exempt, wantM, wantExempt)
			}
		}
	}
}

// TestPathAnswerOwnCopy: a path kept among the recent ones is a copy: a
// request whose path points into memory the framework then reuses for
// another path (fasthttp's), one of the same slot, gets the other path's
// answer.
func TestPathAnswerOwnCopy(t *testing.T) {
	cfg, err := ParseConfig([]byte(pathAnswerConfig), "paths.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const kb = "/api/kb/7/docs/upload/batch"
	other := "" // a path of kb's slot, of kb's length, that no rule names
	for i := 0; other == ""; i++ {
		p := fmt.Sprintf("/p/%024d", i)
		if pathHash("GET", p, true)>>(64-pathSlotBits) == pathHash("GET", kb, true)>>(64-pathSlotBits) {
			other = p
		}
	}
	buf := []byte(kb)
	path := Path(unsafe.String(&buf[0], len(buf)))
	for range 3 {
		if m, _ := cfg.decide("GET", path, "", true); m.rule == nil || m.rule.Name != "kb" || m.cost != 10 {
			t.Fatalf("%s: %+v, want kb at cost 10", path, m)
		}
	}
	copy(buf, other)
	if m, _ := cfg.decide("GET", path, "", true); m.rule == nil || m.rule.Name != DefaultRuleName || m.cost != 1 {
		t.Fatalf("%s in reused memory: %+v, want the default at cost 1", path, m)
	}
}

// TestPathAnswerSlot: an entry answers only its own method and case
// folding: a request that finds in its slot the entry of the same path
// under another method, or with the other folding, is matched.
func TestPathAnswerSlot(t *testing.T) {
	cfg, err := ParseConfig([]byte(pathAnswerConfig), "paths.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		method, path string
		fold         bool
		// the entry put in the request's slot
		entryMethod string
		entryFold   bool
	}{
		{"POST", "/api/login", false, "GET", false},
		{"GET", "/api/login", false, "POST", false},
		{"GET", "/API/LOGIN", false, "GET", true},
		{"POST", "/API/LOGIN", true, "POST", false},
	} {
		want, wantExempt := cfg.matchSpellings(c.method, []string{c.path}, c.fold)
		other, otherExempt := cfg.matchSpellings(c.entryMethod, []string{c.path}, c.entryFold)
		if other == want {
			t.Fatalf("%+v: the entry's answer is the request's own: the case proves nothing", c)
		}
		i := pathHash(c.method, c.path, c.fold) >> (64 - pathSlotBits)
		cfg.routes.paths.answers[i].Store(&pathAnswer{path: c.path, method: c.entryMethod, fold: c.entryFold, m: other, exempt: otherExempt})
		if m, exempt := cfg.decide(c.method, Path(c.path), "", c.fold); m != want || exempt != wantExempt {
			t.Errorf("%s %s (fold %v) beside the entry of %s (fold %v): %+v, want %+v", c.method, c.path, c.fold, c.entryMethod, c.entryFold, m, want)
		}
	}
}

// TestPathAnswerOtherSpelling: an entry answers only its own raw path: a
// request that finds in its slot the entry of another spelling of its path
// (a trailing slash, an escape, another case, a NUL), with that spelling's
// answer, is matched by its own spellings.
func TestPathAnswerOtherSpelling(t *testing.T) {
	for _, text := range []string{pathAnswerConfig, hostileConfig} {
		cfg, err := ParseConfig([]byte(text), "paths.yaml")
		if err != nil {
			t.Fatal(err)
		}
		pairs := [][2]string{ // request, entry
			{"/health/", "/health"}, {"/%68ealth", "/health"}, {"/HEALTH", "/health"}, {"/x/../health", "/health"},
			{"/static", "/static/"}, {"/Health", "/health"}, {"/health", "/Health"},
			{"/api/login", "/api/login/"}, {"/api/%6cogin", "/api/login"}, {"/api/login%00", "/api/login"},
			{"/API/LOGIN", "/api/login"}, {"/docs/%2e%2e/api/login", "/docs/x"}, {"/a/%2F/b", "/a/1/b"},
		}
		n := 0
		for _, pr := range pairs {
			for _, m := range []string{"GET", "POST"} {
				for _, fold := range []bool{false, true} {
					var b1, b2 [maxSpellings]string
					want, wantEx := cfg.matchSpellings(m, spellings(Path(pr[0]), &b1), fold)
					other, otherEx := cfg.matchSpellings(m, spellings(Path(pr[1]), &b2), fold)
					if other == want && otherEx == wantEx {
						continue
					}
					n++
					i := pathHash(m, pr[0], fold) >> (64 - pathSlotBits)
					cfg.routes.paths.answers[i].Store(&pathAnswer{path: pr[1], method: m, fold: fold, m: other, exempt: otherEx})
					if got, ex := cfg.decide(m, Path(pr[0]), "", fold); got != want || ex != wantEx {
						t.Errorf("%s %q (fold %v) beside the entry of %q: %+v exempt %v, want %+v exempt %v", m, pr[0], fold, pr[1], got, ex, want, wantEx)
					}
				}
			}
		}
		if n == 0 {
			t.Fatal("no pair proves anything")
		}
		t.Logf("%d cases", n)
	}
}

// TestPathAnswerOnce: a path asked once costs no allocation (only the
// second request of a (method, path) gives it an entry), and one asked
// again and again none either.
func TestPathAnswerOnce(t *testing.T) {
	cfg, err := ParseConfig([]byte(pathAnswerConfig), "paths.yaml")
	if err != nil {
		t.Fatal(err)
	}
	paths := make([]Path, 200)
	for i := range paths {
		paths[i] = Path(fmt.Sprintf("/api/kb/%d/docs/upload", i))
	}
	i := 0
	if n := testing.AllocsPerRun(100, func() { cfg.decide("GET", paths[i], "", false); i++ }); n != 0 {
		t.Errorf("%v allocations for a path seen once, want 0", n)
	}
	if n := testing.AllocsPerRun(100, func() { cfg.decide("GET", "/api/other", "", true) }); n != 0 {
		t.Errorf("%v allocations for a path seen again, want 0", n)
	}
	// An escaped spelling is decoded when first seen; seen again, its
	// answer is kept, decoded nothing.
	if m, _ := cfg.decide("POST", "/api/%6cogin", "", false); m.rule == nil || m.rule.Name != "login" {
		t.Fatalf("POST /api/%%6cogin: %+v, want login", m)
	}
	if n := testing.AllocsPerRun(100, func() { cfg.decide("POST", "/api/%6cogin", "", false) }); n != 0 {
		t.Errorf("%v allocations for an escaped path seen again, want 0", n)
	}
}

// TestPathHashSlots: the methods that share a first letter (POST, PUT,
// PATCH) and the two case foldings of one path take different slots of
// the recent paths' table (but for the chance of 1 in 512 per pair), so
// that a client asking one cannot push out the answer another keeps.
func TestPathHashSlots(t *testing.T) {
	slot := func(method, path string, fold bool) uint64 {
		return pathHash(method, path, fold) >> (64 - pathSlotBits)
	}
	same := 0
	const paths = 1000
	for i := range paths {
		p := fmt.Sprintf("/api/items/%d", i)
		for _, pair := range [][2]string{{"POST", "PUT"}, {"POST", "PATCH"}, {"PUT", "PATCH"}, {"GET", "HEAD"}} {
			if slot(pair[0], p, false) == slot(pair[1], p, false) {
				same++
			}
		}
		if slot("GET", p, false) == slot("GET", p, true) {
			same++
		}
	}
	// 5,000 pairs: about 10 share a slot by chance.
	if same > 50 {
		t.Errorf("%d of %d pairs of one path share a slot", same, 5*paths)
	}
}

// TestDecideHostileSpellings: whatever route an adapter names and however
// a client spells the path (escapes, //, /./, /../, case, a trailing
// slash, a long path, any method), decide, through the route answers, the
// literal-route shortcut and the recent paths' answers, asked again and
// again, gives what matching every spelling of the path gives.
func TestDecideHostileSpellings(t *testing.T) {
	for _, text := range []string{pathAnswerConfig, hostileConfig} {
		cfg, err := ParseConfig([]byte(text), "paths.yaml")
		if err != nil {
			t.Fatal(err)
		}
		decideHostile(t, cfg)
	}
}

func decideHostile(t *testing.T, cfg *Config) {
	long := "/api/login/" + strings.Repeat("a", 250)
	paths := []string{"/api/login", "/api/login/", "/api//login", "//api/login", "/api/./login", "/x/../api/login",
		"/api/%6cogin", "/api%2flogin", "/API/LOGIN", "/Api/Login/", "/health", "/health/", "/health/.", "//health",
		"/%68ealth", "/x/../health", "/HEALTH", "/docs/x", "/docs/x/../../api/login", "/docs/%2e%2e/api/login",
		"/docs/..%2fapi%2flogin", "/api/kb/1/docs/upload", "/api/kb/1/docs/upload/", "/api/kb/1/docs/upload/batch",
		"/api/kb/1/docs/upload/./batch", "/api/kb/%31/docs/upload/batch", "/api/kb//docs/upload/batch", "/API/Upper",
		"/api/upper", "/", "", "api/login", "/static/", "/static", "/static/x", "/a/1/b", "/a/1/b/", "/A/1/B", "/a//b",
		"/Health", "/Api/z/x", "/api/z/X", "/static/%2e%2e/", "/a/%2F/b", long, long[:256], long[:257], long + "/..", "/api/login%00", "/api/login?x"}
	routes := []string{"", "/", "/api/login", "/api/login/", "/api/:x", "/api/*", "/api/kb/:id/docs/upload/batch",
		"/api/kb/:id/docs/upload", "/health", "/health/", "/docs/:p", "/static/", "/static/:f", "/a/:x/b", "/Health", "/Api/:y/x", "/API/Upper", "/api/upper", "/:a/:b", "/api/{x}"}
	routes = append(routes, paths...) // a router that names the path itself
	methods := []string{"GET", "HEAD", "POST", "post", "Post", "PUT", "DELETE", "OPTIONS", "PROPFIND", ""}
	for round := range 3 {
		for _, p := range paths {
			var buf [maxSpellings]string
			sp := spellings(Path(p), &buf)
			for _, r := range routes {
				for _, m := range methods {
					for _, fold := range []bool{false, true} {
						wantM, wantEx := cfg.matchSpellings(m, sp, fold)
						if gotM, gotEx := cfg.decide(m, Path(p), r, fold); gotM != wantM || gotEx != wantEx {
							t.Fatalf("round %d: %s %q route %q fold %v: %+v exempt %v; want %+v exempt %v",
								round, m, p, r, fold, gotM, gotEx, wantM, wantEx)
						}
					}
				}
			}
		}
	}
}

// TestCachesConcurrent: goroutines asking at once for peers and paths that
// share the peer, route and recent-path tables' slots each get their own
// answer (run with -race: the tables' entries are published whole).
func TestCachesConcurrent(t *testing.T) {
	cfg, err := ParseConfig([]byte(pathAnswerConfig), "paths.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var zero clientip.Config
	type peer struct{ addr, host string }
	var peers []peer
	for i := range 6000 {
		host := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		peers = append(peers, peer{fmt.Sprintf("%s:%d", host, 1+i*7919%65535), host}) // ports of 1 to 5 digits
	}
	var paths []string
	for i := range 1200 {
		paths = append(paths, fmt.Sprintf("/api/kb/%d/docs/upload/batch", i), fmt.Sprintf("/p/%d", i), "/api/login", "/health")
	}
	routes := []string{"", "/api/kb/:id/docs/upload/batch", "/api/login", "/health"}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				for i := range peers {
					p := peers[(i*(2*g+1)+round)%len(peers)]
					if got := zero.ClientIP(p.addr, nil); got != p.host {
						errs <- fmt.Sprintf("ClientIP(%q) = %q", p.addr, got)
						return
					}
				}
				for i := range paths {
					p := paths[(i*(2*g+1)+round)%len(paths)]
					r := routes[(i+g)%len(routes)]
					m, ex := cfg.decide("POST", Path(p), r, g%2 == 1)
					wm, wex := cfg.matchSpellings("POST", []string{p}, g%2 == 1)
					if m != wm || ex != wex {
						errs <- fmt.Sprintf("decide(%q, route %q) = %+v %v, want %+v %v", p, r, m, ex, wm, wex)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

const hostileConfig = `
rate_limit:
  enabled: true
  rules:
    - name: get
      paths: ["/api/*", "/r"]
      methods: ["GET"]
      limit: "5/minute"
      weights:
        "/api/login": 3
    - name: Other
      paths: ["/Api/*/x", "/api/login/"]
      limit: "5/minute"
  default: "120/minute"
  exempt_paths: ["/static/", "/", "/a/*/b", "/Health"]
`
