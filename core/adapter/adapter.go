package adapter

import (
	"net/http"
	"strings"

	"github.com/rlkit/rlkit/core"
)

// Limiter returns the limiter a middleware decides with when its New is
// given limits: limits itself when it is a *core.Limiter, a limiter
// core.NewLimiter makes (counting in a memory store of the middleware's
// own) when it is a *core.Config, and a limiter that passes every request
// when it is nil, a nil *core.Config or a nil *core.Limiter (limiting
// off, as under a disabled configuration).
func Limiter(limits core.Limits) *core.Limiter {
	switch l := limits.(type) {
	case *core.Limiter:
		if l != nil {
			return l
		}
	case *core.Config:
		return core.NewLimiter(l)
	}
	return core.NewLimiter(nil)
}

// Settings are the settings every adapter has over its framework's
// request type R (each adapter's WithKeyFunc, WithBypass, WithPlan and
// WithCost), which its core.Flow calls.
type Settings[R any] struct {
	// Key returns the caller's identity (see core.Flow.Key); nil means
	// none: every request counts under its client IP.
	Key func(R) (string, error)
	// Bypass reports callers never limited (see core.Flow.Bypass).
	Bypass func(R) bool
	// Plan returns the caller's plan (see core.Flow.Plan).
	Plan func(R) string
	// Cost returns the cost of a request known before the handler (see
	// core.Flow.Cost); nil means none: the rules' weights.
	Cost func(R) int64
}

// ClientIP is how a middleware finds the client of a request R: its
// client IP (IPv6 grouped, the identity of a request with no other) and
// its whole address (matched against the allow and ban networks), as
// core.Flow's ClientIP and ClientAddr take them. Both derive from the
// limiter's clientip.Config (core.Limiter.ClientIP): for a framework over
// net/http, its ClientIP and ClientAddr of the request's RemoteAddr and
// Header.Values, read in the closures themselves rather than through an
// accessor of the adapter's (one call less per request).
type ClientIP[R any] struct {
	IP, Addr func(R) string
}

// Options are what an adapter's own options set, over its framework's
// request type R: the Settings every adapter has, and the framework's
// handlers of a request whose key function failed (OnError, of type E)
// and of a refused request (Denied, of type D; nil: the default
// response). An adapter embeds it in the options its Option funcs set.
type Options[R, E, D any] struct {
	Settings[R]
	OnError E
	Denied  D
}

// Flow returns the request flow of a middleware that decides with lim
// under s, finding a request's client with ip and reading its headers
// with header (core.Flow.Header: the value of the header of a canonical
// name, "" when it has none; HeaderKey and JWTSubject take the same
// function).
func (s Settings[R]) Flow(lim *core.Limiter, ip ClientIP[R], header func(r R, name string) string) *core.Flow[R] {
	return &core.Flow[R]{
		Limiter:    lim,
		Key:        s.Key,
		Bypass:     s.Bypass,
		Plan:       s.Plan,
		Cost:       s.Cost,
		ClientIP:   ip.IP,
		ClientAddr: ip.Addr,
		Header:     header,
	}
}

// HeaderKey returns a key function that counts a request by the value of
// its header name (an API key) under HeaderIdentity(canonical name,
// value): the limiter stores and logs it only as a keyed hash
// ("X-Api-Key:hmac:<hex>"; see core.WithIdentityKey), and a request
// without the header counts under its client IP. header(r, name) returns
// the value of r's header of the canonical name, "" when it has none.
// Every adapter's HeaderKey is this over its own request.
func HeaderKey[R any](name string, header func(r R, name string) string) func(R) (string, error) {
	canonical := http.CanonicalHeaderKey(name)
	return func(r R) (string, error) {
		return HeaderIdentity(canonical, header(r, canonical)), nil
	}
}

// JWTSubject returns a key function that counts a request by the subject
// of its bearer token, as "sub:<subject>" (SubjectIdentity): verify
// checks the token (signature, expiry, audience) and returns its subject;
// rlkit parses nothing itself. A request without a bearer token counts
// under its client IP; verify's error rejects the request (the adapter's
// error handler answers it). header is as for HeaderKey. Every adapter's
// JWTSubject is this over its own request.
func JWTSubject[R any](verify func(r R, token string) (subject string, err error), header func(r R, name string) string) func(R) (string, error) {
	return func(r R) (string, error) {
		return SubjectIdentity(header(r, "Authorization"), func(tok string) (string, error) { return verify(r, tok) })
	}
}

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
// (an API key): core.SecretIdentity(canonicalName, value), or "" (count
// the client IP) without a value. The value is a secret: the limiter
// stores and logs only its keyed hash. Every adapter's HeaderKey uses it,
// so that one caller has one identity whichever adapter counts it.
func HeaderIdentity(canonicalName, value string) string {
	if value == "" {
		return ""
	}
	return core.SecretIdentity(canonicalName, value)
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
