package adaptertest

import (
	"fmt"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/clientip"
)

// The answer to a request from a banned network.
func forbidden() want {
	const body = `{"detail": "Forbidden"}`
	return want{http.StatusForbidden, headers(nil, hType, jsonType, hLength, strconv.Itoa(len(body))), body}
}

// banned is a step refused as from a banned network: no store call, one
// banned event.
func banned(r req) step {
	return step{req: r, want: forbidden(), counted: func(takes []string, events []core.Event) string {
		if len(takes) != 0 || len(events) != 1 || events[0] != (core.Event{Outcome: core.OutcomeBanned}) {
			return fmt.Sprintf("store calls %q, events %+v; want none and one banned event", takes, events)
		}
		return ""
	}}
}

// headBanned is banned for a HEAD request: the same headers, no body.
func headBanned(s step) step { s.want.body = ""; return s }

// penalized is a step whose store calls are takes ("key policy cost",
// joined by "; ", the penalty's policies among them) and whose one
// observer event has outcome o under rule for key.
func penalized(r req, w want, takes, rule, key string, o core.Outcome) step {
	return step{req: r, want: w, counted: func(got []string, events []core.Event) string {
		if !slices.Equal(got, strings.Split(takes, "; ")) {
			return fmt.Sprintf("store calls %q, want %q", got, takes)
		}
		if len(events) != 1 || events[0].Outcome != o || events[0].Rule != rule || hashed[events[0].Key] != key || events[0].Allowed != (w.status == http.StatusOK) {
			return fmt.Sprintf("events %+v, want one %v event of %s under %s", events, o, key, rule)
		}
		return ""
	}}
}

// listCases check the allow and ban lists and a rule's penalty through
// every adapter. The suite's client connects from 127.0.0.1; other client
// IPs come from a trusted proxy's X-Forwarded-For.
func listCases() []testCase {
	const xff = "X-Forwarded-For"
	proxy := func(s *Setup) {
		s.ClientIP = clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	}
	lists := func(extra string) string {
		return strings.Replace(ExampleConfig, "  default:", extra+"  default:", 1)
	}
	// alice's store key, as the limiter's: a keyed hash (see hashed).
	var aliceKey string
	for k, v := range hashed {
		if v == "X-User:alice" {
			aliceKey = k
		}
	}
	const penaltyConfig = `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      penalty: {after: 2, within: 1m, ban: 15m}
`
	const (
		ban     = "X-User:alice login!ban 0"
		count   = ban + "; X-User:alice login 1"
		denial  = count + "; X-User:alice login!denials 1"
		setBan  = denial + "; X-User:alice login!ban 1"
		loginOK = "X-User:alice"
	)
	return []testCase{
		{
			name:   "BanNetworks",
			config: lists("  ban:\n    networks: [\"198.51.100.0/24\", \"2001:db8:bad::/48\"]\n"),
			setup:  proxy,
			steps: seq(
				banned(get("/api/search", xff, "198.51.100.7")),
				headBanned(banned(do(http.MethodHead, "/api/search", xff, "198.51.100.7"))),
				// Before exempt paths, the bypass and the key function.
				banned(get("/health", xff, "198.51.100.7")),
				banned(get("/api/search", with([]string{xff, "198.51.100.7"}, superAdmin)...)),
				banned(get("/api/search", with([]string{xff, "198.51.100.7"}, bad)...)),
				banned(do(http.MethodPost, "/api/kb/k1/reindex", with([]string{xff, "198.51.100.7"}, alice)...)),
				// IPv4-mapped IPv6 is the IPv4 address; IPv6 by its /64.
				banned(get("/api/search", xff, "::ffff:198.51.100.7")),
				banned(get("/api/search", xff, "2001:db8:bad:1::5")),
				// The client is the rightmost hop the proxy did not add:
				// what the client wrote to its left changes nothing.
				banned(get("/api/search", xff, "203.0.113.5, 198.51.100.7")),
				hit(get("/api/search", xff, "198.51.100.7, 203.0.113.5"), ok(draft("search", 10, 1, 9, 1)...), "203.0.113.5 search 1"),
				hit(get("/api/search", xff, "198.51.101.7"), ok(draft("search", 10, 1, 9, 1)...), "198.51.101.7 search 1"),
			),
		},
		{
			// An IPv6 entry longer than the /64 a client counts under
			// means the addresses it is written for: it is matched against
			// the client's whole address (clientip.Config.ClientAddr), not
			// its group's; an address beside it in the same /64 is neither
			// banned nor allowed, and counts under the group.
			name:   "ListsIPv6Host",
			config: lists("  allow:\n    networks: [\"2001:db8:0:3::5/128\"]\n  ban:\n    networks: [\"2001:db8:0:2::bad/128\"]\n"),
			setup:  proxy,
			steps: seq(
				banned(get("/api/search", xff, "2001:db8:0:2::bad")),
				hit(get("/api/search", xff, "2001:db8:0:2::1"), ok(draft("search", 10, 1, 9, 1)...), "2001:db8:0:2:: search 1"),
				hit(get("/api/search", xff, "2001:db8:0:3::5"), ok(), ""),
				hit(get("/api/search", xff, "2001:db8:0:3::6"), ok(draft("search", 10, 1, 9, 1)...), "2001:db8:0:3:: search 1"),
			),
		},
		{
			// Without a trusted proxy X-Forwarded-For is the client's own
			// writing: it neither escapes a ban nor earns an allow.
			name:   "BanNoTrustedProxy",
			config: lists("  ban:\n    networks: [\"127.0.0.0/8\"]\n"),
			steps: seq(
				banned(get("/api/search", xff, "203.0.113.5")),
				banned(get("/api/search", "X-Real-Ip", "203.0.113.5")),
			),
		},
		{
			name:   "AllowNoTrustedProxy",
			config: lists("  allow:\n    networks: [\"203.0.113.0/24\"]\n"),
			steps: seq(
				hit(get("/api/search", xff, "203.0.113.5"), ok(draft("search", 10, 1, 9, 1)...), "127.0.0.1 search 1"),
			),
		},
		{
			name:   "AllowNetwork",
			config: lists("  allow:\n    networks: [\"203.0.113.0/24\", \"2001:db8:aaaa::/48\"]\n"),
			setup:  proxy,
			steps: seq(
				// Never counted, whoever it says it is, past any limit.
				times(3, func(int) step {
					return hit(do(http.MethodPost, "/api/kb/k1/reindex", with([]string{xff, "203.0.113.5"}, alice)...), ok(), "")
				}),
				hit(get("/api/search", xff, "2001:db8:aaaa:1::1"), ok(), ""),
				hit(get("/api/search", xff, "::ffff:203.0.113.77"), ok(), ""),
				hit(do(http.MethodPost, "/api/kb/k1/reindex", with([]string{xff, "203.0.114.5"}, alice)...), ok(draft("reindex", 2, 60, 1, 60)...), "X-User:alice reindex 1"),
			),
		},
		{
			name:   "AllowIdentity",
			config: lists("  allow:\n    identities: [\"" + aliceKey + "\"]\n"),
			steps: seq(
				times(3, func(int) step {
					return hit(do(http.MethodPost, "/api/kb/k1/reindex", alice...), ok(), "")
				}),
				// Other spellings are other identities.
				hit(do(http.MethodPost, "/api/kb/k1/reindex", UserHeader, "Alice"), ok(draft("reindex", 2, 60, 1, 60)...), "X-User:Alice reindex 1"),
				hit(do(http.MethodPost, "/api/kb/k1/reindex", bob...), ok(draft("reindex", 2, 60, 1, 60)...), "X-User:bob reindex 1"),
			),
		},
		{
			name:   "Penalty",
			config: penaltyConfig,
			redis:  true,
			steps: seq(
				penalized(do(http.MethodPost, "/login", alice...), ok(draft("login", 2, 60, 1, 60)...), count, "login", loginOK, core.OutcomeAllowed),
				penalized(do(http.MethodPost, "/login", alice...), ok(draft("login", 2, 60, 0, 60)...), count, "login", loginOK, core.OutcomeAllowed),
				penalized(do(http.MethodPost, "/login", alice...), limited("login", "60", draft("login", 2, 60, 0, 60)...), denial, "login", loginOK, core.OutcomeDenied),
				advance(5*time.Second),
				// The second denial within a minute sets the ban.
				penalized(do(http.MethodPost, "/login", alice...), limited("login", "900", draft("login", 2, 60, 0, 900)...), setBan, "login", loginOK, core.OutcomeDenied),
				advance(time.Minute),
				// Under the ban: no counting call, not a denial again.
				times(2, func(int) step {
					return penalized(do(http.MethodPost, "/login", alice...), limited("login", "840", draft("login", 2, 60, 0, 840)...), ban, "login", loginOK, core.OutcomePenalized)
				}),
				penalized(do(http.MethodPost, "/login", bob...), ok(draft("login", 2, 60, 1, 55)...), "X-User:bob login!ban 0; X-User:bob login 1", "login", "X-User:bob", core.OutcomeAllowed),
				advance(14*time.Minute-time.Second),
				// The rest of the ban is shorter than the rule's window now:
				// the rule is asked too, and would admit the request.
				penalized(do(http.MethodPost, "/login", alice...), limited("login", "1", draft("login", 2, 60, 0, 1)...), ban+"; peek X-User:alice login 1", "login", loginOK, core.OutcomePenalized),
				// Lifted when the ban ends.
				advance(time.Second),
				penalized(do(http.MethodPost, "/login", alice...), ok(draft("login", 2, 60, 1, 55)...), count, "login", loginOK, core.OutcomeAllowed),
			),
		},
		{
			// A ban shorter than the rule's window: the banned requests
			// are told the rule's wait, in Retry-After and RateLimit's t,
			// and a client that waits it is admitted then.
			name:   "PenaltyShortBan",
			config: strings.Replace(penaltyConfig, "{after: 2, within: 1m, ban: 15m}", "{after: 1, within: 1m, ban: 5s}", 1),
			redis:  true,
			steps: seq(
				penalized(do(http.MethodPost, "/login", alice...), ok(draft("login", 2, 60, 1, 60)...), count, "login", loginOK, core.OutcomeAllowed),
				penalized(do(http.MethodPost, "/login", alice...), ok(draft("login", 2, 60, 0, 60)...), count, "login", loginOK, core.OutcomeAllowed),
				advance(24*time.Second),
				penalized(do(http.MethodPost, "/login", alice...), limited("login", "36", draft("login", 2, 60, 0, 36)...), setBan, "login", loginOK, core.OutcomeDenied),
				advance(2*time.Second),
				penalized(do(http.MethodPost, "/login", alice...), limited("login", "34", draft("login", 2, 60, 0, 34)...), ban+"; peek X-User:alice login 1", "login", loginOK, core.OutcomePenalized),
				advance(34*time.Second),
				penalized(do(http.MethodPost, "/login", alice...), ok(draft("login", 2, 60, 1, 60)...), count, "login", loginOK, core.OutcomeAllowed),
			),
		},
	}
}
