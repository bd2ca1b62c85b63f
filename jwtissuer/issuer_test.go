package jwtissuer_test

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/jwtissuer"
)

const secret = "test-secret-0123456789-0123456789-abcdef" // 40 bytes

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// newIssuer returns an Issuer on a manual clock reading t0, with the
// secret, after edit changed the default configuration.
func newIssuer(t testing.TB, edit func(*jwtissuer.Config)) (*jwtissuer.Issuer, *store.ManualClock) {
	t.Helper()
	clock := store.NewManualClock(t0)
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = secret
	cfg.Clock = clock
	if edit != nil {
		edit(&cfg)
	}
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = iss.Close() })
	return iss, clock
}

func must[T any](t testing.TB) func(T, error) T {
	return func(v T, err error) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// header returns the decoded JOSE header of token.
func header(t *testing.T, token string) map[string]any {
	t.Helper()
	tok, _, err := jwt.NewParser().ParseUnverified(token, jwt.MapClaims{})
	if err != nil {
		t.Fatal(err)
	}
	return tok.Header
}

var (
	rsaKey = sync.OnceValue(func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	})
	rsaKey2 = sync.OnceValue(func() *rsa.PrivateKey {
		k, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			panic(err)
		}
		return k
	})
)

func ecKey(c elliptic.Curve) *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(c, rand.Reader)
	if err != nil {
		panic(err)
	}
	return k
}

func TestNewErrors(t *testing.T) {
	small, err := rsa.GenerateKey(rand.Reader, 1024)
	if err != nil {
		t.Fatal(err)
	}
	p256, p384 := ecKey(elliptic.P256()), ecKey(elliptic.P384())
	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	for _, c := range []struct {
		name string
		edit func(*jwtissuer.Config)
		want string
	}{
		{"short secret", func(c *jwtissuer.Config) { c.SecretKey = "twelve-bytes" },
			"jwtissuer: SecretKey is 12 bytes, HMAC HS256 needs at least 32"},
		{"no secret", func(c *jwtissuer.Config) { c.SecretKey = "" }, "SecretKey is 0 bytes"},
		{"HS512 short", func(c *jwtissuer.Config) { c.SigningMethod = jwt.SigningMethodHS512 },
			"SecretKey is 40 bytes, HMAC HS512 needs at least 64"},
		{"HS with a private key", func(c *jwtissuer.Config) { c.PrivateKey = rsaKey() }, "PrivateKey or PublicKey is set, but HS256 signs with SecretKey"},
		{"none", func(c *jwtissuer.Config) { c.SigningMethod = jwt.SigningMethodNone }, `SigningMethod "none" is not supported`},
		{"RS256 with a secret", func(c *jwtissuer.Config) { c.SigningMethod = jwt.SigningMethodRS256; c.PrivateKey = rsaKey() },
			"SecretKey is set, but RS256 signs with PrivateKey"},
		{"RS256 without a key", func(c *jwtissuer.Config) { c.SigningMethod, c.SecretKey = jwt.SigningMethodRS256, "" },
			"PrivateKey is nil, RS256 needs one"},
		{"RS256 with a typed nil key", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey = jwt.SigningMethodRS256, "", (*rsa.PrivateKey)(nil)
		}, "PrivateKey is nil"},
		{"RS256 with an EC key", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey = jwt.SigningMethodRS256, "", p256
		},
			"PrivateKey is *ecdsa.PrivateKey, RS256 needs *rsa.PrivateKey"},
		{"RS256 1024-bit", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey = jwt.SigningMethodRS256, "", small
		},
			"PrivateKey is a 1024-bit RSA key, RS256 needs at least 2048 bits"},
		{"RSA key without modulus", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey = jwt.SigningMethodRS256, "", &rsa.PrivateKey{}
		}, "PrivateKey is an *rsa.PrivateKey without a modulus"},
		{"EC key without D", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey = jwt.SigningMethodES256, "", &ecdsa.PrivateKey{PublicKey: p256.PublicKey}
		}, "PrivateKey cannot sign with ES256"},
		{"typed nil public key is derived", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey, c.PublicKey = jwt.SigningMethodES256, "", p256, (*ecdsa.PublicKey)(nil)
		}, ""},
		{"ES256 on P-384", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey = jwt.SigningMethodES256, "", p384
		},
			"PrivateKey is on curve P-384, ES256 needs P-256"},
		{"EdDSA with RSA", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey = jwt.SigningMethodEdDSA, "", rsaKey()
		},
			"PrivateKey is *rsa.PrivateKey, EdDSA needs ed25519.PrivateKey"},
		{"mismatched public key", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey, c.PublicKey = jwt.SigningMethodRS256, "", rsaKey(), &rsaKey2().PublicKey
		}, "PublicKey (*rsa.PublicKey) is not the public half of PrivateKey"},
		{"public key of another type", func(c *jwtissuer.Config) {
			c.SigningMethod, c.SecretKey, c.PrivateKey, c.PublicKey = jwt.SigningMethodEdDSA, "", edPriv, &rsaKey().PublicKey
		}, "is not the public half of PrivateKey"},
		{"negative AccessTTL", func(c *jwtissuer.Config) { c.AccessTTL = -time.Second }, "AccessTTL is -1s"},
		{"sub-second RefreshTTL", func(c *jwtissuer.Config) { c.RefreshTTL = time.Millisecond }, "RefreshTTL is 1ms, want at least 1s"},
		{"negative Leeway", func(c *jwtissuer.Config) { c.Leeway = -1 }, "Leeway is -1ns"},
		{"empty audience", func(c *jwtissuer.Config) { c.Audience = []string{"api", ""} }, "Audience[1] is empty"},
		{"negative rate", func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitRate = true, -1 }, "RateLimitRate is -1"},
		{"huge rate", func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitRate = true, 1<<40 }, "RateLimitRate is 1099511627776, want 1 to 2147483647"},
		{"negative window", func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitWindow = true, -time.Minute }, "RateLimitWindow is -1m0s"},
		{"limiter without EnableRateLimit (not used)", func(c *jwtissuer.Config) { c.RateLimiter = jwtissuer.NewRateLimiter(1, time.Second) }, ""},
		{"typed nil limiter", func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimiter = true, (*jwtissuer.RateLimiter)(nil) },
			"RateLimiter is a nil *jwtissuer.RateLimiter"},
	} {
		cfg := jwtissuer.DefaultConfig()
		cfg.SecretKey = secret
		c.edit(&cfg)
		iss, err := jwtissuer.New(cfg)
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			} else {
				iss.Close()
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: New error %v, want one containing %q", c.name, err, c.want)
		}
		if iss != nil {
			t.Errorf("%s: New returned an Issuer with its error", c.name)
		}
	}
}

// TestZeroConfigDefaults: a Config with only a secret takes every default.
func TestZeroConfigDefaults(t *testing.T) {
	clock := store.NewManualClock(t0)
	iss, err := jwtissuer.New(jwtissuer.Config{SecretKey: secret, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer iss.Close()
	access := must[string](t)(iss.Create(&jwtissuer.Claims{UserID: "u"}))
	refresh := must[string](t)(iss.CreateRefresh(&jwtissuer.Claims{UserID: "u"}))
	c := must[*jwtissuer.Claims](t)(iss.Validate(access))
	if got := c.ExpiresAt.Sub(t0); got != jwtissuer.DefaultAccessTTL {
		t.Errorf("access lifetime %v, want %v", got, jwtissuer.DefaultAccessTTL)
	}
	if header(t, access)["alg"] != "HS256" {
		t.Errorf("alg %v, want HS256", header(t, access)["alg"])
	}
	rc := new(jwtissuer.Claims)
	must[*jwt.Token](t)(jwt.NewParser(jwt.WithoutClaimsValidation()).ParseWithClaims(refresh, rc, func(*jwt.Token) (any, error) { return []byte(secret), nil }))
	if got := rc.ExpiresAt.Sub(t0); got != jwtissuer.DefaultRefreshTTL {
		t.Errorf("refresh lifetime %v, want %v", got, jwtissuer.DefaultRefreshTTL)
	}
	d := jwtissuer.DefaultConfig()
	if d.AccessTTL != 15*time.Minute || d.RefreshTTL != 7*24*time.Hour || d.EnableRateLimit || d.RateLimitRate != 100 ||
		d.RateLimitWindow != time.Minute || d.SigningMethod != jwt.SigningMethodHS256 || d.Leeway != 0 {
		t.Errorf("DefaultConfig() = %+v", d)
	}
}

func TestCreateValidate(t *testing.T) {
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) {
		c.Issuer = "auth.example"
		c.Audience = []string{"api", "admin"}
	})
	in := &jwtissuer.Claims{UserID: "u-1", Username: "ann", Roles: []string{"admin"}, Extra: map[string]any{"tier": "gold"}}
	orig := *in
	tok := must[string](t)(iss.Create(in))
	if in.IssuedAt != nil || in.ExpiresAt != nil || in.ID != "" || in.Issuer != "" || in.Audience != nil {
		t.Fatalf("Create changed the caller's claims: %+v, was %+v", *in, orig)
	}
	if h := header(t, tok); h["typ"] != "at+jwt" || h["alg"] != "HS256" {
		t.Fatalf("header %v, want typ at+jwt, alg HS256", h)
	}
	c := must[*jwtissuer.Claims](t)(iss.Validate(tok))
	switch {
	case c.UserID != "u-1" || c.Username != "ann" || len(c.Roles) != 1 || c.Extra["tier"] != "gold":
		t.Fatalf("claims %+v", c)
	case !c.IssuedAt.Equal(t0) || !c.ExpiresAt.Equal(t0.Add(15*time.Minute)):
		t.Fatalf("iat %v, exp %v; want %v and 15m later", c.IssuedAt, c.ExpiresAt, t0)
	case len(c.ID) != 26:
		t.Fatalf("jti %q, want 26 random characters", c.ID)
	case c.Issuer != "auth.example" || strings.Join(c.Audience, ",") != "api,admin":
		t.Fatalf("iss %q, aud %v", c.Issuer, c.Audience)
	}
	// Claims as a value, with their own exp and jti, and an audience.
	exp := jwt.NewNumericDate(t0.Add(time.Hour))
	tok2 := must[string](t)(iss.Create(jwtissuer.Claims{UserID: "u-2", RegisteredClaims: jwt.RegisteredClaims{
		ExpiresAt: exp, ID: "mine", Audience: jwt.ClaimStrings{"admin"}, Issuer: "someone-else"}}))
	c2 := must[*jwtissuer.Claims](t)(iss.Validate(tok2))
	if !c2.ExpiresAt.Equal(exp.Time) || c2.ID != "mine" || strings.Join(c2.Audience, ",") != "admin" || c2.Issuer != "auth.example" {
		t.Fatalf("own exp/jti/aud not kept, or iss not the issuer's: %+v", c2.RegisteredClaims)
	}
	if c.ID == must[*jwtissuer.Claims](t)(iss.Validate(must[string](t)(iss.Create(in)))).ID {
		t.Fatal("two tokens with one jti")
	}
}

func TestValidateRejects(t *testing.T) {
	iss, clock := newIssuer(t, func(c *jwtissuer.Config) { c.Issuer, c.Audience = "auth", []string{"api"} })
	good := must[string](t)(iss.Create(&jwtissuer.Claims{UserID: "u"}))
	sign := func(c jwt.Claims, typ string, key any, m jwt.SigningMethod) string {
		tok := jwt.NewWithClaims(m, c)
		tok.Header["typ"] = typ
		s, err := tok.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	valid := func() jwt.RegisteredClaims {
		return jwt.RegisteredClaims{Issuer: "auth", Audience: jwt.ClaimStrings{"api"}, ExpiresAt: jwt.NewNumericDate(t0.Add(time.Hour))}
	}
	noExp, otherIss, otherAud, future := valid(), valid(), valid(), valid()
	noExp.ExpiresAt = nil
	otherIss.Issuer = "evil"
	otherAud.Audience = jwt.ClaimStrings{"other"}
	future.NotBefore = jwt.NewNumericDate(t0.Add(time.Minute))
	noneTok := func() string {
		tok := jwt.NewWithClaims(jwt.SigningMethodNone, valid())
		tok.Header["typ"] = "at+jwt"
		s, err := tok.SignedString(jwt.UnsafeAllowNoneSignatureType)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}()
	parts := strings.Split(good, ".")
	for _, c := range []struct {
		name  string
		token string
		want  error
	}{
		{"garbage", "not-a-token", jwt.ErrTokenMalformed},
		{"empty", "", jwt.ErrTokenMalformed},
		{"line break in the signature", parts[0] + "." + parts[1] + "." + parts[2][:5] + "\n" + parts[2][5:], jwt.ErrTokenMalformed},
		{"too long", strings.Repeat("a", 65<<10), jwt.ErrTokenMalformed},
		{"alg none", noneTok, jwt.ErrTokenSignatureInvalid},
		{"other secret", sign(valid(), "at+jwt", []byte(strings.Repeat("x", 40)), jwt.SigningMethodHS256), jwt.ErrTokenSignatureInvalid},
		{"HS512 with the same secret", sign(valid(), "at+jwt", []byte(secret), jwt.SigningMethodHS512), jwt.ErrTokenSignatureInvalid},
		{"tampered claims", parts[0] + "." + base64.RawURLEncoding.EncodeToString([]byte(`{"user_id":"admin","exp":9999999999}`)) + "." + parts[2], jwt.ErrTokenSignatureInvalid},
		{"no exp", sign(noExp, "at+jwt", []byte(secret), jwt.SigningMethodHS256), jwt.ErrTokenRequiredClaimMissing},
		{"other issuer", sign(otherIss, "at+jwt", []byte(secret), jwt.SigningMethodHS256), jwt.ErrTokenInvalidIssuer},
		{"other audience", sign(otherAud, "at+jwt", []byte(secret), jwt.SigningMethodHS256), jwt.ErrTokenInvalidAudience},
		{"not yet valid", sign(future, "at+jwt", []byte(secret), jwt.SigningMethodHS256), jwt.ErrTokenNotValidYet},
		{"typ JWT", sign(valid(), "JWT", []byte(secret), jwt.SigningMethodHS256), jwtissuer.ErrTokenType},
		{"no typ", sign(valid(), "", []byte(secret), jwt.SigningMethodHS256), jwtissuer.ErrTokenType},
		{"refresh typ", sign(valid(), "rt+jwt", []byte(secret), jwt.SigningMethodHS256), jwtissuer.ErrTokenType},
	} {
		_, err := iss.Validate(c.token)
		if !errors.Is(err, c.want) {
			t.Errorf("%s: Validate error %v, want %v", c.name, err, c.want)
		}
		if err := iss.ValidateInto(c.token, new(jwtissuer.Claims)); !errors.Is(err, c.want) {
			t.Errorf("%s: ValidateInto error %v, want %v", c.name, err, c.want)
		}
	}
	if _, err := iss.Validate(sign(valid(), "application/AT+JWT", []byte(secret), jwt.SigningMethodHS256)); err != nil {
		t.Errorf(`typ "application/AT+JWT": %v, want accepted`, err)
	}
	// Expiry, and the leeway.
	clock.Set(t0.Add(15*time.Minute - time.Second))
	must[*jwtissuer.Claims](t)(iss.Validate(good))
	clock.Set(t0.Add(15 * time.Minute))
	if _, err := iss.Validate(good); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Fatalf("at exp: %v, want jwt.ErrTokenExpired", err)
	}
	lenient, lclock := newIssuer(t, func(c *jwtissuer.Config) {
		c.Issuer, c.Audience, c.Leeway = "auth", []string{"api"}, 30*time.Second
	})
	lclock.Set(t0.Add(15*time.Minute + 29*time.Second))
	must[*jwtissuer.Claims](t)(lenient.Validate(good))
	lclock.Set(t0.Add(15*time.Minute + 31*time.Second))
	if _, err := lenient.Validate(good); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Fatalf("past the leeway: %v, want jwt.ErrTokenExpired", err)
	}
}

// TestTokenTypeConfusion: a refresh token is no access token, and the
// reverse, for the built-in and for custom claims.
func TestTokenTypeConfusion(t *testing.T) {
	iss, _ := newIssuer(t, nil)
	claims := &jwtissuer.Claims{UserID: "u"}
	access := must[string](t)(iss.Create(claims))
	refresh := must[string](t)(iss.CreateRefresh(claims))
	if h := header(t, refresh); h["typ"] != "rt+jwt" {
		t.Fatalf("refresh header %v", h)
	}
	if _, err := iss.Validate(refresh); !errors.Is(err, jwtissuer.ErrTokenType) {
		t.Errorf("Validate(refresh): %v, want ErrTokenType", err)
	}
	if err := iss.ValidateInto(refresh, &myClaims{}); !errors.Is(err, jwtissuer.ErrTokenType) {
		t.Errorf("ValidateInto(refresh): %v, want ErrTokenType", err)
	}
	if _, err := iss.Refresh(access); !errors.Is(err, jwtissuer.ErrTokenType) {
		t.Errorf("Refresh(access): %v, want ErrTokenType", err)
	}
	if _, err := iss.RefreshInto(access, &myClaims{}); !errors.Is(err, jwtissuer.ErrTokenType) {
		t.Errorf("RefreshInto(access): %v, want ErrTokenType", err)
	}
	// A refreshed token is an access token.
	again := must[string](t)(iss.Refresh(refresh))
	must[*jwtissuer.Claims](t)(iss.Validate(again))
	if _, err := iss.Refresh(again); !errors.Is(err, jwtissuer.ErrTokenType) {
		t.Errorf("Refresh(refreshed access token): %v, want ErrTokenType", err)
	}
}

// TestAlgorithmConfusion: an issuer on RS256 rejects an HS256 token whose
// HMAC key is the RSA public key (the PEM an attacker can download), and
// tokens signed by another RSA key; each asymmetric method round-trips.
func TestAlgorithmConfusion(t *testing.T) {
	priv := rsaKey()
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) {
		c.SecretKey, c.SigningMethod, c.PrivateKey = "", jwt.SigningMethodRS256, priv
	})
	good := must[string](t)(iss.Create(&jwtissuer.Claims{UserID: "u"}))
	must[*jwtissuer.Claims](t)(iss.Validate(good))

	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})
	claims := jwt.RegisteredClaims{Subject: "admin", ExpiresAt: jwt.NewNumericDate(t0.Add(time.Hour))}
	for _, key := range [][]byte{pemKey, der} {
		forged := jwt.NewWithClaims(jwt.SigningMethodHS256, claims)
		forged.Header["typ"] = "at+jwt"
		s, err := forged.SignedString(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := iss.Validate(s); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			t.Errorf("HS256 signed with the public key: %v, want jwt.ErrTokenSignatureInvalid", err)
		}
	}
	other := jwt.NewWithClaims(jwt.SigningMethodRS256, claims)
	other.Header["typ"] = "at+jwt"
	s, err := other.SignedString(rsaKey2())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := iss.Validate(s); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Errorf("RS256 by another key: %v, want jwt.ErrTokenSignatureInvalid", err)
	}
	ps := jwt.NewWithClaims(jwt.SigningMethodPS256, claims) // same key, other RSA algorithm
	ps.Header["typ"] = "at+jwt"
	if s, err = ps.SignedString(priv); err != nil {
		t.Fatal(err)
	}
	if _, err := iss.Validate(s); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Errorf("PS256 by the issuer's own key: %v, want jwt.ErrTokenSignatureInvalid", err)
	}

	_, edPriv, _ := ed25519.GenerateKey(rand.Reader)
	for _, c := range []struct {
		m    jwt.SigningMethod
		priv any
		pub  any
	}{
		{jwt.SigningMethodRS512, priv, &priv.PublicKey},
		{jwt.SigningMethodPS256, priv, nil},
		{jwt.SigningMethodES256, ecKey(elliptic.P256()), nil},
		{jwt.SigningMethodES384, ecKey(elliptic.P384()), nil},
		{jwt.SigningMethodES512, ecKey(elliptic.P521()), nil},
		{jwt.SigningMethodEdDSA, edPriv, edPriv.Public()},
		{jwt.SigningMethodHS384, nil, nil},
	} {
		iss, _ := newIssuer(t, func(cfg *jwtissuer.Config) {
			cfg.SigningMethod, cfg.PrivateKey, cfg.PublicKey = c.m, c.priv, c.pub
			if c.priv != nil {
				cfg.SecretKey = ""
			} else {
				cfg.SecretKey = strings.Repeat(secret, 2)
			}
		})
		tok := must[string](t)(iss.Create(&jwtissuer.Claims{UserID: "u"}))
		if h := header(t, tok); h["alg"] != c.m.Alg() {
			t.Errorf("%s: header alg %v", c.m.Alg(), h["alg"])
		}
		if _, err := iss.Validate(tok); err != nil {
			t.Errorf("%s: %v", c.m.Alg(), err)
		}
		if _, err := iss.Validate(good); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
			t.Errorf("%s issuer took an RS256 token: %v", c.m.Alg(), err)
		}
	}
}

func TestRefresh(t *testing.T) {
	iss, clock := newIssuer(t, func(c *jwtissuer.Config) { c.Issuer = "auth" })
	refresh := must[string](t)(iss.CreateRefresh(&jwtissuer.Claims{
		UserID: "u", Roles: []string{"r"},
		RegisteredClaims: jwt.RegisteredClaims{Subject: "sub-1", NotBefore: jwt.NewNumericDate(t0)},
	}))
	clock.Set(t0.Add(time.Hour))
	access := must[string](t)(iss.Refresh(refresh))
	c := must[*jwtissuer.Claims](t)(iss.Validate(access))
	now := t0.Add(time.Hour)
	switch {
	case c.UserID != "u" || c.Subject != "sub-1" || len(c.Roles) != 1 || c.Issuer != "auth":
		t.Fatalf("identity not carried over: %+v", c)
	case !c.IssuedAt.Equal(now) || !c.ExpiresAt.Equal(now.Add(15*time.Minute)) || c.NotBefore != nil:
		t.Fatalf("iat %v exp %v nbf %v; want %v, 15m later, none", c.IssuedAt, c.ExpiresAt, c.NotBefore, now)
	}
	rc := new(jwtissuer.Claims)
	must[*jwt.Token](t)(jwt.NewParser(jwt.WithoutClaimsValidation()).ParseWithClaims(refresh, rc, func(*jwt.Token) (any, error) { return []byte(secret), nil }))
	if rc.ID == c.ID || rc.ID == "" {
		t.Fatalf("refreshed jti %q, refresh token's %q: want a fresh one", c.ID, rc.ID)
	}
	// Past the refresh token's lifetime.
	clock.Set(t0.Add(7 * 24 * time.Hour))
	if _, err := iss.Refresh(refresh); !errors.Is(err, jwt.ErrTokenExpired) {
		t.Fatalf("expired refresh: %v, want jwt.ErrTokenExpired", err)
	}
}

// recorder is a RateLimitProvider that records the keys it is asked about.
type recorder struct {
	mu     sync.Mutex
	keys   []string
	deny   bool
	closed atomic.Bool
}

func (r *recorder) Allow(key string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.keys = append(r.keys, key)
	return !r.deny
}
func (r *recorder) Reset(string) {}
func (r *recorder) Close()       { r.closed.Store(true) }
func (r *recorder) take() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.keys
	r.keys = nil
	return k
}

// myClaims is the seed's custom claims: its own UserID (not the built-in
// one) and a RateLimitKey.
type myClaims struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	jwt.RegisteredClaims
}

func (c *myClaims) RateLimitKey() string { return c.Email }

// withClaims embeds the built-in Claims.
type withClaims struct {
	jwtissuer.Claims
	Email string `json:"email"`
}

func (c withClaims) RateLimitKey() string { return "mail:" + c.Email }

// ptrClaims embeds *jwt.RegisteredClaims.
type ptrClaims struct {
	Team string `json:"team"`
	*jwt.RegisteredClaims
}

// TestKeyOrder: subject, then the built-in UserID, then RateLimitKey, then
// "" (not counted).
func TestKeyOrder(t *testing.T) {
	rec := &recorder{}
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimiter = true, rec })
	sub := jwt.RegisteredClaims{Subject: "s"}
	for _, c := range []struct {
		name   string
		claims jwt.Claims
		want   string // "" = not asked
	}{
		{"*Claims: subject beats UserID", &jwtissuer.Claims{UserID: "u", RegisteredClaims: sub}, "s"},
		{"*Claims: UserID", &jwtissuer.Claims{UserID: "u"}, "u"},
		{"Claims value: UserID", jwtissuer.Claims{UserID: "u"}, "u"},
		{"*Claims: nothing", &jwtissuer.Claims{Username: "ann"}, ""},
		{"embedded Claims: subject", &withClaims{Claims: jwtissuer.Claims{UserID: "u", RegisteredClaims: sub}, Email: "e"}, "s"},
		{"embedded Claims: UserID beats RateLimitKey", &withClaims{Claims: jwtissuer.Claims{UserID: "u"}, Email: "e"}, "u"},
		{"embedded Claims: RateLimitKey", &withClaims{Email: "e"}, "mail:e"},
		{"custom: subject beats RateLimitKey", &myClaims{UserID: "u", Email: "e", RegisteredClaims: sub}, "s"},
		{"custom: its own UserID is not the built-in one", &myClaims{UserID: "u", Email: "e"}, "e"},
		{"custom: empty RateLimitKey", &myClaims{UserID: "u"}, ""},
		{"pointer-embedded registered claims", &ptrClaims{Team: "t", RegisteredClaims: &jwt.RegisteredClaims{Subject: "p"}}, "p"},
		{"*jwt.RegisteredClaims", &jwt.RegisteredClaims{Subject: "r"}, "r"},
		{"MapClaims: sub", jwt.MapClaims{"sub": "m", "user_id": "ignored"}, "m"},
		{"MapClaims: none", jwt.MapClaims{"user_id": "ignored"}, ""},
		{"MapClaims: sub not a string", jwt.MapClaims{"sub": 42}, ""},
	} {
		if _, err := iss.Create(c.claims); err != nil {
			t.Errorf("%s: Create: %v", c.name, err)
			continue
		}
		var want []string
		if c.want != "" {
			want = []string{c.want}
		}
		if got := rec.take(); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("%s: limiter asked about %q, want %q", c.name, got, want)
		}
	}
}

// TestKeyOrderBuiltin: on the built-in limiter, an exhausted subject is
// refused whatever the UserID, and claims with no key are never counted.
func TestKeyOrderBuiltin(t *testing.T) {
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitRate = true, 1 })
	create := func(c jwt.Claims) error { _, err := iss.Create(c); return err }
	if err := create(&jwtissuer.Claims{RegisteredClaims: jwt.RegisteredClaims{Subject: "s"}}); err != nil {
		t.Fatal(err)
	}
	if err := create(&jwtissuer.Claims{UserID: "fresh", RegisteredClaims: jwt.RegisteredClaims{Subject: "s"}}); !errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
		t.Fatalf("exhausted subject with a fresh UserID: %v, want ErrRateLimitExceeded", err)
	}
	if err := create(&jwtissuer.Claims{UserID: "fresh"}); err != nil {
		t.Fatalf("fresh UserID: %v", err)
	}
	if err := create(&withClaims{Claims: jwtissuer.Claims{UserID: "fresh"}, Email: "e"}); !errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
		t.Fatalf("UserID beats RateLimitKey: %v, want ErrRateLimitExceeded", err)
	}
	for i := range 50 {
		if err := create(&jwtissuer.Claims{Username: "anonymous"}); err != nil {
			t.Fatalf("keyless claims, #%d: %v", i+1, err)
		}
	}
}

// TestRateLimitIssuance: every issuing call counts; Validate never does.
func TestRateLimitIssuance(t *testing.T) {
	iss, clock := newIssuer(t, func(c *jwtissuer.Config) {
		c.EnableRateLimit, c.RateLimitRate, c.RateLimitWindow = true, 4, time.Minute
	})
	u := &jwtissuer.Claims{UserID: "u"}
	access := must[string](t)(iss.Create(u))
	refresh := must[string](t)(iss.CreateRefresh(u))
	must[string](t)(iss.Refresh(refresh))
	must[string](t)(iss.RefreshInto(refresh, &jwtissuer.Claims{}))
	for name, call := range map[string]func() error{
		"Create":        func() error { _, err := iss.Create(u); return err },
		"CreateRefresh": func() error { _, err := iss.CreateRefresh(u); return err },
		"Refresh":       func() error { _, err := iss.Refresh(refresh); return err },
		"RefreshInto":   func() error { _, err := iss.RefreshInto(refresh, &jwtissuer.Claims{}); return err },
	} {
		if err := call(); !errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
			t.Errorf("%s over the limit: %v, want ErrRateLimitExceeded", name, err)
		}
	}
	for i := range 100 {
		if _, err := iss.Validate(access); err != nil {
			t.Fatalf("Validate #%d over the limit: %v", i+1, err)
		}
		if err := iss.ValidateInto(access, &jwtissuer.Claims{}); err != nil {
			t.Fatalf("ValidateInto #%d over the limit: %v", i+1, err)
		}
	}
	// Another user has their own bucket; a token returns every 15s.
	must[string](t)(iss.Create(&jwtissuer.Claims{UserID: "v"}))
	clock.Advance(15 * time.Second)
	must[string](t)(iss.Create(u))
	if _, err := iss.Create(u); !errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
		t.Fatalf("second token after 15s: %v, want ErrRateLimitExceeded", err)
	}
}

// TestValidateNeverLimited: limit 1, one token, validated 100 times.
func TestValidateNeverLimited(t *testing.T) {
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitRate = true, 1 })
	tok := must[string](t)(iss.Create(&jwtissuer.Claims{UserID: "u"}))
	for i := range 100 {
		if _, err := iss.Validate(tok); err != nil {
			t.Fatalf("Validate #%d: %v", i+1, err)
		}
	}
}

// TestRejectedRefreshCostsNothing: a refresh token that fails verification
// (expired, tampered, an access token) never reaches the limiter.
func TestRejectedRefreshCostsNothing(t *testing.T) {
	iss, clock := newIssuer(t, func(c *jwtissuer.Config) {
		c.EnableRateLimit, c.RateLimitRate, c.RateLimitWindow = true, 2, time.Hour
	})
	short := &jwtissuer.Claims{UserID: "u", RegisteredClaims: jwt.RegisteredClaims{ExpiresAt: jwt.NewNumericDate(t0.Add(time.Second))}}
	expired := must[string](t)(iss.CreateRefresh(short)) // 1 of 2
	clock.Advance(2 * time.Second)                       // refills 2s×2/3600s: nothing
	for range 10 {
		if _, err := iss.Refresh(expired); !errors.Is(err, jwt.ErrTokenExpired) {
			t.Fatalf("expired refresh token: %v, want jwt.ErrTokenExpired", err)
		}
		if _, err := iss.RefreshInto(expired, &jwtissuer.Claims{}); !errors.Is(err, jwt.ErrTokenExpired) {
			t.Fatalf("expired refresh token into claims: %v, want jwt.ErrTokenExpired", err)
		}
		if _, err := iss.Refresh(expired + "x"); err == nil {
			t.Fatal("tampered refresh token accepted")
		}
	}
	must[string](t)(iss.Create(&jwtissuer.Claims{UserID: "u"})) // the second token is still there
	if _, err := iss.Create(&jwtissuer.Claims{UserID: "u"}); !errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
		t.Fatalf("third token: %v, want ErrRateLimitExceeded", err)
	}

	rec := &recorder{}
	iss2, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimiter = true, rec })
	access := must[string](t)(iss2.Create(&jwtissuer.Claims{UserID: "u"}))
	rec.take()
	iss2.Refresh(access)
	iss2.Refresh("garbage")
	iss2.RefreshInto(access, &myClaims{})
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("rejected refreshes asked the limiter about %q", got)
	}
}

// fallible is a FallibleRateLimitProvider with a fixed answer. Its Allow
// records keys (the embedded recorder); AllowErr only counts its calls.
type fallible struct {
	recorder
	allowErrs atomic.Int64
	allowed   bool
	err       error
}

func (f *fallible) AllowErr(string) (bool, error) {
	f.allowErrs.Add(1)
	return f.allowed, f.err
}

func TestFallibleProvider(t *testing.T) {
	boom := errors.New("backend down")
	for _, c := range []struct {
		name                  string
		allowed               bool
		err                   error
		unavailable, exceeded bool
	}{
		{"fails closed", false, boom, true, false},
		{"fails open", true, boom, false, false},
		{"denies", false, nil, false, true},
		{"admits", true, nil, false, false},
	} {
		f := &fallible{allowed: c.allowed, err: c.err}
		iss, _ := newIssuer(t, func(cfg *jwtissuer.Config) { cfg.EnableRateLimit, cfg.RateLimiter = true, f })
		_, err := iss.Create(&jwtissuer.Claims{UserID: "u"})
		if got := errors.Is(err, jwtissuer.ErrRateLimitUnavailable); got != c.unavailable {
			t.Errorf("%s: %v; ErrRateLimitUnavailable %v, want %v", c.name, err, got, c.unavailable)
		}
		if got := errors.Is(err, jwtissuer.ErrRateLimitExceeded); got != c.exceeded {
			t.Errorf("%s: %v; ErrRateLimitExceeded %v, want %v", c.name, err, got, c.exceeded)
		}
		if c.unavailable && !errors.Is(err, boom) {
			t.Errorf("%s: %v does not wrap the cause", c.name, err)
		}
		if (err == nil) != (c.allowed) {
			t.Errorf("%s: err %v", c.name, err)
		}
		if n := f.allowErrs.Load(); n != 1 {
			t.Errorf("%s: AllowErr called %d times, want 1", c.name, n)
		}
		if got := f.take(); len(got) != 0 {
			t.Errorf("%s: Allow called for %q besides AllowErr", c.name, got)
		}
	}
}

// TestCustomClaims round-trips claims types the issuer stamps through
// reflection, and jwt.MapClaims.
func TestCustomClaims(t *testing.T) {
	iss, clock := newIssuer(t, func(c *jwtissuer.Config) { c.Audience = []string{"api"} })
	in := &myClaims{UserID: "u", Email: "e@example.com", RegisteredClaims: jwt.RegisteredClaims{NotBefore: jwt.NewNumericDate(t0)}}
	refresh := must[string](t)(iss.CreateRefresh(in))
	if in.ExpiresAt != nil || in.IssuedAt != nil {
		t.Fatal("CreateRefresh changed the caller's claims")
	}
	clock.Advance(time.Minute)
	out := &myClaims{}
	access := must[string](t)(iss.RefreshInto(refresh, out))
	now := t0.Add(time.Minute)
	if out.Email != "e@example.com" || !out.IssuedAt.Equal(now) || !out.ExpiresAt.Equal(now.Add(15*time.Minute)) ||
		out.NotBefore != nil || out.ID == "" || strings.Join(out.Audience, ",") != "api" {
		t.Fatalf("RefreshInto claims %+v", out)
	}
	got := &myClaims{}
	if err := iss.ValidateInto(access, got); err != nil || got.ID != out.ID || got.Email != out.Email {
		t.Fatalf("ValidateInto: %v, %+v; want the RefreshInto claims %+v", err, got, out)
	}

	// Embedded by pointer: the copy must not write through the caller's pointer.
	rc := &jwt.RegisteredClaims{Subject: "p"}
	tok := must[string](t)(iss.Create(&ptrClaims{Team: "t", RegisteredClaims: rc}))
	if rc.ExpiresAt != nil || rc.ID != "" {
		t.Fatal("Create wrote through an embedded pointer")
	}
	pc := &ptrClaims{}
	if err := iss.ValidateInto(tok, pc); err != nil || pc.Team != "t" || pc.Subject != "p" {
		t.Fatalf("ptrClaims: %v, %+v", err, pc)
	}
	refreshP := must[string](t)(iss.CreateRefresh(ptrClaims{Team: "t"})) // by value
	pc2 := &ptrClaims{}                                                  // nil embedded pointer: allocated
	must[string](t)(iss.RefreshInto(refreshP, pc2))
	if pc2.RegisteredClaims == nil || pc2.ExpiresAt == nil || pc2.Team != "t" {
		t.Fatalf("RefreshInto into a nil embedded pointer: %+v", pc2)
	}

	// Embedded built-in Claims.
	wc := must[string](t)(iss.Create(withClaims{Claims: jwtissuer.Claims{UserID: "u"}, Email: "x"}))
	var wout withClaims
	if err := iss.ValidateInto(wc, &wout); err != nil || wout.UserID != "u" || wout.Email != "x" || wout.ExpiresAt == nil {
		t.Fatalf("withClaims: %v, %+v", err, wout)
	}

	// MapClaims.
	m := jwt.MapClaims{"sub": "m", "role": "r"}
	mt := must[string](t)(iss.Create(m))
	if len(m) != 2 {
		t.Fatal("Create changed the caller's map")
	}
	mout := jwt.MapClaims{}
	if err := iss.ValidateInto(mt, mout); err != nil || mout["role"] != "r" || mout["jti"] == nil || mout["aud"] == nil {
		t.Fatalf("MapClaims: %v, %v", err, mout)
	}
	mr := must[string](t)(iss.CreateRefresh(jwt.MapClaims{"sub": "m", "nbf": t0.Unix()}))
	into := jwt.MapClaims{}
	must[string](t)(iss.RefreshInto(mr, into))
	if _, ok := into["nbf"]; ok || into["sub"] != "m" {
		t.Fatalf("MapClaims RefreshInto: %v", into)
	}
}

// plainClaims implements jwt.Claims itself: the issuer cannot stamp it.
type plainClaims struct {
	Exp *jwt.NumericDate `json:"exp,omitempty"`
	Who string           `json:"who"`
}

func (c plainClaims) GetExpirationTime() (*jwt.NumericDate, error) { return c.Exp, nil }
func (c plainClaims) GetIssuedAt() (*jwt.NumericDate, error)       { return nil, nil }
func (c plainClaims) GetNotBefore() (*jwt.NumericDate, error)      { return nil, nil }
func (c plainClaims) GetIssuer() (string, error)                   { return "", nil }
func (c plainClaims) GetSubject() (string, error)                  { return c.Who, nil }
func (c plainClaims) GetAudience() (jwt.ClaimStrings, error)       { return nil, nil }

func TestClaimsErrors(t *testing.T) {
	iss, _ := newIssuer(t, nil)
	if _, err := iss.Create(nil); err == nil || !strings.Contains(err.Error(), "nil claims") {
		t.Errorf("Create(nil): %v", err)
	}
	if _, err := iss.Create((*jwtissuer.Claims)(nil)); err == nil {
		t.Error("Create(typed nil) succeeded")
	}
	if _, err := iss.Create(plainClaims{Who: "w"}); err == nil || !strings.Contains(err.Error(), `has no "exp"`) {
		t.Errorf("Create(claims without exp, not stampable): %v", err)
	}
	tok := must[string](t)(iss.Create(plainClaims{Who: "w", Exp: jwt.NewNumericDate(t0.Add(time.Hour))}))
	var got plainClaims
	if err := iss.ValidateInto(tok, &got); err != nil || got.Who != "w" {
		t.Errorf("plain claims with exp: %v, %+v", err, got)
	}
	refresh := must[string](t)(iss.CreateRefresh(&jwtissuer.Claims{UserID: "u"}))
	for _, c := range []struct {
		name   string
		claims jwt.Claims
		want   string
	}{
		{"nil", nil, "nil claims"},
		{"not a pointer", jwtissuer.Claims{}, "want a pointer to a struct"},
		{"not stampable", &plainClaims{}, "does not embed jwt.RegisteredClaims"},
	} {
		if _, err := iss.RefreshInto(refresh, c.claims); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("RefreshInto(%s): %v, want %q", c.name, err, c.want)
		}
	}
	if err := iss.ValidateInto(tok, nil); err == nil {
		t.Error("ValidateInto(nil) succeeded")
	}
	if err := iss.ValidateInto(tok, plainClaims{}); err == nil || !strings.Contains(err.Error(), "want a pointer") {
		t.Errorf("ValidateInto(a struct, not a pointer): %v, want an error about the pointer", err)
	}
}

// keyOnly is keyed by its RateLimitKey alone: no subject, no built-in UserID.
type keyOnly struct {
	Email string `json:"email"`
	jwt.RegisteredClaims
}

func (c *keyOnly) RateLimitKey() string { return "mail:" + c.Email }

// TestRefreshCountsUnderTheCreateKey: the refresh token records the key
// CreateRefresh counted under, so Refresh (built-in Claims, no
// RateLimitKey) and RefreshInto count under it too, and one bucket holds
// all of a caller's issuances.
func TestRefreshCountsUnderTheCreateKey(t *testing.T) {
	rec := &recorder{}
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimiter = true, rec })
	refresh := must[string](t)(iss.CreateRefresh(&keyOnly{Email: "e@example.com"}))
	if got := header(t, refresh)["rlk"]; got != "mail:e@example.com" {
		t.Fatalf("refresh token header rlk = %v, want %q", got, "mail:e@example.com")
	}
	must[string](t)(iss.Refresh(refresh))
	must[string](t)(iss.RefreshInto(refresh, &keyOnly{}))
	must[string](t)(iss.RefreshInto(refresh, &jwtissuer.Claims{}))
	want := []string{"mail:e@example.com", "mail:e@example.com", "mail:e@example.com", "mail:e@example.com"}
	if got := rec.take(); !slices.Equal(got, want) {
		t.Fatalf("keys counted: %q, want %q", got, want)
	}
	// The limit holds through Refresh: a limit of 1 admits the
	// CreateRefresh and nothing else.
	lim, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitRate = true, 1 })
	refresh = must[string](t)(lim.CreateRefresh(&keyOnly{Email: "e@example.com"}))
	for range 5 {
		if _, err := lim.Refresh(refresh); !errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
			t.Fatalf("Refresh over the limit: %v, want ErrRateLimitExceeded", err)
		}
	}
	// Access tokens carry no rlk.
	if got, ok := header(t, must[string](t)(iss.Create(&keyOnly{Email: "e"})))["rlk"]; ok {
		t.Fatalf("access token header rlk = %v, want none", got)
	}
}

// admin has a claim the refresh token below lacks.
type admin struct {
	Admin bool `json:"admin,omitempty"`
	jwt.RegisteredClaims
}

// TestRefreshIntoSignsOnlyTheToken: what the caller left in the claims
// RefreshInto decodes into never reaches the new token.
func TestRefreshIntoSignsOnlyTheToken(t *testing.T) {
	iss, _ := newIssuer(t, nil)
	refresh := must[string](t)(iss.CreateRefresh(&admin{RegisteredClaims: jwt.RegisteredClaims{Subject: "s"}}))
	access := must[string](t)(iss.RefreshInto(refresh, &admin{Admin: true}))
	var got admin
	if err := iss.ValidateInto(access, &got); err != nil || got.Admin || got.Subject != "s" {
		t.Fatalf("RefreshInto into a value with admin=true: %v, %+v; want admin=false, subject s", err, got)
	}
	m := jwt.MapClaims{"admin": true}
	access = must[string](t)(iss.RefreshInto(refresh, m))
	var gm jwt.MapClaims
	if err := iss.ValidateInto(access, &gm); err != nil || gm["admin"] != nil || gm["sub"] != "s" {
		t.Fatalf("RefreshInto into a map with admin: %v, %v; want no admin, sub s", err, gm)
	}
}

// nilEmbedded embeds the built-in Claims through a nil pointer beside the
// registered claims: its UserID is simply absent.
type nilEmbedded struct {
	*jwtissuer.Claims
	jwt.RegisteredClaims
}

func TestNilEmbeddedClaims(t *testing.T) {
	rec := &recorder{}
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimiter = true, rec })
	if _, err := iss.Create(&nilEmbedded{}); err != nil {
		t.Fatalf("Create with a nil embedded *Claims: %v", err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("a nil embedded *Claims was counted under %q, want no key", got)
	}
}

// TestDisabledIgnoresLimiter: a RateLimiter in a configuration without
// EnableRateLimit is never asked.
func TestDisabledIgnoresLimiter(t *testing.T) {
	rec := &recorder{deny: true}
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.RateLimiter = rec })
	if _, err := iss.Create(&jwtissuer.Claims{UserID: "u"}); err != nil {
		t.Fatalf("Create with limiting off: %v", err)
	}
	if got := rec.take(); len(got) != 0 {
		t.Fatalf("limiter asked about %q with limiting off", got)
	}
}

func TestClose(t *testing.T) {
	rec := &recorder{}
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimiter = true, rec })
	u := &jwtissuer.Claims{UserID: "u"}
	access := must[string](t)(iss.Create(u))
	refresh := must[string](t)(iss.CreateRefresh(u))
	if err := iss.Close(); err != nil {
		t.Fatal(err)
	}
	if err := iss.Close(); err != nil {
		t.Fatal(err)
	}
	for name, err := range map[string]error{
		"Create":        second(iss.Create(u)),
		"CreateRefresh": second(iss.CreateRefresh(u)),
		"Refresh":       second(iss.Refresh(refresh)),
		"RefreshInto":   second(iss.RefreshInto(refresh, &jwtissuer.Claims{})),
	} {
		if !errors.Is(err, jwtissuer.ErrClosed) {
			t.Errorf("%s after Close: %v, want ErrClosed", name, err)
		}
	}
	if _, err := iss.Validate(access); err != nil {
		t.Errorf("Validate after Close: %v", err)
	}
	if rec.closed.Load() {
		t.Error("Close closed the caller's RateLimiter")
	}
}

func second[T any](_ T, err error) error { return err }

// TestConcurrentIssuance: goroutines issuing for one user get exactly the
// rate, at a frozen instant.
func TestConcurrentIssuance(t *testing.T) {
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitRate = true, 25 })
	var ok, denied atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				tok, err := iss.Create(&jwtissuer.Claims{UserID: "u"})
				switch {
				case err == nil:
					if _, err := iss.Validate(tok); err != nil {
						t.Error(err)
					}
					ok.Add(1)
				case errors.Is(err, jwtissuer.ErrRateLimitExceeded):
					denied.Add(1)
				default:
					t.Error(err)
				}
			}
		})
	}
	wg.Wait()
	if ok.Load() != 25 || denied.Load() != 55 {
		t.Fatalf("%d issued, %d denied; want 25 and 55", ok.Load(), denied.Load())
	}
}
