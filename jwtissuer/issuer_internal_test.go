package jwtissuer

import (
	"errors"
	"testing"
)

// TestCloseClosesBuiltin: Close closes the limiter the Issuer built.
func TestCloseClosesBuiltin(t *testing.T) {
	cfg := DefaultConfig()
	cfg.SecretKey = "test-secret-0123456789-0123456789-abcdef"
	cfg.EnableRateLimit = true
	iss, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	rl := iss.s.limiter.(*RateLimiter)
	if _, err := iss.Create(&Claims{UserID: "u"}); err != nil || rl.len() != 1 {
		t.Fatalf("Create: %v, %d buckets", err, rl.len())
	}
	iss.Close()
	if !rl.closed || rl.Allow("u") {
		t.Fatal("the built-in limiter is open after Close")
	}
	if _, err := iss.Create(&Claims{UserID: "u"}); !errors.Is(err, ErrClosed) {
		t.Fatalf("Create after Close: %v", err)
	}
}
