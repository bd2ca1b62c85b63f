package core

import (
	"encoding/binary"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/store"
	"go.yaml.in/yaml/v3"
)

// AllowSpec is the allow list of a configuration (rate_limit.allow):
// callers never limited and never counted, as if the bypass predicate
// accepted them (Observer outcome bypassed).
type AllowSpec struct {
	// Identities are the store keys of callers (see Limiter.Key) a request
	// is matched by, after the key function names it, whatever key its
	// rule counts per (RuleSpec.Key): the identity itself
	// for a plain one ("sub:ops-bot", "user:42", an IPv4 client IP), and
	// for a secret identity (an API key through an adapter's HeaderKey)
	// its keyed hash, "X-Api-Key:hmac:<32 hex digits>", so that no key is
	// written in clear in the file. Limiter.Key(adapter.HeaderIdentity(name,
	// key)) gives that form, as does Decision.Key and the Observer's
	// Event.Key of a request the caller made. An entry that starts with
	// "sha256:" is a digest key (store.BoundKey): "sha256:" and 64 lower-case
	// hex digits. An entry longer than store.MaxKeyLen is the identity of such
	// a key. An IPv4 client IP entry must be written as ClientIP gives
	// it (canonical, IPv4-mapped addresses as IPv4); an IPv6 one is an
	// error (such a client counts under its group's first address, per
	// clientip.Config.IPv6PrefixLen): list client IPs in Networks.
	Identities []string
	// Networks are CIDR prefixes ("10.0.0.0/8", "2001:db8::/32") or single
	// addresses (a /32 or /128) whose client IPs are never limited nor
	// counted, whatever identity the request names. They are matched
	// against the client's whole address (clientip.Config.ClientAddr),
	// an IPv6 one too, whatever IPv6PrefixLen groups it under. A prefix with host
	// bits set ("10.0.0.1/8") and an IPv6 zone are errors; an
	// IPv4-mapped prefix is taken as IPv4. A network inside a banned one
	// is an error: the ban comes first.
	Networks []string
}

// BanSpec is the ban list of a configuration (rate_limit.ban).
type BanSpec struct {
	// Networks are CIDR prefixes or single addresses (as in
	// AllowSpec.Networks) whose requests are refused with 403 Forbidden
	// before anything else: before exempt paths, the bypass predicate,
	// the key function and any counting.
	Networks []string
}

// lists is the compiled allow and ban lists of a Config; nil when both
// are empty.
type lists struct {
	allowKeys          map[string]struct{}
	allowNets, banNets netSet
}

// netSet holds CIDR prefixes (canonical: masked, IPv4 unmapped, no zone)
// for a lookup that costs one map probe per distinct prefix length in
// the set, at most 33 for IPv4 and 129 for IPv6 whatever its size, and
// allocates nothing. The maps' keys are plain integers, quick to hash.
type netSet struct {
	list         []netip.Prefix  // in list order; the zero Prefix for a bad entry
	v4           map[uint64]int  // bits<<32 | masked IPv4 address → index in list
	v6           map[netKey6]int // masked IPv6 address and bits → index in list
	lens4, lens6 []uint8         // the distinct prefix lengths, shortest first
}

// netKey6 is the map key of an IPv6 prefix.
type netKey6 struct {
	hi, lo uint64
	bits   int
}

// key4 and key6 are the map keys of the prefix of a (of its family) of
// length bits.
func key4(a netip.Addr, bits int) uint64 {
	b := a.As4()
	return uint64(bits)<<32 | uint64(binary.BigEndian.Uint32(b[:])&^(1<<(32-bits)-1))
}

func key6(a netip.Addr, bits int) netKey6 {
	b := a.As16()
	hi, lo := binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
	switch {
	case bits <= 64:
		hi &^= 1<<(64-bits) - 1
		lo = 0
	default:
		lo &^= 1<<(128-bits) - 1
	}
	return netKey6{hi, lo, bits}
}

// add adds p (canonical), the i-th entry of its list; it reports the
// index of an equal entry when there is one, and then adds nothing.
func (s *netSet) add(p netip.Prefix, i int) (dup int, ok bool) {
	a, bits := p.Addr(), p.Bits()
	lens := &s.lens6
	if a.Is4() {
		if s.v4 == nil {
			s.v4 = map[uint64]int{}
		}
		k := key4(a, bits)
		if j, in := s.v4[k]; in {
			return j, true
		}
		s.v4[k], lens = i, &s.lens4
	} else {
		if s.v6 == nil {
			s.v6 = map[netKey6]int{}
		}
		k := key6(a, bits)
		if j, in := s.v6[k]; in {
			return j, true
		}
		s.v6[k] = i
	}
	if b := uint8(bits); !slices.Contains(*lens, b) {
		*lens = append(*lens, b)
		slices.Sort(*lens)
	}
	return 0, false
}

// empty reports whether s holds no prefix.
func (s *netSet) empty() bool { return s.v4 == nil && s.v6 == nil }

// lookup returns the index of the first prefix of s, shortest first, of
// at most max bits that holds a (canonical), and whether there is one.
func (s *netSet) lookup(a netip.Addr, max int) (int, bool) {
	if a.Is4() {
		for _, b := range s.lens4 {
			if int(b) > max {
				break
			}
			if i, ok := s.v4[key4(a, int(b))]; ok {
				return i, true
			}
		}
		return 0, false
	}
	for _, b := range s.lens6 {
		if int(b) > max {
			break
		}
		if i, ok := s.v6[key6(a, int(b))]; ok {
			return i, true
		}
	}
	return 0, false
}

// find returns the index of the first prefix, shortest first, that holds
// a (unmapped, any zone ignored), and whether there is one.
func (s *netSet) find(a netip.Addr) (int, bool) { return s.lookup(a, 128) }

// holder returns the index of a prefix of s that holds all of p, and
// whether there is one; with strict, p itself does not count.
func (s *netSet) holder(p netip.Prefix, strict bool) (int, bool) {
	max := p.Bits()
	if strict {
		max--
	}
	return s.lookup(p.Addr(), max)
}

// hasNets reports whether the configuration lists networks, so that a
// request's client IP must be known.
func (c *Config) hasNets() bool {
	return c.lists != nil && !(c.lists.allowNets.empty() && c.lists.banNets.empty())
}

// listIP parses an identity or client IP for the network lists: the zero
// Addr when it is not an IP address.
func listIP(s string) netip.Addr {
	if !maybeIP(s) {
		return netip.Addr{} // ParseAddr's error would allocate
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// maybeIP reports whether s may be an IP address: not empty, and only
// hex digits, '.' and ':' before a zone's '%'. It rules out, without
// allocating, the identities ("sub:alice", "user:42") Limiter.Decide
// hands listIP.
func maybeIP(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '%':
			return i > 0
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '.', c == ':':
		default:
			return false
		}
	}
	return true
}

// banned reports whether ip is in a banned network.
func (c *Config) banned(ip netip.Addr) bool {
	if c.lists == nil || !ip.IsValid() {
		return false
	}
	_, ok := c.lists.banNets.find(ip)
	return ok
}

// allowsIP reports whether ip is in an allowed network. (It inlines to
// one test for the zero ip of a configuration without networks.)
func (c *Config) allowsIP(ip netip.Addr) bool {
	return ip.IsValid() && c.allowsNet(ip)
}

// allowsNet is allowsIP for a valid ip.
func (c *Config) allowsNet(ip netip.Addr) bool {
	if c.lists == nil {
		return false
	}
	_, ok := c.lists.allowNets.find(ip)
	return ok
}

// BanNetwork returns the network of the ban list (BanSpec.Networks, in
// canonical form: "10.0.0.0/8", "192.0.2.7/32") that holds clientAddr,
// the client's whole address as the limiter matches it
// (clientip.Config.ClientAddr), and whether there is one: the request is
// then refused with 403 before anything else. It explains a ban, for
// tools; the limiter does not call it.
func (c *Config) BanNetwork(clientAddr string) (network netip.Prefix, ok bool) {
	if c == nil || c.lists == nil {
		return netip.Prefix{}, false
	}
	return c.lists.banNets.entry(listIP(clientAddr))
}

// AllowNetwork is BanNetwork for the allow list's networks
// (AllowSpec.Networks): a request from it that is not exempt passes
// uncounted.
func (c *Config) AllowNetwork(clientAddr string) (network netip.Prefix, ok bool) {
	if c == nil || c.lists == nil {
		return netip.Prefix{}, false
	}
	return c.lists.allowNets.entry(listIP(clientAddr))
}

// AllowsIdentity reports whether key, a caller's store key
// (Limiter.Key of its identity), is in the allow list's identities
// (AllowSpec.Identities): a request of that caller that is not exempt
// passes uncounted, whatever its rule counts per. It explains an allowed
// caller, for tools; the limiter asks the same of every request it
// counts.
func (c *Config) AllowsIdentity(key string) bool { return c != nil && c.allowsKey(key) }

// entry returns the prefix of s that holds a (the zero Addr: none), as
// find finds it.
func (s *netSet) entry(a netip.Addr) (netip.Prefix, bool) {
	if !a.IsValid() {
		return netip.Prefix{}, false
	}
	if i, ok := s.find(a); ok {
		return s.list[i], true
	}
	return netip.Prefix{}, false
}

// allowsKey reports whether the store key key is an allowed identity.
func (c *Config) allowsKey(key string) bool {
	if c.lists == nil || c.lists.allowKeys == nil {
		return false
	}
	_, ok := c.lists.allowKeys[key]
	return ok
}

// forbiddenBody is the body of a request from a banned network.
var (
	forbiddenBody   = []byte(`{"detail": "Forbidden"}`)
	forbiddenLength = []string{strconv.Itoa(len(forbiddenBody))}
)

// banned decides a request from a banned network: 403, nothing counted.
func (l *Limiter) banned(d *Decision) {
	*d = Decision{Banned: true}
	l.observe(Event{Outcome: OutcomeBanned})
}

// lists compiles the allow and ban lists; nil when both are empty.
func (cc *compiler) lists(allow AllowSpec, ban BanSpec) *lists {
	if len(allow.Identities) == 0 && len(allow.Networks) == 0 && len(ban.Networks) == 0 {
		return nil
	}
	ls := &lists{}
	ls.banNets = cc.networks("ban.networks", ban.Networks)
	ls.allowNets = cc.networks("allow.networks", allow.Networks)
	for i, p := range ls.allowNets.list {
		if !p.IsValid() {
			continue
		}
		if j, in := ls.banNets.holder(p, false); in {
			cc.fail("allow.networks."+strconv.Itoa(i), "", "allow.networks", allow.Networks[i], "inside ban.networks %q%s: a banned network is refused first, so this entry could never apply", ban.Networks[j], paren(cc.lineOf("ban.networks."+strconv.Itoa(j))))
		}
	}
	seen := map[string]int{}
	for i, id := range allow.Identities {
		key := "allow.identities." + strconv.Itoa(i)
		k, msg := allowKey(id)
		if msg != "" {
			if label, _, secret := secretParts(id); secret {
				id = "SecretIdentity(" + strconv.Quote(label) + ", …)" // the secret stays out of the message
			}
			cc.fail(key, "", "allow.identities", id, "%s", msg)
			continue
		}
		if j, dup := seen[k]; dup {
			cc.fail(key, "", "allow.identities", id, "the same store key as allow.identities[%d]%s", j, paren(cc.lineOf("allow.identities."+strconv.Itoa(j))))
			continue
		}
		seen[k] = i
		if ls.allowKeys == nil {
			ls.allowKeys = map[string]struct{}{}
		}
		ls.allowKeys[k] = struct{}{}
	}
	return ls
}

// networks compiles a list of networks at key, refusing a bad one, one
// given twice and one another entry holds.
func (cc *compiler) networks(key string, vals []string) netSet {
	s := netSet{list: make([]netip.Prefix, len(vals))}
	for i, v := range vals {
		p, err := clientip.ParsePrefix(v)
		if err != nil {
			cc.fail(key+"."+strconv.Itoa(i), "", key, v, "%v (want a CIDR prefix such as 10.0.0.0/8 or 2001:db8::/32, or one address)", err)
			continue
		}
		if j, dup := s.add(p, i); dup {
			cc.fail(key+"."+strconv.Itoa(i), "", key, v, "the same network as %s[%d]%s", key, j, paren(cc.lineOf(key+"."+strconv.Itoa(j))))
			continue
		}
		s.list[i] = p
	}
	for i, p := range s.list {
		if !p.IsValid() {
			continue
		}
		if j, in := s.holder(p, true); in {
			cc.fail(key+"."+strconv.Itoa(i), "", key, vals[i], "inside %q (%s[%d]%s): this entry is redundant", vals[j], key, j, paren(cc.lineOf(key+"."+strconv.Itoa(j))))
		}
	}
	return s
}

// allowKey is the store key an allow.identities entry matches, or why the
// entry is refused.
func allowKey(id string) (key, msg string) {
	n := len(id)
	switch {
	case id == "":
		return "", "an empty identity"
	case strings.IndexByte(id, 0) >= 0:
		return "", "a secret identity (SecretIdentity): write its store key, Limiter.Key(identity), which never holds the secret"
	case strings.HasPrefix(id, digestPrefix):
		if n != len(digestPrefix)+64 || !lowerHex(id[len(digestPrefix):]) {
			return "", `"sha256:" starts a digest key (BoundKey): "sha256:" and 64 lower-case hex digits`
		}
		return id, ""
	case n >= hmacTail && id[n-hmacTail:n-hmacTail+len(hmacMark)] == hmacMark:
		switch {
		case !lowerHex(id[n-32:]):
			return "", `a secret identity's key ends in ":hmac:" and 32 lower-case hex digits (Limiter.Key)`
		case n == hmacTail:
			return "", `a secret identity's key has a label before ":hmac:" (Limiter.Key)`
		case n > store.MaxKeyLen:
			return "", "longer than " + strconv.Itoa(store.MaxKeyLen) + " bytes: the limiter stores such a key as its digest; write Limiter.Key(identity)"
		}
		return id, ""
	}
	if a, err := netip.ParseAddr(id); err == nil {
		if a.Unmap().Is6() {
			// An IPv6 client counts under its group's first address
			// (clientip.Config.IPv6PrefixLen), which the file cannot know.
			return "", "an IPv6 client counts under its group's address (its /64 by default): list it in allow.networks"
		}
		if c := a.Unmap().WithZone("").String(); c != id {
			return "", "a client IP is written as the limiter names it: " + strconv.Quote(c) + " (or list it in allow.networks)"
		}
	}
	return store.BoundKey(id), ""
}

// lowerHex reports whether s is all lower-case hex digits.
func lowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// allow reads rate_limit.allow.
func (w *walker) allow(n *yaml.Node) AllowSpec {
	var a AllowSpec
	w.mapping(n, "", "allow", func(key string, k, v *yaml.Node) {
		fkey := "allow." + key
		w.ln[fkey] = v.Line
		switch key {
		case "identities":
			a.Identities = w.strs(v, fkey, "", fkey, false)
		case "networks":
			a.Networks = w.strs(v, fkey, "", fkey, false)
		default:
			w.fail(k, "", fkey, "", "unknown field (want identities or networks)")
		}
	})
	return a
}

// ban reads rate_limit.ban.
func (w *walker) ban(n *yaml.Node) BanSpec {
	var b BanSpec
	w.mapping(n, "", "ban", func(key string, k, v *yaml.Node) {
		fkey := "ban." + key
		w.ln[fkey] = v.Line
		switch key {
		case "networks":
			b.Networks = w.strs(v, fkey, "", fkey, false)
		default:
			w.fail(k, "", fkey, "", "unknown field (want networks)")
		}
	})
	return b
}
