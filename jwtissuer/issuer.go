package jwtissuer

import (
	"crypto/rand"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Errors of the Issuer. The errors of token validation wrap jwt's (for
// example jwt.ErrTokenExpired, jwt.ErrTokenSignatureInvalid), so errors.Is
// finds them too.
var (
	// ErrRateLimitExceeded is matched (errors.Is) by the *RateLimitError
	// that Create, CreateRefresh, Refresh and RefreshInto return when the
	// key of the claims is over its limit, and that a Caller's methods
	// return when the caller is over the failure limit. The Issuer never
	// returns it bare: errors.As gives the *RateLimitError and its wait.
	ErrRateLimitExceeded = errors.New("jwtissuer: rate limit exceeded")
	// ErrRateLimitUnavailable is wrapped, together with the cause, by the
	// error of an issuance that was refused because the rate limiter's
	// backend failed (a FallibleRateLimitProvider failing closed). It is not
	// ErrRateLimitExceeded.
	ErrRateLimitUnavailable = errors.New("jwtissuer: rate limiter unavailable")
	// ErrTokenType is returned when a refresh token is presented as an
	// access token, or an access token as a refresh token.
	ErrTokenType = errors.New("jwtissuer: wrong token type")
	// ErrClosed is returned by issuance after Close.
	ErrClosed = errors.New("jwtissuer: issuer closed")
)

// A RateLimitError is the error of a call refused by a limit: the
// issuance limit (Config.EnableRateLimit) or the failure limit
// (Config.FailureLimitRate). errors.Is(err, ErrRateLimitExceeded) holds for
// it. It names neither the key nor the token: the key may be a user's
// e-mail address or a client's IP, which an error that gets logged should
// not spread.
type RateLimitError struct {
	// RetryAfter is how long until the same call would be admitted (for a
	// Retry-After header, in whole seconds rounded up): exact for the
	// built-in RateLimiter (to the nanosecond, on its clock) and for
	// jwtissuer/redislimiter (to the microsecond, on the Redis server's
	// clock, as of the decision), and 0 when the limiter does not say (a
	// RateLimitProvider that does not implement
	// RetryAfterRateLimitProvider).
	RetryAfter time.Duration
	// Failures is true when the failure limit refused the call (too many
	// failed verifications from the caller), false when the issuance limit
	// did.
	Failures bool
}

// Error returns "jwtissuer: rate limit exceeded", followed by ": too many
// failed verifications" for the failure limit and by "; retry after " and
// the wait when it is known.
func (e *RateLimitError) Error() string {
	msg := ErrRateLimitExceeded.Error()
	if e.Failures {
		msg += ": too many failed verifications"
	}
	if e.RetryAfter > 0 {
		msg += "; retry after " + e.RetryAfter.String()
	}
	return msg
}

// Is reports whether target is ErrRateLimitExceeded.
func (e *RateLimitError) Is(target error) bool { return target == ErrRateLimitExceeded }

// The "typ" header values of the two kinds of token: RFC 9068's for access
// tokens, and its counterpart for refresh tokens.
const (
	TypeAccess  = "at+jwt"
	TypeRefresh = "rt+jwt"
)

// maxTokenLen bounds the tokens the Issuer parses: longer input is
// rejected before any decoding.
const maxTokenLen = 64 << 10

// An Issuer signs and verifies access and refresh tokens with one key and
// one algorithm, and limits issuance per key. It is safe for concurrent use.
type Issuer struct {
	s      settings
	parser *jwt.Parser
	closed atomic.Bool
}

// New returns an Issuer for cfg. It checks every field and reports the
// first problem, naming the field and its value.
func New(cfg Config) (*Issuer, error) {
	s, err := cfg.check()
	if err != nil {
		return nil, err
	}
	i := &Issuer{s: s}
	opts := []jwt.ParserOption{
		jwt.WithValidMethods([]string{s.method.Alg()}),
		jwt.WithExpirationRequired(),
		jwt.WithLeeway(s.leeway),
		jwt.WithTimeFunc(i.now),
		jwt.WithStrictDecoding(),
	}
	if s.issuer != "" {
		opts = append(opts, jwt.WithIssuer(s.issuer))
	}
	if len(s.audience) > 0 {
		opts = append(opts, jwt.WithAudience(s.audience...))
	}
	i.parser = jwt.NewParser(opts...)
	return i, nil
}

func (i *Issuer) now() time.Time { return time.Unix(0, i.s.clock.Now()) }

// Create returns a signed access token (header "typ": "at+jwt") holding
// claims, after counting one issuance for their key (see RateLimiter and
// the package documentation for the key order).
//
// Claims may be a *Claims (or Claims), a jwt.MapClaims, a
// *jwt.RegisteredClaims, or any struct type, or pointer to one, that
// embeds jwt.RegisteredClaims (directly or through Claims). The Issuer
// works on a copy, never on the caller's value, and sets on it: "iat" to
// now; "exp" to now + AccessTTL unless the claims have one; "jti" to a
// random 130-bit value (26 base32 characters) unless they have one; "iss" to Config.Issuer when
// that is set; "aud" to Config.Audience when that is set and the claims
// name none; "nbf" is left as given. Other claims types are signed as
// they are and must carry their own "exp".
//
// Create fails with a *RateLimitError (errors.Is ErrRateLimitExceeded)
// when the key is over its limit (nothing is signed), with an error wrapping ErrRateLimitUnavailable when
// the limiter's backend failed, and with ErrClosed after Close. An
// issuance counted and then failing (claims that do not encode as JSON)
// is not given back.
func (i *Issuer) Create(claims jwt.Claims) (string, error) {
	return i.create(claims, TypeAccess, i.s.accessTTL)
}

// CreateRefresh is Create for a refresh token: header "typ": "rt+jwt",
// "exp" now + RefreshTTL unless the claims have one. Validate rejects it;
// only Refresh and RefreshInto accept it. The token's (signed) header
// "rlk" records the key the issuance was counted under, so that Refresh and
// RefreshInto count under the same key whatever claims type they decode
// into (Refresh's built-in Claims have no RateLimitKey method, for one).
// Like the claims, it can be read by whoever holds the token.
func (i *Issuer) CreateRefresh(claims jwt.Claims) (string, error) {
	return i.create(claims, TypeRefresh, i.s.refreshTTL)
}

func (i *Issuer) create(claims jwt.Claims, typ string, ttl time.Duration) (string, error) {
	if i.closed.Load() {
		return "", ErrClosed
	}
	e, err := cloneClaims(claims)
	if err != nil {
		return "", err
	}
	if e.rc == nil && e.m == nil {
		if exp, err := claims.GetExpirationTime(); err != nil || exp == nil {
			return "", fmt.Errorf("jwtissuer: %T has no \"exp\" and does not embed jwt.RegisteredClaims, so the issuer cannot set one", claims)
		}
	}
	// The key is read from the copy, in which cloneClaims has allocated the
	// nil embedded pointers that the promoted methods would panic on.
	key := rateLimitKey(e.claims)
	if err := i.admit(key); err != nil {
		return "", err
	}
	i.stamp(&e, ttl, false)
	if typ != TypeRefresh {
		key = ""
	}
	return i.sign(e.claims, typ, key)
}

// Refresh verifies refreshToken as a refresh token of this Issuer
// (signature, algorithm, "typ": "rt+jwt", "exp", "nbf", issuer and
// audience when configured) into the built-in Claims, counts one issuance
// for their key, and returns a new access token with the same claims and a
// fresh "iat", "exp" (now + AccessTTL) and "jti" ("nbf" dropped).
//
// The issuance is counted under the key recorded in the refresh token (see
// CreateRefresh), or, in a token without one, the key of its claims. Only
// the built-in Claims' fields are carried into the new token: use
// RefreshInto to keep claims of another type.
//
// A refresh token that fails verification is rejected before the limiter
// is asked: it costs no quota. An access token gives ErrTokenType.
func (i *Issuer) Refresh(refreshToken string) (string, error) {
	return i.refreshClaims("", refreshToken)
}

func (i *Issuer) refreshClaims(caller, refreshToken string) (string, error) {
	c := new(Claims)
	return i.refresh(caller, refreshToken, editable{claims: c, rc: &c.RegisteredClaims})
}

// RefreshInto is Refresh for custom claims: it decodes refreshToken into
// claims, which must be a non-nil pointer to a struct that embeds
// jwt.RegisteredClaims (directly or through Claims), or a non-nil
// jwt.MapClaims. On success claims holds the claims of the new access
// token: those of the refresh token with a fresh "iat", "exp" and "jti",
// and no "nbf". On failure their content is unspecified.
func (i *Issuer) RefreshInto(refreshToken string, claims jwt.Claims) (string, error) {
	return i.refreshInto("", refreshToken, claims)
}

func (i *Issuer) refreshInto(caller, refreshToken string, claims jwt.Claims) (string, error) {
	e, err := inPlace(claims)
	if err != nil {
		return "", err
	}
	return i.refresh(caller, refreshToken, e)
}

// refresh is Refresh and RefreshInto, with the failure limit on caller.
func (i *Issuer) refresh(caller, token string, e editable) (string, error) {
	if i.closed.Load() {
		return "", ErrClosed
	}
	header, err := i.parse(caller, token, e.claims, TypeRefresh)
	if err != nil {
		return "", err
	}
	if e.rc == nil {
		if err := e.fill(); err != nil {
			return "", err
		}
	}
	key, _ := header["rlk"].(string)
	if key == "" {
		key = rateLimitKey(e.claims)
	}
	if err := i.admit(key); err != nil {
		return "", err
	}
	i.stamp(&e, i.s.accessTTL, true)
	return i.sign(e.claims, TypeAccess, "")
}

// Validate verifies an access token (signature, algorithm, "typ":
// "at+jwt", "exp" required and not past, "nbf", issuer and audience when
// configured) and returns its claims. It is never rate limited (Caller's
// Validate is, under the failure limit), and keeps working after Close. A refresh token gives ErrTokenType.
func (i *Issuer) Validate(token string) (*Claims, error) {
	return i.validate("", token)
}

func (i *Issuer) validate(caller, token string) (*Claims, error) {
	c := new(Claims)
	if _, err := i.parse(caller, token, c, TypeAccess); err != nil {
		return nil, err
	}
	return c, nil
}

// ValidateInto is Validate for custom claims: it verifies token and decodes
// its claims into claims, a non-nil pointer (or jwt.MapClaims). Claims that
// implement jwt's ClaimsValidator are checked with it too.
func (i *Issuer) ValidateInto(token string, claims jwt.Claims) error {
	return i.validateInto("", token, claims)
}

func (i *Issuer) validateInto(caller, token string, claims jwt.Claims) error {
	if claims == nil || isNil(claims) {
		return errors.New("jwtissuer: nil claims")
	}
	if _, isMap := claims.(jwt.MapClaims); !isMap && reflect.ValueOf(claims).Kind() != reflect.Pointer {
		return fmt.Errorf("jwtissuer: claims are a %T, want a pointer (or jwt.MapClaims) to decode into", claims)
	}
	_, err := i.parse(caller, token, claims, TypeAccess)
	return err
}

// A Caller is an Issuer's verification on behalf of one caller, for the
// failure limit (Config.FailureLimitRate): its Validate, ValidateInto,
// Refresh and RefreshInto are the Issuer's, except that each one that fails
// verification counts against the caller's key, and that while the key is
// over the limit they fail at once with a *RateLimitError (Failures true,
// RetryAfter the wait), before the token is parsed or its signature
// checked. Without a failure limit, or with an empty key, they are exactly
// the Issuer's. A Caller is a small value: make one per request.
type Caller struct {
	iss *Issuer
	key string
}

// Caller returns the verification of the Issuer on behalf of key, the
// identity of whoever presents the tokens, which the failure limit counts
// under. It must be one the presenter cannot choose freely: typically the
// client's IP address (or its network, such as its /64 for IPv6) as the
// service's proxy reports it, or an API client's authenticated ID. Never
// use a claim of the token itself: an attacker writes whatever claims it
// likes into a forged token, so keying on them would let it spread its
// guesses over fresh keys, and lock out the user it names. Keys longer than
// 128 bytes are kept as their SHA-256 digest.
func (i *Issuer) Caller(key string) Caller { return Caller{iss: i, key: key} }

// Validate is Issuer.Validate under the failure limit (see Caller).
func (c Caller) Validate(token string) (*Claims, error) { return c.iss.validate(c.key, token) }

// ValidateInto is Issuer.ValidateInto under the failure limit (see Caller).
func (c Caller) ValidateInto(token string, claims jwt.Claims) error {
	return c.iss.validateInto(c.key, token, claims)
}

// Refresh is Issuer.Refresh under the failure limit (see Caller): a
// refresh token that fails verification counts against the caller; the
// issuance that follows a verified one is limited as Issuer.Refresh's is,
// and its refusal (a *RateLimitError with Failures false) does not count.
func (c Caller) Refresh(refreshToken string) (string, error) {
	return c.iss.refreshClaims(c.key, refreshToken)
}

// RefreshInto is Issuer.RefreshInto under the failure limit (see Caller
// and Caller.Refresh).
func (c Caller) RefreshInto(refreshToken string, claims jwt.Claims) (string, error) {
	return c.iss.refreshInto(c.key, refreshToken, claims)
}

// Close stops issuance: Create, CreateRefresh, Refresh and RefreshInto
// return ErrClosed afterwards, while Validate and ValidateInto keep
// working. It closes the built-in RateLimiter, but not a
// Config.RateLimiter, which belongs to the caller. The failure limit stays,
// as Caller's Validate and ValidateInto keep working under it. Closing twice is a
// no-op.
func (i *Issuer) Close() error {
	if i.closed.Swap(true) {
		return nil
	}
	if i.s.ownLimiter {
		i.s.limiter.Close()
	}
	return nil
}

// admit counts one issuance for key. An empty key is not counted.
func (i *Issuer) admit(key string) error {
	if i.s.limiter == nil || key == "" {
		return nil
	}
	var (
		ok   bool
		wait time.Duration
		err  error
	)
	switch {
	case i.s.retry != nil:
		ok, wait, err = i.s.retry.AllowRetryAfter(key)
	case i.s.fallible != nil:
		ok, err = i.s.fallible.AllowErr(key)
	default:
		ok = i.s.limiter.Allow(key)
	}
	switch {
	case ok:
		return nil
	case err != nil:
		return fmt.Errorf("%w: %w", ErrRateLimitUnavailable, err)
	case i.closed.Load():
		return ErrClosed // the built-in limiter was closed under us
	}
	return &RateLimitError{RetryAfter: wait}
}

// stamp sets the registered claims the Issuer controls. fresh (a refresh)
// replaces "exp" and "jti" and drops "nbf"; otherwise the claims' own
// "exp" and "jti" are kept.
func (i *Issuer) stamp(e *editable, ttl time.Duration, fresh bool) {
	now := i.now()
	if e.m != nil {
		m := e.m
		if i.s.issuer != "" {
			m["iss"] = i.s.issuer
		}
		if aud, ok := m["aud"]; (!ok || aud == nil || aud == "") && len(i.s.audience) > 0 {
			m["aud"] = slices.Clone(i.s.audience)
		}
		m["iat"] = jwt.NewNumericDate(now)
		if _, ok := m["exp"]; fresh || !ok || m["exp"] == nil {
			m["exp"] = jwt.NewNumericDate(now.Add(ttl))
		}
		if id, _ := m["jti"].(string); fresh || id == "" {
			m["jti"] = newID()
		}
		if fresh {
			delete(m, "nbf")
		}
		return
	}
	rc := e.rc
	if rc == nil {
		return // signed as it is; it carries its own "exp"
	}
	if i.s.issuer != "" {
		rc.Issuer = i.s.issuer
	}
	if len(rc.Audience) == 0 && len(i.s.audience) > 0 {
		rc.Audience = slices.Clone(i.s.audience)
	}
	rc.IssuedAt = jwt.NewNumericDate(now)
	if fresh || rc.ExpiresAt == nil {
		rc.ExpiresAt = jwt.NewNumericDate(now.Add(ttl))
	}
	if fresh || rc.ID == "" {
		rc.ID = newID()
	}
	if fresh {
		rc.NotBefore = nil
	}
}

// newID returns a random token ID: 26 base32 characters, 130 bits.
func newID() string { return rand.Text() }

// sign signs claims as a token of type typ, with header "rlk" set to
// rateKey when that is not empty.
func (i *Issuer) sign(claims jwt.Claims, typ, rateKey string) (string, error) {
	t := jwt.NewWithClaims(i.s.method, claims)
	t.Header["typ"] = typ
	if rateKey != "" {
		t.Header["rlk"] = rateKey
	}
	s, err := t.SignedString(i.s.sign)
	if err != nil {
		return "", fmt.Errorf("jwtissuer: sign: %w", err)
	}
	return s, nil
}

// parse verifies token into claims, checks that its type is want, and
// returns its header. With a failure limit and a caller key, it refuses a
// caller over the limit before anything else, and counts a failure.
func (i *Issuer) parse(caller, token string, claims jwt.Claims, want string) (map[string]any, error) {
	if i.s.failures == nil || caller == "" {
		return i.verify(token, claims, want)
	}
	if wait := i.s.failures.wait(caller); wait > 0 {
		return nil, &RateLimitError{RetryAfter: wait, Failures: true}
	}
	header, err := i.verify(token, claims, want)
	if err != nil {
		i.s.failures.Allow(caller)
	}
	return header, err
}

// verify is parse without the failure limit.
func (i *Issuer) verify(token string, claims jwt.Claims, want string) (map[string]any, error) {
	if len(token) > maxTokenLen {
		return nil, fmt.Errorf("jwtissuer: %w: %d bytes, more than %d", jwt.ErrTokenMalformed, len(token), maxTokenLen)
	}
	if !compact(token) {
		return nil, fmt.Errorf("jwtissuer: %w: not three base64url segments", jwt.ErrTokenMalformed)
	}
	t, err := i.parser.ParseWithClaims(token, claims, i.key)
	if err != nil {
		return nil, fmt.Errorf("jwtissuer: %w", err)
	}
	typ, _ := t.Header["typ"].(string)
	if !typeIs(typ, want) {
		return nil, fmt.Errorf("%w: header typ is %q, want %q", ErrTokenType, typ, want)
	}
	return t.Header, nil
}

// compact reports whether token has only base64url characters and dots.
// Go's base64 decoders skip CR and LF, so without this check a signature
// with a line break in it would still verify.
func compact(token string) bool {
	for i := 0; i < len(token); i++ {
		switch c := token[i]; {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9', c == '-', c == '_', c == '.':
		default:
			return false
		}
	}
	return true
}

func (i *Issuer) key(*jwt.Token) (any, error) { return i.s.verify, nil }

// typeIs reports whether the typ header names the media type want
// ("at+jwt" also as "application/at+jwt", in any case; RFC 7515, 4.1.9).
func typeIs(typ, want string) bool {
	if len(typ) > len("application/") && strings.EqualFold(typ[:len("application/")], "application/") {
		typ = typ[len("application/"):]
	}
	return strings.EqualFold(typ, want)
}
