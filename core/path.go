package core

import (
	"net/url"
	"path"
	"strings"
)

// Path is a request path as the framework's router reads it: escaped, as
// sent, without the query ("/api/kb/a%2Fb/reindex"). Adapters pass it to
// Flow.Decide; applications pass it to Config.Exempt and Config.Match to
// take the same decision the limiter takes. Get it from a *url.URL with
// URLPath; a framework that routes on the raw request path (fasthttp) gives
// it as it is. Path(r.URL.Path) is wrong: r.URL.Path is already decoded,
// and decoding it again would make up a spelling no router reads.
//
// Routers and handlers do not all read a path the same way: some route
// on it as sent, some decode it first, some clean it, and many serve
// "/x/" by the handler of "/x". Rules and exempt paths therefore consider
// every spelling of a Path that one of them may act on:
//
//   - as sent;
//   - segment by segment decoded, an encoded slash ("%2F") staying inside
//     its segment, as http.ServeMux matches it;
//   - decoded, "%2F" becoming '/', as r.URL.Path reads;
//   - each of those cleaned as path.Clean does: "//" collapsed, "." and
//     ".." resolved (also those spelled "%2e"), the trailing slash dropped;
//   - each with and without its trailing slash.
//
// A path is decoded once, as routers do: "%252F" is the three characters
// "%2F", never a slash. An invalid escape ("%zz", a lone "%") stays as it
// is. No other spelling is considered: paths are case-sensitive, and ';'
// and '\' are ordinary characters.
//
// A request is exempt only when every spelling is exempt, and it counts
// under the first rule, in rule order, that any spelling matches, at the
// highest weight a matching spelling has under that rule. So no spelling
// leaves a rule or reaches an exemption that another spelling's handler
// would not have: "/api%2Fsearch" counts under a rule for "/api/search",
// "/health/" is not exempt by "/health" alone, and "/files/../health" is
// not exempt unless "/files/../health" itself is.
//
// A clean path — no '%', no "//", no "." or ".." segment, no trailing slash
// — is its only spelling; parsing it costs one scan and no allocation. The
// others take a few scans and copies of the path, bounded by its length.
type Path string

// URLPath returns the Path of u as net/http routers read it: u.RawPath when
// it is set and decodes to u.Path (the request was sent with escapes that
// are not the default ones, such as "%2F"), else u.Path, with any '%' in it
// escaped as "%25" so that decoding it once gives u.Path back. Clean paths
// come back without allocating.
func URLPath(u *url.URL) Path {
	if u.RawPath != "" && decodesTo(u.RawPath, u.Path) {
		return Path(u.RawPath)
	}
	if strings.IndexByte(u.Path, '%') < 0 {
		return Path(u.Path)
	}
	return Path(strings.ReplaceAll(u.Path, "%", "%25"))
}

// maxSpellings is the number of distinct spellings a path can have: as
// sent, segment-decoded and decoded, each also cleaned. Trailing-slash
// variants are substrings, not counted here.
const maxSpellings = 6

// spellings are the distinct spellings of one Path, worked out once per
// decision; s[0] is the path as sent.
type spellings struct {
	s [maxSpellings]string
	n int
}

// spell returns the spellings of p.
func spell(p Path) (sp spellings) {
	s := string(p)
	sp.s[0], sp.n = s, 1
	if clean(s) {
		return sp
	}
	segs := decode(s, true)
	full := decode(s, false)
	sp.add(segs)
	sp.add(full)
	if len(s) > 0 && s[0] == '/' {
		sp.add(path.Clean(s))
		sp.add(path.Clean(segs))
		sp.add(path.Clean(full))
	}
	return sp
}

// add adds s unless it is there already.
func (sp *spellings) add(s string) {
	for _, t := range sp.s[:sp.n] {
		if t == s {
			return
		}
	}
	sp.s[sp.n] = s
	sp.n++
}

// single returns the path's only spelling, and whether it has only one.
func (sp *spellings) single() (string, bool) { return sp.s[0], sp.n == 1 }

// clean reports whether p is its only spelling: no '%', no "//", no dot
// segment, no trailing slash. A path that does not start with '/' ("*",
// "") is its only spelling too: no pattern matches it.
func clean(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return true
	}
	for i := 0; i < len(p); i++ {
		switch p[i] {
		case '%':
			return false
		case '/':
			if i+1 == len(p) {
				return i == 0 // "/" alone, or a trailing slash
			}
			switch p[i+1] {
			case '/':
				return false
			case '.':
				// "/." or "/.." followed by '/' or the end.
				j := i + 2
				if j < len(p) && p[j] == '.' {
					j++
				}
				if j == len(p) || p[j] == '/' {
					return false
				}
			}
		}
	}
	return true
}

// decode returns p with each valid %XX escape decoded, once; with
// keepSlash an encoded slash stays as it was written. Invalid escapes stay
// as they are. p itself comes back, without allocating, when nothing is
// decoded.
func decode(p string, keepSlash bool) string {
	first := -1
	for i := strings.IndexByte(p, '%'); i >= 0; {
		if c, ok := escaped(p, i); ok && !(keepSlash && c == '/') {
			first = i
			break
		}
		j := strings.IndexByte(p[i+1:], '%')
		if j < 0 {
			break
		}
		i += 1 + j
	}
	if first < 0 {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	b.WriteString(p[:first])
	for i := first; i < len(p); i++ {
		if c, ok := escaped(p, i); ok && !(keepSlash && c == '/') {
			b.WriteByte(c)
			i += 2
			continue
		}
		b.WriteByte(p[i])
	}
	return b.String()
}

// escaped returns the byte of the escape at p[i], if p[i:] starts with a
// valid one.
func escaped(p string, i int) (byte, bool) {
	if p[i] != '%' || i+2 >= len(p) {
		return 0, false
	}
	hi, lo := unhex(p[i+1]), unhex(p[i+2])
	if hi < 0 || lo < 0 {
		return 0, false
	}
	return byte(hi<<4 | lo), true
}

// decodesTo reports whether decoding raw once gives p, without allocating.
func decodesTo(raw, p string) bool {
	j := 0
	for i := 0; i < len(raw); i, j = i+1, j+1 {
		c := raw[i]
		if d, ok := escaped(raw, i); ok {
			c = d
			i += 2
		}
		if j >= len(p) || p[j] != c {
			return false
		}
	}
	return j == len(p)
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}
