package main

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// explainFile has an exempt list, allow and ban lists, a stacked rule, a
// first rule with a weight and a burst, a later rule keyed by IP and a
// header, a rule in shadow mode, and two plans.
const explainFile = `rate_limit:
  enabled: true
  algorithm: gcra
  default: "100/minute"
  exempt_paths: ["/health", "/static/**"]
  allow:
    identities: ["sub:ops-bot"]
    networks: ["10.1.0.0/16"]
  ban:
    networks: ["203.0.113.0/24"]
  rules:
    - name: global
      stack: true
      paths: ["/api/**"]
      limit: "1000/hour"
    - name: search
      paths: ["/api/search", "/api/Find"]
      methods: [GET]
      limit: "10/minute"
      burst: 20
      weights: {"/api/search": 2}
    - name: api
      paths: ["/api/**"]
      key: ip+header:X-Tenant
      limit: "60/minute"
    - name: trial
      mode: shadow
      paths: ["/api/**"]
      limit: "5/minute"
  tiers:
    free:
      rules:
        search: "5/minute"
    pro:
      default: "1000/minute"
      rules:
        search: {limit: "100/minute", burst: 150}
`

// explain runs rlkit explain over explainFile with args and returns its
// stdout, failing unless it exits 0 and writes nothing on stderr.
func explain(t *testing.T, args ...string) string {
	t.Helper()
	dir := files(t, "rl.yaml", explainFile)
	out, errOut, code := rlkit(t, dir, append([]string{"explain", "--config", "rl.yaml"}, args...)...)
	if code != 0 || errOut != "" {
		t.Fatalf("explain %q: status %d, stderr %q; want 0 and nothing", args, code, errOut)
	}
	return out
}

// section returns section n (1 to 5) of a text report, its heading
// included, without the blank line after it.
func section(t *testing.T, out string, n int) string {
	t.Helper()
	heading := regexp.MustCompile(`(?m)^` + string(rune('0'+n)) + `\. .*$`)
	loc := heading.FindStringIndex(out)
	if loc == nil {
		t.Fatalf("no section %d in\n%s", n, out)
	}
	s := out[loc[0]:]
	if end := strings.Index(s, "\n\n"); end >= 0 {
		s = s[:end+1]
	}
	return s
}

// checkSection fails unless section n of out is want.
func checkSection(t *testing.T, out string, n int, want string) {
	t.Helper()
	if got := section(t, out, n); got != want {
		t.Errorf("section %d:\n%s\nwant\n%s", n, got, want)
	}
}

func TestExplainSpellings(t *testing.T) {
	out := explain(t, "GET", "/api//kb/%2e%2e/x%2Fy/?q=1&r=2")
	checkSection(t, out, 1, `1. Path
  query "q=1&r=2": ignored, as the limiter ignores it
  spellings the limiter matches (the request is exempt only when every one is):
    /api//kb/%2e%2e/x%2Fy/  not exempt
    /api//kb/%2e%2e/x%2Fy   not exempt
    /api//kb/../x%2Fy/      not exempt
    /api//kb/../x%2Fy       not exempt
    /api//kb/../x/y/        not exempt
    /api//kb/../x/y         not exempt
    /api/kb/%2e%2e/x%2Fy    not exempt
    /api/x%2Fy              not exempt
    /api/x/y                not exempt
  exempt: no
`)
	if !strings.HasPrefix(out, "GET /api//kb/%2e%2e/x%2Fy/?q=1&r=2 under rl.yaml\n") {
		t.Errorf("first line of\n%s\nwant the request and the file", out)
	}
}

func TestExplainExempt(t *testing.T) {
	// Every spelling exempt: nothing counted, no rate-limit header.
	out := explain(t, "GET", "/static/a/")
	checkSection(t, out, 1, `1. Path
  spellings the limiter matches (the request is exempt only when every one is):
    /static/a/  exempt by "/static/**"
    /static/a   exempt by "/static/**"
  exempt: yes
`)
	if !strings.Contains(section(t, out, 3), "\n  none counts this request (the path is exempt); were it counted:\n") {
		t.Errorf("section 3 does not say that nothing counts:\n%s", section(t, out, 3))
	}
	checkSection(t, out, 4, `4. Store keys
  nothing counted: the path is exempt
  default: key user (nothing counted)
`)
	checkSection(t, out, 5, `5. First request (a fresh memory store, clock at 2026-01-01T00:00:00Z)
  status 200: passed to the handler
`)
	// One spelling exempt, the other not: counted under the default.
	out = explain(t, "GET", "/health/")
	checkSection(t, out, 1, `1. Path
  spellings the limiter matches (the request is exempt only when every one is):
    /health/  not exempt
    /health   exempt by "/health"
  exempt: no
`)
	checkSection(t, out, 5, `5. First request (a fresh memory store, clock at 2026-01-01T00:00:00Z)
  status 200: passed to the handler
  RateLimit: "default";r=99;t=1
  RateLimit-Policy: "default";q=100;w=60
`)
}

func TestExplainBanned(t *testing.T) {
	// Banned on an exempt path too: the ban comes first.
	out := explain(t, "--ip", "203.0.113.77", "GET", "/health")
	checkSection(t, out, 2, `2. Caller
  client IP   203.0.113.77
  identity    203.0.113.77 (the client IP: no key function names the caller; --identity gives one)
  store key   203.0.113.77 (Limiter.Key of the identity)
  plan        none (--plan gives one)
  banned      yes: ban.networks 203.0.113.0/24; refused with 403 before anything else, exempt paths included
  allowed     no
`)
	checkSection(t, out, 5, `5. First request (a fresh memory store, clock at 2026-01-01T00:00:00Z)
  status 403: refused
  body {"detail": "Forbidden"}
`)
}

func TestExplainAllowed(t *testing.T) {
	for _, c := range []struct {
		args []string
		line string
	}{
		{[]string{"--ip", "10.1.200.3"}, "  allowed     yes: allow.networks 10.1.0.0/16; passes uncounted\n"},
		{[]string{"--identity", "sub:ops-bot"}, "  allowed     yes: allow.identities \"sub:ops-bot\"; passes uncounted\n"},
		{[]string{"--bypass"}, "  allowed     yes: the application's bypass predicate (--bypass); passes uncounted\n"},
		{[]string{"--bypass", "--ip", "203.0.113.1"}, "  allowed     by the application's bypass predicate (--bypass), but the ban comes first\n"},
	} {
		out := explain(t, append(c.args, "GET", "/api/search")...)
		if !strings.Contains(section(t, out, 2), c.line) {
			t.Errorf("%q: section 2\n%s\nlacks %q", c.args, section(t, out, 2), c.line)
		}
		banned := slices.Contains(c.args, "203.0.113.1")
		want := "  status 200: passed to the handler\n"
		if banned {
			want = "  status 403: refused\n"
		}
		if s := section(t, out, 5); !strings.HasSuffix(s, ")\n"+want) && !strings.Contains(s, ")\n"+want+"  body") {
			t.Errorf("%q: section 5\n%s\nwant %q and no rate-limit header", c.args, s, want)
		}
		if !banned && !strings.Contains(section(t, out, 4), "nothing counted: the caller is allowed\n") {
			t.Errorf("%q: section 4\n%s\nwant nothing counted", c.args, section(t, out, 4))
		}
	}
	if out := explain(t, "--identity", "sub:alice", "GET", "/api/search"); !strings.Contains(section(t, out, 2), "  identity    sub:alice (--identity)\n  store key   sub:alice (Limiter.Key of the identity)\n") {
		t.Errorf("--identity sub:alice: section 2\n%s", section(t, out, 2))
	}
}

func TestExplainRules(t *testing.T) {
	// The first match, with its weight, then the rule in shadow mode and
	// the stacked rule beside it.
	out := explain(t, "GET", "/api/search")
	checkSection(t, out, 3, `3. Rules
  search: applies, the first rule in order that a spelling matches
    matches     /api/search by "/api/search", cost 2
    limits      gcra 10/minute burst 20
    plans       free: gcra 5/minute; pro: gcra 100/minute burst 150
    count       all (every request, before the handler)
    concurrent  none
    wait        none
    mode        enforce
    consistency exact: one store call per decision
    key         user
  trial: in shadow mode, counted beside the rule that applies: denies nothing
    matches     /api/search by "/api/**", cost 1
    limits      gcra 5/minute
    plans       free: gcra 5/minute; pro: gcra 5/minute
    count       all (every request, before the handler)
    concurrent  none
    wait        none
    mode        shadow: counts and reports, denies nothing
    consistency exact: one store call per decision
    key         user
  global: stacked, counted beside the rule that applies
    matches     /api/search by "/api/**", cost 1
    limits      gcra 1000/hour
    plans       free: gcra 1000/hour; pro: gcra 1000/hour
    count       all (every request, before the handler)
    concurrent  none
    wait        none
    mode        enforce
    consistency exact: one store call per decision
    key         user
`)
	// Both counted rules in the headers, each under its own name.
	checkSection(t, out, 5, `5. First request (a fresh memory store, clock at 2026-01-01T00:00:00Z)
  status 200: passed to the handler
  RateLimit: "search";r=18;t=12, "global";r=999;t=4
  RateLimit-Policy: "search";q=10;w=60, "global";q=1000;w=3600
`)
	// POST is not search's: the later rule, keyed by IP and header.
	out = explain(t, "-H", "X-Tenant: acme", "POST", "/api/search")
	if s := section(t, out, 3); !strings.HasPrefix(s, `3. Rules
  api: applies, the first rule in order that a spelling matches
    matches     /api/search by "/api/**", cost 1
`) || !strings.Contains(s, "    key         ip+header:X-Tenant\n") {
		t.Errorf("POST /api/search: section 3\n%s", s)
	}
	checkSection(t, out, 4, `4. Store keys
  api: key ip+header:X-Tenant → ip:192.0.2.1|h:X-Tenant:hmac:10331cd12cd90b4fa17ce29f4a2a3b1e
    redis  rl:{ip%3A192.0.2.1%7Ch%3AX-Tenant%3Ahmac%3A10331cd12cd90b4fa17ce29f4a2a3b1e}:api@1e40f914e66b2b10
  trial: key user → 192.0.2.1
    redis  rl:{192.0.2.1}:trial@e1fd6e329a8c557c
  global: key user → 192.0.2.1
    redis  rl:{192.0.2.1}:global@7e680189d02069b4
  (redis: the default prefix rl:; a fixed window's key ends in its window, a calendar limit's in
   its period, as of now. The memory store keeps no key names, only their hashes.)
`)
	// No rule's paths: the default.
	out = explain(t, "GET", "/other")
	if s := section(t, out, 3); !strings.HasPrefix(s, `3. Rules
  default: applies, no rule matches: the default limit
    matches     no rule's paths (the default limit)
    cost        1
    limits      gcra 100/minute
    plans       free: gcra 100/minute; pro: gcra 1000/minute
`) {
		t.Errorf("GET /other: section 3\n%s", s)
	}
	// Without regard to case, "/API/FIND" is search's: noted.
	out = explain(t, "GET", "/API/FIND")
	if !strings.Contains(section(t, out, 1), "\n  behind a router that matches paths without regard to case (Fiber's default, Flow.FoldCase) it counts under search (cost 1), trial (cost 1), global (cost 1) instead\n") {
		t.Errorf("GET /API/FIND: section 1\n%s\nwant the rules with case folded", section(t, out, 1))
	}
	if strings.Contains(section(t, explain(t, "GET", "/api/search"), 1), "without regard to case") {
		t.Error("GET /api/search: case folding noted, though it changes nothing")
	}
}

func TestExplainPlans(t *testing.T) {
	out := explain(t, "--plan", "pro", "GET", "/api/search")
	if !strings.Contains(section(t, out, 2), "\n  plan        pro\n") ||
		!strings.Contains(section(t, out, 3), "\n    plans       free: gcra 5/minute; pro: gcra 100/minute burst 150 (selected by --plan)\n") {
		t.Errorf("--plan pro:\n%s", out)
	}
	checkSection(t, out, 5, `5. First request (a fresh memory store, clock at 2026-01-01T00:00:00Z)
  status 200: passed to the handler
  RateLimit: "search";r=148;t=2, "global";r=999;t=4
  RateLimit-Policy: "search";q=100;w=60, "global";q=1000;w=3600
`)
	if s := section(t, out, 4); !strings.Contains(s, "\n    redis  rl:{192.0.2.1}:search@pro@") {
		t.Errorf("--plan pro: section 4\n%s\nwant the plan's counters", s)
	}
	// An unknown plan counts under the rules' own limits.
	out = explain(t, "-plan", "gold", "GET", "/api/search")
	if !strings.Contains(section(t, out, 2), "\n  plan        \"gold\": not a plan of the file (free, pro): counts under the rules' own limits, as the limiter does\n") ||
		strings.Contains(out, "selected by --plan") {
		t.Errorf("--plan gold:\n%s", out)
	}
	if s := section(t, out, 5); !strings.Contains(s, `RateLimit-Policy: "search";q=10;w=60, "global";q=1000;w=3600`) {
		t.Errorf("--plan gold: section 5\n%s\nwant the rule's own limits", s)
	}
}

func TestExplainLegacyHeaders(t *testing.T) {
	dir := files(t, "legacy.yaml", "rate_limit:\n  enabled: true\n  headers: legacy\n  default: \"30/minute\"\n")
	out, _, code := rlkit(t, dir, "explain", "-config", "legacy.yaml", "DELETE", "/x")
	if code != 0 {
		t.Fatalf("status %d", code)
	}
	checkSection(t, out, 5, `5. First request (a fresh memory store, clock at 2026-01-01T00:00:00Z)
  status 200: passed to the handler
  X-RateLimit-Limit: 30
  X-RateLimit-Remaining: 29
  X-RateLimit-Reset: 60
`)
	checkSection(t, out, 4, `4. Store keys
  default: key user → 192.0.2.1
    redis  rl:{192.0.2.1}:default@`+strings.TrimPrefix(regexp.MustCompile(`default@[0-9a-f]{16}:[0-9]+`).FindString(out), "default@")+`
  (redis: the default prefix rl:; a fixed window's key ends in its window, a calendar limit's in
   its period, as of now. The memory store keeps no key names, only their hashes.)
`)
}

func TestExplainJSON(t *testing.T) {
	out := explain(t, "--format", "json", "--plan", "pro", "-H", "X-Tenant: acme", "-H", "Accept: a, b", "GET", "/api/search/?q=1")
	var rep report
	dec := json.NewDecoder(strings.NewReader(out))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("stdout is not the report: %v\n%s", err, out)
	}
	// The documented field names, decoded apart from the program's own
	// types.
	var raw struct {
		Top   map[string]json.RawMessage
		Rules []map[string]json.RawMessage `json:"rules"`
		Resp  map[string]json.RawMessage   `json:"response"`
	}
	if err := json.Unmarshal([]byte(out), &raw.Top); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(raw.Top["rules"], &raw.Rules)
	_ = json.Unmarshal(raw.Top["response"], &raw.Resp)
	keys := func(m map[string]json.RawMessage) string {
		var k []string
		for name := range m {
			k = append(k, name)
		}
		slices.Sort(k)
		return strings.Join(k, " ")
	}
	for _, c := range []struct{ got, want string }{
		{keys(raw.Top), "caller config enabled exempt lists request response rules spellings"},
		{keys(raw.Rules[0]), "algorithm concurrent consistency cost count default key largest_block lease_block limits matched_pattern matches name outcome plan plans redis_keys role shadow spelling stacked store_key timezone wait window"},
		{keys(raw.Resp), "body handler headers status"},
	} {
		if c.got != c.want {
			t.Errorf("JSON fields %q, want %q", c.got, c.want)
		}
	}
	if rep.Config != "rl.yaml" || !rep.Enabled || rep.Exempt {
		t.Errorf("config %q, enabled %v, exempt %v", rep.Config, rep.Enabled, rep.Exempt)
	}
	if q := rep.Request; q.Method != "GET" || q.Path != "/api/search/" || q.RouterPath != "/api/search/" || q.Query != "q=1" ||
		!slices.Equal(q.Headers["X-Tenant"], []string{"acme"}) || !slices.Equal(q.Headers["Accept"], []string{"a, b"}) {
		t.Errorf("request = %+v", q)
	}
	if want := []spelling{{Spelling: "/api/search/"}, {Spelling: "/api/search"}}; !slices.Equal(rep.Spellings, want) {
		t.Errorf("spellings = %+v, want %+v", rep.Spellings, want)
	}
	if want := (caller{IP: "192.0.2.1", ClientIP: "192.0.2.1", Identity: "192.0.2.1", IdentitySource: "client_ip", StoreKey: "192.0.2.1", Plan: "pro", PlanKnown: true}); rep.Caller != want {
		t.Errorf("caller = %+v, want %+v", rep.Caller, want)
	}
	if rep.Lists != (lists{}) || rep.FoldCase != nil {
		t.Errorf("lists = %+v, fold_case = %+v; want none", rep.Lists, rep.FoldCase)
	}
	if len(rep.Rules) != 3 {
		t.Fatalf("%d rules, want search, trial, global: %+v", len(rep.Rules), rep.Rules)
	}
	s := rep.Rules[0]
	if s.Name != "search" || s.Role != "applies" || s.Stacked || s.Shadow || s.Default || s.MatchedPattern != "/api/search" || s.Spelling != "/api/search" || s.Cost != 2 ||
		s.Algorithm != "gcra" || s.Window != "" || s.Plan != "pro" || s.Count != "all" || s.Concurrent != 0 || s.Wait != "" || s.Key != "user" ||
		s.StoreKey != "192.0.2.1" || s.Outcome != "allowed" {
		t.Errorf("rules[0] = %+v", s)
	}
	if want := []match{{Spelling: "/api/search", Pattern: "/api/search", Cost: 2}}; !slices.Equal(s.Matches, want) {
		t.Errorf("rules[0].matches = %+v, want %+v", s.Matches, want)
	}
	if want := []limit{{Limit: "10/minute burst 20", Count: 10, Period: 60, Burst: 20}}; !slices.Equal(s.Limits, want) {
		t.Errorf("rules[0].limits = %+v, want %+v", s.Limits, want)
	}
	if len(s.Plans) != 2 || !slices.Equal(s.Plans["free"], []limit{{Limit: "5/minute", Count: 5, Period: 60}}) ||
		!slices.Equal(s.Plans["pro"], []limit{{Limit: "100/minute burst 150", Count: 100, Period: 60, Burst: 150}}) {
		t.Errorf("rules[0].plans = %+v", s.Plans)
	}
	if len(s.RedisKeys) != 1 || !regexp.MustCompile(`^rl:\{192\.0\.2\.1\}:search@pro@[0-9a-f]{16}$`).MatchString(s.RedisKeys[0]) {
		t.Errorf("rules[0].redis_keys = %q", s.RedisKeys)
	}
	if r := rep.Rules[1]; r.Name != "trial" || r.Role != "shadow" || !r.Shadow || r.Stacked || r.MatchedPattern != "/api/**" || r.Outcome != "allowed" {
		t.Errorf("rules[1] = %+v", r)
	}
	if r := rep.Rules[2]; r.Name != "global" || r.Role != "stacked" || !r.Stacked || r.Shadow || r.MatchedPattern != "/api/**" || r.Cost != 1 ||
		r.StoreKey != "192.0.2.1" || r.Plan != "pro" || !slices.Equal(r.Plans["pro"], []limit{{Limit: "1000/hour", Count: 1000, Period: 3600}}) {
		t.Errorf("rules[2] = %+v", r)
	}
	want := map[string][]string{
		"RateLimit":        {`"search";r=148;t=2, "global";r=999;t=4`},
		"RateLimit-Policy": {`"search";q=100;w=60, "global";q=1000;w=3600`},
	}
	if r := rep.Response; r.Status != 200 || !r.Handler || r.Body != "" || r.Error != "" || len(r.Headers) != len(want) ||
		!slices.Equal(r.Headers["RateLimit"], want["RateLimit"]) || !slices.Equal(r.Headers["RateLimit-Policy"], want["RateLimit-Policy"]) {
		t.Errorf("response = %+v, want 200 with %v", r, want)
	}

	// A banned caller: the lists, and a 403 whose body is shown.
	out = explain(t, "-format=json", "-ip", "203.0.113.9", "GET", "/api/search")
	rep = report{}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Lists != (lists{Banned: true, BanNetwork: "203.0.113.0/24"}) || rep.Response.Status != 403 || rep.Response.Handler ||
		rep.Response.Body != `{"detail": "Forbidden"}` || len(rep.Response.Headers) != 0 || rep.Rules[0].StoreKey != "" || len(rep.Rules[0].RedisKeys) != 0 {
		t.Errorf("banned: lists %+v, response %+v, rules[0] %+v", rep.Lists, rep.Response, rep.Rules[0])
	}
}

func TestExplainUsage(t *testing.T) {
	dir := files(t, "rl.yaml", explainFile)
	for _, c := range []struct {
		args []string
		msg  string // in stderr
	}{
		{[]string{"explain", "--config", "rl.yaml"}, "expected"},
		{[]string{"explain", "--config", "rl.yaml", "GET"}, "<path>"},
		{[]string{"explain", "GET", "/x"}, "--config"},
		{[]string{"explain", "--config", "rl.yaml", "GET", "api/search"}, `path "api/search" must start with '/'`},
		{[]string{"explain", "--config", "rl.yaml", "-H", "X-Tenant acme", "GET", "/x"}, `-H "X-Tenant acme" is not a header`},
		{[]string{"explain", "--config", "rl.yaml", "-H", "Bad Name: v", "GET", "/x"}, `-H "Bad Name: v" is not a header`},
		{[]string{"explain", "--config", "rl.yaml", "--ip", "300.1.1.1", "GET", "/x"}, `--ip "300.1.1.1" is not an IP address`},
		{[]string{"explain", "--config", "rl.yaml", "--ip", "fe80::1%eth0", "GET", "/x"}, `--ip "fe80::1%eth0" has a zone (%eth0)`},
		{[]string{"explain", "--config", "rl.yaml", "G(E)T", "/x"}, `method "G(E)T" is not an HTTP method`},
		{[]string{"explain", "--config", "rl.yaml", "", "/x"}, `method "" is not an HTTP method`},
		{[]string{"explain", "--config", "rl.yaml", "--format", "xml", "GET", "/x"}, "xml"},
		{[]string{"explain", "--config", "rl.yaml", "--identity", "a", "--key-header", "X-Api-Key", "GET", "/x"}, "--identity and --key-header can't be used together"},
		{[]string{"explain", "--config", "rl.yaml", "--key-header", "X Api", "GET", "/x"}, `--key-header "X Api" is not a header name`},
		{[]string{"explain", "--config", "rl.yaml", "--identity-key-env", "RLKIT_TEST_UNSET_VARIABLE", "GET", "/x"}, "--identity-key-env RLKIT_TEST_UNSET_VARIABLE: the variable is empty or not set"},
	} {
		out, errOut, code := rlkit(t, dir, c.args...)
		if code != 2 || out != "" || !strings.HasPrefix(errOut, "rlkit: ") || !strings.Contains(errOut, c.msg) {
			t.Errorf("rlkit %q: status %d, stdout %q, stderr %q; want 2 and an error naming %q", c.args, code, out, errOut, c.msg)
		}
	}
}

func TestExplainConfigError(t *testing.T) {
	dir := files(t, "bad.yaml", twoErrors)
	out, errOut, code := rlkit(t, dir, "explain", "--config", "bad.yaml", "GET", "/api")
	want := `bad.yaml:7:14: rule "api": field "limit": value "ten/minute": limit "ten/minute": count "ten" is not a positive integer
bad.yaml:8:14: rule "api": field "burst": value "-3": burst applies to token_bucket and gcra only, not fixed_window
`
	if code != 1 || out != "" || errOut != want {
		t.Errorf("explain bad.yaml: status %d, stdout %q, stderr\n%s\nwant 1 and\n%s", code, out, errOut, want)
	}
	out, errOut, code = rlkit(t, dir, "explain", "--config", "missing.yaml", "GET", "/api")
	if code != 1 || out != "" || errOut != "missing.yaml: no such file or directory\n" {
		t.Errorf("explain missing.yaml: status %d, stdout %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = rlkit(t, dir, "explain", "--config", ".", "GET", "/api")
	if code != 1 || out != "" || errOut != ".: is a directory, not a regular file\n" {
		t.Errorf("explain --config .: status %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// TestExplainUnparsablePath: a path net/http refuses is still explained,
// its request not sent.
func TestExplainUnparsablePath(t *testing.T) {
	out := explain(t, "GET", "/api/%zz")
	if !strings.Contains(section(t, out, 1), "    /api/%zz  not exempt\n") {
		t.Errorf("section 1\n%s", section(t, out, 1))
	}
	if s := section(t, out, 5); !strings.Contains(s, "\n  not sent: net/http refuses this path before any middleware runs (400 Bad Request): invalid URL escape \"%zz\"\n") {
		t.Errorf("section 5\n%s", s)
	}
}

// TestExplainRequestLine: a request whose request line net/http's
// server refuses with 400 (a raw space in the path or the query, a
// control character in the query, a line break) is not sent, and the
// report says why, as for a path net/http cannot parse; a space written
// %20 is sent.
func TestExplainRequestLine(t *testing.T) {
	const refused = "\n  not sent: net/http refuses this path before any middleware runs (400 Bad Request): "
	for _, c := range []struct{ target, why string }{
		{"/api/a b", `in the request line "GET /api/a b HTTP/1.1": malformed HTTP version "b HTTP/1.1"`},
		{"/api/search?q=a b", `in the request line "GET /api/search?q=a b HTTP/1.1": malformed HTTP version "b HTTP/1.1"`},
		{"/api/search?q=\x01", `net/url: invalid control character in URL`},
		{"/api/search?q=1 HTTP/1.1\r\nX-Evil: 1", `a line break ends the request line, whose path net/http reads as "/api/search?q=1"`},
		{"/api/a\x01 b", `in the request line "GET /api/a\x01 b HTTP/1.1": malformed HTTP version "b HTTP/1.1"`}, // escaped once
	} {
		out := explain(t, "GET", c.target)
		if s := section(t, out, 5); !strings.HasPrefix(s, "5. First request") || !strings.Contains(s, refused+c.why+"\n") {
			t.Errorf("GET %q: section 5\n%s\nwant it to say: %s", c.target, s, c.why)
		}
		if s := section(t, out, 4); !strings.Contains(s, "\n  nothing counted: net/http refuses the path with 400 before the limiter sees it\n") {
			t.Errorf("GET %q: section 4\n%s", c.target, s)
		}
		var rep report
		if err := json.Unmarshal([]byte(explain(t, "--format", "json", "GET", c.target)), &rep); err != nil || rep.Response.Status != 0 || rep.Response.Handler || !strings.HasSuffix(rep.Response.Error, ": "+c.why) {
			t.Errorf("GET %q as JSON: %v, response %+v; want status 0 and the error", c.target, err, rep.Response)
		}
	}
	if s := section(t, explain(t, "GET", "/api/a%20b"), 5); !strings.Contains(s, "\n  status 200: passed to the handler\n") {
		t.Errorf("GET /api/a%%20b: section 5\n%s", s)
	}
}

// TestExplainUnparsablePathCountsNothing: sections 3 and 4 say why no
// rule counts a path net/http refuses.
func TestExplainUnparsablePathCountsNothing(t *testing.T) {
	out := explain(t, "GET", "/api/%zz")
	why := "net/http refuses the path with 400 before the limiter sees it"
	if s := section(t, out, 3); !strings.Contains(s, "\n  none counts this request ("+why+")") {
		t.Errorf("section 3\n%s", s)
	}
	if s := section(t, out, 4); !strings.Contains(s, "\n  nothing counted: "+why+"\n") {
		t.Errorf("section 4\n%s", s)
	}
}

// TestExplainNotCountedByOutcome: a rule counting failures counts a
// first request the handler answers 200 at cost 0, so no key is shown.
func TestExplainNotCountedByOutcome(t *testing.T) {
	dir := files(t, "f.yaml", `rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      count: failures
      limit: "5/minute"
`)
	out, errOut, code := rlkit(t, dir, "explain", "--config", "f.yaml", "POST", "/login")
	if code != 0 || errOut != "" {
		t.Fatalf("status %d, stderr %q", code, errOut)
	}
	checkSection(t, out, 4, "4. Store keys\n  login: key user (nothing counted)\n")
	out, _, _ = rlkit(t, dir, "explain", "--config", "f.yaml", "--format", "json", "POST", "/login")
	var rep struct {
		Rules []struct {
			StoreKey  string   `json:"store_key"`
			RedisKeys []string `json:"redis_keys"`
		} `json:"rules"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil || len(rep.Rules) != 1 || rep.Rules[0].StoreKey != "" || len(rep.Rules[0].RedisKeys) != 0 {
		t.Errorf("json rules %+v (%v); want one rule with no store key and no Redis keys", rep.Rules, err)
	}
}

// TestExplainBanWhenOff: with limiting off the lists do not apply, so a
// banned network is not reported as refused.
func TestExplainBanWhenOff(t *testing.T) {
	dir := files(t, "off.yaml", strings.Replace(explainFile, "enabled: true", "enabled: false", 1))
	out, errOut, code := rlkit(t, dir, "explain", "--config", "off.yaml", "--ip", "203.0.113.9", "GET", "/api/search")
	if code != 0 || errOut != "" || !strings.Contains(section(t, out, 2), "\n  banned      no\n") {
		t.Errorf("status %d, stderr %q, section 2\n%s", code, errOut, section(t, out, 2))
	}
}

// TestExplainPrintable: control bytes of a path are written \xNN, and a
// lowercase method gets a note on stderr.
func TestExplainPrintable(t *testing.T) {
	dir := files(t, "rl.yaml", explainFile)
	out, errOut, code := rlkit(t, dir, "explain", "--config", "rl.yaml", "get", "/a\x1b[31mRED")
	if code != 0 || strings.ContainsRune(out, 0x1b) || !strings.HasPrefix(out, "get /a\\x1b[31mRED under rl.yaml\n") {
		t.Errorf("status %d, stdout starts %q", code, out[:min(len(out), 80)])
	}
	if errOut != "rlkit: explain: note: methods are case-sensitive, as net/http and the rules' methods read them: \"get\" is not GET\n" {
		t.Errorf("stderr %q", errOut)
	}
}

// TestExplainPrintableUTF8: the text report writes each byte of invalid
// UTF-8 (the path /api/%ff has the spelling /api/ and the byte 0xff) and of a C1
// control character (U+009B, a terminal's CSI) as \xNN, a backslash
// doubled, printable UTF-8 as it is; a quoted value is quoted once
// (strconv.Quote), its escapes not doubled; columns stay aligned.
func TestExplainPrintableUTF8(t *testing.T) {
	out := explain(t, "--identity", "bob\u009b31m\\é", "GET", `/api/%ff/é?q="x\y"`)
	if !utf8.ValidString(out) || strings.ContainsAny(out, "\u009b\x1b") {
		t.Errorf("the report holds invalid UTF-8 or a control character:\n%s", out)
	}
	checkSection(t, out, 1, `1. Path
  query "q=\"x\\y\"": ignored, as the limiter ignores it
  spellings the limiter matches (the request is exempt only when every one is):
    /api/%ff/é   not exempt
    /api/\xff/é  not exempt
  exempt: no
`)
	if s := section(t, out, 2); !strings.Contains(s, "\n  identity    bob\\xc2\\x9b31m\\\\é (--identity)\n") {
		t.Errorf("section 2\n%s", s)
	}
	if !strings.HasPrefix(out, `GET /api/%ff/é?q="x\\y" under rl.yaml`+"\n") {
		t.Errorf("first line %q", out[:strings.IndexByte(out, '\n')])
	}
	// JSON as encoding/json writes it.
	var rep report
	if err := json.Unmarshal([]byte(explain(t, "--format", "json", "--identity", "bob\u009b31m", "GET", "/api/%ff")), &rep); err != nil || rep.Caller.Identity != "bob\u009b31m" || len(rep.Spellings) != 2 || rep.Spellings[1].Spelling != "/api/\ufffd" {
		t.Errorf("JSON: %v, identity %q, spellings %+v", err, rep.Caller.Identity, rep.Spellings)
	}
}

// TestExplainDocsExample runs the example of docs/cli.md and requires
// the output printed there.
func TestExplainDocsExample(t *testing.T) {
	data, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	_, doc, ok := strings.Cut(string(data), "\n## rlkit explain\n")
	if !ok {
		t.Fatal("docs/cli.md has no rlkit explain section")
	}
	_, doc, _ = strings.Cut(doc, "\n### An example run\n")
	block := func(fence string) string {
		_, rest, ok := strings.Cut(doc, "\n```"+fence+"\n")
		body, _, closed := strings.Cut(rest, "\n```\n")
		if !ok || !closed {
			t.Fatalf("no ```%s block in the example", fence)
		}
		return body + "\n"
	}
	file, console := block("yaml"), block("console")
	cmdline, want, _ := strings.Cut(console, "\n")
	var args []string
	for i, part := range strings.Split(strings.TrimPrefix(cmdline, "$ rlkit "), "'") {
		if i%2 == 1 {
			args = append(args, part) // quoted
		} else {
			args = append(args, strings.Fields(part)...)
		}
	}
	out, errOut, code := rlkit(t, files(t, "ratelimit.yaml", file), args...)
	if code != 0 || errOut != "" || out != want {
		t.Errorf("rlkit %q: status %d, stderr %q, stdout\n%s\nwant (docs/cli.md)\n%s", args, code, errOut, out, want)
	}
}

// TestExplainLease: a rule in lease mode says so, with its largest block,
// in the text and in JSON.
func TestExplainLease(t *testing.T) {
	dir := files(t, "rl.yaml", `rate_limit:
  enabled: true
  consistency: lease
  lease_block: 50
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "100/minute"
`)
	out, errOut, code := rlkit(t, dir, "explain", "--config", "rl.yaml", "GET", "/api/search")
	if want := "    consistency lease: blocks of at most 12 units per process and key (lease_block 50, an eighth of the capacity)\n"; code != 0 || errOut != "" || !strings.Contains(section(t, out, 3), want) {
		t.Errorf("status %d, stderr %q, section 3\n%s\nwant %q", code, errOut, section(t, out, 3), want)
	}
	out, _, _ = rlkit(t, dir, "explain", "--config", "rl.yaml", "--format", "json", "GET", "/api/search")
	if !strings.Contains(out, `"consistency": "lease"`) || !strings.Contains(out, `"lease_block": 50`) || !strings.Contains(out, `"largest_block": 12`) {
		t.Errorf("JSON has no consistency lease, lease_block 50 and largest_block 12:\n%s", out)
	}
	// Under a stacked rule the request is taken in one store call.
	stacked := files(t, "rl.yaml", `rate_limit:
  enabled: true
  consistency: lease
  rules:
    - name: all
      paths: ["/api/**"]
      limit: "1000/hour"
      stack: true
    - name: search
      paths: ["/api/search"]
      limit: "100/minute"
`)
	out, _, _ = rlkit(t, stacked, "explain", "--config", "rl.yaml", "GET", "/api/search")
	if want := "    consistency lease, but this request counts under stacked rules too: all of them are taken in one store call\n"; !strings.Contains(section(t, out, 3), want) {
		t.Errorf("section 3\n%s\nwant %q", section(t, out, 3), want)
	}
}

// TestExplainKeyHeader: with --key-header the caller is the value of the
// header -H gives, kept as its keyed hash under the identity key that
// --identity-key-env names (the built-in one without it), and under a
// rule keyed by the header too, and shown so in the request's headers; a
// request without the header counts under its client IP, as HeaderKey
// counts it.
func TestExplainKeyHeader(t *testing.T) {
	dir := files(t, "rl.yaml", "rate_limit:\n  enabled: true\n  default: 10/second\n  rules:\n    - name: api\n      paths: [\"/api/**\"]\n      limit: 5/second\n      key: header:X-Api-Key\n")
	// HMAC-SHA256 of "secret", its first 32 hex digits, under the key
	// "abc" and under the built-in key.
	const underABC, underBuiltIn = "de9f2ed5807a42c9a747c49428ab2c85", "408f64e22cda0996be3ce0ce9ea97b81"
	t.Setenv("SERVICE_KEY", "abc")
	for _, c := range []struct {
		args           []string
		source, caller string
	}{
		{[]string{"--identity-key-env", "SERVICE_KEY", "--key-header", "x-api-key", "-H", "X-Api-Key: secret"}, "key_header", "X-Api-Key:hmac:" + underABC},
		{[]string{"--key-header", "X-Api-Key", "-H", "X-Api-Key: secret"}, "key_header", "X-Api-Key:hmac:" + underBuiltIn},
		{[]string{"--identity-key-env", "SERVICE_KEY", "-H", "X-Api-Key: secret"}, "client_ip", "192.0.2.1"},
		{[]string{"--key-header", "X-Api-Key"}, "client_ip", "192.0.2.1"},
	} {
		out, errOut, code := rlkit(t, dir, append(append([]string{"explain", "--config", "rl.yaml", "--format", "json"}, c.args...), "GET", "/api/x")...)
		if code != 0 {
			t.Fatalf("explain %q: status %d, stderr %s", c.args, code, errOut)
		}
		var rep report
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if slices.Contains(c.args, "--key-header") && strings.Contains(out, `"secret"`) {
			t.Errorf("explain %q: the JSON report shows the API key:\n%s", c.args, out)
		}
		ruleKey := "ip:192.0.2.1"
		if strings.Contains(strings.Join(c.args, " "), "secret") {
			ruleKey = "h:X-Api-Key:hmac:" + underBuiltIn
			if c.args[0] == "--identity-key-env" {
				ruleKey = "h:X-Api-Key:hmac:" + underABC
			}
		}
		if rep.Caller.IdentitySource != c.source || rep.Caller.StoreKey != c.caller || rep.Caller.Identity != c.caller || len(rep.Rules) != 1 || rep.Rules[0].StoreKey != ruleKey {
			t.Errorf("explain %q: caller %+v, rules %+v; want %s %s, the rule's key %s", c.args, rep.Caller, rep.Rules, c.source, c.caller, ruleKey)
		}
	}
	out, _, _ := rlkit(t, dir, "explain", "--config", "rl.yaml", "--key-header", "X-Api-Key", "-H", "X-Api-Key: secret", "GET", "/api/x")
	if want := "identity    the value of X-Api-Key (--key-header), a secret kept as its keyed hash"; !strings.Contains(out, want) || strings.Contains(out, "secret\n") {
		t.Errorf("the text report lacks %q, or shows the secret:\n%s", want, out)
	}
}
