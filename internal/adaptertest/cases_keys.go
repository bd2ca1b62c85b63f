package adaptertest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/netip"
	"time"

	"github.com/rlkit/rlkit/core/clientip"
)

// keyCases check rules that count per another key than the caller's
// (core.RuleSpec.Key) through every adapter: per client IP, per path
// parameter, per request header, and combinations, in one configuration
// with rules per user. Store keys read as core's key.go documents them,
// hashed identities shown as "X-User:<name>" and "X-Api-Key:<value>". The
// suite's client connects from 127.0.0.1; other client IPs come from a
// trusted proxy's X-Forwarded-For.
func keyCases() []testCase {
	const xff = "X-Forwarded-For"
	proxy := func(s *Setup) {
		s.ClientIP = clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	}
	from := func(ip string, h ...[]string) []string { return with(append([][]string{{xff, ip}}, h...)...) }
	ip1, ip2 := []string{xff, "203.0.113.1"}, []string{xff, "203.0.113.2"}
	apiKey := func(v string) []string { return []string{"X-Api-Key", v} }
	post := func(path string, h ...string) req { return do(http.MethodPost, path, h...) }
	return []testCase{
		{
			// A login guard per client IP and a search limit per user, in
			// one file and one middleware; the default limit per IP.
			name: "KeysLoginPerIPSearchPerUser",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      key: ip
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
      key: user
  default: "120/minute"
  default_key: ip
`,
			setup: proxy,
			keyed: true,
			steps: seq(
				// alice and bob behind one address share the login counter,
				// and so does an anonymous client there.
				hit(post("/login", from("203.0.113.1", alice)...), ok(draft("login", 2, 60, 1, 60)...), "ip:203.0.113.1 login 1"),
				hit(post("/login", from("203.0.113.1", bob)...), ok(draft("login", 2, 60, 0, 60)...), "ip:203.0.113.1 login 1"),
				hit(post("/login", ip1...), limited("login", "60", draft("login", 2, 60, 0, 60)...), "ip:203.0.113.1 login 1"),
				hit(post("/login", from("203.0.113.2", alice)...), ok(draft("login", 2, 60, 1, 60)...), "ip:203.0.113.2 login 1"),
				// IPv6 clients by their /64.
				hit(post("/login", from("2001:db8:0:1::5", alice)...), ok(draft("login", 2, 60, 1, 60)...), "ip:2001:db8:0:1:: login 1"),
				hit(post("/login", from("2001:db8:0:1::6", bob)...), ok(draft("login", 2, 60, 0, 60)...), "ip:2001:db8:0:1:: login 1"),
				// Search per user, whatever the address.
				hit(get("/api/search", from("203.0.113.1", alice)...), ok(draft("search", 2, 60, 1, 60)...), "X-User:alice search 1"),
				hit(get("/api/search", from("203.0.113.1", bob)...), ok(draft("search", 2, 60, 1, 60)...), "X-User:bob search 1"),
				hit(get("/api/search", from("203.0.113.9", alice)...), ok(draft("search", 2, 60, 0, 60)...), "X-User:alice search 1"),
				hit(get("/api/search", from("203.0.113.1", alice)...), limited("search", "60", draft("search", 2, 60, 0, 60)...), "X-User:alice search 1"),
				hit(get("/api/search", ip1...), ok(draft("search", 2, 60, 1, 60)...), "203.0.113.1 search 1"),
				// The default limit per IP.
				hit(get("/elsewhere", from("203.0.113.1", alice)...), ok(draft("default", 120, 60, 119, 60)...), "ip:203.0.113.1 default 1"),
				hit(get("/other", from("203.0.113.1", bob)...), ok(draft("default", 120, 60, 118, 60)...), "ip:203.0.113.1 default 1"),
				advance(time.Minute),
				hit(post("/login", ip1...), ok(draft("login", 2, 60, 1, 60)...), "ip:203.0.113.1 login 1"),
			),
		},
		{
			// One knowledge base across all its users: every spelling of
			// its path counts under its decoded name.
			name: "KeysParamAcrossUsers",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: kb
      paths: ["/api/kb/{kb}/search", "/api/v2/:org/kb/:kb"]
      limit: "3/minute"
      key: param:kb
`,
			keyed: true,
			steps: seq(
				hit(get("/api/kb/k1/search", alice...), ok(draft("kb", 3, 60, 2, 60)...), "p:k1 kb 1"),
				hit(get("/api/kb/k1/search", bob...), ok(draft("kb", 3, 60, 1, 60)...), "p:k1 kb 1"),
				hit(get("/api/v2/acme/kb/k1"), ok(draft("kb", 3, 60, 0, 60)...), "p:k1 kb 1"),
				hit(get("/api/kb/k%31/search", bob...), limited("kb", "60", draft("kb", 3, 60, 0, 60)...), "p:k1 kb 1"),
				hit(get("/api/kb/k1/search/", alice...), limited("kb", "60", draft("kb", 3, 60, 0, 60)...), "p:k1 kb 1"),
				hit(get("/api/kb/x/../k1/search", alice...), limited("kb", "60", draft("kb", 3, 60, 0, 60)...), "p:k1 kb 1"),
				hit(get("/api/kb/x/%2e%2e/k1/search", alice...), limited("kb", "60", draft("kb", 3, 60, 0, 60)...), "p:k1 kb 1"),
				// Another knowledge base has its own count; "K1" is another
				// name behind a router that minds case, "a%2Fb" is "a/b".
				hit(get("/api/kb/k2/search", alice...), ok(draft("kb", 3, 60, 2, 60)...), "p:k2 kb 1"),
				hit(get("/api/kb/K1/search", alice...), ok(draft("kb", 3, 60, 2, 60)...), "p:K1 kb 1"),
				hit(get("/api/kb/a%2Fb/search", alice...), ok(draft("kb", 3, 60, 2, 60)...), "p:a/b kb 1"),
			),
		},
		{
			// The same, through the router's route templates (the rule is
			// found once per route; the parameter read per request).
			name: "KeysParamWithRoutes",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: kb
      paths: ["/api/kb/{kb}/search"]
      limit: "2/minute"
      key: user+param:kb
`,
			setup: func(s *Setup) { s.Routes = []string{"/api/kb/:id/search"} },
			keyed: true,
			steps: seq(
				hit(get("/api/kb/k1/search", alice...), ok(draft("kb", 2, 60, 1, 60)...), "u:X-User:alice|p:k1 kb 1"),
				hit(get("/api/kb/k2/search", alice...), ok(draft("kb", 2, 60, 1, 60)...), "u:X-User:alice|p:k2 kb 1"),
				hit(get("/api/kb/k1/search", alice...), ok(draft("kb", 2, 60, 0, 60)...), "u:X-User:alice|p:k1 kb 1"),
				hit(get("/api/kb/k1/search", alice...), limited("kb", "60", draft("kb", 2, 60, 0, 60)...), "u:X-User:alice|p:k1 kb 1"),
				hit(get("/api/kb/k%31/search", alice...), limited("kb", "60", draft("kb", 2, 60, 0, 60)...), "u:X-User:alice|p:k1 kb 1"),
				hit(get("/api/kb/k1/search", bob...), ok(draft("kb", 2, 60, 1, 60)...), "u:X-User:bob|p:k1 kb 1"),
				// An anonymous caller's user part is its client IP.
				hit(get("/api/kb/k1/search"), ok(draft("kb", 2, 60, 1, 60)...), "ip:127.0.0.1|p:k1 kb 1"),
			),
		},
		{
			// Per API key, hashed; a request without one (or with an
			// empty one) counts under its client IP, never a shared key.
			name: "KeysHeader",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: data
      paths: ["/api/data"]
      limit: "2/minute"
      key: header:x-api-key
`,
			setup: proxy,
			keyed: true,
			steps: seq(
				hit(get("/api/data", from("203.0.113.1", apiKey("key1"))...), ok(draft("data", 2, 60, 1, 60)...), "h:X-Api-Key:key1 data 1"),
				hit(get("/api/data", from("203.0.113.2", apiKey("key1"), bob)...), ok(draft("data", 2, 60, 0, 60)...), "h:X-Api-Key:key1 data 1"),
				hit(get("/api/data", from("203.0.113.3", apiKey("key1"))...), limited("data", "60", draft("data", 2, 60, 0, 60)...), "h:X-Api-Key:key1 data 1"),
				hit(get("/api/data", from("203.0.113.1", apiKey("key2"))...), ok(draft("data", 2, 60, 1, 60)...), "h:X-Api-Key:key2 data 1"),
				hit(get("/api/data", from("203.0.113.1", alice)...), ok(draft("data", 2, 60, 1, 60)...), "ip:203.0.113.1 data 1"),
				hit(get("/api/data", from("203.0.113.1", apiKey(""))...), ok(draft("data", 2, 60, 0, 60)...), "ip:203.0.113.1 data 1"),
				hit(get("/api/data", ip2...), ok(draft("data", 2, 60, 1, 60)...), "ip:203.0.113.2 data 1"),
				// A value that spells the fallback's key is hashed all the same.
				hit(get("/api/data", from("203.0.113.2", apiKey("ip:203.0.113.2"))...), ok(draft("data", 2, 60, 1, 60)...), "h:X-Api-Key:hmac:"+hmacOf("ip:203.0.113.2")+" data 1"),
			),
		},
		{
			// Combinations: per user and knowledge base, per IP and API key.
			name: "KeysCombined",
			config: `
rate_limit:
  enabled: true
  rules:
    - name: upload
      paths: ["/api/kb/:kb/upload"]
      limit: "2/minute"
      key: user+param:kb
    - name: data
      paths: ["/api/data"]
      limit: "2/minute"
      key: ip+header:X-Api-Key
`,
			setup: proxy,
			keyed: true,
			steps: seq(
				hit(post("/api/kb/k1/upload", from("203.0.113.1", alice)...), ok(draft("upload", 2, 60, 1, 60)...), "u:X-User:alice|p:k1 upload 1"),
				hit(post("/api/kb/k1/upload", from("203.0.113.2", alice)...), ok(draft("upload", 2, 60, 0, 60)...), "u:X-User:alice|p:k1 upload 1"),
				hit(post("/api/kb/k1/upload", from("203.0.113.1", alice)...), limited("upload", "60", draft("upload", 2, 60, 0, 60)...), "u:X-User:alice|p:k1 upload 1"),
				hit(post("/api/kb/k1/upload", from("203.0.113.1", bob)...), ok(draft("upload", 2, 60, 1, 60)...), "u:X-User:bob|p:k1 upload 1"),
				hit(post("/api/kb/k2/upload", from("203.0.113.1", alice)...), ok(draft("upload", 2, 60, 1, 60)...), "u:X-User:alice|p:k2 upload 1"),
				hit(post("/api/kb/k1/upload", ip1...), ok(draft("upload", 2, 60, 1, 60)...), "ip:203.0.113.1|p:k1 upload 1"),
				hit(get("/api/data", from("203.0.113.1", apiKey("key1"))...), ok(draft("data", 2, 60, 1, 60)...), "ip:203.0.113.1|h:X-Api-Key:key1 data 1"),
				hit(get("/api/data", from("203.0.113.2", apiKey("key1"))...), ok(draft("data", 2, 60, 1, 60)...), "ip:203.0.113.2|h:X-Api-Key:key1 data 1"),
				hit(get("/api/data", from("203.0.113.1", apiKey("key1"))...), ok(draft("data", 2, 60, 0, 60)...), "ip:203.0.113.1|h:X-Api-Key:key1 data 1"),
				hit(get("/api/data", ip1...), ok(draft("data", 2, 60, 1, 60)...), "ip:203.0.113.1|ip:203.0.113.1 data 1"),
			),
		},
	}
}

// hmacOf is the hex of a secret's keyed hash in the suite's store keys.
func hmacOf(secret string) string {
	h := hmac.New(sha256.New, []byte(identityKey))
	h.Write([]byte(secret))
	return hex.EncodeToString(h.Sum(nil)[:16])
}
