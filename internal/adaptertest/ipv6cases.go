package adaptertest

import (
	"net/netip"
	"slices"

	"github.com/rlkit/rlkit/core/clientip"
)

// allCases is the table Run and Same go through: cases, the cases of
// this file, deniedCases, planCases, listCases, outcomeCases,
// interplayCases, catchAllCases, calendarCases, waitCases, costCases and
// concurrentCases and keyCases.
func allCases() []testCase {
	return onRedis(slices.Concat(cases(), ipv6Cases(), deniedCases(), planCases(), listCases(), outcomeCases(), interplayCases(), catchAllCases(), calendarCases(), waitCases(), costCases(), concurrentCases(), keyCases(), stackCases()))
}

// ipv6Cases check that anonymous IPv6 clients count per /64 by default,
// and per address with IPv6PrefixLen 128, through every adapter. The
// suite's client connects over IPv4 loopback, so the IPv6 addresses come
// from a trusted proxy's X-Forwarded-For.
func ipv6Cases() []testCase {
	proxy := func(prefixLen int) func(*Setup) {
		return func(s *Setup) {
			s.ClientIP = clientip.Config{
				TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")},
				IPv6PrefixLen:  prefixLen,
			}
		}
	}
	const xff = "X-Forwarded-For"
	return []testCase{
		{
			name:   "IPv6PerSlash64",
			config: ExampleConfig,
			setup:  proxy(0),
			steps: seq(
				hit(get("/api/search", xff, "2001:db8:1:2::5"), ok(draft("search", 10, 1, 9, 1)...), "2001:db8:1:2:: search 1"),
				// Another address of the same /64 (a host rotating through
				// its addresses) counts in the same counter.
				hit(get("/api/search", xff, "2001:db8:1:2:aaaa:bbbb:cccc:dddd"), ok(draft("search", 10, 1, 8, 1)...), "2001:db8:1:2:: search 1"),
				hit(get("/api/search", xff, "[2001:DB8:1:2::9]:4711"), ok(draft("search", 10, 1, 7, 1)...), "2001:db8:1:2:: search 1"),
				// The next /64 is another client.
				hit(get("/api/search", xff, "2001:db8:1:3::5"), ok(draft("search", 10, 1, 9, 1)...), "2001:db8:1:3:: search 1"),
				// IPv4, and IPv4-mapped IPv6, count per address.
				hit(get("/api/search", xff, "203.0.113.5"), ok(draft("search", 10, 1, 9, 1)...), "203.0.113.5 search 1"),
				hit(get("/api/search", xff, "::ffff:203.0.113.5"), ok(draft("search", 10, 1, 8, 1)...), "203.0.113.5 search 1"),
				hit(get("/api/search", xff, "203.0.113.6"), ok(draft("search", 10, 1, 9, 1)...), "203.0.113.6 search 1"),
			),
		},
		{
			name:   "IPv6WholeAddress",
			config: ExampleConfig,
			setup:  proxy(128),
			steps: seq(
				hit(get("/api/search", xff, "2001:db8:1:2::5"), ok(draft("search", 10, 1, 9, 1)...), "2001:db8:1:2::5 search 1"),
				hit(get("/api/search", xff, "2001:db8:1:2::6"), ok(draft("search", 10, 1, 9, 1)...), "2001:db8:1:2::6 search 1"),
				hit(get("/api/search", xff, "2001:db8:1:2::5"), ok(draft("search", 10, 1, 8, 1)...), "2001:db8:1:2::5 search 1"),
			),
		},
	}
}
