package store

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
)

// MaxKeyLen is the longest identity used as it is. Longer ones (a header
// value is user input) are replaced by a SHA-256 digest, so no caller can
// make a store hold keys of unbounded size.
const MaxKeyLen = 128

// BoundKey returns key, or "sha256:<hex digest>" when key is longer than
// MaxKeyLen, starts with "sha256:" or ends as a secret identity's key does
// (":hmac:" and 32 more bytes, see core.Limiter.Key). Distinct keys stay
// distinct, and no key a caller can choose spells one of those.
func BoundKey(key string) string {
	n := len(key)
	if n <= MaxKeyLen && !strings.HasPrefix(key, digestPrefix) && !(n >= hmacTail && key[n-hmacTail:n-hmacTail+len(hmacMark)] == hmacMark) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return digestPrefix + hex.EncodeToString(sum[:])
}

// hmacMark follows the label of a secret identity's key, and 32 hex
// digits follow it: hmacTail bytes in all.
const (
	hmacMark = ":hmac:"
	hmacTail = len(hmacMark) + 32
)

// digestPrefix starts every digest BoundKey makes. A short key that starts
// with it is hashed too, so that no caller can name another's digest.
const digestPrefix = "sha256:"
