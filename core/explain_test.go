package core_test

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/rlkit/rlkit/core"
)

// TestPathSpellings: Spellings lists every spelling the limiter matches,
// as Path tells them, in order: as sent, decoded per segment, decoded,
// cleaned, each followed by itself without its trailing slash; a clean
// path is its only spelling.
func TestPathSpellings(t *testing.T) {
	for _, c := range []struct {
		path string
		want []string
	}{
		{"/api/search", []string{"/api/search"}},
		{"*", []string{"*"}},
		{"/health/", []string{"/health/", "/health"}},
		{"/api//kb/%2e%2e/x%2Fy/", []string{
			"/api//kb/%2e%2e/x%2Fy/", "/api//kb/%2e%2e/x%2Fy",
			"/api//kb/../x%2Fy/", "/api//kb/../x%2Fy",
			"/api//kb/../x/y/", "/api//kb/../x/y",
			"/api/kb/%2e%2e/x%2Fy",
			"/api/x%2Fy",
			"/api/x/y",
		}},
		{"/%68ealth", []string{"/%68ealth", "/health"}},
		{"/a%252Fb", []string{"/a%252Fb", "/a%2Fb"}},
	} {
		if got := core.Path(c.path).Spellings(); !slices.Equal(got, c.want) {
			t.Errorf("Path(%q).Spellings() = %q\nwant %q", c.path, got, c.want)
		}
	}
}

const explainYAML = `rate_limit:
  enabled: true
  default: "100/minute"
  exempt_paths: ["/health", "/health/", "/static/**"]
  allow:
    identities: ["sub:ops-bot"]
    networks: ["10.1.0.0/16"]
  ban:
    networks: ["203.0.113.0/24", "2001:db8:bad::/48"]
  rules:
    - name: all
      stack: true
      paths: ["/api/**"]
      limit: "1000/hour"
      weights: {"/api/export": 3}
    - name: search
      paths: ["/api/search", "/api/Find"]
      methods: [GET]
      limit: "10/minute"
      weights: {"/api/search": 2}
    - name: api
      paths: ["/api/**"]
      limit: "60/minute"
    - name: trial
      mode: shadow
      paths: ["/api/**"]
      limit: "5/minute"
`

// TestExemptPattern: the exempt pattern that matches each spelling, its
// trailing slash counting; Exempt holds when every spelling has one.
func TestExemptPattern(t *testing.T) {
	cfg := mustLoad(t, explainYAML)
	for _, c := range []struct{ spelling, want string }{
		{"/health", "/health"},
		{"/health/", "/health/"},
		{"/static", "/static/**"},
		{"/static/a/b/", "/static/**"},
		{"/healthz", ""},
		{"/HEALTH", ""},
	} {
		got, ok := cfg.ExemptPattern(c.spelling)
		if got != c.want || ok != (c.want != "") {
			t.Errorf("ExemptPattern(%q) = %q, %v; want %q", c.spelling, got, ok, c.want)
		}
	}
	// "/x/../health" is exempt by none of its spellings but the cleaned
	// one: not exempt, as Exempt says.
	all := true
	for _, s := range core.Path("/x/../health").Spellings() {
		_, ok := cfg.ExemptPattern(s)
		all = all && ok
	}
	if all || cfg.Exempt("/x/../health") {
		t.Errorf("/x/../health: every spelling exempt %v, Exempt %v; want false, false", all, cfg.Exempt("/x/../health"))
	}
	var nilCfg *core.Config
	if _, ok := nilCfg.ExemptPattern("/health"); ok {
		t.Error("a nil Config exempts a spelling")
	}
}

// TestMatchRules: the rule that applies, the rule in shadow mode beside
// it and the stacked rules, each with its cost; MatchSpelling tells the
// pattern and cost per spelling.
func TestMatchRules(t *testing.T) {
	cfg := mustLoad(t, explainYAML)
	names := func(rules []*core.Rule, costs []int64) string {
		var b strings.Builder
		for i, r := range rules {
			b.WriteString(r.Name + "×" + string(rune('0'+costs[i])) + " ")
		}
		return strings.TrimSpace(b.String())
	}
	for _, c := range []struct {
		method, path string
		fold         bool
		want         string
	}{
		{"GET", "/api/search", false, "search×2 trial×1 all×1"},
		{"POST", "/api/search", false, "api×1 trial×1 all×1"},
		{"GET", "/api/export", false, "api×1 trial×1 all×3"},
		{"GET", "/api/x%2F..%2Fsearch", false, "search×2 trial×1 all×1"}, // the strictest of its spellings' rules
		{"GET", "/other", false, "default×1"},
		{"GET", "/API/FIND", false, "default×1"},
		{"GET", "/API/FIND", true, "search×1 trial×1 all×1"},
		{"GET", "/health", false, "default×1"}, // exempt paths aside
	} {
		if got := names(cfg.MatchRules(c.method, core.Path(c.path), c.fold)); got != c.want {
			t.Errorf("MatchRules(%s %s, fold %v) = %s, want %s", c.method, c.path, c.fold, got, c.want)
		}
		// The rule that applies is Match's.
		r, cost := cfg.Match(c.method, core.Path(c.path))
		if c.fold {
			r, cost = cfg.MatchFoldCase(c.method, core.Path(c.path))
		}
		if rules, costs := cfg.MatchRules(c.method, core.Path(c.path), c.fold); rules[0] != r || costs[0] != cost {
			t.Errorf("MatchRules(%s %s)[0] = %s %d, Match: %s %d", c.method, c.path, rules[0].Name, costs[0], r.Name, cost)
		}
	}
	search := cfg.Rule("search")
	for _, c := range []struct {
		spelling string
		fold     bool
		pattern  string
		cost     int64
	}{
		{"/api/search", false, "/api/search", 2},
		{"/api/search/", false, "/api/search", 2},
		{"/api/find", false, "", 0},
		{"/api/find", true, "/api/Find", 1},
		{"/api/SEARCH", true, "/api/search", 2},
	} {
		p, cost, ok := search.MatchSpelling(c.spelling, c.fold)
		if p != c.pattern || cost != c.cost || ok != (c.pattern != "") {
			t.Errorf("search.MatchSpelling(%q, %v) = %q %d %v; want %q %d", c.spelling, c.fold, p, cost, ok, c.pattern, c.cost)
		}
	}
	if p, cost, ok := cfg.Rule("all").MatchSpelling("/api/export", false); p != "/api/**" || cost != 3 || !ok {
		t.Errorf("all.MatchSpelling(/api/export) = %q %d %v; want /api/** 3", p, cost, ok)
	}
	if _, _, ok := cfg.Default().MatchSpelling("/other", false); ok {
		t.Error("the default rule matches a spelling by a path")
	}
	var nilCfg *core.Config
	if rules, _ := nilCfg.MatchRules("GET", "/api", false); rules != nil {
		t.Error("a nil Config matches rules")
	}
}

// TestListEntries: the ban and allow network that holds an address, and
// whether a store key is an allowed identity.
func TestListEntries(t *testing.T) {
	cfg := mustLoad(t, explainYAML)
	for _, c := range []struct {
		addr, ban, allow string
	}{
		{"203.0.113.9", "203.0.113.0/24", ""},
		{"::ffff:203.0.113.9", "203.0.113.0/24", ""},
		{"2001:db8:bad:1::5", "2001:db8:bad::/48", ""},
		{"10.1.2.3", "", "10.1.0.0/16"},
		{"192.0.2.1", "", ""},
		{"sub:alice", "", ""},
		{"", "", ""},
	} {
		got, ok := cfg.BanNetwork(c.addr)
		if ok != (c.ban != "") || ok && got != netip.MustParsePrefix(c.ban) {
			t.Errorf("BanNetwork(%q) = %v, %v; want %q", c.addr, got, ok, c.ban)
		}
		got, ok = cfg.AllowNetwork(c.addr)
		if ok != (c.allow != "") || ok && got != netip.MustParsePrefix(c.allow) {
			t.Errorf("AllowNetwork(%q) = %v, %v; want %q", c.addr, got, ok, c.allow)
		}
	}
	if !cfg.AllowsIdentity("sub:ops-bot") || cfg.AllowsIdentity("sub:alice") {
		t.Error("AllowsIdentity: want sub:ops-bot alone")
	}
	empty := mustLoad(t, "rate_limit:\n  enabled: true\n")
	if _, ok := empty.BanNetwork("203.0.113.9"); ok || empty.AllowsIdentity("sub:ops-bot") {
		t.Error("a configuration without lists bans or allows")
	}
}

func mustLoad(t *testing.T, doc string) *core.Config {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(doc), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}
