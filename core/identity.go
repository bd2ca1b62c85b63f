package core

import "strings"

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
