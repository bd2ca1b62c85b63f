package clientip

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/rlkit/rlkit/core/internal/addrhash"
)

// Header names the header a trusted proxy uses to pass on the client address.
type Header uint8

const (
	// XForwardedFor is "X-Forwarded-For": comma-separated hops, each
	// proxy appends the address it received the request from. All header
	// lines are taken in order, as if joined with commas.
	XForwardedFor Header = iota
	// Forwarded is the RFC 7239 "Forwarded" header: the for= parameter
	// of each element (token or quoted string, IPv6 in brackets, optional
	// port). "unknown" and obfuscated identifiers ("_hidden") are invalid hops.
	Forwarded
	// XRealIP is "X-Real-IP": one address, set (not appended) by the proxy.
	XRealIP
)

// cipHeaderNames maps an Header to its canonical header name.
var cipHeaderNames = [...]string{"X-Forwarded-For", "Forwarded", "X-Real-Ip"}

// Config says whom to trust when deriving the rate-limit key of a
// request. The model: the TCP peer address is the only thing a client cannot
// forge; a header is believed only when the peer is a proxy listed in
// TrustedProxies, and then only for the hops that trusted proxies appended.
//
// The zero value (and a nil *Config) trusts nobody, so the key is
// always the TCP peer address (an IPv6 one masked to its /64). A
// Config must not be modified while in use; ClientIP only reads it
// and is safe for concurrent use.
type Config struct {
	// TrustedProxies are the ranges of proxies we trust: the peer and any
	// hop inside them is skipped. Build it with ParseTrustedProxies; IPv4
	// addresses are matched in IPv4 form, so an IPv4-mapped prefix built by
	// hand ("::ffff:10.0.0.0/104") never matches. Trusting 0.0.0.0/0 or ::/0
	// lets every client forge its key.
	TrustedProxies []netip.Prefix
	// Header is the header the trusted proxy sets; the zero value is
	// X-Forwarded-For. An unknown value makes ClientIP ignore all headers.
	Header Header
	// IPv6PrefixLen groups IPv6 clients by their first IPv6PrefixLen bits:
	// the key is the masked address, e.g. "2001:db8:1:2::" for 64. One host
	// usually holds a whole /64 (SLAAC, privacy addresses) and could
	// otherwise take a fresh address, and a fresh quota, for every request:
	// 2^64 of them. 1 to 127 group by that prefix; 128 keeps the whole
	// address. 0, the default, means 64. Any other value (below 0 or above
	// 128) is invalid and also means 64, so that a mistake never weakens
	// the grouping. IPv4 clients (and IPv4-mapped IPv6 ones) are counted
	// per address.
	IPv6PrefixLen int
}

// ParseTrustedProxies parses CIDR prefixes ("10.0.0.0/8", "fd00::/8") and
// single addresses ("127.0.0.1" -> /32, "::1" -> /128). Surrounding spaces are
// ignored. Empty values, IPv6 zones and prefixes with host bits set
// ("10.0.0.1/8") are rejected; IPv4-mapped values are converted to IPv4. The
// error names the first bad value, e.g.
// `clientip: trusted proxy "10.0.0.300/8": invalid IP address`. It never panics.
func ParseTrustedProxies(values ...string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(values))
	for _, v := range values {
		p, err := ParsePrefix(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("clientip: trusted proxy %q: %w", v, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// ParsePrefix parses one network as ParseTrustedProxies does, without
// trimming spaces: a CIDR prefix or one address. The error says what is
// wrong ("invalid IP address", "host bits set (did you mean
// 10.0.0.0/8?)"), without the value.
func ParsePrefix(s string) (netip.Prefix, error) {
	p, reason := parsePrefix(s)
	if reason != "" {
		return netip.Prefix{}, errors.New(reason)
	}
	return p, nil
}

// parsePrefix is ParsePrefix; a non-empty reason means failure.
func parsePrefix(s string) (netip.Prefix, string) {
	if s == "" {
		return netip.Prefix{}, "empty value"
	}
	addrPart, bitsPart, hasBits := strings.Cut(s, "/")
	addr, err := netip.ParseAddr(addrPart)
	if err != nil {
		return netip.Prefix{}, "invalid IP address"
	}
	if addr.Zone() != "" {
		return netip.Prefix{}, "IPv6 zone not allowed"
	}
	bits := addr.BitLen()
	if hasBits {
		var ok bool
		if bits, ok = cipAtoi(bitsPart, bits); !ok {
			return netip.Prefix{}, "invalid prefix length"
		}
	}
	p := netip.PrefixFrom(addr, bits)
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Sprintf("host bits set (did you mean %s?)", m)
	}
	if addr.Is4In6() { // masked and 4-in-6 implies bits >= 96
		p = netip.PrefixFrom(addr.Unmap(), bits-96)
	}
	return p, ""
}

// ClientIP returns the client address (the rate-limit key) of a request that
// arrived from peer remoteAddr, in http.Request.RemoteAddr form ("ip:port",
// "[ipv6]:port" or a bare ip). values(name) returns all lines of a request
// header, like http.Header.Values; it is called with the canonical name
// "X-Forwarded-For", "Forwarded" or "X-Real-Ip", and only for a trusted peer.
// values may be nil.
//
// Security contract:
//
//   - Header spoofing: if the peer is not a trusted proxy, every header is
//     ignored and the peer address is the answer. Anyone on the internet can
//     send "X-Forwarded-For: 1.2.3.4"; it must not change the key.
//   - Leftmost-value spoofing: X-Forwarded-For and Forwarded are walked from
//     RIGHT to LEFT, skipping hops that are trusted proxies; the first
//     untrusted hop is the client. The leftmost value is whatever the client
//     sent and is never taken just because it is leftmost. If every hop is
//     trusted, the leftmost hop is the answer.
//   - Key rotation: a hop that is not a valid IP (garbage, "unknown",
//     "_obfuscated", empty) stops the walk and the answer is the last trusted
//     address seen (the hop to its right, or the peer). A random value per
//     request thus never becomes a fresh key, and never lets the value to its
//     left through. An absent or blank header yields the peer.
//   - X-Real-IP: with a trusted peer, the header's single valid IP; with zero
//     or several lines, or an invalid value, the peer.
//
// The answer is canonical: netip form, IPv4-mapped IPv6 unmapped, zone and
// port dropped, IPv6 masked to its /64 or to IPv6PrefixLen. A remoteAddr
// that does not parse is returned as-is, so the caller still gets a stable
// key. ClientIP never
// panics and, when the answer is already canonical in the input (the common
// case), returns a substring of it without allocating. With no trusted
// proxy, the host of a plain IPv4 peer is kept, with a copy of remoteAddr
// to check it against, in a slot chosen by the address of remoteAddr's
// bytes, so that the later requests of a connection, which share its
// RemoteAddr, find it at once.
func (c *Config) ClientIP(remoteAddr string, values func(name string) []string) string {
	if c == nil || len(c.TrustedProxies) == 0 {
		// No proxy is trusted: the peer is the client. An IPv4 peer, the
		// common case, is its host part as it stands.
		if host, ok := cipPeerIPv4(remoteAddr); ok {
			return host
		}
	}
	peer, src, ok := cipParseHost(remoteAddr)
	if !ok {
		return remoteAddr
	}
	if c == nil || values == nil || int(c.Header) >= len(cipHeaderNames) || !c.cipTrusted(peer) {
		return c.cipRender(peer, src)
	}
	lines := values(cipHeaderNames[c.Header])
	if c.Header == XRealIP {
		if len(lines) == 1 {
			if a, s, ok := cipParseHost(cipTrimOWS(lines[0])); ok {
				return c.cipRender(a, s)
			}
		}
		return c.cipRender(peer, src)
	}
	// peer/src is the last trusted address seen; walk hops right to left.
	for i := len(lines) - 1; i >= 0; i-- {
		for line := lines[i]; ; {
			var cut int
			var a netip.Addr
			var s string
			if c.Header == Forwarded {
				cut = cipLastSep(line, ',')
				a, s, ok = cipForwardedFor(line[cut+1:])
			} else {
				cut = strings.LastIndexByte(line, ',')
				a, s, ok = cipParseHost(cipTrimOWS(line[cut+1:]))
			}
			if !ok {
				return c.cipRender(peer, src) // garbage: stop at last trusted
			}
			if !c.cipTrusted(a) {
				return c.cipRender(a, s) // first untrusted hop is the client
			}
			peer, src = a, s
			if cut < 0 {
				break
			}
			line = line[:cut]
		}
	}
	return c.cipRender(peer, src) // every hop trusted: leftmost (or peer)
}

// ClientAddr is ClientIP without the grouping of IPv6 clients: an IPv6
// client's whole address, whatever IPv6PrefixLen says. A configuration's
// allow and ban networks (core.AllowSpec, core.BanSpec) are matched against it, so
// that an IPv6 entry means the addresses it is written for, longer than
// the group or not.
func (c *Config) ClientAddr(remoteAddr string, values func(name string) []string) string {
	var whole Config
	if c != nil {
		whole = *c
	}
	whole.IPv6PrefixLen = 128
	return whole.ClientIP(remoteAddr, values)
}

// cipTrusted reports whether a (canonical: unmapped, no zone) is a trusted proxy.
func (c *Config) cipTrusted(a netip.Addr) bool {
	for _, p := range c.TrustedProxies {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// cipV6Bits is the IPv6 prefix length c groups clients by: see
// IPv6PrefixLen.
func (c *Config) cipV6Bits() int {
	if c == nil || c.IPv6PrefixLen <= 0 || c.IPv6PrefixLen > 128 {
		return 64
	}
	return c.IPv6PrefixLen
}

// cipRender masks an IPv6 a per IPv6PrefixLen and formats it, returning src
// itself when it already spells the result, and a masked IPv6 address from
// cipV6Strings, so that the common cases do not allocate.
func (c *Config) cipRender(a netip.Addr, src string) string {
	if a.Is6() {
		if bits := c.cipV6Bits(); bits < 128 {
			if p, _ := a.Prefix(bits); p.Addr() != a {
				return cipV6String(p.Addr())
			}
		}
	}
	if a.Is4() && len(src) <= len("255.255.255.255") && strings.IndexByte(src, ':') < 0 {
		return src // netip accepts only the canonical dotted quad
	}
	var buf [64]byte
	b := a.AppendTo(buf[:0])
	if string(b) == src {
		return src
	}
	return string(b)
}

// cipV6Strings caches the text of recently seen masked IPv6 addresses (a
// client's /64, most often): a direct-mapped table, so a lookup is one load
// and a compare, and its size is fixed. A slot holds an immutable entry,
// replaced whole on a miss; a client that returns finds its text without
// allocating.
var cipV6Strings [4096]atomic.Pointer[cipV6Entry]

type cipV6Entry struct {
	addr netip.Addr
	text string
}

// cipV6String returns the text of the IPv6 address a (no zone).
func cipV6String(a netip.Addr) string {
	b := a.As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	slot := &cipV6Strings[((hi^lo*0x9E3779B97F4A7C15)*0x9E3779B97F4A7C15)>>52] // Fibonacci hashing to 12 bits
	if e := slot.Load(); e != nil && e.addr == a {
		return e.text
	}
	e := &cipV6Entry{addr: a, text: a.String()}
	slot.Store(e)
	return e.text
}

// cipParseHost parses "ip", "ipv4:port", "[ipv6]" or "[ipv6]:port" (a zone
// is accepted and dropped). It returns the canonical address and the
// substring that spelled it. It does not allocate for zone-less input.
func cipParseHost(s string) (netip.Addr, string, bool) {
	host, bracketed := s, false
	if strings.HasPrefix(s, "[") {
		end := strings.LastIndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, "", false
		}
		host, bracketed = s[1:end], true
		if rest := s[end+1:]; rest != "" {
			if _, ok := cipAtoi(strings.TrimPrefix(rest, ":"), 65535); !ok || rest[0] != ':' {
				return netip.Addr{}, "", false
			}
		}
	} else if i := strings.IndexByte(s, ':'); i >= 0 && i == strings.LastIndexByte(s, ':') {
		// Exactly one colon: IPv4 with port (IPv6 has at least two).
		if _, ok := cipAtoi(s[i+1:], 65535); !ok {
			return netip.Addr{}, "", false
		}
		host = s[:i]
	}
	a, err := netip.ParseAddr(host)
	if err != nil || (bracketed && !a.Is6()) {
		return netip.Addr{}, "", false
	}
	return a.Unmap().WithZone(""), host, true
}

// cipForwardedFor returns the address in the for= parameter of one RFC 7239
// forwarded-element. A missing or repeated for=, or a value that is not an
// IP (e.g. "unknown", "_hidden"), is invalid.
func cipForwardedFor(elem string) (netip.Addr, string, bool) {
	var val string
	found := false
	for {
		cut := cipLastSep(elem, ';')
		name, v, _ := strings.Cut(cipTrimOWS(elem[cut+1:]), "=")
		if strings.EqualFold(name, "for") {
			if found {
				return netip.Addr{}, "", false
			}
			val, found = v, true
		}
		if cut < 0 {
			break
		}
		elem = elem[:cut]
	}
	if len(val) >= 2 && val[0] == '"' && val[len(val)-1] == '"' {
		val = val[1 : len(val)-1]
	}
	if !found || strings.ContainsAny(val, "\"\\") {
		return netip.Addr{}, "", false
	}
	return cipParseHost(val)
}

// cipLastSep returns the index of the last sep in s that is outside an
// RFC 7230 quoted-string, or -1. Scanning from the right keeps the hops
// appended by proxies intact even if the client's part has a stray quote.
func cipLastSep(s string, sep byte) int {
	quoted := false
	for i := len(s) - 1; i >= 0; i-- {
		switch s[i] {
		case '"':
			n := 0 // a quote preceded by an odd number of backslashes is escaped
			for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
				n++
			}
			if n%2 == 0 {
				quoted = !quoted
			}
		case sep:
			if !quoted {
				return i
			}
		}
	}
	return -1
}

// cipAtoi parses 1 to 5 decimal digits with a value of at most max.
func cipAtoi(s string, max int) (int, bool) {
	if len(s) == 0 || len(s) > 5 {
		return 0, false
	}
	n := 0
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
		n = n*10 + int(s[i]-'0')
	}
	return n, n <= max
}

// cipTrimOWS trims HTTP optional whitespace (spaces and tabs).
func cipTrimOWS(s string) string {
	return strings.Trim(s, " \t")
}

// cipPeers caches the host of recently seen plain IPv4 peers
// ("a.b.c.d:port", see cipPlainIPv4) in slots chosen by the address of
// their string: a server hands every request of one connection the same
// RemoteAddr string, so that the requests after the first two find its
// host with one load and a comparison of at most 21 bytes instead of
// parsing the string again. A direct-mapped table, so a lookup is one load
// and its size is fixed; a slot holds an immutable entry, replaced whole.
// An entry holds its own copy of the string it was made for and answers
// only a string equal to that copy: the address picks the slot and
// nothing more, so a string over bytes its caller reuses (a fasthttp-style
// buffer) gets the answer for what it holds now. A string is only
// remembered (cipSeen) the first time its slot sees it and gets an entry
// the second, so that a peer seen once (a connection with one request)
// costs no allocation.
var (
	cipPeers [4096]atomic.Pointer[cipPeer]
	cipSeen  [4096]atomic.Pointer[byte]
)

type cipPeer struct {
	addr    [len("255.255.255.255:65535")]byte // the peer's string, addr[:n]
	n, host uint8                              // its length, its host's
}

// cipPeerIPv4 is cipPlainIPv4 through cipPeers.
func cipPeerIPv4(hostport string) (string, bool) {
	p := unsafe.StringData(hostport)
	i := addrhash.Slot(unsafe.Pointer(p), 12)
	if e := cipPeers[i].Load(); e != nil && int(e.n) == len(hostport) && string(e.addr[:e.n]) == hostport {
		return hostport[:e.host], true
	}
	host, ok := cipPlainIPv4(hostport)
	if !ok || p == nil {
		return host, ok
	}
	if seen := &cipSeen[i]; seen.Load() == p && len(hostport) <= len(cipPeer{}.addr) {
		e := &cipPeer{n: uint8(len(hostport)), host: uint8(len(host))}
		copy(e.addr[:], hostport)
		cipPeers[i].Store(e)
	} else {
		seen.Store(p)
	}
	return host, true
}

// cipPlainIPv4 returns the host of "a.b.c.d:port" when it is an IPv4
// address in canonical form (four decimal octets ≤ 255, no leading zeros),
// as netip would print it, and the port is 1 to 5 digits, at most 65535.
// It reads the string once, from the left.
func cipPlainIPv4(hostport string) (string, bool) {
	s := hostport
	i := 0
	for k := 0; k < 4; k++ {
		// An octet: "0", or 1 to 3 digits without a leading zero, ≤ 255.
		if i >= len(s) || s[i]-'0' > 9 {
			return "", false
		}
		v := uint(s[i] - '0')
		i++
		for n := 1; v != 0 && n < 3 && i < len(s) && s[i]-'0' <= 9; n++ {
			v = v*10 + uint(s[i]-'0')
			i++
		}
		sep := byte('.')
		if k == 3 {
			sep = ':'
		}
		if v > 255 || i >= len(s) || s[i] != sep {
			return "", false
		}
		i++
	}
	if _, ok := cipAtoi(s[i:], 65535); !ok {
		return "", false // as cipParseHost: a port must be a number
	}
	return s[:i-1], true
}
