package fiberrl

import (
	"net"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"strings"
	"testing"
	"unsafe"

	"github.com/gofiber/fiber/v2"
	"github.com/valyala/fasthttp"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/internal/adaptertest"
)

// TestRequestPathAsNetHTTP: for the same request line, Fiber's path and
// nethttp's (core.URLPath of net/http's URL) get the same decision: the
// same exemption and the same rule and cost.
func TestRequestPathAsNetHTTP(t *testing.T) {
	cfg := adaptertest.Config(t, strings.Replace(adaptertest.ExampleConfig,
		`exempt_paths: ["/health", "/ready", "/docs", "/redoc", "/openapi.json"]`,
		`exempt_paths: ["/health", "/ready", "/ready/", "/static/*", "/a b"]`, 1))
	for _, raw := range []string{
		"/", "", "/api/search", "/api/search/", "/api//search", "/api/./search", "/api/kb/../search",
		"/api/kb/a%2Fb/reindex", "/api/kb/a%2fb/reindex", "/api/kb/%2F/reindex", "/api/%2F%2F",
		"/api/%41%42c", "/api/%61pi", "/caf%C3%A9", "/api/%252F", "/api/%25",
		"/a%2Fb%41/c%2f", "/%7Euser", "/a+b", "/a;b=c", "/a:b@c", "/%2e%2e/admin", "/api/%2E/search",
		"/api%2Fsearch", "/health", "/health/", "/health%2F", "/%68ealth", "/ready/", "/static/a%2Fb",
		"/static/%61", "/files/%2e%2e/health", "/api/kb/x%2Fdocs/upload/batch", "/health%00",
	} {
		u, err := url.ParseRequestURI(raw + "?q=1")
		if raw == "" {
			u, err = &url.URL{}, nil
		}
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		fiber, std := requestPath([]byte(raw)), core.URLPath(u)
		if got, want := cfg.Exempt(fiber), cfg.Exempt(std); got != want {
			t.Errorf("%q: exempt %v, want %v (nethttp's %q)", raw, got, want, std)
		}
		for _, m := range []string{"GET", "POST"} {
			r, c := cfg.Match(m, fiber)
			wr, wc := cfg.Match(m, std)
			if r != wr || c != wc {
				t.Errorf("%s %q: rule %s cost %d, want %s %d (nethttp's %q)", m, raw, r.Name, c, wr.Name, wc, std)
			}
		}
	}
	// The one difference: a default escape. net/http's routers and
	// handlers read "/a%20b" as "/a b", which is exempt; Fiber routes on
	// "/a%20b" as sent, which "/a b" does not exempt.
	u, _ := url.ParseRequestURI("/a%20b")
	if !cfg.Exempt(core.URLPath(u)) || cfg.Exempt(requestPath([]byte("/a%20b"))) {
		t.Errorf("/a%%20b: exempt %v through nethttp and %v through Fiber, want true and false",
			cfg.Exempt(core.URLPath(u)), cfg.Exempt(requestPath([]byte("/a%20b"))))
	}
}

// TestRequestPathAsSent: the path is fasthttp's raw path as it is, also
// for what net/http never hands over: escapes it rejects (a 400 there),
// and bytes that must be escaped.
func TestRequestPathAsSent(t *testing.T) {
	for _, raw := range []string{"/a%zz/b", "/a%2", "/a%", "/api/kb/a%2Fb{/reindex", "/api/kb/a%2Fb%7B/reindex"} {
		if got := requestPath([]byte(raw)); string(got) != raw {
			t.Errorf("requestPath(%q) = %q, want it as sent", raw, got)
		}
	}
}

func TestRequestPathDoesNotAllocate(t *testing.T) {
	raw := []byte("/api/kb/a%2Fb/docs/upload")
	if n := testing.AllocsPerRun(100, func() { _ = requestPath(raw) }); n != 0 {
		t.Fatalf("requestPath allocated %v times, want 0", n)
	}
}

// TestRouteAndMethod: the route template is the served route's path, the
// prefix for a middleware mounted with Use or Group (core matches such
// requests by path: see TestFirstMatchAndDefault), "" without a route;
// methods are copied out of fasthttp's buffers.
func TestRouteAndMethod(t *testing.T) {
	var got []string
	app := fiber.New()
	app.Use(func(c *fiber.Ctx) error {
		got = append(got, "use:"+route(c.Route()))
		return c.Next()
	})
	api := app.Group("/api", func(c *fiber.Ctx) error {
		got = append(got, "group:"+route(c.Route()))
		return c.Next()
	})
	api.Get("/kb/:id/reindex", func(c *fiber.Ctx) error {
		got = append(got, "route:"+route(c.Route()))
		return nil
	})
	if _, err := app.Test(httptest.NewRequest("GET", "/api/kb/kb-01/reindex", nil)); err != nil {
		t.Fatal(err)
	}
	want := []string{"use:/", "group:/api", "route:/api/kb/:id/reindex"}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("routes: got %q, want %q", got, want)
	}
	if r := route(new(fiber.Ctx).Route()); r != "" {
		t.Fatalf("route of a context without one: got %q, want %q", r, "")
	}

	buf := []byte("GET PATCH PROPFIND")
	str := func(b []byte) string { return unsafe.String(&b[0], len(b)) } // as Fiber's c.Method()
	get, patch, propfind := method(str(buf[:3])), method(str(buf[4:9])), method(str(buf[10:]))
	clear(buf)
	if get != "GET" || patch != "PATCH" || propfind != "PROPFIND" {
		t.Fatalf("methods: got %q %q %q after the buffer changed", get, patch, propfind)
	}
}

// TestPeerIPAsClientIP: with no trusted proxy, the client IP is the one
// clientip.Config gives for the peer's "ip:port", for IPv4, IPv4-mapped
// and IPv6 peers, IPv6 ones grouped per the configured IPv6PrefixLen (/64
// by default), and the IPv4 cache answers each address with its own text
// even when addresses share a slot.
func TestPeerIPAsClientIP(t *testing.T) {
	for _, tt := range []struct {
		prefixLen int
		addr      *net.TCPAddr
		want      string
	}{
		{0, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, "192.0.2.1"},
		{0, &net.TCPAddr{IP: net.IPv4(10, 0, 0, 255).To4(), Port: 1}, "10.0.0.255"},
		{0, &net.TCPAddr{IP: net.ParseIP("::ffff:198.51.100.7"), Port: 8080}, "198.51.100.7"},
		{0, &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1"), Port: 443}, "2001:db8:1:2::"},
		{0, &net.TCPAddr{IP: net.ParseIP("fe80::1"), Port: 443, Zone: "eth0"}, "fe80::"},
		{128, &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1"), Port: 443}, "2001:db8:1:2::1"},
		{48, &net.TCPAddr{IP: net.ParseIP("2001:db8:1:2::1"), Port: 443}, "2001:db8:1::"},
		{48, &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}, "192.0.2.1"},
	} {
		cfg := clientip.Config{IPv6PrefixLen: tt.prefixLen}
		var ctx fasthttp.RequestCtx
		ctx.Init(&fasthttp.Request{}, tt.addr, nil)
		app := fiber.New()
		c := app.AcquireCtx(&ctx)
		got, viaCore := peerIP(c, &cfg, false), cfg.ClientIP(remoteAddr(c), nil)
		app.ReleaseCtx(c)
		if got != tt.want || viaCore != tt.want {
			t.Errorf("IPv6PrefixLen %d, peer %v: peerIP = %q, clientip.Config.ClientIP = %q; want %q", tt.prefixLen, tt.addr, got, viaCore, tt.want)
		}
	}
	for i := uint32(0); i < 1<<16; i++ {
		v := i * 2654435761 // spread over the whole space; many share a slot
		a := [4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}
		for range 2 { // a miss, then (unless evicted meanwhile) a hit
			if got, want := ipv4String(a), netip.AddrFrom4(a).String(); got != want {
				t.Fatalf("ipv4String(%v) = %q, want %q", a, got, want)
			}
		}
	}
	a := [4]byte{203, 0, 113, 9}
	ipv4String(a)
	if n := testing.AllocsPerRun(100, func() { _ = ipv4String(a) }); n != 0 {
		t.Errorf("ipv4String of a cached address allocated %v times, want 0", n)
	}
}
