package core

import (
	"net/url"
	"path"
	"strings"
)

// Path is a request path as the framework's router reads it, escapes and
// all, without the query: fasthttp's raw path as sent
// ("/api/kb/a%2Fb/reindex"), or for net/http what URLPath gives. Adapters
// pass it to Flow.Decide; a program that decides something else by path
// (authentication that exempt paths skip) passes it to Config.Exempt and
// Config.Match, and takes the limiter's own decision. Path(r.URL.Path) is
// wrong when the path may hold '%': r.URL.Path is decoded already, and
// decoding it again makes up a path no router reads (use URLPath).
//
// Routers and handlers do not all read a path the same way: some route
// on it as sent (Echo and Gin's UseRawPath on u.RawPath, Fiber), some
// segment by segment (http.ServeMux), handlers read it decoded
// (r.URL.Path), some clean it, and many serve "/x/" by the handler of
// "/x". Rules and exempt paths are therefore matched against every
// spelling of a Path one of them may act on:
//
//   - as sent;
//   - decoded segment by segment: every escape but an encoded slash
//     ("%2F"), which stays inside its segment;
//   - decoded, "%2F" becoming '/';
//   - each of those cleaned as path.Clean does: "//" collapsed, "." and
//     ".." resolved (also those decoded from "%2e"), the trailing slash
//     dropped;
//   - each with and without its trailing slash.
//
// A path is decoded once, as routers do: "%252F" is the three characters
// "%2F", never a slash. An invalid escape ("%zz", a lone "%") stays as it
// is; "%00" is the byte 0, a character like any other. Paths are
// case-sensitive, except behind a router that matches them without regard
// to ASCII case (Fiber's default, CaseSensitive false): its adapter sets
// Flow.FoldCase, and rules and weights then match every spelling without
// regard to ASCII case, so "/API/search" counts under a rule for
// "/api/search" (and "/api/users" under one for "/api/Users"), while
// exempt paths still match exactly: "/HEALTH" is not exempt. No other
// spelling is considered: '+', ';' and '\' are ordinary characters.
//
// A request is exempt only when every spelling is exempt, and an exempt
// path matches with its trailing slash counting: "/health" exempts
// "/health" only, and "/health/" is exempt only when both "/health/" and
// "/health" are listed; a catch-all exempts with or without one
// ("/static/**" exempts "/static", "/static/" and "/static/a/"). A request that is not exempt counts under the
// first rule, in rule order, that any spelling matches (a rule ignores
// trailing slashes), at the highest weight a matching spelling has under
// that rule. When the first rules of its spellings differ, it counts
// under the strictest of them (the one that admits fewest such requests
// per second by its steady rate, burst aside; the earliest of equals): the router may serve any of those
// spellings, so the earliest rule could be a generous one that a client
// picks by spelling a strict rule's path oddly ("/api/kb/k1%2F../reindex",
// which Echo serves as "/api/kb/:id/reindex", decodes and cleans to
// "/api/kb/reindex"). So "/api%2Fsearch" counts under a rule for "/api/search";
// "/api/kb/a%2Fb/reindex" under one for "/api/kb/*/reindex" (a router
// takes "a/b" as the '*' segment); "/health%2F", "/%68ealth" and
// "/files/../health" are not exempt by "/health".
//
// A clean path — no '%', no "//", no "." or ".." segment, no trailing
// slash — is its only spelling: it costs one scan and no allocation. Any
// other costs at most two decodings and three cleanings (at most 8
// allocations, each at most the path's length) and is matched against at
// most six spellings: work bounded by the path's length. (When the
// request's route gives no answer, a path asked for twice in a row in its
// slot of the recent paths' table costs two allocations more, the copy of
// the path and the answer kept with it, and asked again, none: see
// pathAnswers.)
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

// spellings returns the distinct spellings of p, in buf: as sent,
// segment-decoded, decoded, then each of those cleaned.
func spellings(p Path, buf *[maxSpellings]string) []string {
	s := string(p)
	buf[0] = s
	sp := buf[:1]
	if clean(s) {
		return sp
	}
	sp = addSpelling(sp, decode(s, true))
	if hasEncodedSlash(s) {
		sp = addSpelling(sp, decode(s, false))
	}
	// s starts with '/' (clean took the others), and so do its decodings.
	for _, t := range sp {
		sp = addSpelling(sp, path.Clean(t))
	}
	return sp
}

// Spellings returns every spelling of p the limiter matches (see Path),
// distinct, in this order: as sent, decoded segment by segment, decoded
// with "%2F" as '/', then each of those cleaned; each followed by itself
// without its trailing slash when it has one. Exempt paths match each of
// them as it is (Config.ExemptPattern: p is exempt when every one is);
// rules match each without its trailing slash (Rule.MatchSpelling). A
// path that does not start with '/' is its only spelling. It explains
// Exempt's and Match's answers, for tools; the limiter works the
// spellings out without allocating for a clean path.
func (p Path) Spellings() []string {
	var buf [maxSpellings]string
	sp := spellings(p, &buf)
	out := make([]string, 0, 2*len(sp))
	for _, s := range sp {
		out = addSpelling(out, s)
		out = addSpelling(out, trimSlash(s))
	}
	return out
}

// hasUpperASCII reports whether p holds a byte in 'A'..'Z'.
func hasUpperASCII(p string) bool {
	for i := 0; i < len(p); i++ {
		if 'A' <= p[i] && p[i] <= 'Z' {
			return true
		}
	}
	return false
}

// equalCase reports whether a and b are equal, or with fold equal but for
// ASCII case (as Fiber compares paths; other bytes, UTF-8 included, must
// be equal).
func equalCase(a, b string, fold bool) bool {
	if !fold || len(a) != len(b) {
		return a == b
	}
	for i := 0; i < len(a); i++ {
		if x, y := a[i], b[i]; x != y && lowerByte(x) != lowerByte(y) {
			return false
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// hasEncodedSlash reports whether p holds "%2F" or "%2f".
func hasEncodedSlash(p string) bool {
	return firstEscape(p, func(c byte) bool { return c == '/' }) >= 0
}

// firstEscape returns the index in p of the first valid %XX escape whose
// byte want accepts, or -1.
func firstEscape(p string, want func(byte) bool) int {
	for i := strings.IndexByte(p, '%'); i >= 0; {
		if c, ok := escaped(p, i); ok && want(c) {
			return i
		}
		j := strings.IndexByte(p[i+1:], '%')
		if j < 0 {
			return -1
		}
		i += 1 + j
	}
	return -1
}

// addSpelling appends s to sp unless it is there already; sp has room.
func addSpelling(sp []string, s string) []string {
	for _, t := range sp {
		if t == s {
			return sp
		}
	}
	return append(sp, s)
}

// clean reports whether p is its only spelling: no '%', no "//", no dot
// segment, no trailing slash. A path that does not start with '/' ("*",
// "") is its only spelling too: no pattern matches it.
func clean(p string) bool {
	if len(p) == 0 || p[0] != '/' {
		return true
	}
	if len(p) > 1 && p[len(p)-1] == '/' || strings.IndexByte(p, '%') >= 0 {
		return false
	}
	for i := 0; i < len(p)-1; i++ {
		if p[i] != '/' {
			continue
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
	return true
}

// decode returns p with each valid %XX escape decoded, once; with
// keepSlash an encoded slash stays as it was written. Invalid escapes stay
// as they are. p itself comes back, without allocating, when nothing is
// decoded.
func decode(p string, keepSlash bool) string {
	decoded := func(c byte) bool { return !keepSlash || c != '/' }
	first := firstEscape(p, decoded)
	if first < 0 {
		return p
	}
	var b strings.Builder
	b.Grow(len(p))
	b.WriteString(p[:first])
	for i := first; i < len(p); i++ {
		if c, ok := escaped(p, i); ok && decoded(c) {
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
