package core

import "strings"

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
