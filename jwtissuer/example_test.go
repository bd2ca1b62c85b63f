package jwtissuer_test

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/jwtissuer"
)

// New, Create and Validate: issue an access token and verify it.
func Example() {
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	cfg.Issuer = "auth.example.com"
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()

	token, err := iss.Create(&jwtissuer.Claims{UserID: "u-123", Roles: []string{"admin"}})
	if err != nil {
		panic(err)
	}
	claims, err := iss.Validate(token)
	if err != nil {
		panic(err)
	}
	fmt.Println(claims.UserID, claims.Roles, claims.Issuer, claims.ExpiresAt.Sub(claims.IssuedAt.Time))
	// Output: u-123 [admin] auth.example.com 15m0s
}

// New names the field at fault.
func ExampleNew() {
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "too-short"
	_, err := jwtissuer.New(cfg)
	fmt.Println(err)
	// Output: jwtissuer: SecretKey is 9 bytes, HMAC HS256 needs at least 32
}

// Create stamps iat, exp, jti, iss and aud on a copy of the claims, and
// marks the token as an access token in its header.
func ExampleIssuer_Create() {
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	cfg.Issuer = "auth.example.com"
	cfg.Audience = []string{"api.example.com"}
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()

	claims := &jwtissuer.Claims{UserID: "u-123", RegisteredClaims: jwt.RegisteredClaims{Subject: "ann"}}
	token, err := iss.Create(claims)
	if err != nil {
		panic(err)
	}
	parsed, _, _ := jwt.NewParser().ParseUnverified(token, &jwtissuer.Claims{})
	c := parsed.Claims.(*jwtissuer.Claims)
	fmt.Println(parsed.Header["alg"], parsed.Header["typ"])
	fmt.Println(c.Subject, c.UserID, c.Issuer, c.Audience, len(c.ID))
	fmt.Println("caller's claims untouched:", claims.ExpiresAt == nil)
	// Output:
	// HS256 at+jwt
	// ann u-123 auth.example.com [api.example.com] 26
	// caller's claims untouched: true
}

// CreateRefresh issues a long-lived refresh token ("typ": "rt+jwt").
func ExampleIssuer_CreateRefresh() {
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()

	refresh, err := iss.CreateRefresh(&jwtissuer.Claims{UserID: "u-123"})
	if err != nil {
		panic(err)
	}
	parsed, _, _ := jwt.NewParser().ParseUnverified(refresh, &jwtissuer.Claims{})
	c := parsed.Claims.(*jwtissuer.Claims)
	fmt.Println(parsed.Header["typ"], c.ExpiresAt.Sub(c.IssuedAt.Time))
	// Output: rt+jwt 168h0m0s
}

// Validate reports why a token is refused; jwt's errors stay visible to
// errors.Is.
func ExampleIssuer_Validate() {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	cfg.Clock = clock
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()

	token, err := iss.Create(&jwtissuer.Claims{UserID: "u-123"})
	if err != nil {
		panic(err)
	}
	clock.Advance(16 * time.Minute)
	_, err = iss.Validate(token)
	fmt.Println(errors.Is(err, jwt.ErrTokenExpired))
	fmt.Println(err)
	// Output:
	// true
	// jwtissuer: token has invalid claims: token is expired
}

// ValidateInto decodes into any claims type, here jwt.MapClaims.
func ExampleIssuer_ValidateInto() {
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()

	token, err := iss.Create(jwt.MapClaims{"sub": "ann", "plan": "pro"})
	if err != nil {
		panic(err)
	}
	claims := jwt.MapClaims{}
	if err := iss.ValidateInto(token, claims); err != nil {
		panic(err)
	}
	fmt.Println(claims["sub"], claims["plan"])
	// Output: ann pro
}

// CreateRefresh and Refresh: a refresh token buys a new access token, and
// is not an access token itself.
func ExampleIssuer_Refresh() {
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()

	refresh, err := iss.CreateRefresh(&jwtissuer.Claims{UserID: "u-123"})
	if err != nil {
		panic(err)
	}
	_, err = iss.Validate(refresh)
	fmt.Println("refresh token as access token:", errors.Is(err, jwtissuer.ErrTokenType))

	access, err := iss.Refresh(refresh)
	if err != nil {
		panic(err)
	}
	claims, err := iss.Validate(access)
	if err != nil {
		panic(err)
	}
	fmt.Println("refreshed for", claims.UserID, "valid for", claims.ExpiresAt.Sub(claims.IssuedAt.Time))
	// Output:
	// refresh token as access token: true
	// refreshed for u-123 valid for 15m0s
}

// MyClaims are custom claims: their rate-limit key is the e-mail address.
type MyClaims struct {
	UserID string `json:"user_id"`
	Email  string `json:"email"`
	jwt.RegisteredClaims
}

// RateLimitKey implements jwtissuer.RateLimitKeyer.
func (c *MyClaims) RateLimitKey() string { return c.Email }

// RefreshInto and ValidateInto with custom claims, limited per e-mail.
func ExampleIssuer_RefreshInto() {
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	cfg.EnableRateLimit = true
	cfg.RateLimitRate = 2 // per minute, per e-mail
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()

	refresh, err := iss.CreateRefresh(&MyClaims{UserID: "u-123", Email: "ann@example.com"}) // 1 of 2
	if err != nil {
		panic(err)
	}
	var fresh MyClaims
	access, err := iss.RefreshInto(refresh, &fresh) // 2 of 2
	if err != nil {
		panic(err)
	}
	var got MyClaims
	if err := iss.ValidateInto(access, &got); err != nil {
		panic(err)
	}
	fmt.Println(got.Email, got.ID == fresh.ID)

	_, err = iss.RefreshInto(refresh, &MyClaims{})
	fmt.Println(errors.Is(err, jwtissuer.ErrRateLimitExceeded))
	// Output:
	// ann@example.com true
	// true
}

// A token endpoint answers 429 with Retry-After when the user is over the
// issuance limit: the *RateLimitError says how long to wait, which the
// header gives in whole seconds, rounded up (RFC 9110, section 10.2.3).
func Example_rateLimitExceeded() {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	cfg.EnableRateLimit = true
	cfg.RateLimitRate = 3 // per minute: one token every 20s
	cfg.RateLimitWindow = time.Minute
	cfg.Clock = clock // for the example; leave it nil in a service
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()

	token := func(w http.ResponseWriter, r *http.Request) {
		// ... the user's credentials are checked first ...
		access, err := iss.Create(&jwtissuer.Claims{UserID: r.FormValue("user")})
		var limited *jwtissuer.RateLimitError
		switch {
		case errors.As(err, &limited):
			if limited.RetryAfter > 0 {
				secs := (limited.RetryAfter + time.Second - 1) / time.Second
				w.Header().Set("Retry-After", strconv.FormatInt(int64(secs), 10))
			}
			http.Error(w, "too many tokens", http.StatusTooManyRequests)
		case err != nil:
			http.Error(w, "cannot issue a token", http.StatusInternalServerError)
		default:
			fmt.Fprint(w, access)
		}
	}
	post := func() {
		w := httptest.NewRecorder()
		token(w, httptest.NewRequest(http.MethodPost, "/token?user=u-123", nil))
		if ra := w.Header().Get("Retry-After"); ra != "" {
			fmt.Println(w.Code, "Retry-After:", ra)
			return
		}
		fmt.Println(w.Code)
	}
	for range 4 {
		post()
	}
	clock.Advance(19500 * time.Millisecond)
	post() // 0.5s to go: Retry-After 1
	clock.Advance(500 * time.Millisecond)
	post()
	// Output:
	// 200
	// 200
	// 200
	// 429 Retry-After: 20
	// 429 Retry-After: 1
	// 200
}

// The failure limit: a client that presents bad tokens is refused, before
// any signature check, once it has failed 3 times in a minute; Caller
// takes the key it is counted under, here the client's address.
func ExampleIssuer_Caller() {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	cfg := jwtissuer.DefaultConfig()
	cfg.SecretKey = "hmac-key-that-has-at-least-32-bytes!"
	cfg.FailureLimitRate = 3 // failures per minute per caller
	cfg.Clock = clock
	iss, err := jwtissuer.New(cfg)
	if err != nil {
		panic(err)
	}
	defer iss.Close()
	good, err := iss.Create(&jwtissuer.Claims{UserID: "u-123"})
	if err != nil {
		panic(err)
	}

	client := iss.Caller("203.0.113.7")
	for _, token := range []string{"forged.1.x", "forged.2.x", "forged.3.x", good} {
		_, err := client.Validate(token)
		var limited *jwtissuer.RateLimitError
		if errors.As(err, &limited) {
			fmt.Println("refused, retry after", limited.RetryAfter)
		} else {
			fmt.Println("verified:", err == nil)
		}
	}
	_, err = iss.Caller("198.51.100.1").Validate(good) // another client
	fmt.Println("other client verified:", err == nil)
	clock.Advance(20 * time.Second)
	_, err = client.Validate(good)
	fmt.Println("20s later verified:", err == nil)
	// Output:
	// verified: false
	// verified: false
	// verified: false
	// refused, retry after 20s
	// other client verified: true
	// 20s later verified: true
}

// AllowN takes several tokens at once, all or none.
func ExampleRateLimiter_AllowN() {
	limiter := jwtissuer.NewRateLimiter(100, time.Minute)
	defer limiter.Close()

	// 10 of 100 at once, e.g. a batch of 10 tokens.
	if limiter.AllowN("user:123", 10) {
		fmt.Println("batch allowed")
	}
	// 90 left: 95 is refused, and nothing is taken.
	fmt.Println(limiter.AllowN("user:123", 95))
	fmt.Println(limiter.AllowN("user:123", 90))
	// Output:
	// batch allowed
	// false
	// true
}

func ExampleNewRateLimiter() {
	limiter := jwtissuer.NewRateLimiter(2, time.Minute)
	defer limiter.Close()

	fmt.Println(limiter.Allow("user:123"), limiter.Allow("user:123"), limiter.Allow("user:123"))
	limiter.Reset("user:123")
	fmt.Println(limiter.Allow("user:123"))
	// Output:
	// true true false
	// true
}
