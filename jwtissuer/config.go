package jwtissuer

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rlkit/rlkit/core/store"
)

// Defaults of Config, as DefaultConfig returns them. New also uses them for
// the fields left zero.
const (
	DefaultAccessTTL       = 15 * time.Minute
	DefaultRefreshTTL      = 7 * 24 * time.Hour
	DefaultRateLimitRate   = 100
	DefaultRateLimitWindow = time.Minute
	// DefaultFailureLimitWindow is the window of Config.FailureLimitRate.
	DefaultFailureLimitWindow = time.Minute
)

// MinRSABits is the smallest RSA key New accepts.
const MinRSABits = 2048

// Config configures an Issuer. Start from DefaultConfig; New also reads a
// zero duration, rate or signing method as its default.
type Config struct {
	// SecretKey is the HMAC key of HS256, HS384 and HS512. It must be at
	// least as long as the hash: 32 bytes for HS256, 48 for HS384, 64 for
	// HS512 (RFC 7518, section 3.2). It must be empty for the other methods.
	SecretKey string
	// SigningMethod is the one algorithm the Issuer signs with and accepts:
	// jwt.SigningMethodHS256 (nil means HS256), HS384, HS512, RS256, RS384,
	// RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA. Tokens signed
	// with any other algorithm, "none" included, are rejected.
	SigningMethod jwt.SigningMethod
	// PrivateKey signs with the asymmetric methods: an *rsa.PrivateKey of
	// at least 2048 bits for RS* and PS*, an *ecdsa.PrivateKey on P-256,
	// P-384 or P-521 for ES256, ES384 or ES512, an ed25519.PrivateKey for
	// EdDSA.
	PrivateKey crypto.PrivateKey
	// PublicKey verifies with the asymmetric methods. nil means the public
	// half of PrivateKey; when set, it must be that public half.
	PublicKey crypto.PublicKey

	// AccessTTL is the lifetime of access tokens. Default: 15 minutes.
	AccessTTL time.Duration
	// RefreshTTL is the lifetime of refresh tokens. Default: 7 days.
	RefreshTTL time.Duration
	// Issuer, when set, is the "iss" of every token issued, and tokens
	// from any other issuer are rejected. Default: none.
	Issuer string
	// Audience, when set, is the "aud" of tokens whose claims name none,
	// and a token is accepted only when its "aud" names one of these.
	// Default: none.
	Audience []string
	// Leeway is the clock skew allowed when checking "exp" and "nbf".
	// Default: 0.
	Leeway time.Duration

	// EnableRateLimit turns on the limit on issuance (Create, CreateRefresh,
	// Refresh, RefreshInto). Default: false.
	EnableRateLimit bool
	// RateLimitRate is the number of tokens one key may be issued per
	// RateLimitWindow, and the largest burst, for the built-in RateLimiter.
	// Default: 100.
	RateLimitRate int
	// RateLimitWindow is the window of RateLimitRate. Default: 1 minute.
	RateLimitWindow time.Duration
	// RateLimiter, when set, replaces the built-in RateLimiter (then
	// RateLimitRate and RateLimitWindow are not used). The Issuer does not
	// close it: it belongs to the caller. Without EnableRateLimit it is not
	// used.
	// Default: nil, the built-in RateLimiter.
	RateLimiter RateLimitProvider

	// FailureLimitRate, when above 0, turns on the failure limit: the
	// verifications that fail (a malformed token, a bad signature, a wrong
	// "typ", an expired token, ... any error of verification) through
	// Issuer.Caller(key).Validate, ValidateInto, Refresh or RefreshInto
	// count against key, FailureLimitRate per FailureLimitWindow, in an
	// in-memory token bucket per key like the built-in RateLimiter (bursts
	// of up to FailureLimitRate, at most 10,000 keys). While key's bucket
	// is empty, every call through Caller(key), with a valid token or not,
	// fails with a *RateLimitError (Failures true) before the token is
	// parsed or its signature checked. Successful calls, errors of the
	// caller's own making (nil claims) and the issuance limit's refusals
	// do not count; Validate, ValidateInto, Refresh and RefreshInto called
	// on the Issuer itself are neither counted nor refused. It is
	// independent of EnableRateLimit. 1 to 2,147,483,647. Default: 0, off.
	FailureLimitRate int
	// FailureLimitWindow is the window of FailureLimitRate; it must be
	// left 0 when FailureLimitRate is. Default: 1 minute.
	FailureLimitWindow time.Duration

	// Clock tells the time of "iat", "exp", their checks and the built-in
	// RateLimiter: for tests (store.ManualClock). Default: store.SystemClock.
	Clock store.Clock
}

// DefaultConfig returns the defaults: HS256, access tokens for 15 minutes,
// refresh tokens for 7 days, no leeway, rate limiting off and, when turned
// on, 100 tokens per minute per key. SecretKey (or PrivateKey) is left for
// the caller to set.
func DefaultConfig() Config {
	return Config{
		SigningMethod:   jwt.SigningMethodHS256,
		AccessTTL:       DefaultAccessTTL,
		RefreshTTL:      DefaultRefreshTTL,
		RateLimitRate:   DefaultRateLimitRate,
		RateLimitWindow: DefaultRateLimitWindow,
	}
}

// keys are the checked keys of a configuration.
type keys struct {
	method jwt.SigningMethod
	sign   any // []byte or crypto.Signer
	verify any // []byte or a public key
}

// hmacMin is the shortest HMAC key of each method: the hash's size.
var hmacMin = map[string]int{"HS256": 32, "HS384": 48, "HS512": 64}

var curves = map[string]elliptic.Curve{"ES256": elliptic.P256(), "ES384": elliptic.P384(), "ES512": elliptic.P521()}

// checkKeys validates the signing method and its keys.
func (c *Config) checkKeys() (keys, error) {
	m := c.SigningMethod
	if m == nil || isNil(m) {
		m = jwt.SigningMethodHS256
	}
	alg := m.Alg()
	k := keys{method: m}
	switch m.(type) {
	case *jwt.SigningMethodHMAC:
		need, ok := hmacMin[alg]
		if !ok {
			return k, fmt.Errorf("jwtissuer: SigningMethod %q is not supported", alg)
		}
		if c.PrivateKey != nil || c.PublicKey != nil {
			return k, fmt.Errorf("jwtissuer: PrivateKey or PublicKey is set, but %s signs with SecretKey", alg)
		}
		if len(c.SecretKey) < need {
			return k, fmt.Errorf("jwtissuer: SecretKey is %d bytes, HMAC %s needs at least %d", len(c.SecretKey), alg, need)
		}
		k.sign = []byte(c.SecretKey)
		k.verify = k.sign
		return k, nil
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS, *jwt.SigningMethodECDSA, *jwt.SigningMethodEd25519:
	default:
		return k, fmt.Errorf("jwtissuer: SigningMethod %q is not supported (want HS256, HS384, HS512, RS256, RS384, RS512, PS256, PS384, PS512, ES256, ES384, ES512 or EdDSA)", alg)
	}
	if c.SecretKey != "" {
		return k, fmt.Errorf("jwtissuer: SecretKey is set, but %s signs with PrivateKey", alg)
	}
	if c.PrivateKey == nil || isNil(c.PrivateKey) {
		return k, fmt.Errorf("jwtissuer: PrivateKey is nil, %s needs one", alg)
	}
	var pub crypto.PublicKey
	switch m.(type) {
	case *jwt.SigningMethodRSA, *jwt.SigningMethodRSAPSS:
		priv, ok := c.PrivateKey.(*rsa.PrivateKey)
		if !ok {
			return k, fmt.Errorf("jwtissuer: PrivateKey is %T, %s needs *rsa.PrivateKey", c.PrivateKey, alg)
		}
		if priv.N == nil {
			return k, errors.New("jwtissuer: PrivateKey is an *rsa.PrivateKey without a modulus")
		}
		if bits := priv.N.BitLen(); bits < MinRSABits {
			return k, fmt.Errorf("jwtissuer: PrivateKey is a %d-bit RSA key, %s needs at least %d bits", bits, alg, MinRSABits)
		}
		if err := priv.Validate(); err != nil {
			return k, fmt.Errorf("jwtissuer: PrivateKey: %w", err)
		}
		k.sign, pub = priv, &priv.PublicKey
	case *jwt.SigningMethodECDSA:
		priv, ok := c.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return k, fmt.Errorf("jwtissuer: PrivateKey is %T, %s needs *ecdsa.PrivateKey", c.PrivateKey, alg)
		}
		want := curves[alg]
		if want == nil {
			return k, fmt.Errorf("jwtissuer: SigningMethod %q is not supported", alg)
		}
		if priv.Curve != want {
			return k, fmt.Errorf("jwtissuer: PrivateKey is on curve %s, %s needs %s", curveName(priv.Curve), alg, want.Params().Name)
		}
		k.sign, pub = priv, &priv.PublicKey
	case *jwt.SigningMethodEd25519:
		var priv ed25519.PrivateKey
		switch p := c.PrivateKey.(type) {
		case ed25519.PrivateKey:
			priv = p
		case *ed25519.PrivateKey:
			priv = *p
		default:
			return k, fmt.Errorf("jwtissuer: PrivateKey is %T, %s needs ed25519.PrivateKey", c.PrivateKey, alg)
		}
		if len(priv) != ed25519.PrivateKeySize {
			return k, fmt.Errorf("jwtissuer: PrivateKey is %d bytes, an ed25519.PrivateKey is %d", len(priv), ed25519.PrivateKeySize)
		}
		k.sign, pub = priv, priv.Public()
	}
	if c.PublicKey != nil && !isNil(c.PublicKey) {
		type equaler interface{ Equal(crypto.PublicKey) bool }
		given := c.PublicKey
		if p, ok := given.(*ed25519.PublicKey); ok && p != nil {
			given = *p
		}
		if e, ok := pub.(equaler); !ok || !e.Equal(given) {
			return k, fmt.Errorf("jwtissuer: PublicKey (%T) is not the public half of PrivateKey", c.PublicKey)
		}
	}
	k.verify = pub
	if err := k.probe(); err != nil {
		return k, err
	}
	return k, nil
}

// probe signs a message with the keys and verifies it, so that a key that
// cannot sign (a malformed one) fails New rather than every issuance.
func (k keys) probe() (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("jwtissuer: PrivateKey cannot sign with %s: %v", k.method.Alg(), r)
		}
	}()
	const msg = "jwtissuer.probe"
	sig, err := k.method.Sign(msg, k.sign)
	if err != nil {
		return fmt.Errorf("jwtissuer: PrivateKey cannot sign with %s: %w", k.method.Alg(), err)
	}
	if err := k.method.Verify(msg, sig, k.verify); err != nil {
		return fmt.Errorf("jwtissuer: PublicKey cannot verify what PrivateKey signs with %s: %w", k.method.Alg(), err)
	}
	return nil
}

func curveName(c elliptic.Curve) string {
	if c == nil || c.Params() == nil {
		return "<nil>"
	}
	return c.Params().Name
}

// settings are a checked configuration.
type settings struct {
	keys
	accessTTL, refreshTTL time.Duration
	issuer                string
	audience              []string
	leeway                time.Duration
	clock                 store.Clock
	limiter               RateLimitProvider
	fallible              FallibleRateLimitProvider   // limiter, when it is one
	retry                 RetryAfterRateLimitProvider // limiter, when it is one
	ownLimiter            bool                        // limiter is ours to close
	failures              *RateLimiter                // the failure limit, or nil
}

// check validates c and fills in its defaults. It builds no limiter.
func (c *Config) check() (settings, error) {
	var s settings
	var err error
	if s.keys, err = c.checkKeys(); err != nil {
		return s, err
	}
	durations := []struct {
		name string
		v    time.Duration
		def  time.Duration
		dst  *time.Duration
	}{
		{"AccessTTL", c.AccessTTL, DefaultAccessTTL, &s.accessTTL},
		{"RefreshTTL", c.RefreshTTL, DefaultRefreshTTL, &s.refreshTTL},
	}
	for _, d := range durations {
		switch {
		case d.v < 0:
			return s, fmt.Errorf("jwtissuer: %s is %v, want a positive duration (or 0 for the default, %v)", d.name, d.v, d.def)
		case d.v > 0 && d.v < time.Second:
			// "exp" counts whole seconds: a shorter lifetime would round to 0.
			return s, fmt.Errorf("jwtissuer: %s is %v, want at least 1s", d.name, d.v)
		case d.v == 0:
			*d.dst = d.def
		default:
			*d.dst = d.v
		}
	}
	if c.Leeway < 0 {
		return s, fmt.Errorf("jwtissuer: Leeway is %v, want 0 or more", c.Leeway)
	}
	for i, a := range c.Audience {
		if a == "" {
			return s, fmt.Errorf("jwtissuer: Audience[%d] is empty", i)
		}
	}
	s.issuer, s.audience, s.leeway = c.Issuer, append([]string(nil), c.Audience...), c.Leeway
	s.clock = c.Clock
	if s.clock == nil || isNil(s.clock) {
		s.clock = store.SystemClock
	}

	switch rate, window := c.FailureLimitRate, c.FailureLimitWindow; {
	case rate < 0 || rate > math.MaxInt32:
		return s, fmt.Errorf("jwtissuer: FailureLimitRate is %d, want 1 to %d (or 0 for no failure limit)", rate, math.MaxInt32)
	case rate == 0 && window != 0:
		return s, fmt.Errorf("jwtissuer: FailureLimitWindow is %v but FailureLimitRate is 0 (no failure limit): set FailureLimitRate too", window)
	case rate > 0:
		if window, err = checkWindow("FailureLimitWindow", window, DefaultFailureLimitWindow); err != nil {
			return s, err
		}
		s.failures = newRateLimiter(rate, window, s.clock, maxBuckets)
	}

	custom := c.RateLimiter != nil
	if custom && isNil(c.RateLimiter) {
		return s, fmt.Errorf("jwtissuer: RateLimiter is a nil %T", c.RateLimiter)
	}
	if !c.EnableRateLimit {
		return s, nil // RateLimiter, if any, is not used
	}
	if custom {
		s.limiter = c.RateLimiter
		s.fallible, _ = c.RateLimiter.(FallibleRateLimitProvider)
		s.retry, _ = c.RateLimiter.(RetryAfterRateLimitProvider)
		return s, nil
	}
	rate := c.RateLimitRate
	switch {
	case rate < 0 || rate > math.MaxInt32:
		return s, fmt.Errorf("jwtissuer: RateLimitRate is %d, want 1 to %d (or 0 for the default, %d)", rate, math.MaxInt32, DefaultRateLimitRate)
	case rate == 0:
		rate = DefaultRateLimitRate
	}
	window, err := checkWindow("RateLimitWindow", c.RateLimitWindow, DefaultRateLimitWindow)
	if err != nil {
		return s, err
	}
	rl := newRateLimiter(rate, window, s.clock, maxBuckets)
	s.limiter, s.retry, s.ownLimiter = rl, rl, true
	return s, nil
}

// checkWindow returns the window of a limit, field name, or def for 0.
func checkWindow(name string, window, def time.Duration) (time.Duration, error) {
	switch {
	case window < 0:
		return 0, fmt.Errorf("jwtissuer: %s is %v, want a positive duration (or 0 for the default, %v)", name, window, def)
	case window == 0:
		return def, nil
	}
	return window, nil
}

// isNil reports whether v is an interface holding a nil pointer, map,
// slice, func or channel.
func isNil(v any) bool {
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan, reflect.Interface:
		return rv.IsNil()
	}
	return v == nil
}
