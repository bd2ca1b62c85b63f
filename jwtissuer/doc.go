// Package jwtissuer issues and verifies JSON Web Tokens on
// github.com/golang-jwt/jwt/v5, limits how many tokens each user can be
// issued, and, optionally, how many failed verifications each caller can
// make.
//
//	cfg := jwtissuer.DefaultConfig()
//	cfg.SecretKey = os.Getenv("JWT_SECRET") // at least 32 bytes for HS256
//	cfg.EnableRateLimit = true               // 100 tokens per minute per user
//	iss, err := jwtissuer.New(cfg)
//	if err != nil { ... }
//	defer iss.Close()
//
//	access, err := iss.Create(&jwtissuer.Claims{UserID: "u-123"})
//	var limited *jwtissuer.RateLimitError // errors.Is(err, jwtissuer.ErrRateLimitExceeded) too
//	if errors.As(err, &limited) {
//		// 429 Too Many Requests, Retry-After: limited.RetryAfter in whole seconds, rounded up
//	}
//	claims, err := iss.Validate(access) // never limited
//
// # Tokens
//
// An Issuer signs with one algorithm and one key, and accepts only that
// algorithm: a token whose header says "none", or HS256 where the Issuer
// uses RS256 (the key-confusion attack), is rejected before its signature
// is looked at. Access and refresh tokens differ in their "typ" header,
// "at+jwt" (RFC 9068) and "rt+jwt": Validate and ValidateInto accept only
// access tokens, Refresh and RefreshInto only refresh tokens, whatever the
// claims look like, and the wrong kind gives ErrTokenType. Every token
// must carry "exp"; "nbf", and the issuer and audience when the Config
// names them, are checked too.
//
// The Issuer sets "iat", "exp" (unless the claims have one), "jti" (unless
// the claims have one), "iss" and "aud" on a copy of the claims it is
// given; see Create for the claims types it can do this for.
//
// # Rate limit
//
// With EnableRateLimit, every issuance — Create, CreateRefresh, Refresh and
// RefreshInto — takes one token from the bucket of the claims' key, and
// fails with a *RateLimitError when the bucket is empty: it matches
// ErrRateLimitExceeded (errors.Is), and its RetryAfter says how long until
// the key is admitted again, exactly for the built-in RateLimiter and for
// jwtissuer/redislimiter (any RetryAfterRateLimitProvider), 0 for a
// provider that cannot tell. It names neither the key nor the token.
// Validate and ValidateInto are never limited by it. The key is, in order:
//
//  1. the "sub" claim (RegisteredClaims.Subject), when not empty;
//  2. the built-in Claims' UserID (also when Claims is embedded), when not empty;
//  3. RateLimitKey(), when the claims implement RateLimitKeyer;
//  4. otherwise "", and the issuance is not counted.
//
// Refresh takes the key from the refresh token, after verifying it: the
// key CreateRefresh counted under, which it records in the token's signed
// header "rlk", so that a refresh counts in the same bucket whatever
// claims type it decodes into. A refresh token that fails verification
// costs no quota.
//
// This limit counts tokens issued, after the caller has checked the
// credentials: it does not count failed logins, and so does not stop a
// password from being guessed. Limit the login route itself for that (by
// client IP, or counting only failed attempts).
//
// # Failure limit
//
// With Config.FailureLimitRate, the verifications that fail through
// Issuer.Caller(key) — Validate, ValidateInto, Refresh and RefreshInto on
// behalf of one caller — count against key (FailureLimitRate per
// FailureLimitWindow, a token bucket per key like the RateLimiter, in this
// process). Once key's bucket is empty, every call through Caller(key)
// fails with a *RateLimitError whose Failures is true, before the token
// is parsed or its signature checked, until RetryAfter has passed. The key
// is the caller's, not the token's: the client's IP address or network, or
// an authenticated client ID. A token's claims cannot key it, as whoever
// forges a token writes them. So one address that presents forged,
// guessed or stolen-and-expired tokens gets at most FailureLimitRate
// verifications per window (plus the calls in flight at once when the
// limit is reached, each of which checks its token), and makes the service
// check no more signatures than that; an attacker with many addresses gets
// that many per address, and each replica counts on its own. Guessing an
// HMAC key of 32 bytes or more, or forging an RSA, ECDSA or EdDSA
// signature, is out of reach anyway: what the limit bounds is the work a
// caller causes and how long it can probe. The Issuer's own Validate,
// ValidateInto, Refresh and RefreshInto are not counted.
//
// # Where this differs from the usual token-bucket issuer
//
//   - HMAC keys must be as long as the hash (RFC 7518, section 3.2): 32
//     bytes for HS256, but 48 for HS384 and 64 for HS512.
//   - When a full RateLimiter evicts and the buckets idle for more than
//     2×window free less than a tenth of the capacity, live buckets go too
//     until a tenth is free: otherwise, with one bucket going idle per
//     insert, every insert would scan all 10,000.
//   - The live buckets that go are those that have consumed fewest tokens
//     (after refill to now), the oldest last refill first among equals, not
//     the oldest last refill: a flood of fresh keys reaches those before
//     the last refill of a drained bucket whose key stopped asking, and
//     would free the keys being held back.
//
// The built-in RateLimiter is a token bucket per key in this process
// (RateLimitRate tokens per RateLimitWindow, proportional refill, at most
// 10,000 keys); see RateLimiter. A service with several replicas shares
// its counts with package jwtissuer/redislimiter, through Redis, which
// fails closed: when Redis fails, issuance is refused with an error that
// wraps ErrRateLimitUnavailable and the cause (see
// FallibleRateLimitProvider). Any RateLimitProvider can take its place.
package jwtissuer
