package adaptertest

import (
	"fmt"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
)

// stackConfig stacks a limit over all of /api on the routes' own limits
// and the default one.
const stackConfig = `
rate_limit:
  enabled: true
  default: "100/minute"
  rules:
    - name: global
      stack: true
      paths: ["/api/**"]
      limit: "5/minute"
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
    - name: heavy
      paths: ["/api/heavy"]
      limit: "10/minute"
      weights:
        /api/heavy: 3
`

// stackedOnRedis: the Redis store counts one request under several rules
// at once (a store.MultiTaker), so the stacked cases run over it too.
var _ store.MultiTaker = (*redisstore.Store)(nil)

const stackedOnRedis = true

// listed is the draft headers of a request counted under several rules:
// the RateLimit-Policy and RateLimit items of each (draft's), in order,
// joined by ", ".
func listed(rules ...[]string) []string {
	var policy, rate []string
	for _, d := range rules {
		policy, rate = append(policy, d[1]), append(rate, d[3])
	}
	return []string{hPolicy, strings.Join(policy, ", "), hRateLimit, strings.Join(rate, ", ")}
}

// takeAll is the store calls of one TakeAll: "takeall key rule cost" of
// each "key rule cost", joined by "; ".
func takeAll(takes ...string) string {
	return "takeall " + strings.Join(takes, "; takeall ")
}

// refusedBy marks the rules of s's TakeAll that refused its request.
func refusedBy(s step, rules ...string) step { s.refusedBy = rules; return s }

// stackReport is the handler's body in the cases that show the Decision
// it gets: its rule, whether it is allowed and whether a rule in shadow
// mode would have refused it.
func stackReport(inRequest, _ *core.Decision) string {
	if inRequest == nil {
		return "null"
	}
	return fmt.Sprintf(`{"rule":%q,"allowed":%t,"shadow_denied":%t}`, inRequest.Rule.Name, inRequest.Allowed, inRequest.ShadowDenied)
}

// stackCases check stacked rules (core.RuleSpec.Stack) through every
// adapter: a request counts under the rule that applies to it and each
// stacked rule its path matches, in one TakeAll, all or nothing; the
// headers are the most restrictive rule's (legacy) or list every rule
// counted (draft); a refusal is the refusing rule's with the longest
// Retry-After and consumes from none of them.
func stackCases() []testCase {
	var (
		search = takeAll("X-User:alice search 1", "X-User:alice global 1")
		other  = takeAll("X-User:alice default 1", "X-User:alice global 1")
	)
	searchDraft := func(r, t int) []string { return draft("search", 2, 60, r, t) }
	globalDraft := func(r, t int) []string { return draft("global", 5, 60, r, t) }
	defaultDraft := func(r, t int) []string { return draft("default", 100, 60, r, t) }
	const xff = "X-Forwarded-For"
	proxy := func(s *Setup) {
		s.ClientIP = clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	}
	from := func(ip string, h ...[]string) []string { return with(append([][]string{{xff, ip}}, h...)...) }
	return []testCase{
		{
			// search's 2 and global's 5 a minute: the most restrictive
			// decides; a refusal by either consumes from neither, nor from
			// the default.
			name:   "StackCountsBoth",
			config: stackConfig,
			redis:  stackedOnRedis,
			steps: seq(
				hit(get("/api/search", alice...), ok(listed(searchDraft(1, 60), globalDraft(4, 60))...), search),
				hit(get("/api/search", alice...), ok(listed(searchDraft(0, 60), globalDraft(3, 60))...), search),
				// Refused by search: global keeps its 3.
				hit(get("/api/search", alice...), limited("search", "60", listed(searchDraft(0, 60), globalDraft(3, 60))...), search),
				// The default and global: global decides, with fewer left.
				hit(get("/api/other", alice...), ok(listed(defaultDraft(99, 60), globalDraft(2, 60))...), other),
				hit(get("/api/other", alice...), ok(listed(defaultDraft(98, 60), globalDraft(1, 60))...), other),
				hit(do(http.MethodPost, "/api/other", alice...), ok(listed(defaultDraft(97, 60), globalDraft(0, 60))...), other),
				// Refused by global: the default keeps its 97.
				hit(get("/api/other", alice...), limited("global", "60", listed(defaultDraft(97, 60), globalDraft(0, 60))...), other),
				advance(15*time.Second),
				// Both refuse, with the same wait: the rule that applies
				// is named.
				refusedBy(hit(get("/api/search", alice...), limited("search", "45", listed(searchDraft(0, 45), globalDraft(0, 45))...), search), "search", "global"),
				hit(get("/api/other", alice...), limited("global", "45", listed(defaultDraft(97, 45), globalDraft(0, 45))...), other),
				// Outside /api: the default alone, which counted three.
				hit(get("/other", alice...), ok(defaultDraft(96, 45)...), "X-User:alice default 1"),
				// Another caller is counted apart.
				hit(get("/api/search", bob...), ok(listed(searchDraft(1, 45), globalDraft(4, 45))...), takeAll("X-User:bob search 1", "X-User:bob global 1")),
				advance(45*time.Second),
				hit(get("/api/search", alice...), ok(listed(searchDraft(1, 60), globalDraft(4, 60))...), search),
			),
		},
		{
			// heavy weighs 3 under its own rule and 1 under global (whose
			// weights are its own: none); a cost the request gives counts
			// under every rule.
			name:   "StackWeights",
			config: stackConfig,
			redis:  stackedOnRedis,
			steps: seq(
				hit(get("/api/heavy", alice...), ok(listed(draft("heavy", 10, 60, 7, 60), globalDraft(4, 60))...), takeAll("X-User:alice heavy 3", "X-User:alice global 1")),
				hit(get("/api/heavy", alice...), ok(listed(draft("heavy", 10, 60, 4, 60), globalDraft(3, 60))...), takeAll("X-User:alice heavy 3", "X-User:alice global 1")),
				hit(get("/api/heavy", alice...), ok(listed(draft("heavy", 10, 60, 1, 60), globalDraft(2, 60))...), takeAll("X-User:alice heavy 3", "X-User:alice global 1")),
				// 1 < 3 under heavy: refused, global keeps its 2.
				hit(get("/api/heavy", alice...), limited("heavy", "60", listed(draft("heavy", 10, 60, 1, 60), globalDraft(2, 60))...), takeAll("X-User:alice heavy 3", "X-User:alice global 1")),
				hit(get("/api/other", alice...), ok(listed(defaultDraft(99, 60), globalDraft(1, 60))...), other),
				hit(do(http.MethodPost, "/api/heavy", with(bob, []string{BatchHeader, "2"})...), ok(listed(draft("heavy", 10, 60, 8, 60), globalDraft(3, 60))...), takeAll("X-User:bob heavy 2", "X-User:bob global 2")),
				hit(do(http.MethodPost, "/api/heavy", with(bob, []string{BatchHeader, "4"})...), limited("global", "60", listed(draft("heavy", 10, 60, 8, 60), globalDraft(3, 60))...), takeAll("X-User:bob heavy 4", "X-User:bob global 4")),
			),
		},
		{
			// The legacy headers are the deciding rule's alone.
			name:   "StackLegacyHeaders",
			config: stackConfig + "  headers: legacy\n",
			redis:  stackedOnRedis,
			steps: seq(
				hit(get("/api/other", alice...), ok(legacy(5, 4, 60)...), other),
				hit(get("/api/search", alice...), ok(legacy(2, 1, 60)...), search),
				hit(get("/api/other", alice...), ok(legacy(5, 2, 60)...), other),
				hit(get("/api/search", alice...), ok(legacy(2, 0, 60)...), search),
				hit(get("/api/other", alice...), ok(legacy(5, 0, 60)...), other),
				advance(20*time.Second),
				// Both refuse, with the same wait: the rule that applies.
				refusedBy(hit(get("/api/search", alice...), limited("search", "40", legacy(2, 0, 40)...), search), "search", "global"),
				hit(get("/api/other", alice...), limited("global", "40", legacy(5, 0, 40)...), other),
				hit(get("/other", alice...), ok(legacy(100, 96, 40)...), "X-User:alice default 1"),
			),
		},
		{
			// A stacked limit per client IP over every path, beside a
			// search limit per user: users behind one address share it,
			// and a refusal by it takes nothing from the user's search.
			name: "StackPerIPOverPerUser",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: per-ip
      stack: true
      key: ip
      paths: ["/**"]
      limit: "3/minute"
    - name: search
      paths: ["/api/search"]
      limit: "10/minute"
`,
			setup: proxy,
			keyed: true,
			redis: stackedOnRedis,
			steps: seq(
				hit(get("/api/search", from("203.0.113.1", alice)...), ok(listed(draft("search", 10, 60, 9, 60), draft("per-ip", 3, 60, 2, 60))...), takeAll("X-User:alice search 1", "ip:203.0.113.1 per-ip 1")),
				hit(get("/api/search", from("203.0.113.1", bob)...), ok(listed(draft("search", 10, 60, 9, 60), draft("per-ip", 3, 60, 1, 60))...), takeAll("X-User:bob search 1", "ip:203.0.113.1 per-ip 1")),
				hit(get("/api/search", from("203.0.113.1")...), ok(listed(draft("search", 10, 60, 9, 60), draft("per-ip", 3, 60, 0, 60))...), takeAll("203.0.113.1 search 1", "ip:203.0.113.1 per-ip 1")),
				hit(get("/api/search", from("203.0.113.1", alice)...), limited("per-ip", "60", listed(draft("search", 10, 60, 9, 60), draft("per-ip", 3, 60, 0, 60))...), takeAll("X-User:alice search 1", "ip:203.0.113.1 per-ip 1")),
				hit(get("/api/search", from("203.0.113.2", alice)...), ok(listed(draft("search", 10, 60, 8, 60), draft("per-ip", 3, 60, 2, 60))...), takeAll("X-User:alice search 1", "ip:203.0.113.2 per-ip 1")),
				// Elsewhere: the default limit (120 a minute per user) and per-ip.
				hit(get("/elsewhere", from("203.0.113.2", alice)...), ok(listed(draft("default", 120, 60, 119, 60), draft("per-ip", 3, 60, 1, 60))...), takeAll("X-User:alice default 1", "ip:203.0.113.2 per-ip 1")),
				hit(get("/elsewhere", from("203.0.113.1", bob)...), limited("per-ip", "60", listed(draft("default", 120, 60, 120, 60), draft("per-ip", 3, 60, 0, 60))...), takeAll("X-User:bob default 1", "ip:203.0.113.1 per-ip 1")),
			),
		},
		{
			// A stacked rule in shadow mode is counted apart, after the
			// others: it refuses nothing and is in no header; the handler
			// sees that it would have refused.
			name: "StackShadow",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: global
      stack: true
      paths: ["/api/**"]
      limit: "3/minute"
    - name: probe
      stack: true
      mode: shadow
      paths: ["/api/**"]
      limit: "1/minute"
    - name: search
      paths: ["/api/search"]
      limit: "6/minute"
`,
			setup: func(s *Setup) { s.DecisionContext, s.Report = true, stackReport },
			redis: stackedOnRedis,
			logs:  []string{"WARN rlkit: shadow rule would deny"}, // once: the clock stands still
			steps: seq(
				hit(get("/api/search", alice...), reported(`{"rule":"global","allowed":true,"shadow_denied":false}`, listed(draft("search", 6, 60, 5, 60), draft("global", 3, 60, 2, 60))...),
					search+"; X-User:alice probe 1"),
				shadowDenied(hit(get("/api/search", alice...), reported(`{"rule":"global","allowed":true,"shadow_denied":true}`, listed(draft("search", 6, 60, 4, 60), draft("global", 3, 60, 1, 60))...),
					search+"; X-User:alice probe 1")),
				shadowDenied(hit(get("/api/search", alice...), reported(`{"rule":"global","allowed":true,"shadow_denied":true}`, listed(draft("search", 6, 60, 3, 60), draft("global", 3, 60, 0, 60))...),
					search+"; X-User:alice probe 1")),
				// Refused by global; the shadow rule still counts.
				shadowDenied(hit(get("/api/search", alice...), limited("global", "60", listed(draft("search", 6, 60, 3, 60), draft("global", 3, 60, 0, 60))...),
					search+"; X-User:alice probe 1")),
				// Outside /api: the default limit alone.
				hit(get("/other", alice...), reported(`{"rule":"default","allowed":true,"shadow_denied":false}`, draft("default", 120, 60, 119, 60)...), "X-User:alice default 1"),
			),
		},
		{
			// Every spelling of a path that decodes or cleans into
			// "/api/**", or is in it as sent, counts under global; a
			// router that minds case does not serve "/API/x" as "/api/x".
			name:   "StackSpellings",
			config: stackConfig,
			redis:  stackedOnRedis,
			steps: seq(
				hit(get("/api/x", alice...), ok(listed(defaultDraft(99, 60), globalDraft(4, 60))...), other),
				hit(get("/api%2Fx", alice...), ok(listed(defaultDraft(98, 60), globalDraft(3, 60))...), other),
				hit(get("/x/%2e%2e/api/y", alice...), ok(listed(defaultDraft(97, 60), globalDraft(2, 60))...), other),
				hit(get("/%61pi/z", alice...), ok(listed(defaultDraft(96, 60), globalDraft(1, 60))...), other),
				hit(get("/api//v", alice...), ok(listed(defaultDraft(95, 60), globalDraft(0, 60))...), other),
				hit(get("/api%2Fsearch", alice...), limited("global", "60", listed(searchDraft(2, 60), globalDraft(0, 60))...), search),
				hit(get("/api/x/..%2Fsearch", alice...), limited("global", "60", listed(searchDraft(2, 60), globalDraft(0, 60))...), search),
				hit(get("/API/x", alice...), ok(defaultDraft(94, 60)...), "X-User:alice default 1"),
				// "/other" decoded and cleaned; as sent, in /api.
				hit(get("/api/%2e%2e/other", alice...), limited("global", "60", listed(defaultDraft(94, 60), globalDraft(0, 60))...), other),
			),
		},
		{
			// The store fails: one TakeAll, an error event for every rule;
			// failing closed, 503.
			name:     "StackStoreDownClosed",
			config:   stackConfig + "  failure: closed\n",
			failing:  true,
			warnings: 1,
			steps: seq(
				hit(get("/api/search", alice...), unavailable(), search),
				hit(get("/api/other", alice...), unavailable(), other),
			),
		},
		{
			name:     "StackStoreDownOpen",
			config:   stackConfig,
			failing:  true,
			warnings: 1,
			steps: seq(
				hit(get("/api/search", alice...), ok(), search),
			),
		},
	}
}
