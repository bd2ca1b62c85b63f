package grpcrl_test

import (
	"fmt"
	"maps"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

// conformanceConfig is one rule file for both servers: a fixed window on
// the unary method, GCRA with a burst on the stream (waits that are not
// whole minutes), the rest under the default, and an exempt method.
const conformanceConfig = `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say"]
      limit: "3/minute"
    - name: watch
      paths: ["/test.Echo/Watch"]
      algorithm: gcra
      limit: "6/minute"
      burst: 2
  default: "5/minute"
  exempt_paths: ["/test.Echo/Ping"]
`

// outcome is what one call got, in the terms both protocols share: the
// kind of answer and every rate-limit header, by its lower-case name.
type outcome struct {
	kind    string // allowed, limited, unauthenticated
	headers string // "name=value" of each rate-limit header, by name
}

func (a outcome) String() string { return a.kind + " " + a.headers }

// headerLine formats the rate-limit headers get gives for limitKeys.
func headerLine(get func(name string) string) string {
	var parts []string
	for _, k := range limitKeys {
		if v := get(k); v != "" {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, " ")
}

// TestConformanceWithNetHTTP runs the same rule file through nethttp (a
// real HTTP server on loopback) and grpcrl (a real gRPC server on a
// 127.0.0.1 listener) with the same identities (an API key, a bearer
// token's subject, a forged token, the client's IP) and the same methods
// as paths, calling both at the same instants of one clock, in both
// header styles, and checks that every call gets the same outcome
// (allowed or refused, the same RateLimit-Policy and RateLimit, or
// X-RateLimit-*, values and the same Retry-After, and for gRPC a
// RetryInfo of the wait those seconds round up), that the stores were
// asked the same keys, and the exact allowed and refused counts.
func TestConformanceWithNetHTTP(t *testing.T) {
	for _, style := range []core.HeaderStyle{core.HeadersDraft, core.HeadersLegacy} {
		t.Run(fmt.Sprint(style), func(t *testing.T) { conformance(t, style) })
	}
}

func conformance(t *testing.T, style core.HeaderStyle) {
	clock := store.NewManualClock(start)
	httpStore := &spyStore{Store: memAt(t, clock)}
	grpcStore := &spyStore{Store: memAt(t, clock)}
	cfg := config(t, conformanceConfig)

	jwt := nethttp.JWTSubject(func(r *http.Request, tok string) (string, error) { return verify(r.Context(), tok) })
	apiKeyHTTP := nethttp.HeaderKey("X-Api-Key")
	h := nethttp.New(
		core.NewLimiter(cfg, core.WithStore(httpStore), core.WithHeaders(style)),
		nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
			if id, err := jwt(r); err != nil || id != "" {
				return id, err
			}
			return apiKeyHTTP(r)
		}),
	)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("{}")) }))
	base := adaptertest.ServeHTTP(t, h)
	conn, _ := serve(t, cfg, core.WithStore(grpcStore), core.WithHeaders(style), keys)

	callHTTP := func(method string, md []string) outcome {
		req, err := http.NewRequest("POST", base+method, nil)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i+1 < len(md); i += 2 {
			req.Header.Set(md[i], md[i+1])
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		a := outcome{headers: headerLine(resp.Header.Get)}
		switch resp.StatusCode {
		case http.StatusOK:
			a.kind = "allowed"
		case http.StatusTooManyRequests:
			a.kind = "limited"
		case http.StatusUnauthorized:
			a.kind = "unauthenticated"
		default:
			a.kind = resp.Status
		}
		return a
	}
	callGRPC := func(method string, md []string) outcome {
		var r result
		if method == watchMethod {
			r = watch(t, conn, []string{"x"}, md...)
		} else {
			r = invoke(t, conn, method, "hi", md...)
		}
		a := outcome{headers: headerLine(func(k string) string { return get(t, r.header, k) })}
		switch r.code {
		case codes.OK:
			a.kind = "allowed"
		case codes.ResourceExhausted:
			a.kind = "limited"
			// RetryInfo is the exact wait; retry-after its seconds rounded up.
			if got, ra := strconv.FormatInt(int64(math.Ceil(r.retry.Seconds())), 10), get(t, r.header, "retry-after"); got != ra {
				t.Errorf("%s: RetryInfo %v rounds to %s s, retry-after says %s", method, r.retry, got, ra)
			}
		case codes.Unauthenticated:
			a.kind = "unauthenticated"
		default:
			a.kind = r.code.String()
		}
		return a
	}

	callers := []struct {
		name string
		md   []string
	}{
		{"api key", apiKey("k-123")},
		{"bearer", bearer("good-carol")},
		{"bearer and api key", append(bearer("good-dave"), apiKey("k-123")...)},
		{"forged", append(bearer("forged"), apiKey("k-456")...)},
		{"client ip", nil},
	}
	// The same script for every caller: bursts, waits that free part of a
	// limit, the default rule, the exempt method.
	type call struct {
		method string
		n      int
		adv    time.Duration
	}
	script := []call{
		{method: sayMethod, n: 5},
		{method: watchMethod, n: 4},
		{method: "/test.Echo/Other", n: 6},
		{method: "/test.Echo/Ping", n: 2},
		{adv: 12 * time.Second},
		{method: watchMethod, n: 2},
		{adv: 48 * time.Second},
		{method: sayMethod, n: 4},
		{method: watchMethod, n: 3},
	}
	counts := map[string]map[string]int{} // caller → outcome → calls
	for _, c := range callers {
		counts[c.name] = map[string]int{}
	}
	for step, s := range script {
		if s.adv > 0 {
			clock.Advance(s.adv)
			continue
		}
		for _, c := range callers {
			for i := range s.n {
				hg, gg := callHTTP(s.method, c.md), callGRPC(s.method, c.md)
				if hg != gg {
					t.Errorf("step %d %s %s call %d:\n nethttp: %v\n grpcrl:  %v", step, c.name, s.method, i+1, hg, gg)
				}
				counts[c.name][gg.kind]++
				if gg.kind != "unauthenticated" && s.method != "/test.Echo/Ping" && gg.headers == "" {
					t.Fatalf("step %d %s %s: no rate-limit headers", step, c.name, s.method)
				}
			}
		}
	}
	// 5+4+6+2+2+4+3 = 26 calls each. Allowed: say 3, and 3 in the next
	// minute; watch 2 (its burst), 1 of 2 at 12 s (GCRA frees one per
	// 10 s: the other waits 8 s), 2 of 3 at 60 s; the default 5 of 6;
	// Ping (exempt) 2.
	allowed := 3 + 3 + 2 + 1 + 2 + 5 + 2
	want := map[string]int{"allowed": allowed, "limited": 26 - allowed}
	for _, c := range callers {
		w := want
		if c.name == "forged" {
			w = map[string]int{"unauthenticated": 26 - 2, "allowed": 2} // only the exempt method passes
		}
		if !maps.Equal(counts[c.name], w) {
			t.Errorf("%s: outcomes %v, want %v", c.name, counts[c.name], w)
		}
	}
	// The "bearer and api key" caller counted as dave, not as k-123.
	hk, gk := httpStore.takes(), grpcStore.takes()
	if !slices.Equal(hk, gk) {
		t.Errorf("store keys differ:\n nethttp: %q\n grpcrl:  %q", hk, gk)
	}
	if n := strings.Count(strings.Join(gk, "\n"), "sub:dave say"); n != 5+4 {
		t.Errorf("dave's say calls reached the store %d times, want 9", n)
	}
}
