package worksclient

import (
	"net/url"
	"strings"
)

// idSegment is what a path segment holding a resource id becomes in a key.
const idSegment = "{id}"

// maxWord is the longest segment kept as a word; a longer one is an id.
const maxWord = 64

// APIKey returns the rate-limit key of a Works API call: the method, one
// space and the normalized path, for example
//
//	APIKey("PATCH", "/v1.0/users/a1b2c3@example.com?x=1") == "PATCH /v1.0/users/{id}"
//	APIKey("POST", "/oauth2/v2.0/token")                  == "POST /oauth2/v2.0/token"
//
// The method is upper-cased ("" is GET, as in net/http; a byte that cannot
// appear in a method becomes '_'). The path may be escaped (as
// url.URL.EscapedPath returns it) or not, and may be a whole URL, whose
// scheme and host are dropped. The query and fragment are dropped, and so
// are empty segments (a trailing slash, "//"). Each segment is
// percent-decoded, then kept when it is
//
//   - a word: ASCII letters in runs joined by single '-', at most 64 bytes,
//     optionally ending in one digit ("users", "alias-emails", "Users",
//     "oauth2");
//   - or a version: 'v' and one to three groups of one to three digits
//     joined by '.' ("v1", "v1.0", "v2.0").
//
// Any other segment (one with several digits, '@', '.', '%' after decoding,
// a UUID, an e-mail, a number) holds an id and becomes "{id}". A decoded
// word is written decoded, so "alias%2Demails" and "alias-emails" are one
// key. APIKey of a key's own method and path returns the key unchanged.
//
// The digit allowed at the end of a word (for "oauth2") is the one
// departure from the rule above ("letters and '-'"): without it the token endpoint
// would be keyed "POST /{id}/v2.0/token". A word-like id ("alice", "emp1")
// is kept as it is; a Transport given WithTemplates keys such paths right.
func APIKey(method, path string) string {
	var b strings.Builder
	b.Grow(len(method) + len(path) + 8)
	writeMethod(&b, method)
	b.WriteByte(' ')
	n := 0
	for seg := range segments(path) {
		b.WriteByte('/')
		if keep(seg) {
			b.WriteString(seg)
		} else {
			b.WriteString(idSegment)
		}
		n++
	}
	if n == 0 {
		b.WriteByte('/')
	}
	return b.String()
}

// writeMethod writes method upper-cased, "GET" for "", and '_' for every
// byte that is not an RFC 9110 token character.
func writeMethod(b *strings.Builder, method string) {
	if method == "" {
		b.WriteString("GET")
		return
	}
	for i := 0; i < len(method); i++ {
		c := method[i]
		switch {
		case 'a' <= c && c <= 'z':
			b.WriteByte(c - 'a' + 'A')
		case tchar(c):
			b.WriteByte(c)
		default:
			b.WriteByte('_')
		}
	}
}

func tchar(c byte) bool {
	switch {
	case 'A' <= c && c <= 'Z', 'a' <= c && c <= 'z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// segments yields the decoded non-empty segments of a path, after dropping
// a scheme and authority, the query and the fragment. A segment that does
// not decode is yielded as it is (its '%' makes it an id).
func segments(path string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		path = pathOnly(path)
		for len(path) > 0 {
			var seg string
			if i := strings.IndexByte(path, '/'); i >= 0 {
				seg, path = path[:i], path[i+1:]
			} else {
				seg, path = path, ""
			}
			if seg == "" {
				continue
			}
			if strings.IndexByte(seg, '%') >= 0 {
				if dec, err := url.PathUnescape(seg); err == nil {
					seg = dec
				}
			}
			if !yield(seg) {
				return
			}
		}
	}
}

// pathOnly returns the path of a path or URL, without query or fragment.
func pathOnly(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		s = s[:i]
	}
	if i := strings.Index(s, "://"); i > 0 && isScheme(s[:i]) {
		s = s[i+3:]
		if j := strings.IndexByte(s, '/'); j >= 0 {
			s = s[j:]
		} else {
			s = ""
		}
	}
	return s
}

func isScheme(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
		case i > 0 && ('0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// keep reports whether a decoded segment is a word or a version, which a
// key keeps, rather than an id.
func keep(seg string) bool { return isWord(seg) || isVersion(seg) }

// isWord reports whether s is ASCII letters in runs joined by single '-',
// optionally ending in one digit, at most maxWord bytes.
func isWord(s string) bool {
	if len(s) == 0 || len(s) > maxWord {
		return false
	}
	if c := s[len(s)-1]; '0' <= c && c <= '9' {
		s = s[:len(s)-1]
	}
	prevLetter := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			prevLetter = true
		case c == '-' && prevLetter:
			prevLetter = false
		default:
			return false
		}
	}
	return prevLetter
}

// isVersion reports whether s is 'v' and one to three groups of one to
// three digits joined by '.'.
func isVersion(s string) bool {
	if len(s) < 2 || s[0] != 'v' {
		return false
	}
	groups, digits := 1, 0
	for i := 1; i < len(s); i++ {
		switch c := s[i]; {
		case '0' <= c && c <= '9':
			if digits++; digits > 3 {
				return false
			}
		case c == '.' && digits > 0 && groups < 3:
			groups, digits = groups+1, 0
		default:
			return false
		}
	}
	return digits > 0
}

// templates key the paths that match one of them by that template; see
// WithTemplates.
type templates []template

type template struct {
	method   string   // "" matches every method
	segs     []string // decoded literal segments; "" is a parameter
	literals int
	path     string // the key's path: literals, and "{id}" for parameters
}

func parseTemplates(specs []string) templates {
	ts := make(templates, 0, len(specs))
	for _, spec := range specs {
		spec = strings.TrimSpace(spec)
		var t template
		if i := strings.IndexByte(spec, ' '); i >= 0 {
			var m strings.Builder
			writeMethod(&m, spec[:i])
			t.method, spec = m.String(), strings.TrimSpace(spec[i+1:])
		}
		var p strings.Builder
		for seg := range segments(spec) {
			p.WriteByte('/')
			if len(seg) >= 2 && seg[0] == '{' && seg[len(seg)-1] == '}' {
				t.segs = append(t.segs, "")
				p.WriteString(idSegment)
				continue
			}
			t.segs = append(t.segs, seg)
			t.literals++
			p.WriteString(seg)
		}
		if len(t.segs) == 0 {
			p.WriteByte('/')
		}
		t.path = p.String()
		ts = append(ts, t)
	}
	return ts
}

// key returns the key of the most specific template (most literal
// segments; the first given on a tie) that matches, and false when none
// does.
func (ts templates) key(method, path string) (string, bool) {
	if len(ts) == 0 {
		return "", false
	}
	var m strings.Builder
	writeMethod(&m, method)
	method = m.String()
	var segs []string
	for seg := range segments(path) {
		segs = append(segs, seg)
	}
	best := -1
	for i := range ts {
		t := &ts[i]
		if (t.method != "" && t.method != method) || len(t.segs) != len(segs) ||
			(best >= 0 && t.literals <= ts[best].literals) {
			continue
		}
		match := true
		for j, lit := range t.segs {
			if lit != "" && lit != segs[j] {
				match = false
				break
			}
		}
		if match {
			best = i
		}
	}
	if best < 0 {
		return "", false
	}
	return method + " " + ts[best].path, true
}
