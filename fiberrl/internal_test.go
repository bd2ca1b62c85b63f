package fiberrl

import (
	"net/http/httptest"
	"net/url"
	"testing"
	"unsafe"

	"github.com/gofiber/fiber/v2"

	"github.com/rlkit/rlkit/core"
)

// TestRequestPathAsNetHTTP: for the same request line, the path the rules
// see is the one nethttp gives them (core.RequestPath of net/http's URL).
func TestRequestPathAsNetHTTP(t *testing.T) {
	for _, raw := range []string{
		"/", "", "/api/search", "/api/search/", "/api//search", "/api/./search", "/api/kb/../search",
		"/api/kb/a%2Fb/reindex", "/api/kb/a%2fb/reindex", "/api/kb/%2F/reindex", "/api/%2F%2F",
		"/api/%41%42c", "/api/%61pi", "/a%20b", "/caf%C3%A9", "/api/%252F", "/api/%25",
		"/a%2Fb%41/c%2f", "/%7Euser", "/a+b", "/a;b=c", "/a:b@c", "/%2e%2e/admin", "/api/%2E/search",
	} {
		u, err := url.ParseRequestURI(raw + "?q=1")
		if raw == "" {
			u, err = &url.URL{}, nil
		}
		if err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		if got, want := requestPath([]byte(raw)), core.RequestPath(u); got != want {
			t.Errorf("requestPath(%q): got %q, want %q (core.RequestPath)", raw, got, want)
		}
	}
}

// TestRequestPathOwnRules covers what net/http never hands over: escapes
// it rejects (a 400 there), and request lines whose net/http URL has no
// RawPath because they hold a byte that must be escaped, where
// core.RequestPath sees the decoded slash. Fiber routes such a line on its
// raw form, "a%2Fb{" one segment, so the slash stays encoded here.
func TestRequestPathOwnRules(t *testing.T) {
	for _, c := range []struct{ raw, want string }{
		{"/a%zz/b", "/a%zz/b"},
		{"/a%2", "/a%2"},
		{"/a%", "/a%"},
		{"/a%4", "/a%4"},
		{"/api/kb/a%2Fb{/reindex", "/api/kb/a%2Fb{/reindex"},
		{"/api/kb/a%2Fb%7B/reindex", "/api/kb/a%2Fb{/reindex"},
	} {
		if got := requestPath([]byte(c.raw)); got != c.want {
			t.Errorf("requestPath(%q): got %q, want %q", c.raw, got, c.want)
		}
	}
}

func TestRequestPathDoesNotAllocate(t *testing.T) {
	raw := []byte("/api/kb/kb-01/docs/upload")
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
