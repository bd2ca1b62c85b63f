package clientip

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// cipRefHop is an independent reference parser for one X-Forwarded-For hop,
// built on netip's own ip:port splitting.
func cipRefHop(h string) (netip.Addr, bool) {
	h = strings.Trim(h, " \t")
	if ap, err := netip.ParseAddrPort(h); err == nil && len(h)-strings.LastIndexByte(h, ':')-1 <= 5 {
		return ap.Addr().Unmap().WithZone(""), true
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().WithZone(""), true
	}
	if len(h) >= 2 && h[0] == '[' && h[len(h)-1] == ']' {
		if a, err := netip.ParseAddr(h[1 : len(h)-1]); err == nil && a.Is6() {
			return a.Unmap().WithZone(""), true
		}
	}
	return netip.Addr{}, false
}

// cipRefXFF is a deliberately naive reference of the X-Forwarded-For walk:
// join all lines, split on commas, walk right to left.
func cipRefXFF(c *Config, peer netip.Addr, lines []string) netip.Addr {
	if len(lines) == 0 {
		return peer
	}
	hops := strings.Split(strings.Join(lines, ","), ",")
	last := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := cipRefHop(hops[i])
		if !ok {
			return last
		}
		if !c.cipTrusted(a) {
			return a
		}
		last = a
	}
	return last
}

func FuzzClientIP(f *testing.F) {
	seeds := []struct {
		remote string
		kind   uint8
		header string
	}{
		{"203.0.113.9:51234", 0, "1.2.3.4"},
		{"10.0.0.1:5555", 0, "1.1.1.1, 203.0.113.5, 10.0.0.2"},
		{"10.0.0.1:5555", 0, "1.1.1.1, 203.0.113.5\n10.0.0.3, 10.0.0.2"},
		{"10.0.0.1:5555", 0, "198.51.100.7, garbage, 10.0.0.2"},
		{"10.0.0.1:5555", 0, "198.51.100.7,, 10.0.0.2,"},
		{"10.0.0.1:5555", 0, "[2001:db8::1]:80, ::ffff:10.0.0.1, 1.2.3.4:567"},
		{"[::1]:80", 0, "fe80::1%eth0, 2001:DB8:0::1"},
		{"[fe80::1%eth0]:80", 0, "unknown"},
		{"[::ffff:10.0.0.1]:80", 0, "  \t "},
		{"10.0.0.1", 0, "[1.2.3.4], [::1, ::1]:99999"},
		{"pipe", 0, "1.2.3.4"},
		{"", 1, "for=1.2.3.4"},
		{"10.0.0.1:1", 1, `for=192.0.2.60;proto=http;by=203.0.113.43`},
		{"10.0.0.1:1", 1, `For="[2001:db8:cafe::17]:4711", for=10.0.0.3`},
		{"10.0.0.1:1", 1, `for=", for=198.51.100.17`},
		{"10.0.0.1:1", 1, `for="1.1.1.1, for=198.51.100.17"`},
		{"10.0.0.1:1", 1, `for=198.51.100.17;ext="a,b;c\"d\\", for=_hidden, for=unknown`},
		{"10.0.0.1:1", 1, "for=1.1.1.1;for=2.2.2.2\nproto=https"},
		{"10.0.0.1:1", 1, `for="\"\\\""`},
		{"10.0.0.1:1", 2, "198.51.100.7"},
		{"10.0.0.1:1", 2, "1.1.1.1\n2.2.2.2"},
		{"10.0.0.1:1", 2, " 2001:DB8::1 "},
		{"[2001:db8:1:2:3:4:5:6]:443", 0, ""},
		{"10.0.0.1:1", 7, "1.2.3.4"},
		{"[10.0.0.1]:80", 0, "1.2.3.4"},
		{"10.0.0.1:http", 0, "1.2.3.4"},
	}
	for i, s := range seeds {
		f.Add(s.remote, s.kind, s.header, uint8(i*16))
	}
	f.Fuzz(func(t *testing.T, remote string, kind uint8, header string, prefixLen uint8) {
		lines := strings.Split(header, "\n")
		if header == "" {
			lines = nil
		}
		values := func(string) []string { return lines }
		pl := int(prefixLen) - 64 // -64 to 191: below 0, the default, 1 to 128, above 128
		cfg := &Config{TrustedProxies: cipTestTrusted, Header: Header(kind % 4), IPv6PrefixLen: pl}
		got := cfg.ClientIP(remote, values)

		// The result is a canonical IP, or the unparsable remoteAddr as-is.
		if a, err := netip.ParseAddr(got); err == nil {
			if s := a.String(); s != got || a.Is4In6() || a.Zone() != "" {
				t.Fatalf("ClientIP(%q) = got %q, want canonical %q", remote, got, a.Unmap().WithZone(""))
			}
			bits := pl // IPv6PrefixLen: 0 and anything outside 0..128 mean 64
			if bits <= 0 || bits > 128 {
				bits = 64
			}
			if p, _ := a.Prefix(bits); a.Is6() && p.Addr() != a {
				t.Fatalf("ClientIP(%q) = got %q, want masked to /%d (IPv6PrefixLen %d)", remote, got, bits, pl)
			}
		} else if got != remote {
			t.Fatalf("ClientIP(%q) = got %q, want a canonical IP or the remoteAddr", remote, got)
		}

		// Untrusted peer (or no trust at all): the header never matters.
		none := &Config{IPv6PrefixLen: pl}
		if a, b := none.ClientIP(remote, values), none.ClientIP(remote, nil); a != b {
			t.Fatalf("zero config depends on header: got %q, want %q", a, b)
		}
		peerKey := (&Config{IPv6PrefixLen: 128}).ClientIP(remote, nil)
		peer, err := netip.ParseAddr(peerKey)
		if err != nil || !cfg.cipTrusted(peer) {
			if want := cfg.ClientIP(remote, nil); got != want {
				t.Fatalf("untrusted peer %q: got %q, want %q (header ignored)", remote, got, want)
			}
			return
		}

		// Trusted peer with X-Forwarded-For: agree with the naive reference.
		if cfg.Header == XForwardedFor {
			want := (&Config{IPv6PrefixLen: pl}).ClientIP(cipRefXFF(cfg, peer, lines).String(), nil)
			if got != want {
				t.Fatalf("XFF %q from %q: got %q, want %q", lines, remote, got, want)
			}
		}
	})
}

func FuzzParseTrustedProxies(f *testing.F) {
	for _, s := range []string{"10.0.0.0/8", "127.0.0.1", "::1", "fd00::/8", " 192.168.0.0/16 ", "",
		"10.0.0.300/8", "10.0.0.1/8", "10.0.0.0/33", "10.0.0.0/", "10.0.0.0/08", "fe80::1%eth0",
		"::ffff:10.0.0.0/104", "::ffff:1.2.3.4", "::ffff:0:0/95", "0.0.0.0/0", "::/0", "/8", "1.2.3.4/+8"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseTrustedProxies(s)
		// Anything netip accepts as a canonical prefix must be accepted unchanged.
		if np, nerr := netip.ParsePrefix(strings.TrimSpace(s)); nerr == nil && np == np.Masked() && !np.Addr().Is4In6() {
			if err != nil || got[0] != np {
				t.Fatalf("ParseTrustedProxies(%q) = got %v, %v, want %v", s, got, err, np)
			}
		}
		if err != nil {
			if want := "clientip: trusted proxy " + strconv.Quote(s) + ": "; !strings.HasPrefix(err.Error(), want) {
				t.Fatalf("error = got %q, want prefix %q", err.Error(), want)
			}
			if got != nil {
				t.Fatalf("got %v with error, want nil", got)
			}
			return
		}
		if len(got) != 1 {
			t.Fatalf("got %d prefixes, want 1", len(got))
		}
		p := got[0]
		if !p.IsValid() || p != p.Masked() || p.Addr().Is4In6() || p.Addr().Zone() != "" {
			t.Fatalf("ParseTrustedProxies(%q) = got %v, want a valid, masked, unmapped prefix", s, p)
		}
		if again, err := ParseTrustedProxies(p.String()); err != nil || again[0] != p {
			t.Fatalf("round trip of %v: got %v, %v, want %v", p, again, err, p)
		}
	})
}
