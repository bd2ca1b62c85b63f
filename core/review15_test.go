package core

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

// TestClientIPPeerReusedBytes: a caller that hands ClientIP a string over
// bytes it reuses (a fasthttp-style buffer turned into a string without a
// copy, to spare an allocation) gets the answer for what the string holds
// now, never the host kept for what it held when the peer cache saw it:
// another client's length of host, a half address, a non-IPv4 peer
// passed off as a plain one.
func TestClientIPPeerReusedBytes(t *testing.T) {
	var zero ClientIPConfig
	buf := make([]byte, 12)
	s := unsafe.String(&buf[0], len(buf))
	for _, c := range []struct{ first, then string }{
		{"1.1.1.1:5555", "22.2.2.2:555"},
		{"22.2.2.2:555", "1.1.1.1:5555"},
		{"1.1.1.1:5555", "[::1]:655350"},
		{"1.1.1.1:5555", "10.0.0.99:80"},
	} {
		copy(buf, c.first)
		for range 3 { // seen, then kept
			if got, want := zero.ClientIP(s, nil), zero.ClientIP(string(buf), nil); got != want {
				t.Fatalf("ClientIP(%q) = %q, want %q", c.first, got, want)
			}
		}
		copy(buf, c.then)
		if got, want := zero.ClientIP(s, nil), zero.ClientIP(string(buf), nil); got != want {
			t.Errorf("after %q, ClientIP(%q) over the same bytes = %q, want %q", c.first, c.then, got, want)
		}
	}
}

// TestAppendDecimalEdges: appendDecimal writes what strconv does at every
// bound of its four-digit steps and both ends of int64, after a prefix.
func TestAppendDecimalEdges(t *testing.T) {
	vals := []int64{math.MinInt64, math.MinInt64 + 1, -10000, -9999, -1, 0, math.MaxInt64, math.MaxInt64 - 1}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, 10*p-1)
	}
	for _, v := range vals {
		for _, pre := range []string{"", "x;r="} {
			if got, want := string(appendDecimal([]byte(pre), v)), strconv.AppendInt([]byte(pre), v, 10); got != string(want) {
				t.Errorf("appendDecimal(%q, %d) = %q, want %q", pre, v, got, want)
			}
		}
	}
	for v := int64(-20000); v <= 200000; v++ {
		if got, want := string(appendDecimal(nil, v)), strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendDecimal(%d) = %q, want %q", v, got, want)
		}
	}
}

// TestDecideHostileSpellings: whatever route an adapter names and however
// a client spells the path (escapes, //, /./, /../, case, a trailing
// slash, a long path, any method), decide, through the route answers, the
// literal-route shortcut and the recent paths' answers, asked again and
// again, gives what matching every spelling of the path gives.
func TestDecideHostileSpellings(t *testing.T) {
	for _, text := range []string{pathAnswerConfig, hostileConfig} {
		cfg, err := ParseConfig([]byte(text), "paths.yaml")
		if err != nil {
			t.Fatal(err)
		}
		decideHostile(t, cfg)
	}
}

const hostileConfig = `
rate_limit:
  enabled: true
  rules:
    - name: get
      paths: ["/api/*", "/r"]
      methods: ["GET"]
      limit: "5/minute"
      weights:
        "/api/login": 3
    - name: Other
      paths: ["/Api/*/x", "/api/login/"]
      limit: "5/minute"
  default: "120/minute"
  exempt_paths: ["/static/", "/", "/a/*/b", "/Health"]
`

func decideHostile(t *testing.T, cfg *Config) {
	long := "/api/login/" + strings.Repeat("a", 250)
	paths := []string{"/api/login", "/api/login/", "/api//login", "//api/login", "/api/./login", "/x/../api/login",
		"/api/%6cogin", "/api%2flogin", "/API/LOGIN", "/Api/Login/", "/health", "/health/", "/health/.", "//health",
		"/%68ealth", "/x/../health", "/HEALTH", "/docs/x", "/docs/x/../../api/login", "/docs/%2e%2e/api/login",
		"/docs/..%2fapi%2flogin", "/api/kb/1/docs/upload", "/api/kb/1/docs/upload/", "/api/kb/1/docs/upload/batch",
		"/api/kb/1/docs/upload/./batch", "/api/kb/%31/docs/upload/batch", "/api/kb//docs/upload/batch", "/API/Upper",
		"/api/upper", "/", "", "api/login", "/static/", "/static", "/static/x", "/a/1/b", "/a/1/b/", "/A/1/B", "/a//b",
		"/Health", "/Api/z/x", "/api/z/X", "/static/%2e%2e/", "/a/%2F/b", long, long[:256], long[:257], long + "/..", "/api/login%00", "/api/login?x"}
	routes := []string{"", "/", "/api/login", "/api/login/", "/api/:x", "/api/*", "/api/kb/:id/docs/upload/batch",
		"/api/kb/:id/docs/upload", "/health", "/health/", "/docs/:p", "/static/", "/static/:f", "/a/:x/b", "/Health", "/Api/:y/x", "/API/Upper", "/api/upper", "/:a/:b", "/api/{x}"}
	routes = append(routes, paths...) // a router that names the path itself
	methods := []string{"GET", "HEAD", "POST", "post", "Post", "PUT", "DELETE", "OPTIONS", "PROPFIND", ""}
	for round := range 3 {
		for _, p := range paths {
			var buf [maxSpellings]string
			sp := spellings(Path(p), &buf)
			for _, r := range routes {
				for _, m := range methods {
					for _, fold := range []bool{false, true} {
						wantM, wantEx := cfg.matchSpellings(m, sp, fold)
						if gotM, gotEx := cfg.decide(m, Path(p), r, fold); gotM != wantM || gotEx != wantEx {
							t.Fatalf("round %d: %s %q route %q fold %v: %+v exempt %v; want %+v exempt %v",
								round, m, p, r, fold, gotM, gotEx, wantM, wantEx)
						}
					}
				}
			}
		}
	}
}

// TestCachesConcurrent: goroutines asking at once for peers and paths that
// share the peer, route and recent-path tables' slots each get their own
// answer (run with -race: the tables' entries are published whole).
func TestCachesConcurrent(t *testing.T) {
	cfg, err := ParseConfig([]byte(pathAnswerConfig), "paths.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var zero ClientIPConfig
	type peer struct{ addr, host string }
	var peers []peer
	for i := range 6000 {
		host := fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)
		peers = append(peers, peer{fmt.Sprintf("%s:%d", host, 1+i*7919%65535), host}) // ports of 1 to 5 digits
	}
	var paths []string
	for i := range 1200 {
		paths = append(paths, fmt.Sprintf("/api/kb/%d/docs/upload/batch", i), fmt.Sprintf("/p/%d", i), "/api/login", "/health")
	}
	routes := []string{"", "/api/kb/:id/docs/upload/batch", "/api/login", "/health"}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for round := range 3 {
				for i := range peers {
					p := peers[(i*(2*g+1)+round)%len(peers)]
					if got := zero.ClientIP(p.addr, nil); got != p.host {
						errs <- fmt.Sprintf("ClientIP(%q) = %q", p.addr, got)
						return
					}
				}
				for i := range paths {
					p := paths[(i*(2*g+1)+round)%len(paths)]
					r := routes[(i+g)%len(routes)]
					m, ex := cfg.decide("POST", Path(p), r, g%2 == 1)
					wm, wex := cfg.matchSpellings("POST", []string{p}, g%2 == 1)
					if m != wm || ex != wex {
						errs <- fmt.Sprintf("decide(%q, route %q) = %+v %v, want %+v %v", p, r, m, ex, wm, wex)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// BenchmarkClientIPPeer: ClientIP for a plain IPv4 peer with no trusted
// proxy, the string asked for again (the cipPeers hit: a load and a
// comparison with the entry's copy), and a new string each time (a parse).
func BenchmarkClientIPPeer(b *testing.B) {
	var zero ClientIPConfig
	b.Run("kept", func(b *testing.B) {
		addr := strings.Clone("203.0.113.254:54321")
		b.ReportAllocs()
		for b.Loop() {
			zero.ClientIP(addr, nil)
		}
	})
	b.Run("parsed", func(b *testing.B) {
		var addrs [1 << 14]string
		for i := range addrs {
			addrs[i] = fmt.Sprintf("203.0.%d.%d:54321", i>>8&255, i&255)
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			zero.ClientIP(addrs[i&(len(addrs)-1)], nil)
			i++
		}
	})
}
