package core

import (
	"net/url"
	"strings"
)

// BearerToken returns the token of an "Authorization: Bearer <token>"
// header value (the scheme is case-insensitive), and whether there was one.
func BearerToken(authorization string) (string, bool) {
	const scheme = "bearer "
	if len(authorization) <= len(scheme) || !strings.EqualFold(authorization[:len(scheme)], scheme) {
		return "", false
	}
	tok := strings.TrimSpace(authorization[len(scheme):])
	return tok, tok != ""
}

// RequestPath is the path of u that rules are matched against: u.Path,
// except that an encoded slash ("%2F") stays inside its segment. Routers
// such as http.ServeMux match "/api/kb/a%2Fb/reindex" to "/api/kb/{id}/reindex"
// with id "a/b"; matching the decoded "/api/kb/a/b/reindex" instead would
// let a client move a request out of a '*' rule. Paths without escapes (the
// usual case) are returned without allocating.
func RequestPath(u *url.URL) string {
	if u.RawPath == "" || !strings.Contains(u.RawPath, "%") {
		return u.Path
	}
	raw := u.EscapedPath()
	var b strings.Builder
	b.Grow(len(raw))
	for i := 0; i < len(raw); i++ {
		if raw[i] == '%' && i+2 < len(raw) {
			if hi, lo := unhex(raw[i+1]), unhex(raw[i+2]); hi >= 0 && lo >= 0 {
				if c := byte(hi<<4 | lo); c != '/' {
					b.WriteByte(c)
				} else {
					b.WriteString("%2F")
				}
				i += 2
				continue
			}
		}
		b.WriteByte(raw[i])
	}
	return b.String()
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
