package jwtissuer_test

import (
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rlkit/rlkit/jwtissuer"
)

// TestRateLimitErrorWait: the issuance limit's error carries the exact
// wait, matches ErrRateLimitExceeded, and names no key.
func TestRateLimitErrorWait(t *testing.T) {
	iss, clock := newIssuer(t, func(c *jwtissuer.Config) {
		c.EnableRateLimit, c.RateLimitRate, c.RateLimitWindow = true, 3, time.Minute
	})
	u := &jwtissuer.Claims{UserID: "ann@example.com"}
	for range 3 {
		must[string](t)(iss.Create(u))
	}
	clock.Advance(5 * time.Second)
	_, err := iss.Create(u)
	var rle *jwtissuer.RateLimitError
	if !errors.As(err, &rle) || !errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
		t.Fatalf("over the limit: %v (%T)", err, err)
	}
	if rle.RetryAfter != 15*time.Second || rle.Failures {
		t.Fatalf("RateLimitError %+v, want RetryAfter 15s, Failures false", *rle)
	}
	if got, want := err.Error(), "jwtissuer: rate limit exceeded; retry after 15s"; got != want {
		t.Fatalf("Error() %q, want %q", got, want)
	}
	if strings.Contains(err.Error(), "ann") {
		t.Fatalf("the error names the key: %q", err)
	}
	// Refresh's issuance says the same.
	refreshIss, clock2 := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitRate = true, 2 })
	refresh := must[string](t)(refreshIss.CreateRefresh(u))
	must[string](t)(refreshIss.Refresh(refresh))
	clock2.Advance(time.Second)
	if _, err := refreshIss.Refresh(refresh); !errors.As(err, &rle) || rle.RetryAfter != 29*time.Second {
		t.Fatalf("Refresh over the limit: %v, want a wait of 29s", err)
	}
	if errors.Is(&jwtissuer.RateLimitError{}, jwtissuer.ErrRateLimitUnavailable) {
		t.Fatal("RateLimitError matches ErrRateLimitUnavailable")
	}
}

// TestRateLimitErrorPlainProvider: a provider that cannot tell the wait
// gives a RateLimitError with none.
func TestRateLimitErrorPlainProvider(t *testing.T) {
	f := &fallible{allowed: false}
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimiter = true, f })
	_, err := iss.Create(&jwtissuer.Claims{UserID: "u"})
	var rle *jwtissuer.RateLimitError
	if !errors.As(err, &rle) || rle.RetryAfter != 0 || err.Error() != "jwtissuer: rate limit exceeded" {
		t.Fatalf("denied by a FallibleRateLimitProvider: %v", err)
	}
}

// retrying is a RetryAfterRateLimitProvider with a fixed answer.
type retrying struct {
	recorder
	allowed bool
	wait    time.Duration
	err     error
	calls   atomic.Int64
}

func (r *retrying) AllowErr(string) (bool, error) { panic("AllowErr called") }
func (r *retrying) AllowRetryAfter(string) (bool, time.Duration, error) {
	r.calls.Add(1)
	return r.allowed, r.wait, r.err
}

// TestRetryAfterProvider: the Issuer prefers AllowRetryAfter, passes its
// wait on, and treats its error as AllowErr's.
func TestRetryAfterProvider(t *testing.T) {
	boom := errors.New("backend down")
	for _, c := range []struct {
		name                  string
		p                     *retrying
		ok, unavailable, over bool
	}{
		{"denies", &retrying{wait: 1234 * time.Millisecond}, false, false, true},
		{"admits", &retrying{allowed: true}, true, false, false},
		{"fails closed", &retrying{err: boom}, false, true, false},
		{"fails open", &retrying{allowed: true, err: boom}, true, false, false},
	} {
		iss, _ := newIssuer(t, func(cfg *jwtissuer.Config) { cfg.EnableRateLimit, cfg.RateLimiter = true, c.p })
		_, err := iss.Create(&jwtissuer.Claims{UserID: "u"})
		var rle *jwtissuer.RateLimitError
		switch {
		case (err == nil) != c.ok,
			errors.Is(err, jwtissuer.ErrRateLimitUnavailable) != c.unavailable,
			c.unavailable && !errors.Is(err, boom),
			errors.As(err, &rle) != c.over,
			c.over && rle.RetryAfter != 1234*time.Millisecond:
			t.Errorf("%s: %v", c.name, err)
		}
		if n := c.p.calls.Load(); n != 1 || len(c.p.take()) != 0 {
			t.Errorf("%s: AllowRetryAfter called %d times (Allow too?)", c.name, n)
		}
	}
}

// counted are claims that count how often they are validated (jwt calls
// Validate after the signature verified): work a refused caller must not
// cause.
type counted struct {
	jwtissuer.Claims
}

var validations atomic.Int64

func (counted) Validate() error { validations.Add(1); return nil }

// TestFailureLimit: failures count per caller key, exactly; over the limit
// every call through that key is refused, with the exact wait, before the
// token is verified; other keys, successes and the Issuer's own methods are
// untouched.
func TestFailureLimit(t *testing.T) {
	iss, clock := newIssuer(t, func(c *jwtissuer.Config) { c.FailureLimitRate = 3 })
	good := must[string](t)(iss.Create(&jwtissuer.Claims{UserID: "u"}))
	refresh := must[string](t)(iss.CreateRefresh(&jwtissuer.Claims{UserID: "u"}))
	forged := good[:strings.LastIndexByte(good, '.')+1] + "AAAA"
	ip := iss.Caller("203.0.113.7")

	// Successes cost nothing.
	for range 10 {
		must[*jwtissuer.Claims](t)(ip.Validate(good))
	}
	// Three failures, of each kind of call, each with its own error.
	if _, err := ip.Validate(forged); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Fatalf("failure 1: %v", err)
	}
	if _, err := ip.Refresh(good); !errors.Is(err, jwtissuer.ErrTokenType) {
		t.Fatalf("failure 2: %v", err)
	}
	if err := ip.ValidateInto("garbage", &counted{}); !errors.Is(err, jwt.ErrTokenMalformed) {
		t.Fatalf("failure 3: %v", err)
	}
	// The 4th call is refused, a valid token too, without verifying it.
	validations.Store(0)
	refused := func(what string, err error, want time.Duration) {
		t.Helper()
		var rle *jwtissuer.RateLimitError
		if !errors.As(err, &rle) || !errors.Is(err, jwtissuer.ErrRateLimitExceeded) || !rle.Failures || rle.RetryAfter != want {
			t.Fatalf("%s over the failure limit: %v, want a RateLimitError with Failures and %v", what, err, want)
		}
	}
	refused("ValidateInto", ip.ValidateInto(good, &counted{}), 20*time.Second)
	if n := validations.Load(); n != 0 {
		t.Fatalf("a refused call verified the token (%d validations)", n)
	}
	_, err := ip.Validate(good)
	refused("Validate", err, 20*time.Second)
	_, err = ip.RefreshInto(refresh, &counted{})
	refused("RefreshInto", err, 20*time.Second)
	clock.Advance(15 * time.Second)
	_, err = ip.Refresh(refresh)
	refused("Refresh", err, 5*time.Second)
	if got, want := err.Error(), "jwtissuer: rate limit exceeded: too many failed verifications; retry after 5s"; got != want {
		t.Fatalf("Error() %q, want %q", got, want)
	}

	// Another key, an empty key and the Issuer itself are not limited.
	must[*jwtissuer.Claims](t)(iss.Caller("198.51.100.1").Validate(good))
	must[*jwtissuer.Claims](t)(iss.Validate(good))
	for range 5 {
		if _, err := iss.Validate(forged); errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
			t.Fatal("Issuer.Validate is limited")
		}
		if _, err := iss.Caller("").Validate(forged); errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
			t.Fatal("an empty caller key is limited")
		}
	}

	// 5s later, one token: one failure, then refused again for 20s.
	clock.Advance(5 * time.Second)
	if _, err := ip.Validate(forged); !errors.Is(err, jwt.ErrTokenSignatureInvalid) {
		t.Fatalf("after the wait: %v", err)
	}
	_, err = ip.Validate(good)
	refused("Validate", err, 20*time.Second)
	clock.Advance(20 * time.Second)
	must[*jwtissuer.Claims](t)(ip.Validate(good))
}

// TestFailureLimitCountsOnlyVerification: the issuance limit's refusal,
// ErrClosed and the caller's bad arguments are not failures.
func TestFailureLimitCountsOnlyVerification(t *testing.T) {
	iss, _ := newIssuer(t, func(c *jwtissuer.Config) {
		c.FailureLimitRate, c.EnableRateLimit, c.RateLimitRate = 1, true, 1
	})
	refresh := must[string](t)(iss.CreateRefresh(&jwtissuer.Claims{UserID: "u"})) // uses u's one issuance
	ip := iss.Caller("ip")
	for range 3 {
		_, err := ip.Refresh(refresh)
		var rle *jwtissuer.RateLimitError
		if !errors.As(err, &rle) || rle.Failures {
			t.Fatalf("Refresh over the issuance limit: %v, want the issuance limit's error", err)
		}
		if err := ip.ValidateInto(refresh, nil); err == nil || errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
			t.Fatalf("nil claims: %v", err)
		}
		if _, err := ip.RefreshInto(refresh, &struct{ jwt.MapClaims }{}); err == nil || errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
			t.Fatalf("claims without RegisteredClaims: %v", err)
		}
	}
	iss.Close()
	if _, err := ip.Refresh(refresh); !errors.Is(err, jwtissuer.ErrClosed) {
		t.Fatalf("Refresh after Close: %v", err)
	}
	// None of these counted: the one failure the limit allows is still there.
	if _, err := ip.Validate("garbage"); !errors.Is(err, jwt.ErrTokenMalformed) {
		t.Fatalf("first failure: %v", err)
	}
	if _, err := ip.Validate("garbage"); !errors.Is(err, jwtissuer.ErrRateLimitExceeded) {
		t.Fatalf("second failure: %v, want the failure limit (it outlives Close, as Validate does)", err)
	}
}

// TestFailureLimitConfig: the fields are checked, and FailureLimitWindow
// alone is refused rather than ignored.
func TestFailureLimitConfig(t *testing.T) {
	for _, c := range []struct {
		name string
		edit func(*jwtissuer.Config)
		want string
	}{
		{"negative rate", func(c *jwtissuer.Config) { c.FailureLimitRate = -1 },
			"jwtissuer: FailureLimitRate is -1, want 1 to 2147483647 (or 0 for no failure limit)"},
		{"huge rate", func(c *jwtissuer.Config) { c.FailureLimitRate = 1 << 31 },
			"jwtissuer: FailureLimitRate is 2147483648, want 1 to 2147483647 (or 0 for no failure limit)"},
		{"negative window", func(c *jwtissuer.Config) { c.FailureLimitRate, c.FailureLimitWindow = 5, -time.Second },
			"jwtissuer: FailureLimitWindow is -1s, want a positive duration (or 0 for the default, 1m0s)"},
		{"window without rate", func(c *jwtissuer.Config) { c.FailureLimitWindow = time.Hour },
			"jwtissuer: FailureLimitWindow is 1h0m0s but FailureLimitRate is 0 (no failure limit): set FailureLimitRate too"},
		{"negative issuance window", func(c *jwtissuer.Config) { c.EnableRateLimit, c.RateLimitWindow = true, -time.Second },
			"jwtissuer: RateLimitWindow is -1s, want a positive duration (or 0 for the default, 1m0s)"},
	} {
		cfg := jwtissuer.DefaultConfig()
		cfg.SecretKey = secret
		c.edit(&cfg)
		if _, err := jwtissuer.New(cfg); err == nil || err.Error() != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	// The window: 2 per hour, one every 30 minutes.
	iss, clock := newIssuer(t, func(c *jwtissuer.Config) { c.FailureLimitRate, c.FailureLimitWindow = 2, time.Hour })
	ip := iss.Caller("ip")
	ip.Validate("x")
	ip.Validate("x")
	clock.Advance(time.Minute)
	var rle *jwtissuer.RateLimitError
	if _, err := ip.Validate("x"); !errors.As(err, &rle) || rle.RetryAfter != 29*time.Minute {
		t.Fatalf("third failure in an hour: %v, want a wait of 29m", err)
	}
}
