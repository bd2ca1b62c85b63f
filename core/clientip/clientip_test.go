package clientip

import (
	"fmt"
	"math"
	"net/netip"
	"reflect"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// cipTestTrusted is the proxy set used by most tests.
var cipTestTrusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("127.0.0.1/32"),
	netip.MustParsePrefix("::1/128"),
	netip.MustParsePrefix("fd00::/8"),
}

// cipHeaders returns a values func that looks names up exactly (no
// canonicalization), so a wrong header name spelling makes tests fail.
func cipHeaders(h map[string][]string) func(string) []string {
	return func(name string) []string { return h[name] }
}

func TestClientIP(t *testing.T) {
	// The parsing rows keep whole IPv6 addresses (IPv6PrefixLen 128), so
	// that every bit of the answer shows; the IPv6PrefixLen rows below
	// check the grouping, /64 by default.
	xff := &Config{TrustedProxies: cipTestTrusted, IPv6PrefixLen: 128}
	fwd := &Config{TrustedProxies: cipTestTrusted, Header: Forwarded, IPv6PrefixLen: 128}
	xri := &Config{TrustedProxies: cipTestTrusted, Header: XRealIP, IPv6PrefixLen: 128}
	v6 := &Config{TrustedProxies: cipTestTrusted, IPv6PrefixLen: 64}
	def := &Config{TrustedProxies: cipTestTrusted}
	prefix := func(n int) *Config { return &Config{IPv6PrefixLen: n} }
	const (
		XFF = "X-Forwarded-For"
		FWD = "Forwarded"
		XRI = "X-Real-Ip"
	)
	type H = map[string][]string
	tests := []struct {
		name   string
		cfg    *Config
		remote string
		hdr    H
		want   string
	}{
		// Untrusted peers: headers are ignored (spoofing).
		{"zero config", &Config{}, "203.0.113.9:51234", H{XFF: {"1.2.3.4"}}, "203.0.113.9"},
		{"nil config", nil, "203.0.113.9:51234", H{XFF: {"1.2.3.4"}}, "203.0.113.9"},
		{"untrusted spoofed XFF", xff, "203.0.113.9:51234", H{XFF: {"1.2.3.4, 10.0.0.2"}}, "203.0.113.9"},
		{"untrusted spoofed Forwarded", fwd, "203.0.113.9:51234", H{FWD: {"for=1.2.3.4"}}, "203.0.113.9"},
		{"untrusted spoofed X-Real-IP", xri, "203.0.113.9:51234", H{XRI: {"1.2.3.4"}}, "203.0.113.9"},
		{"unknown header kind", &Config{TrustedProxies: cipTestTrusted, Header: 9}, "10.0.0.1:1", H{XFF: {"1.2.3.4"}}, "10.0.0.1"},

		// X-Forwarded-For from a trusted peer.
		{"xff single hop", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7"}}, "198.51.100.7"},
		{"xff chain rightmost untrusted", xff, "10.0.0.1:5555", H{XFF: {"1.1.1.1, 203.0.113.5, 10.0.0.2"}}, "203.0.113.5"},
		{"xff multiple lines", xff, "10.0.0.1:5555", H{XFF: {"1.1.1.1, 203.0.113.5", "10.0.0.3, 10.0.0.2"}}, "203.0.113.5"},
		{"xff client in last line", xff, "10.0.0.1:5555", H{XFF: {"6.6.6.6", "198.51.100.7"}}, "198.51.100.7"},
		{"xff all trusted leftmost", xff, "10.0.0.1:5555", H{XFF: {"10.0.0.5, 127.0.0.1", "10.0.0.2"}}, "10.0.0.5"},
		{"xff absent", xff, "10.0.0.1:5555", H{}, "10.0.0.1"},
		{"xff empty value", xff, "10.0.0.1:5555", H{XFF: {""}}, "10.0.0.1"},
		{"xff whitespace value", xff, "10.0.0.1:5555", H{XFF: {" \t "}}, "10.0.0.1"},
		{"xff garbage stops walk", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7, garbage, 10.0.0.2"}}, "10.0.0.2"},
		{"xff garbage rightmost", xff, "10.0.0.1:5555", H{XFF: {"1.1.1.1, garbage"}}, "10.0.0.1"},
		{"xff unknown", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7, unknown"}}, "10.0.0.1"},
		{"xff empty hop stops walk", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7,, 10.0.0.2"}}, "10.0.0.2"},
		{"xff trailing comma", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7,"}}, "10.0.0.1"},
		{"xff empty last line", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7", ""}}, "10.0.0.1"},
		{"xff OWS around hops", xff, "10.0.0.1:5555", H{XFF: {"\t198.51.100.7 ,\t10.0.0.2 "}}, "198.51.100.7"},
		{"xff hop with port", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7:567"}}, "198.51.100.7"},
		{"xff hop ipv6 with port", xff, "10.0.0.1:5555", H{XFF: {"[2001:db8::1]:80"}}, "2001:db8::1"},
		{"xff hop ipv6 non-canonical", xff, "10.0.0.1:5555", H{XFF: {"2001:DB8:0::1"}}, "2001:db8::1"},
		{"xff hop ipv4-mapped", xff, "10.0.0.1:5555", H{XFF: {"::ffff:198.51.100.7"}}, "198.51.100.7"},
		{"xff hop zone dropped", xff, "10.0.0.1:5555", H{XFF: {"fe80::1%eth0"}}, "fe80::1"},
		{"xff mapped trusted hop skipped", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7, ::ffff:10.9.9.9"}}, "198.51.100.7"},
		{"xff hop bad port stops walk", xff, "10.0.0.1:5555", H{XFF: {"198.51.100.7:99999"}}, "10.0.0.1"},
		{"xff hop bracketed ipv4 invalid", xff, "10.0.0.1:5555", H{XFF: {"[198.51.100.7]"}}, "10.0.0.1"},

		// Peer address forms.
		{"ipv6 peer trusted", xff, "[::1]:80", H{XFF: {"198.51.100.7"}}, "198.51.100.7"},
		{"ipv6 peer untrusted", xff, "[2001:db8::9]:443", H{XFF: {"198.51.100.7"}}, "2001:db8::9"},
		{"ipv6 peer non-canonical", xff, "[2001:DB8::9]:443", nil, "2001:db8::9"},
		{"zoned peer", xff, "[fe80::1%eth0]:80", nil, "fe80::1"},
		{"bare zoned peer", xff, "fe80::1%eth0", nil, "fe80::1"},
		{"ipv4-mapped peer trusted", xff, "[::ffff:10.0.0.1]:80", H{XFF: {"198.51.100.7"}}, "198.51.100.7"},
		{"ipv4-mapped peer untrusted", xff, "[::ffff:203.0.113.9]:1", nil, "203.0.113.9"},
		{"bare ipv4 peer", xff, "203.0.113.9", nil, "203.0.113.9"},
		{"bare ipv4 peer trusted", xff, "10.0.0.1", H{XFF: {"198.51.100.7"}}, "198.51.100.7"},
		{"bare ipv6 peer", xff, "2001:db8::1", nil, "2001:db8::1"},
		{"bracketed peer no port", xff, "[2001:db8::1]", nil, "2001:db8::1"},
		{"unparsable pipe", xff, "pipe", H{XFF: {"198.51.100.7"}}, "pipe"},
		{"unparsable empty", xff, "", H{XFF: {"198.51.100.7"}}, ""},
		{"unparsable unix socket", xff, "@", nil, "@"},
		{"unparsable bad port", xff, "10.0.0.1:http", H{XFF: {"198.51.100.7"}}, "10.0.0.1:http"},
		{"unparsable open bracket", xff, "[::1", nil, "[::1"},
		{"unparsable bracketed ipv4", xff, "[10.0.0.1]:80", nil, "[10.0.0.1]:80"},

		// RFC 7239 Forwarded.
		{"fwd single", fwd, "10.0.0.1:5555", H{FWD: {"for=192.0.2.60;proto=http;by=203.0.113.43"}}, "192.0.2.60"},
		{"fwd quoted ipv6 port case-insensitive", fwd, "10.0.0.1:5555", H{FWD: {`For="[2001:db8:cafe::17]:4711"`}}, "2001:db8:cafe::17"},
		{"fwd upper-case FOR", fwd, "10.0.0.1:5555", H{FWD: {"FOR=192.0.2.60"}}, "192.0.2.60"},
		{"fwd quoted ipv4 port", fwd, "10.0.0.1:5555", H{FWD: {`for="192.0.2.60:4711"`}}, "192.0.2.60"},
		{"fwd chain", fwd, "10.0.0.1:5555", H{FWD: {"for=192.0.2.43, for=198.51.100.17;by=10.0.0.9, for=10.0.0.3"}}, "198.51.100.17"},
		{"fwd multiple lines", fwd, "10.0.0.1:5555", H{FWD: {"for=192.0.2.43, for=198.51.100.17", `for="[fd00::3]"`}}, "198.51.100.17"},
		{"fwd all trusted leftmost", fwd, "10.0.0.1:5555", H{FWD: {"for=10.0.0.7, for=10.0.0.3"}}, "10.0.0.7"},
		{"fwd params with OWS", fwd, "10.0.0.1:5555", H{FWD: {"proto=https; for=198.51.100.17 ; by=10.0.0.9"}}, "198.51.100.17"},
		{"fwd unknown stops", fwd, "10.0.0.1:5555", H{FWD: {"for=198.51.100.17, for=unknown"}}, "10.0.0.1"},
		{"fwd obfuscated stops", fwd, "10.0.0.1:5555", H{FWD: {"for=198.51.100.17, for=_hidden, for=10.0.0.3"}}, "10.0.0.3"},
		{"fwd element without for", fwd, "10.0.0.1:5555", H{FWD: {"for=198.51.100.17, proto=https"}}, "10.0.0.1"},
		{"fwd duplicate for", fwd, "10.0.0.1:5555", H{FWD: {"for=1.1.1.1;for=198.51.100.17"}}, "10.0.0.1"},
		{"fwd quoted comma and semicolon", fwd, "10.0.0.1:5555", H{FWD: {`for=198.51.100.17;ext="a,b;for=1.1.1.1"`}}, "198.51.100.17"},
		{"fwd stray quote from client", fwd, "10.0.0.1:5555", H{FWD: {`for=", for=198.51.100.17`}}, "198.51.100.17"},
		{"fwd quote swallowing hop", fwd, "10.0.0.1:5555", H{FWD: {`for="1.1.1.1, for=198.51.100.17"`}}, "10.0.0.1"},
		{"fwd unquoted ipv6 brackets", fwd, "10.0.0.1:5555", H{FWD: {"for=[2001:db8::1]"}}, "2001:db8::1"},
		{"fwd escaped value", fwd, "10.0.0.1:5555", H{FWD: {`for="\198.51.100.17"`}}, "10.0.0.1"},
		{"fwd empty", fwd, "10.0.0.1:5555", H{FWD: {""}}, "10.0.0.1"},

		// X-Real-IP.
		{"xri valid", xri, "10.0.0.1:5555", H{XRI: {"198.51.100.7"}}, "198.51.100.7"},
		{"xri ipv6 non-canonical", xri, "10.0.0.1:5555", H{XRI: {" 2001:DB8::1 "}}, "2001:db8::1"},
		{"xri garbage", xri, "10.0.0.1:5555", H{XRI: {"garbage"}}, "10.0.0.1"},
		{"xri list", xri, "10.0.0.1:5555", H{XRI: {"1.1.1.1, 198.51.100.7"}}, "10.0.0.1"},
		{"xri two lines", xri, "10.0.0.1:5555", H{XRI: {"1.1.1.1", "198.51.100.7"}}, "10.0.0.1"},
		{"xri absent", xri, "10.0.0.1:5555", nil, "10.0.0.1"},

		// IPv6PrefixLen: 0 (the default) means /64, 128 the whole address,
		// anything outside 0..128 /64 too.
		{"v6 default zero config", &Config{}, "[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::"},
		{"v6 default nil config", nil, "[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::"},
		{"v6 default bare peer", nil, "2001:db8:1:2:3:4:5:6", nil, "2001:db8:1:2::"},
		{"v6 default zoned peer", nil, "[fe80::1:2%eth0]:80", nil, "fe80::"},
		{"v6 default already masked", nil, "[2001:db8:1:2::]:443", nil, "2001:db8:1:2::"},
		{"v6 default xff hop", def, "10.0.0.1:5555", H{XFF: {"203.0.113.5, [2001:db8:1:2:aaaa::1]:80, 10.0.0.2"}}, "2001:db8:1:2::"},
		{"v6 default fwd hop", &Config{TrustedProxies: cipTestTrusted, Header: Forwarded}, "10.0.0.1:5555",
			H{FWD: {`for="[2001:db8:cafe:1::17]:4711"`}}, "2001:db8:cafe:1::"},
		{"v6 default xri", &Config{TrustedProxies: cipTestTrusted, Header: XRealIP}, "10.0.0.1:5555", H{XRI: {"2001:DB8:1:2::9"}}, "2001:db8:1:2::"},
		{"v6 default trusted ipv6 peer", def, "[::1]:80", nil, "::"},
		{"v6 default fd00 trusted hop skipped", def, "10.0.0.1:5555", H{XFF: {"2001:db8:9:9::1, fd00::3"}}, "2001:db8:9:9::"},
		{"v6 prefix untrusted peer", v6, "[2001:db8:1:2:3:4:5:6]:443", nil, "2001:db8:1:2::"},
		{"v6 prefix xff hop", v6, "10.0.0.1:5555", H{XFF: {"2001:db8:1:2::99"}}, "2001:db8:1:2::"},
		{"v6 prefix ipv4 unaffected", def, "203.0.113.9:1", nil, "203.0.113.9"},
		{"v6 prefix mapped is ipv4", def, "[::ffff:203.0.113.9]:1", nil, "203.0.113.9"},
		{"v6 prefix 48", prefix(48), "[2001:db8:1:2::1]:1", nil, "2001:db8:1::"},
		{"v6 prefix 1", prefix(1), "[2001:db8:1:2::1]:1", nil, "::"},
		{"v6 prefix 127", prefix(127), "[2001:db8:1:2::7]:1", nil, "2001:db8:1:2::6"},
		{"v6 prefix 128 whole address", prefix(128), "[2001:db8:1:2:3:4:5:6]:1", nil, "2001:db8:1:2:3:4:5:6"},
		{"v6 prefix 129 invalid: /64", prefix(129), "[2001:db8:1:2::1]:1", nil, "2001:db8:1:2::"},
		{"v6 prefix 200 invalid: /64", prefix(200), "[2001:db8:1:2::1]:1", nil, "2001:db8:1:2::"},
		{"v6 prefix negative invalid: /64", prefix(-1), "[2001:db8:1:2::1]:1", nil, "2001:db8:1:2::"},
		{"v6 prefix min int invalid: /64", prefix(math.MinInt), "[2001:db8:1:2::1]:1", nil, "2001:db8:1:2::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.cfg.ClientIP(tt.remote, cipHeaders(tt.hdr)); got != tt.want {
				t.Errorf("ClientIP(%q) = got %q, want %q", tt.remote, got, tt.want)
			}
		})
	}
}

func TestClientIPUntrustedNeverReadsHeaders(t *testing.T) {
	cfg := &Config{TrustedProxies: cipTestTrusted}
	called := 0
	values := func(string) []string { called++; return []string{"1.2.3.4"} }
	if got, want := cfg.ClientIP("203.0.113.9:51234", values), "203.0.113.9"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if called != 0 {
		t.Errorf("values called %d times for an untrusted peer, want 0", called)
	}
}

func TestClientIPNilValues(t *testing.T) {
	cfg := &Config{TrustedProxies: cipTestTrusted}
	if got, want := cfg.ClientIP("10.0.0.1:1", nil), "10.0.0.1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestClientIPConcurrent(t *testing.T) {
	cfg := &Config{TrustedProxies: cipTestTrusted, IPv6PrefixLen: 64}
	values := cipHeaders(map[string][]string{"X-Forwarded-For": {"2001:db8:1:2::5, 10.0.0.2"}})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if got, want := cfg.ClientIP("10.0.0.1:1", values), "2001:db8:1:2::"; got != want {
					t.Errorf("got %q, want %q", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestClientIPAllocs(t *testing.T) {
	trusted := &Config{TrustedProxies: cipTestTrusted}
	tests := []struct {
		name   string
		cfg    *Config
		remote string
		hdr    map[string][]string
		want   string
	}{
		{"zero config", &Config{}, "203.0.113.9:51234", nil, "203.0.113.9"},
		{"ipv4 peer untrusted", trusted, "203.0.113.9:51234", map[string][]string{"X-Forwarded-For": {"1.2.3.4"}}, "203.0.113.9"},
		{"ipv4 peer trusted xff", trusted, "10.0.0.1:51234", map[string][]string{"X-Forwarded-For": {"198.51.100.7, 10.0.0.2"}}, "198.51.100.7"},
		{"ipv6 peer untrusted, /64", trusted, "[2001:db8:0:1:2:3:4:9]:443", nil, "2001:db8:0:1::"},
		{"ipv6 peer untrusted, whole", &Config{TrustedProxies: cipTestTrusted, IPv6PrefixLen: 128}, "[2001:db8::9]:443", nil, "2001:db8::9"},
		{"ipv6 peer already masked", trusted, "[2001:db8:0:1::]:443", nil, "2001:db8:0:1::"},
		{"forwarded trusted, /64", &Config{TrustedProxies: cipTestTrusted, Header: Forwarded}, "10.0.0.1:51234",
			map[string][]string{"Forwarded": {`for="[2001:db8:0:2::7]:4711";proto=https, for=10.0.0.2`}}, "2001:db8:0:2::"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			values := cipHeaders(tt.hdr)
			var got string
			allocs := testing.AllocsPerRun(100, func() { got = tt.cfg.ClientIP(tt.remote, values) })
			if got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			if allocs != 0 {
				t.Errorf("got %v allocs, want 0", allocs)
			}
		})
	}
}

// TestClientIPv6Strings: the text of masked IPv6 addresses comes from a
// cache of 4,096 slots; 20,000 /64s, many sharing a slot, each get their
// own text, on a miss and on a hit.
func TestClientIPv6Strings(t *testing.T) {
	var cfg Config
	for pass := range 2 {
		for i := range 20_000 {
			var b [16]byte
			b[0], b[1] = 0x20, 0x01
			v := uint64(i) * 0x9E3779B97F4A7C15
			for j := range 6 {
				b[2+j] = byte(v >> (8 * j))
			}
			b[15] = byte(i) | 1 // a host part: masked away
			a := netip.AddrFrom16(b)
			p, _ := a.Prefix(64)
			if got, want := cfg.ClientIP("["+a.String()+"]:443", nil), p.Addr().String(); got != want {
				t.Fatalf("pass %d, %s: got %q, want %q", pass, a, got, want)
			}
		}
	}
}

func BenchmarkClientIPUntrusted(b *testing.B) {
	cfg := &Config{TrustedProxies: cipTestTrusted}
	values := cipHeaders(map[string][]string{"X-Forwarded-For": {"1.2.3.4"}})
	b.ReportAllocs()
	for b.Loop() {
		cfg.ClientIP("203.0.113.9:51234", values)
	}
}

func BenchmarkClientIPTrustedXFF(b *testing.B) {
	cfg := &Config{TrustedProxies: cipTestTrusted}
	values := cipHeaders(map[string][]string{"X-Forwarded-For": {"198.51.100.7, 10.0.0.2"}})
	b.ReportAllocs()
	for b.Loop() {
		cfg.ClientIP("10.0.0.1:51234", values)
	}
}

func TestParseTrustedProxies(t *testing.T) {
	got, err := ParseTrustedProxies("10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8", " 192.168.0.0/16 ",
		"::ffff:10.0.0.0/104", "::ffff:172.16.0.1", "0.0.0.0/0", "2001:db8::/032")
	if err != nil {
		t.Fatalf("got error %v, want nil", err)
	}
	want := []netip.Prefix{
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("127.0.0.1/32"),
		netip.MustParsePrefix("::1/128"),
		netip.MustParsePrefix("fd00::/8"),
		netip.MustParsePrefix("192.168.0.0/16"),
		netip.MustParsePrefix("10.0.0.0/8"),
		netip.MustParsePrefix("172.16.0.1/32"),
		netip.MustParsePrefix("0.0.0.0/0"),
		netip.MustParsePrefix("2001:db8::/32"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
	if got, err := ParseTrustedProxies(); err != nil || len(got) != 0 {
		t.Errorf("ParseTrustedProxies() = got %v, %v, want [], nil", got, err)
	}
}

func TestParseTrustedProxiesErrors(t *testing.T) {
	tests := []struct {
		in   []string
		want string
	}{
		{[]string{"10.0.0.300/8"}, `clientip: trusted proxy "10.0.0.300/8": invalid IP address`},
		{[]string{""}, `clientip: trusted proxy "": empty value`},
		{[]string{"  "}, `clientip: trusted proxy "  ": empty value`},
		{[]string{"example.com"}, `clientip: trusted proxy "example.com": invalid IP address`},
		{[]string{"10.0.0.0/33"}, `clientip: trusted proxy "10.0.0.0/33": invalid prefix length`},
		{[]string{"::/129"}, `clientip: trusted proxy "::/129": invalid prefix length`},
		{[]string{"10.0.0.0/"}, `clientip: trusted proxy "10.0.0.0/": invalid prefix length`},
		{[]string{"10.0.0.0/-1"}, `clientip: trusted proxy "10.0.0.0/-1": invalid prefix length`},
		{[]string{"10.0.0.0/8/8"}, `clientip: trusted proxy "10.0.0.0/8/8": invalid prefix length`},
		{[]string{"10.0.0.0/8, 192.168.0.0/16"}, `clientip: trusted proxy "10.0.0.0/8, 192.168.0.0/16": invalid prefix length`},
		{[]string{"fe80::1%eth0"}, `clientip: trusted proxy "fe80::1%eth0": IPv6 zone not allowed`},
		{[]string{"10.0.0.1/8"}, `clientip: trusted proxy "10.0.0.1/8": host bits set (did you mean 10.0.0.0/8?)`},
		{[]string{"10.0.0.0/8", "bad", "also bad"}, `clientip: trusted proxy "bad": invalid IP address`},
	}
	for _, tt := range tests {
		got, err := ParseTrustedProxies(tt.in...)
		if err == nil {
			t.Errorf("ParseTrustedProxies(%q) = got %v, nil error, want error %q", tt.in, got, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("ParseTrustedProxies(%q) error = got %q, want %q", tt.in, err.Error(), tt.want)
		}
		if got != nil {
			t.Errorf("ParseTrustedProxies(%q) = got %v, want nil on error", tt.in, got)
		}
	}
}

func TestPlainIPv4(t *testing.T) {
	for _, in := range []string{
		"192.0.2.1:1234", "0.0.0.0:1", "255.255.255.255:65535", "10.1.2.3:80",
		"256.1.1.1:1", "01.2.3.4:1", "1.2.3:1", "1.2.3.4.5:1", "1..3.4:1", "1.2.3.4", "[::1]:1",
		"::ffff:1.2.3.4:1", "1.2.3.a:1", ".1.2.3:1", "1.2.3.:1", "001.2.3.4:5", "10.0.0.1:http", "1.2.3.4:", "1.2.3.4:99999",
	} {
		host, ok := cipPlainIPv4(in)
		// Whatever the fast path accepts, the full parse must render the same.
		var zero Config
		full := func() string {
			peer, src, ok := cipParseHost(in)
			if !ok {
				return in
			}
			return zero.cipRender(peer, src)
		}()
		if ok && host != full {
			t.Errorf("cipPlainIPv4(%q) = %q, full parse %q", in, host, full)
		}
		if got := zero.ClientIP(in, nil); got != full {
			t.Errorf("ClientIP(%q) = %q, want %q", in, got, full)
		}
	}
	if _, ok := cipPlainIPv4("192.0.2.1:1234"); !ok {
		t.Error("the fast path refused a plain IPv4 peer")
	}
}

// plainIPv4Reference is cipPlainIPv4 as it was first written: it returns the host of "a.b.c.d:port" when it is an IPv4
// address in canonical form (four decimal octets ≤ 255, no leading zeros),
// as netip would print it.
func plainIPv4Reference(hostport string) (string, bool) {
	colon := strings.LastIndexByte(hostport, ':')
	if colon < 7 || colon > 15 {
		return "", false
	}
	if _, ok := cipAtoi(hostport[colon+1:], 65535); !ok {
		return "", false // as cipParseHost: a port must be a number
	}
	host := hostport[:colon]
	dots, val, digits := 0, 0, 0
	for i := 0; i < len(host); i++ {
		switch c := host[i]; {
		case c >= '0' && c <= '9':
			if digits == 1 && val == 0 {
				return "", false // a leading zero
			}
			val = val*10 + int(c-'0')
			digits++
			if val > 255 {
				return "", false
			}
		case c == '.' && digits > 0:
			dots++
			val, digits = 0, 0
		default:
			return "", false
		}
	}
	if dots != 3 || digits == 0 {
		return "", false
	}
	return host, true
}

// TestPlainIPv4Reference: cipPlainIPv4 answers as plainIPv4Reference, its
// first, plainer form, for every string of up to 9 bytes over the
// characters "0", "1", "9", "." and ":" (the shortest dotted quad with a
// port has 9), and for dotted quads and ports around every bound.
func TestPlainIPv4Reference(t *testing.T) {
	check := func(in string) {
		host, ok := cipPlainIPv4(in)
		if wantHost, wantOK := plainIPv4Reference(in); host != wantHost || ok != wantOK {
			t.Fatalf("cipPlainIPv4(%q) = %q, %v; want %q, %v", in, host, ok, wantHost, wantOK)
		}
	}
	const alphabet = "019.:"
	var walk func(prefix []byte)
	walk = func(prefix []byte) {
		check(string(prefix))
		if len(prefix) == 9 {
			return
		}
		for i := range len(alphabet) {
			walk(append(prefix, alphabet[i]))
		}
	}
	walk(nil)
	octets := []string{"0", "00", "01", "1", "9", "10", "99", "100", "199", "200", "249", "250", "255", "256", "260", "300", "999", "1000", "0255", ""}
	ports := []string{"", "0", "1", "80", "65535", "65536", "99999", "100000", "012", "1a", ":1"}
	for _, a := range octets {
		for _, b := range octets {
			for _, p := range ports {
				check(a + "." + b + ".2.3:" + p)
				check("1.2." + a + "." + b + ":" + p)
				check(a + "." + b + ".2:" + p)
			}
		}
	}
}

// TestClientIPPeers: the hosts ClientIP keeps by the address of a peer's
// string (cipPeers) are each string's own: strings that start at one
// address but differ in length (the longer not a plain IPv4 peer), equal
// strings at other addresses, and thousands of peers, each asked again and
// again, in any order, all get the answer the full parse gives.
func TestClientIPPeers(t *testing.T) {
	var zero Config
	long := strings.Clone("198.51.100.7:4711x")
	short := long[:len("198.51.100.7:4711")] // same address, a plain peer
	peers := []struct{ addr, want string }{
		{short, "198.51.100.7"},
		{long, long}, // does not parse: returned as it is
		{strings.Clone(short), "198.51.100.7"},
	}
	for i := range 5000 {
		addr := fmt.Sprintf("10.%d.%d.%d:%d", i>>16&255, i>>8&255, i&255, 1024+i)
		peers = append(peers, struct{ addr, want string }{addr, addr[:strings.LastIndexByte(addr, ':')]})
	}
	for range 3 { // the first three alone: the two strings at one address in turn
		for _, p := range peers[:3] {
			if got := zero.ClientIP(p.addr, nil); got != p.want {
				t.Fatalf("ClientIP(%q) = %q, want %q", p.addr, got, p.want)
			}
		}
	}
	for round := range 4 {
		for i := range peers {
			p := peers[(i*(2*round+1))%len(peers)]
			if got := zero.ClientIP(p.addr, nil); got != p.want {
				t.Fatalf("round %d: ClientIP(%q) = %q, want %q", round, p.addr, got, p.want)
			}
		}
	}
}

// TestClientIPPeerOnce: a peer asked once (a connection with a single
// request) costs no allocation: only the second request of a string gives
// it an entry.
func TestClientIPPeerOnce(t *testing.T) {
	addrs, hosts := make([]string, 200), make([]string, 200)
	for i := range addrs {
		hosts[i] = fmt.Sprint("192.0.2.", i%250)
		addrs[i] = fmt.Sprint(hosts[i], ":", 40000+i)
	}
	var zero Config
	i := 0
	if n := testing.AllocsPerRun(100, func() {
		if got := zero.ClientIP(addrs[i], nil); got != hosts[i] {
			t.Fatalf("ClientIP(%q) = %q, want %q", addrs[i], got, hosts[i])
		}
		i++
	}); n != 0 {
		t.Errorf("%v allocations for a peer seen once, want 0", n)
	}
}

// TestClientIPPeerReusedBytes: a caller that hands ClientIP a string over
// bytes it reuses (a fasthttp-style buffer turned into a string without a
// copy, to spare an allocation) gets the answer for what the string holds
// now, never the host kept for what it held when the peer cache saw it:
// another client's length of host, a half address, a non-IPv4 peer
// passed off as a plain one.
func TestClientIPPeerReusedBytes(t *testing.T) {
	var zero Config
	buf := make([]byte, 12)
	s := unsafe.String(&buf[0], len(buf))
	for _, c := range []struct{ first, then string }{
		{"1.1.1.1:5555", "22.2.2.2:555"},
		{"22.2.2.2:555", "1.1.1.1:5555"},
		{"1.1.1.1:5555", "[::1]:655350"},
		{"1.1.1.1:5555", "10.0.0.99:80"},
	} {
		copy(buf, c.first)
		for range 3 { // seen, then kept
			if got, want := zero.ClientIP(s, nil), zero.ClientIP(string(buf), nil); got != want {
				t.Fatalf("ClientIP(%q) = %q, want %q", c.first, got, want)
			}
		}
		copy(buf, c.then)
		if got, want := zero.ClientIP(s, nil), zero.ClientIP(string(buf), nil); got != want {
			t.Errorf("after %q, ClientIP(%q) over the same bytes = %q, want %q", c.first, c.then, got, want)
		}
	}
}

// BenchmarkClientIPPeer: ClientIP for a plain IPv4 peer with no trusted
// proxy, the string asked for again (the cipPeers hit: a load and a
// comparison with the entry's copy), and a new string each time (a parse).
func BenchmarkClientIPPeer(b *testing.B) {
	var zero Config
	b.Run("kept", func(b *testing.B) {
		addr := strings.Clone("203.0.113.254:54321")
		b.ReportAllocs()
		for b.Loop() {
			zero.ClientIP(addr, nil)
		}
	})
	b.Run("parsed", func(b *testing.B) {
		var addrs [1 << 14]string
		for i := range addrs {
			addrs[i] = fmt.Sprintf("203.0.%d.%d:54321", i>>8&255, i&255)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			zero.ClientIP(addrs[i&(len(addrs)-1)], nil)
			i++
		}
	})
}
