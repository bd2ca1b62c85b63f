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

// HeaderIdentity is the identity of a caller named by a request header
// (an API key): SecretIdentity(canonicalName, value), or "" (count the
// client IP) without a value. The value is a secret: the limiter stores
// and logs only its keyed hash. Every adapter's HeaderKey uses it, so that
// one caller has one identity whichever adapter counts it.
func HeaderIdentity(canonicalName, value string) string {
	if value == "" {
		return ""
	}
	return SecretIdentity(canonicalName, value)
}

// SecretIdentity is the identity of a caller named by a secret (an API
// key, a session token): the limiter counts it under the key
// "<label>:<keyed hash of secret>", HMAC-SHA256 under the limiter's
// identity key (WithIdentityKey), so the secret is never written to a
// store nor to a log. label must not hold a NUL byte. The identity itself
// holds the secret: keep it in the process (an adapter's Identity, Reset).
func SecretIdentity(label, secret string) string {
	return secretMark + label + secretMark + secret
}

// secretMark starts and ends the label of a SecretIdentity. No key
// function of an adapter gives an identity with a NUL byte (HTTP forbids
// it in header values), so no caller can spell another's hashed key.
const secretMark = "\x00"

// secretParts splits a SecretIdentity; ok is false for any other identity.
func secretParts(identity string) (label, secret string, ok bool) {
	if len(identity) == 0 || identity[0] != secretMark[0] {
		return "", "", false
	}
	label, secret, ok = strings.Cut(identity[1:], secretMark)
	return label, secret, ok
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
