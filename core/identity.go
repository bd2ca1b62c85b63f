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
	return DecodePath(u.EscapedPath())
}

// DecodePath is RequestPath for a path as sent (still escaped), for
// adapters whose framework gives the raw path (Fiber): every %XX escape is
// decoded except an encoded slash, which stays "%2F" inside its segment;
// an invalid escape is kept as it is. The result is a new string unless
// raw holds no '%'.
func DecodePath(raw string) string {
	i := strings.IndexByte(raw, '%')
	if i < 0 {
		return raw
	}
	var b strings.Builder
	b.Grow(len(raw))
	b.WriteString(raw[:i])
	for ; i < len(raw); i++ {
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

// HeaderIdentity is the identity of a caller named by a request header:
// "<canonical name>:<value>", or "" (count the client IP) without a value.
// Every adapter's HeaderKey uses it, so that one caller has one identity
// whichever adapter counts it.
func HeaderIdentity(canonicalName, value string) string {
	if value == "" {
		return ""
	}
	return canonicalName + ":" + value
}

// SubjectIdentity is the identity of a caller with a bearer token:
// "sub:<subject>" from verify's answer for the token in the Authorization
// header value. No bearer token, or an empty subject, gives "" (count the
// client IP); verify's error rejects the request. Every adapter's
// JWTSubject uses it.
func SubjectIdentity(authorization string, verify func(token string) (string, error)) (string, error) {
	tok, ok := BearerToken(authorization)
	if !ok {
		return "", nil
	}
	sub, err := verify(tok)
	if err != nil || sub == "" {
		return "", err
	}
	return "sub:" + sub, nil
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
