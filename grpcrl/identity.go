package grpcrl

import (
	"context"
	"net/http"
	"strings"

	"google.golang.org/grpc/metadata"

	"github.com/rlkit/rlkit/core/adapter"
)

// JWTSubject counts calls by the subject of their bearer token (the first
// "authorization" metadata entry, "Bearer <token>"), as "sub:<subject>",
// the identity the HTTP adapters' JWTSubject gives the same token. verify
// must check the token (signature, expiry, audience) and return its
// subject; rlkit parses nothing itself. A call without a bearer token
// counts under the next key function of FirstKey, else the peer's IP;
// one whose token fails verification is rejected (see WithErrorHandler),
// so that a client can never pick its identity with a token it made up.
func JWTSubject(verify func(ctx context.Context, token string) (subject string, err error)) KeyFunc {
	return func(ctx context.Context, _ string) (string, error) {
		return adapter.SubjectIdentity(first(ctx, "authorization"), func(tok string) (string, error) { return verify(ctx, tok) })
	}
}

// MetadataKey counts calls by the value of a metadata entry (an API key;
// name in any case, "x-api-key") under the identity
// adapter.HeaderIdentity(canonical header name, value), which the limiter
// stores and logs only as a keyed hash ("X-Api-Key:hmac:<hex>"; see
// core.WithIdentityKey): the identity the HTTP adapters' HeaderKey gives
// the same key in the same-named header, so a caller shares one count
// across both. Calls without the entry count under the next key function
// of FirstKey, else the peer's IP. The value is taken as it is: a client
// that may send any value gets a fresh count with each one, so either the
// key is checked before the limiter runs (an authenticating interceptor
// earlier in the chain) or the limits per IP bound what that gains.
func MetadataKey(name string) KeyFunc {
	key, label := strings.ToLower(name), http.CanonicalHeaderKey(name)
	return func(ctx context.Context, _ string) (string, error) {
		return adapter.HeaderIdentity(label, first(ctx, key)), nil
	}
}

// FirstKey tries the key functions in order: the first identity one gives
// is the call's, and the first error rejects the call. With none, or all
// "", the call counts under the peer's IP. The documented order for an
// API with tokens and API keys is
//
//	grpcrl.FirstKey(grpcrl.JWTSubject(verify), grpcrl.MetadataKey("x-api-key"))
//
// (a verified subject, else the API key, else the peer's IP).
func FirstKey(fns ...KeyFunc) KeyFunc {
	return func(ctx context.Context, fullMethod string) (string, error) {
		for _, fn := range fns {
			if id, err := fn(ctx, fullMethod); err != nil || id != "" {
				return id, err
			}
		}
		return "", nil
	}
}

// first is the first value of the incoming metadata entry key (lower
// case), "" when there is none.
func first(ctx context.Context, key string) string {
	if v := metadata.ValueFromIncomingContext(ctx, key); len(v) > 0 {
		return v[0]
	}
	return ""
}
