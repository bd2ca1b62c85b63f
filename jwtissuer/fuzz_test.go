package jwtissuer_test

import (
	"strings"
	"testing"

	"github.com/golang-jwt/jwt/v5"

	"github.com/rlkit/rlkit/jwtissuer"
)

// FuzzValidate feeds arbitrary strings to Validate, ValidateInto and
// Refresh: they must never panic, and must accept nothing but the tokens
// the Issuer itself issued (the seeds; every mutation breaks the
// signature, or the base64url form that keeps tokens non-malleable).
func FuzzValidate(f *testing.F) {
	iss, _ := newIssuer(f, nil)
	// Fixed IDs on a fixed clock: every fuzz worker process issues the
	// same two tokens.
	access := must[string](f)(iss.Create(&jwtissuer.Claims{UserID: "u", Roles: []string{"admin"}, RegisteredClaims: jwt.RegisteredClaims{ID: "a"}}))
	refresh := must[string](f)(iss.CreateRefresh(&jwtissuer.Claims{UserID: "u", RegisteredClaims: jwt.RegisteredClaims{ID: "r"}}))
	none := jwt.NewWithClaims(jwt.SigningMethodNone, jwt.MapClaims{"sub": "admin", "exp": 1 << 40})
	none.Header["typ"] = "at+jwt"
	noneTok := must[string](f)(none.SignedString(jwt.UnsafeAllowNoneSignatureType))
	for _, s := range []string{access, refresh, noneTok, "", ".", "..", "a.b.c", "eyJhbGciOiJub25lIn0.e30.", access + "\n",
		strings.Replace(access, ".", "=.", 1), access[:len(access)-1]} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := iss.Validate(s)
		if err == nil && (s != access || c.UserID != "u") {
			t.Fatalf("Validate accepted %q", s)
		}
		if err := iss.ValidateInto(s, jwt.MapClaims{}); err == nil && s != access {
			t.Fatalf("ValidateInto accepted %q", s)
		}
		if _, err := iss.Refresh(s); err == nil && s != refresh {
			t.Fatalf("Refresh accepted %q", s)
		}
	})
}
