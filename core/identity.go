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
