package core

import (
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/rlkit/rlkit/core/store"
)

// A rule's key (RuleSpec.Key) says what the rule counts per: the caller
// (user, the default), the client IP, a request header, a path parameter,
// or several of those together. A rule keyed by user alone, as is every
// rule that names no key, counts under Limiter.Key(identity). Any other
// key is its parts in order, joined by '|', each a tag and a value:
//
//	u:<Limiter.Key(identity)>    user, when the key function named the caller (not its client IP)
//	ip:<client IP>               ip, and the fallback of every other part
//	h:<Name>:hmac:<32 hex>       header:<Name>, the value's keyed hash
//	p:<value>                    param:<name>, decoded once
//
// The tags are prefix-free and no value holds '|' (a value's '|' and '%'
// are written "%7C" and "%25"), so two requests share a key only when
// every part's kind and value are the same: a user named "1.2.3.4" is
// "u:1.2.3.4", never the client IP 1.2.3.4's "ip:1.2.3.4", and no value
// can spell a separator. A key longer than store.MaxKeyLen is its digest
// (store.BoundKey); a shorter one never starts with "sha256:".

// keyKind is the kind of one part of a rule's key.
type keyKind uint8

const (
	keyUser   keyKind = iota // the key function's identity, else the client IP
	keyIP                    // the client IP (Flow.ClientIP)
	keyHeader                // a request header's value, hashed
	keyParam                 // the path segment a parameter of the rule's paths matched
)

// maxKeyParts bounds the parts of a key: a key is built on every request
// of its rule.
const maxKeyParts = 4

// The tags that start the parts of a key, and what separates them.
const (
	tagUser   = "u:"
	tagIP     = "ip:"
	tagHeader = "h:"
	tagParam  = "p:"
	keySep    = '|'
)

// keyPart is one part of a rule's key.
type keyPart struct {
	kind keyKind
	name string // keyHeader: the canonical header name; keyParam: the parameter's
	pos  []int  // keyParam: the parameter's segment in each of the rule's paths, in order
}

// ruleKey is a rule's compiled key; a rule keyed by user alone has none
// (nil), and counts under the caller's key.
type ruleKey struct {
	spec  string // as compiled: the parts joined by '+', header names canonical
	parts []keyPart
}

// Key returns what the rule counts per, as the configuration writes it
// (RuleSpec.Key): "user" (the default), or its parts joined by '+'
// ("ip", "user+param:kb", "ip+header:X-Api-Key"), header names canonical.
func (r *Rule) Key() string {
	if r.key == nil {
		return "user"
	}
	return r.key.spec
}

// keyed reports whether a rule of m counts per a key of its own.
func (m *match) keyed() bool {
	return m.rule != nil && m.rule.key != nil || m.shadow != nil && m.shadow.key != nil
}

// decidingKey returns the store key of the rule of m that decides, the
// enforced one, else the one in shadow mode, given the caller's (key) and
// the rules' own (see Limiter.count).
func decidingKey(key string, m *match, d *Decision) string {
	switch {
	case m.rule == nil && d.shadow.more != nil:
		return d.shadow.more.key
	case m.rule != nil && d.Key != "":
		return d.Key
	}
	return key
}

// shadowKey returns the store key of the rule in shadow mode, given to
// Limiter.count in d.shadow.more, which it clears, else the caller's, the
// key of identity. (Out of line: count, which calls it only for a
// configuration with keys, stays small.)
//
//go:noinline
func (l *Limiter) shadowKey(identity string, d *Decision) string {
	if more := d.shadow.more; more != nil {
		d.shadow.more = nil
		return more.key
	}
	return l.Key(identity)
}

// key compiles the key spec at fkey (field field) of the rule label whose
// paths are paths, or of the default limit (def); nil for user, the
// default, or when the spec has a problem.
func (cc *compiler) key(fkey, label, field, spec string, paths []pattern, def bool) *ruleKey {
	if spec == "" {
		return nil
	}
	fail := func(format string, args ...any) { cc.fail(fkey, label, field, spec, format, args...) }
	raw := strings.Split(spec, "+")
	if len(raw) > maxKeyParts {
		fail("%d parts, at most %d", len(raw), maxKeyParts)
		return nil
	}
	n := len(cc.errs)
	k := &ruleKey{}
	var names []string
	for _, s := range raw {
		s = strings.Trim(s, " ")
		kind, arg, named := strings.Cut(s, ":")
		p := keyPart{name: arg}
		switch kind {
		case "user", "ip":
			p.kind = keyUser
			if kind == "ip" {
				p.kind = keyIP
			}
			if named {
				fail("%q: %s takes no name", s, kind)
				continue
			}
		case "header":
			p.kind = keyHeader
			if !headerName(arg) {
				fail("%q: want header:<Name>, a header name such as X-Api-Key (letters, digits and !#$%%&'*-.^_`|~)", s)
				continue
			}
			p.name = http.CanonicalHeaderKey(arg)
		case "param":
			p.kind = keyParam
			if arg == "" || nameLen(arg) != len(arg) {
				fail("%q: want param:<name>, the name of a parameter of the rule's paths (an ASCII letter or '_', then letters, digits or '_')", s)
				continue
			}
			if def {
				fail("%q: the default limit has no paths, so no parameter", s)
				continue
			}
			p.pos = cc.paramPositions(fail, s, arg, paths)
		case "":
			fail("an empty part: want parts joined by one '+'")
			continue
		default:
			fail("%q: want user, ip, header:<Name> or param:<name>, or several joined by '+'", s)
			continue
		}
		name := kind
		if named {
			name += ":" + p.name
		}
		for _, prev := range names {
			if prev == name {
				fail("%q given twice", name)
			}
		}
		names = append(names, name)
		k.parts = append(k.parts, p)
	}
	if len(cc.errs) > n || len(k.parts) == 1 && k.parts[0].kind == keyUser {
		return nil
	}
	k.spec = strings.Join(names, "+")
	return k
}

// paramPositions returns the segment the parameter name stands at in each
// of paths, failing (for the part s) when a path has no such parameter or
// names it twice.
func (cc *compiler) paramPositions(fail func(string, ...any), s, name string, paths []pattern) []int {
	pos := make([]int, len(paths))
	for i := range paths {
		j, n := paths[i].param(name)
		switch {
		case n == 0:
			fail("%q: path %q has no parameter %s (every path of the rule must name it, as :%s or {%s})", s, paths[i].raw, name, name, name)
		case n > 1:
			fail("%q: path %q names %s %d times", s, paths[i].raw, name, n)
		}
		pos[i] = j
	}
	return pos
}

// headerName reports whether s is a header name: one or more token
// characters (RFC 9110), '+' aside (it joins the parts of a key).
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// keyReq is what the keys of one request are built from, beside the
// request itself (Flow.ruleKey).
type keyReq struct {
	l     *Limiter
	id    string // the identity: the key function's, else the client IP
	named bool   // id is not the client IP (nor, for Limiter.Decide, an IP address)
	ip    string // the client IP
	path  Path
	fold  bool // see Flow.FoldCase
}

// ruleKey returns the store key of request r under rule, when the rule
// counts per a key of its own; "" when it counts per the caller (no
// rule, or a rule keyed by user alone).
func (f *Flow[R]) ruleKey(r R, rule *Rule, k *keyReq) string {
	if rule == nil || rule.key == nil {
		return ""
	}
	var buf [store.MaxKeyLen]byte // a longer key is bounded (boundKey)
	b := buf[:0]
	for i := range rule.key.parts {
		p := &rule.key.parts[i]
		if i > 0 {
			b = append(b, keySep)
		}
		switch p.kind {
		case keyUser:
			if k.named {
				b = k.l.appendUser(b, k.id)
				continue
			}
		case keyHeader:
			if f.Header != nil {
				if v := f.Header(r, p.name); v != "" {
					b = k.l.appendSecret(append(b, tagHeader...), p.name, v)
					continue
				}
			}
		case keyParam:
			if seg, mode, ok := rule.param(p.pos, k.path, k.fold); ok {
				b = appendParam(append(b, tagParam...), seg, mode, k.fold)
				continue
			}
		}
		// ip, and what every other part falls back to.
		b = appendEscaped(append(b, tagIP...), k.ip)
	}
	return boundKey(b)
}

// boundKey is the key b, bounded: its digest (store.BoundKey) when longer
// than store.MaxKeyLen. A shorter one starts with a tag, never with the
// digests' "sha256:".
func boundKey(b []byte) string {
	if len(b) > store.MaxKeyLen {
		return store.BoundKey(string(b))
	}
	return string(b)
}

// appendUser appends the user part of a key for identity: "u:" and
// Limiter.Key(identity), escaped.
func (l *Limiter) appendUser(b []byte, identity string) []byte {
	b = append(b, tagUser...)
	if label, secret, ok := secretParts(identity); ok {
		return l.appendSecret(b, label, secret)
	}
	return appendEscaped(b, store.BoundKey(identity))
}

// appendSecret appends Limiter.Key(SecretIdentity(label, secret)),
// escaped.
func (l *Limiter) appendSecret(b []byte, label, secret string) []byte {
	var buf [store.MaxKeyLen]byte
	return appendEscaped(b, l.secretKey(buf[:0], label, secret))
}

// appendEscaped appends s with '%' and keySep escaped ("%25", "%7C").
func appendEscaped[S string | []byte](b []byte, s S) []byte {
	i := 0
	for i < len(s) && s[i] != '%' && s[i] != keySep {
		i++
	}
	b = append(b, s[:i]...)
	for ; i < len(s); i++ {
		b = appendEscapedByte(b, s[i])
	}
	return b
}

func appendEscapedByte(b []byte, c byte) []byte {
	switch c {
	case '%':
		return append(b, "%25"...)
	case keySep:
		return append(b, "%7C"...)
	}
	return append(b, c)
}

// paramMode is what is left to decode in a parameter's segment, by the
// spelling of the path it was found in (see Rule.param).
type paramMode uint8

const (
	decodedAll  paramMode = iota // nothing: the segment is decoded (or has no escape)
	decodeSlash                  // the encoded slashes: the path decoded segment by segment
	decodeAll                    // every escape: the path as sent
)

// appendParam appends the value of the segment seg found in a spelling of
// mode: decoded once, in lower case with fold, escaped.
func appendParam(b []byte, seg string, mode paramMode, fold bool) []byte {
	if !fold && mode == decodedAll {
		return appendEscaped(b, seg)
	}
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if c == '%' && mode != decodedAll {
			if x, ok := escaped(seg, i); ok && (mode == decodeAll || x == '/') {
				c = x
				i += 2
			}
		}
		if fold {
			c = lowerByte(c)
		}
		b = appendEscapedByte(b, c)
	}
	return b
}

// param returns the segment of request path p that the rule's parameter
// stands at (pos: its segment in each of the rule's paths), found in a
// spelling of p (see Path) that one of the rule's paths matches, with
// fold without regard to ASCII case, and what is left to decode in it.
// The spellings are tried from the most decoded and cleaned to the path
// as sent, so that the value is what the path resolves to: every spelling
// of one path that a router serves by the rule's handler with the same
// parameter gives the same value once decoded, and a client cannot mint
// keys by spelling it otherwise ("%61" for 'a', "x/../a", "a/"). A clean
// path, its only spelling, costs a match and no allocation. ok is false
// when no spelling matches (never, for the rule the request counts
// under).
func (r *Rule) param(pos []int, p Path, fold bool) (seg string, mode paramMode, ok bool) {
	s := string(p)
	if clean(s) {
		// A clean path is its only spelling, which the rule matched: with
		// one path, the rule's path is the one (segment checks the depth).
		if len(r.paths) == 1 {
			seg, ok = segment(s, pos[0])
		} else {
			seg, ok = r.paramIn(pos, s, fold)
		}
		return seg, decodedAll, ok
	}
	d, sd := decode(s, false), decode(s, true)
	for _, c := range [...]struct {
		s    string
		mode paramMode
	}{
		{path.Clean(d), decodedAll}, {d, decodedAll},
		{path.Clean(sd), decodeSlash}, {sd, decodeSlash},
		{path.Clean(s), decodeAll}, {s, decodeAll},
	} {
		if seg, ok = r.paramIn(pos, trimSlash(c.s), fold); ok {
			return seg, c.mode, true
		}
	}
	return "", 0, false
}

// paramIn returns the segment at pos[i] of the spelling s (trailing slash
// trimmed) that the rule's i-th path, the first that matches s, has.
func (r *Rule) paramIn(pos []int, s string, fold bool) (string, bool) {
	for i := range r.paths {
		if r.paths[i].matchCase(s, fold) {
			return segment(s, pos[i])
		}
	}
	return "", false
}

// segment returns the i-th segment (from 0) of path, which starts with
// '/', and whether it is a segment of its own, not empty. (A loop over
// bytes: the segments are short, and IndexByte's setup costs more than
// it saves.)
func segment(path string, i int) (string, bool) {
	if path == "" || path[0] != '/' {
		return "", false
	}
	start := 1
	for j := 1; j < len(path); j++ {
		if path[j] != '/' {
			continue
		}
		if i == 0 {
			return path[start:j], j > start
		}
		i, start = i-1, j+1
	}
	return path[start:], i == 0 && len(path) > start
}

// resetKey is the store key Limiter.Reset resets for identity under
// rule r: the caller's (Key) for a rule keyed by user; for a key of one
// other part, that part's with identity as its value (see Limiter.Reset);
// an error for a key of several parts.
func (l *Limiter) resetKey(r *Rule, identity string) (string, error) {
	if r.key == nil {
		return l.Key(identity), nil
	}
	if len(r.key.parts) > 1 {
		return "", &keyError{rule: r.Name, spec: r.key.spec}
	}
	var buf [2 * store.MaxKeyLen]byte
	b := buf[:0]
	switch p := &r.key.parts[0]; p.kind {
	case keyIP:
		b = appendEscaped(append(b, tagIP...), identity)
	case keyHeader:
		if _, secret, ok := secretParts(identity); ok {
			identity = secret
		}
		b = l.appendSecret(append(b, tagHeader...), p.name, identity)
	case keyParam:
		b = appendParam(append(b, tagParam...), identity, decodedAll, false)
	}
	return boundKey(b), nil
}

// keyError is Limiter.Reset's error for a rule whose key has several
// parts: one identity does not name such a key.
type keyError struct{ rule, spec string }

func (e *keyError) Error() string {
	return "rate-limit reset: rule " + strconv.Quote(e.rule) + " counts per " + e.spec +
		", a key of several parts: reset it by its store key (ResetKey with Decision.Key or Event.Key)"
}
