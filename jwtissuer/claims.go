package jwtissuer

import (
	"errors"
	"fmt"
	"maps"
	"reflect"
	"sync"

	"github.com/golang-jwt/jwt/v5"
)

// Claims are the built-in claims: the registered claims of RFC 7519 and
// the fields most services put in an access token. Embed Claims in your own
// type to add fields; its UserID then still keys the rate limit.
//
// Extra is one claim, "extra", holding whatever map the caller puts in it;
// after a round trip through JSON its numbers are float64. Other claims a
// token carries are not decoded into Claims: to keep them through a
// refresh, use RefreshInto with a type that has them.
type Claims struct {
	UserID    string         `json:"user_id,omitempty"`
	Username  string         `json:"username,omitempty"`
	Email     string         `json:"email,omitempty"`
	Roles     []string       `json:"roles,omitempty"`
	Scope     string         `json:"scope,omitempty"` // space-separated, as in RFC 9068
	ClientID  string         `json:"client_id,omitempty"`
	SessionID string         `json:"sid,omitempty"`
	Extra     map[string]any `json:"extra,omitempty"`
	jwt.RegisteredClaims
}

// userID is promoted to every type that embeds Claims, in any package: it
// is how the key order finds the built-in UserID.
func (c Claims) userID() string { return c.UserID }

type userIDer interface{ userID() string }

// userIDOf is u.userID(), or "" when u reaches Claims through a nil
// embedded *Claims (the promoted method then dereferences nil).
func userIDOf(u userIDer) (id string) {
	defer func() {
		if recover() != nil {
			id = ""
		}
	}()
	return u.userID()
}

// RateLimitKeyer is implemented by claims that name their own rate-limit
// key (see the Issuer's key order).
type RateLimitKeyer interface {
	RateLimitKey() string
}

// rateLimitKey returns the key claims are counted under: the subject when
// not empty, else the built-in Claims' UserID (also when embedded), else
// RateLimitKey when the claims have it, else "" (not counted).
func rateLimitKey(claims jwt.Claims) string {
	if sub, err := claims.GetSubject(); err == nil && sub != "" {
		return sub
	}
	if u, ok := claims.(userIDer); ok && !isNil(claims) {
		if id := userIDOf(u); id != "" {
			return id
		}
	}
	if k, ok := claims.(RateLimitKeyer); ok {
		return k.RateLimitKey()
	}
	return ""
}

var registeredType = reflect.TypeFor[jwt.RegisteredClaims]()

// registeredPaths caches, per claims struct type, the index path of the
// jwt.RegisteredClaims it embeds ([]int(nil) when it embeds none).
var registeredPaths sync.Map

// registeredPath returns the index path of the jwt.RegisteredClaims that
// struct type t embeds (directly or through embedded structs or pointers),
// or nil.
func registeredPath(t reflect.Type) []int {
	if v, ok := registeredPaths.Load(t); ok {
		return v.([]int)
	}
	var path []int
	if f, ok := t.FieldByName("RegisteredClaims"); ok && f.Anonymous &&
		(f.Type == registeredType || f.Type == reflect.PointerTo(registeredType)) {
		path = f.Index
	}
	registeredPaths.Store(t, path)
	return path
}

var errUnsettable = errors.New("embeds jwt.RegisteredClaims through an unexported field")

// registeredIn returns the jwt.RegisteredClaims inside the struct v (which
// must be settable), allocating embedded pointers on the way that are nil
// and, when clone is set, replacing the others by copies so that v shares
// nothing the caller modifies. It returns nil when v embeds none.
func registeredIn(v reflect.Value, clone bool) (*jwt.RegisteredClaims, error) {
	path := registeredPath(v.Type())
	if path == nil {
		return nil, nil
	}
	for _, i := range path {
		f := v.Field(i)
		if !f.CanSet() {
			return nil, errUnsettable
		}
		if f.Kind() == reflect.Pointer {
			if f.IsNil() || clone {
				p := reflect.New(f.Type().Elem())
				if !f.IsNil() {
					p.Elem().Set(f.Elem())
				}
				f.Set(p)
			}
			f = f.Elem()
		}
		v = f
	}
	return v.Addr().Interface().(*jwt.RegisteredClaims), nil
}

// editable is claims in a form the Issuer may set registered claims on.
type editable struct {
	claims jwt.Claims
	rc     *jwt.RegisteredClaims // the registered claims of claims, or nil
	m      jwt.MapClaims         // claims as a map, or nil
}

// cloneClaims returns a copy of claims whose registered claims can be set
// without touching the caller's value: a *Claims, a Claims, a
// *jwt.RegisteredClaims, a jwt.MapClaims, or a struct (or pointer to one)
// that embeds jwt.RegisteredClaims. Other claims are returned as they are,
// with neither rc nor m set.
func cloneClaims(claims jwt.Claims) (editable, error) {
	if claims == nil || isNil(claims) {
		return editable{}, errors.New("jwtissuer: nil claims")
	}
	switch c := claims.(type) {
	case *Claims:
		cp := *c
		return editable{claims: &cp, rc: &cp.RegisteredClaims}, nil
	case Claims:
		return editable{claims: &c, rc: &c.RegisteredClaims}, nil
	case *jwt.RegisteredClaims:
		cp := *c
		return editable{claims: &cp, rc: &cp}, nil
	case jwt.RegisteredClaims:
		return editable{claims: &c, rc: &c}, nil
	case jwt.MapClaims:
		m := maps.Clone(c)
		return editable{claims: m, m: m}, nil
	}
	v := reflect.ValueOf(claims)
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t.Kind() != reflect.Struct || registeredPath(t) == nil {
		return editable{claims: claims}, nil
	}
	cp := reflect.New(t)
	cp.Elem().Set(reflect.Indirect(v))
	rc, err := registeredIn(cp.Elem(), true)
	if err != nil {
		return editable{}, fmt.Errorf("jwtissuer: %T %w", claims, err)
	}
	c, ok := cp.Interface().(jwt.Claims)
	if !ok {
		return editable{}, fmt.Errorf("jwtissuer: *%v does not implement jwt.Claims", t)
	}
	return editable{claims: c, rc: rc}, nil
}

// inPlace returns claims, which RefreshInto decodes into and then edits:
// a non-nil pointer to a struct that embeds jwt.RegisteredClaims, or a
// non-nil jwt.MapClaims. It clears them first. Its rc is filled in after
// decoding (see fill).
func inPlace(claims jwt.Claims) (editable, error) {
	if claims == nil || isNil(claims) {
		return editable{}, errors.New("jwtissuer: nil claims")
	}
	if m, ok := claims.(jwt.MapClaims); ok {
		clear(m) // decoding merges: nothing of the caller's may be signed
		return editable{claims: m, m: m}, nil
	}
	v := reflect.ValueOf(claims)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return editable{}, fmt.Errorf("jwtissuer: claims are a %T, want a pointer to a struct (or jwt.MapClaims)", claims)
	}
	if registeredPath(v.Elem().Type()) == nil {
		return editable{}, fmt.Errorf("jwtissuer: %T does not embed jwt.RegisteredClaims, so the issuer cannot give the new token a fresh exp, iat and jti", claims)
	}
	v.Elem().SetZero() // decoding merges: nothing of the caller's may be signed
	return editable{claims: claims}, nil
}

// fill finds the registered claims of e after decoding.
func (e *editable) fill() error {
	if e.m != nil {
		return nil
	}
	rc, err := registeredIn(reflect.ValueOf(e.claims).Elem(), false)
	if err != nil {
		return fmt.Errorf("jwtissuer: %T %w", e.claims, err)
	}
	e.rc = rc
	return nil
}
