package nethttp_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

// get sends GET base+path with X-Forwarded-For xff and returns the status.
func attackGet(t *testing.T, base, path, xff string) int {
	t.Helper()
	req, err := http.NewRequest("GET", base+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Forwarded-For", xff)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// An IPv6 network longer than /64 in allow.networks loads without a word,
// and then allows every client of the /64 that holds it (the client IP is
// its /64's first address), not only the addresses written: a /120 of 256
// addresses becomes 2^64.
func TestAttack14IPv6AllowLongerThan64AllowsWhole64(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "1/minute"
  allow:
    networks: ["2001:db8:0:1::/120"]
`), "attack.yaml")
	if err != nil {
		t.Fatalf("the config is refused (good): %v", err)
	}
	h := nethttp.New(cfg, nethttp.WithClientIP(core.ClientIPConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	base := adaptertest.ServeHTTP(t, h)
	// 2001:db8:0:1:ffff:ffff:ffff:1 is far outside 2001:db8:0:1::/120.
	var codes []int
	for range 3 {
		codes = append(codes, attackGet(t, base, "/api", "2001:db8:0:1:ffff:ffff:ffff:1"))
	}
	if codes[1] != http.StatusTooManyRequests {
		t.Errorf("a client outside the allowed /120 got %v for 3 requests under 1/minute; want the second refused (429)", codes)
	}
}

// An IPv6 ban longer than /64 (a single address) loads without a word,
// and never refuses that address.
func TestAttack14IPv6BanLongerThan64NeverMatches(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "100/minute"
  ban:
    networks: ["2001:db8:0:2::bad/128"]
`), "attack.yaml")
	if err != nil {
		t.Fatalf("the config is refused (good): %v", err)
	}
	h := nethttp.New(cfg, nethttp.WithClientIP(core.ClientIPConfig{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	base := adaptertest.ServeHTTP(t, h)
	if got := attackGet(t, base, "/api", "2001:db8:0:2::bad"); got != http.StatusForbidden {
		t.Errorf("the banned address 2001:db8:0:2::bad got %d; want 403", got)
	}
}
