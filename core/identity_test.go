package core_test

import (
	"net/url"
	"testing"

	"github.com/rlkit/rlkit/core"
)

func TestRequestPath(t *testing.T) {
	for _, tt := range []struct{ raw, want string }{
		{"/api/search", "/api/search"},
		{"/api/kb/a%2Fb/reindex", "/api/kb/a%2Fb/reindex"}, // one segment, as routers see it
		{"/api/kb/a%2fb/reindex", "/api/kb/a%2Fb/reindex"},
		{"/api/%73earch", "/api/search"}, // other escapes are decoded
		{"/api/kb/x%20y/reindex", "/api/kb/x y/reindex"},
		{"/a%252Fb", "/a%2Fb"}, // a literal "%2F" text: still one segment
	} {
		u, err := url.Parse(tt.raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := core.RequestPath(u); got != tt.want {
			t.Errorf("RequestPath(%q) = %q, want %q", tt.raw, got, tt.want)
		}
	}
	u, _ := url.Parse("/api/search")
	if n := testing.AllocsPerRun(100, func() { core.RequestPath(u) }); n != 0 {
		t.Errorf("%v allocations for a plain path, want 0", n)
	}
}

func TestEncodedSlashCannotLeaveAStarRule(t *testing.T) {
	cfg, err := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n  rules:\n    - name: reindex\n      paths: [\"/api/kb/*/reindex\"]\n      limit: \"2/minute\"\n"), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse("/api/kb/a%2Fb/reindex")
	if r, _ := cfg.Match("POST", core.RequestPath(u)); r.Name != "reindex" {
		t.Fatalf("got rule %q, want reindex", r.Name)
	}
}
