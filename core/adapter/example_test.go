package adapter_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/store"
)

// request is a toy framework's request: what its middleware reads.
type request struct {
	method, path, route string
	peer                string            // the client's address
	header              map[string]string // canonical names
}

// header is the toy framework's way of reading a request header.
func header(r *request, name string) string { return r.header[name] }

// A middleware builds its core.Flow from Settings and a ClientIP, and
// decides each request with it.
func Example() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
  exempt_paths: ["/health"]
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	clock := store.NewManualClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
	lim := adapter.Limiter(core.NewLimiter(cfg, core.WithClock(clock)))

	settings := adapter.Settings[*request]{Key: adapter.HeaderKey("X-User", header)}
	flow := settings.Flow(lim, adapter.ClientIP[*request]{
		IP: func(r *request) string { return r.peer }, // no proxy in front
	}, header)

	for _, r := range []*request{
		{method: "GET", path: "/health", peer: "192.0.2.1"},
		{method: "GET", path: "/api/search", route: "/api/search", peer: "192.0.2.1"},
		{method: "GET", path: "/api/search", route: "/api/search", peer: "192.0.2.1"},
		{method: "GET", path: "/api/search", route: "/api/search", peer: "192.0.2.1"},
		{method: "GET", path: "/api/search", route: "/api/search", peer: "192.0.2.1", header: map[string]string{"X-User": "alice"}},
	} {
		var d core.Decision
		if err := flow.DecideTo(context.Background(), &d, r, r.method, core.Path(r.path), r.route); err != nil {
			fmt.Println("key function failed:", err)
			continue
		}
		rule := "none"
		if d.Rule != nil {
			rule = d.Rule.Name
		}
		fmt.Printf("%s %s: %d, rule %s, remaining %d\n", r.method, r.path, d.Status(), rule, d.Result.Remaining)
	}
	// Output:
	// GET /health: 200, rule none, remaining 0
	// GET /api/search: 200, rule search, remaining 1
	// GET /api/search: 200, rule search, remaining 0
	// GET /api/search: 429, rule search, remaining 0
	// GET /api/search: 200, rule search, remaining 1
}

// Limiter gives the limiter a middleware's New decides with, whichever
// core.Limits it was given.
func ExampleLimiter() {
	cfg, err := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n  default: \"60/minute\"\n"), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	own := adapter.Limiter(cfg) // a limiter of the middleware's own, on a memory store
	fmt.Println(own.Config() == cfg, own.Store() != nil)

	shared := core.NewLimiter(cfg)
	fmt.Println(adapter.Limiter(shared) == shared) // the limiter itself

	off := adapter.Limiter(nil) // passes every request
	fmt.Println(off.Config().Enabled())
	// Output:
	// true true
	// true
	// false
}

// HeaderKey counts a request by an API key in a header: the identity is a
// secret, so the store key is a keyed hash of it. A request without the
// header has no identity of its own (the flow then counts its client IP).
func ExampleHeaderKey() {
	key := adapter.HeaderKey("x-api-key", header) // the name is made canonical
	lim := core.NewLimiter(nil, core.WithIdentityKey([]byte("an example key of 32 bytes......")))

	id, _ := key(&request{header: map[string]string{"X-Api-Key": "k-123"}})
	fmt.Println(lim.Key(id))
	id, _ = key(&request{})
	fmt.Printf("%q\n", id)
	// Output:
	// X-Api-Key:hmac:d79bd53d4d5166789ad7c12d29a18ec9
	// ""
}

// SubjectIdentity turns an Authorization header value into the identity
// "sub:<subject>", with the subject verify finds in the bearer token.
func ExampleSubjectIdentity() {
	verify := func(token string) (string, error) {
		if token != "valid-token" {
			return "", errors.New("invalid token")
		}
		return "alice", nil
	}
	fmt.Println(adapter.SubjectIdentity("Bearer valid-token", verify))
	fmt.Println(adapter.SubjectIdentity("bearer forged", verify))
	fmt.Println(adapter.SubjectIdentity("Basic YWxpY2U6cHc=", verify)) // no bearer token: ""
	// Output:
	// sub:alice <nil>
	//  invalid token
	//  <nil>
}
