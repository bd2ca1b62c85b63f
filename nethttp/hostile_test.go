package nethttp_test

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"net/http/httputil"
	"net/netip"
	"net/url"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

// hostileGet sends GET base+path with X-Forwarded-For xff and returns the
// status.
func hostileGet(t *testing.T, base, path, xff string) int {
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

// TestHostileIPv6AllowLongerThan64ListsOnlyItsAddresses checks that the following does not happen:
//
// An IPv6 network longer than /64 in allow.networks loads without a word,
// and then allows every client of the /64 that holds it (the client IP is
// its /64's first address), not only the addresses written: a /120 of 256
// addresses becomes 2^64.
func TestHostileIPv6AllowLongerThan64ListsOnlyItsAddresses(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "1/minute"
  allow:
    networks: ["2001:db8:0:1::/120"]
`), "hostile.yaml")
	if err != nil {
		t.Fatalf("the config is refused (good): %v", err)
	}
	h := nethttp.New(core.NewLimiter(cfg, core.WithClientIP(clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	base := adaptertest.ServeHTTP(t, h)
	// 2001:db8:0:1:ffff:ffff:ffff:1 is far outside 2001:db8:0:1::/120.
	var codes []int
	for range 3 {
		codes = append(codes, hostileGet(t, base, "/api", "2001:db8:0:1:ffff:ffff:ffff:1"))
	}
	if codes[1] != http.StatusTooManyRequests {
		t.Errorf("a client outside the allowed /120 got %v for 3 requests under 1/minute; want the second refused (429)", codes)
	}
}

// TestHostileIPv6BanLongerThan64Matches checks that the following does not happen:
//
// An IPv6 ban longer than /64 (a single address) loads without a word,
// and never refuses that address.
func TestHostileIPv6BanLongerThan64Matches(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "100/minute"
  ban:
    networks: ["2001:db8:0:2::bad/128"]
`), "hostile.yaml")
	if err != nil {
		t.Fatalf("the config is refused (good): %v", err)
	}
	h := nethttp.New(core.NewLimiter(cfg, core.WithClientIP(clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}})))(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	base := adaptertest.ServeHTTP(t, h)
	if got := hostileGet(t, base, "/api", "2001:db8:0:2::bad"); got != http.StatusForbidden {
		t.Errorf("the banned address 2001:db8:0:2::bad got %d; want 403", got)
	}
}

// saturate starts 64 requests of fresh identities whose provider lookups
// hang until release is closed, and returns once all 64 calls run.
// providerCalls is how many LimitProvider calls a limiter runs at once
// (see core.LimitProvider).
const providerCalls = 64

func saturate(t *testing.T, base string, calls *atomic.Int64, release chan struct{}) *sync.WaitGroup {
	t.Helper()
	// A client of its own, whose connections go at the test's end before
	// the server shuts down: of 64 concurrent requests, some dial a
	// connection another request's reuse made needless, and the server
	// waits 5s for such a connection, new and never used, before it
	// counts it idle.
	client := &http.Client{Transport: &http.Transport{}}
	t.Cleanup(client.CloseIdleConnections)
	var wg sync.WaitGroup
	for i := range providerCalls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequest("GET", base+"/api", nil)
			req.Header.Set("X-User", "flood-"+strconv.Itoa(i))
			if resp, err := client.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	deadline := time.Now().Add(5 * time.Second)
	for calls.Load() < int64(providerCalls) {
		if time.Now().After(deadline) {
			close(release)
			t.Fatalf("only %d provider calls running", calls.Load())
		}
		time.Sleep(time.Millisecond)
	}
	return &wg
}

func providerServer(t *testing.T, custom string, lims []algo.Limit, ruleLimit string) (base string, calls *atomic.Int64, release chan struct{}) {
	calls = new(atomic.Int64)
	release = make(chan struct{})
	prov := core.LimitProviderFunc(func(ctx context.Context, key, rule string) ([]algo.Limit, bool, error) {
		if key == custom {
			return lims, true, nil
		}
		calls.Add(1)
		select { // a database slowed down by the flood
		case <-release:
		case <-ctx.Done():
		}
		return nil, false, nil
	})
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "`+ruleLimit+`"
`), "hostile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New()), core.WithLimitProvider(prov))
	h := nethttp.New(
		lim,
		nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
			return "user:" + r.Header.Get("X-User"), nil
		}),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	return adaptertest.ServeHTTP(t, h), calls, release
}

func userGet(t *testing.T, base, user string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/api", nil)
	req.Header.Set("X-User", user)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestHostileProviderFloodKeepsCustomQuota checks that the following does not happen:
//
// A flood of 64 fresh identities whose lookups are slow takes every
// provider call; meanwhile a customer with a negotiated quota of
// 100/minute counts under the rule's 2/minute and is refused its third
// request.
func TestHostileProviderFloodKeepsCustomQuota(t *testing.T) {
	base, calls, release := providerServer(t, "user:vip", []algo.Limit{{Count: 100, Period: time.Minute}}, "2/minute")
	wg := saturate(t, base, calls, release)
	var codes []int
	for range 3 {
		codes = append(codes, userGet(t, base, "vip"))
	}
	close(release)
	wg.Wait()
	if codes[2] != http.StatusOK {
		t.Errorf("vip (custom 100/minute) got %v during a flood of fresh identities; want 3 × 200", codes)
	}
}

// TestHostileProviderFloodKeepsStricterCustomLimit checks that the following does not happen:
//
// The same flood lets a caller whose provider limits are stricter than
// the rule (1/minute, a throttled abuser) count under the rule's
// 100/minute.
func TestHostileProviderFloodKeepsStricterCustomLimit(t *testing.T) {
	base, calls, release := providerServer(t, "user:abuser", []algo.Limit{{Count: 1, Period: time.Minute}}, "100/minute")
	wg := saturate(t, base, calls, release)
	var codes []int
	for range 5 {
		codes = append(codes, userGet(t, base, "abuser"))
	}
	close(release)
	wg.Wait()
	if codes[1] != http.StatusTooManyRequests {
		t.Errorf("abuser (custom 1/minute) got %v during a flood of fresh identities; want the second refused", codes)
	}
}

// TestHostileReverseProxyAbortCounted checks that the following does not happen:
//
// Behind the middleware an httputil.ReverseProxy streams a backend's
// answer; a client that reads the status line and the first bytes and
// then closes its connection makes the proxy panic with
// http.ErrAbortHandler, so Limiter.Complete never runs: under
// `count: successes` (a quota of exports), every such download is
// uncounted, and under `count: failures` a streamed 401 is too.
func TestHostileReverseProxyAbortCounted(t *testing.T) {
	for _, tc := range []struct {
		mode   string
		status int
	}{{"successes", http.StatusOK}, {"failures", http.StatusUnauthorized}} {
		t.Run(tc.mode, func(t *testing.T) {
			backend := adaptertest.ServeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tc.status)
				_, _ = w.Write([]byte("first chunk of a long answer\n"))
				http.NewResponseController(w).Flush()
				select { // the rest comes slowly
				case <-r.Context().Done():
				case <-time.After(5 * time.Second):
				}
			}))
			u, _ := url.Parse(backend)
			cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: export
      paths: ["/export"]
      limit: "2/minute"
      count: `+tc.mode+`
`), "hostile.yaml")
			if err != nil {
				t.Fatal(err)
			}
			// done says when the server has finished a request (the
			// middleware's count included), panic or not, so that the
			// next request never meets this one in flight.
			done := make(chan struct{}, 6)
			h := nethttp.New(cfg)(httputil.NewSingleHostReverseProxy(u))
			base := adaptertest.ServeHTTP(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				defer func() { done <- struct{}{} }()
				h.ServeHTTP(w, r)
			}))
			addr := strings.TrimPrefix(base, "http://")
			served := 0
			for range 6 {
				c, err := net.DialTimeout("tcp", addr, 2*time.Second)
				if err != nil {
					t.Fatal(err)
				}
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = c.Write([]byte("GET /export HTTP/1.1\r\nHost: x\r\n\r\n"))
				line, err := bufio.NewReader(c).ReadString('\n')
				c.Close() // mid-response
				if err != nil {
					t.Fatal(err)
				}
				if strings.HasPrefix(line, "HTTP/1.1 "+strconv.Itoa(tc.status)) {
					served++
				}
				select { // the proxy notices and aborts
				case <-done:
				case <-time.After(5 * time.Second):
					t.Fatal("the server did not finish a request within 5s of its client closing")
				}
			}
			if served > 2 {
				t.Errorf("count: %s, limit 2/minute: %d of 6 requests answered %d (each client closed mid-response); want at most 2 before 429", tc.mode, served, tc.status)
			}
		})
	}
}

// TestHostileProviderCacheCopiesKeys checks that the following does not happen:
//
// Behind a trusted proxy the client IP is the rightmost address of
// X-Forwarded-For, handed on as a substring of the header's value, and the
// LimitProvider's cache keeps it as its key: each cached caller pins the
// whole header the client wrote to the left of its address (up to
// net/http's 1 MB). 64 callers with a 512 KB header each hold 32 MB, where
// the cache's 64 keys are at most 128 bytes each (MaxKeyLen). With the
// default cache size (10,000) and 1 MB headers that is 10 GB.
func TestHostileProviderCacheCopiesKeys(t *testing.T) {
	prov := core.LimitProviderFunc(func(ctx context.Context, key, rule string) ([]algo.Limit, bool, error) {
		return nil, false, nil
	})
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "100/minute"
`), "hostile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lim := core.NewLimiter(cfg, core.WithLimitProvider(prov),
		core.WithClientIP(clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}))
	h := nethttp.New(lim)(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	base := adaptertest.ServeHTTP(t, h)
	junk := strings.Repeat("a", 512<<10)
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	const callers = 64
	for i := range callers {
		if got := hostileGet(t, base, "/api", junk+", 198.51.100."+strconv.Itoa(i+1)); got != http.StatusOK {
			t.Fatalf("status %d", got)
		}
	}
	http.DefaultClient.CloseIdleConnections()
	time.Sleep(100 * time.Millisecond) // let the server's connections go
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	retained := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	runtime.KeepAlive(lim)
	if retained > 8<<20 {
		t.Errorf("%d cached callers (keys of at most %d bytes) retain %d MB of heap: each pins its X-Forwarded-For header", callers, store.MaxKeyLen, retained>>20)
	}
}

// TestHostileHalfCloseWaitsForProvider checks that the following does not happen:
//
// While the LimitProvider is asked about a caller (once per TTL, or
// after its entry is dropped), its other requests wait for the answer,
// unless their context ends: then they count under the rule's limits. A
// client that closes its write side (net/http then cancels the request's
// context, and the client still reads the answer) is never kept waiting:
// a caller throttled to 1/minute by its custom limits is served under the
// rule's 100/minute.
func TestHostileHalfCloseWaitsForProvider(t *testing.T) {
	asked := make(chan struct{}, 1)
	prov := core.LimitProviderFunc(func(ctx context.Context, key, rule string) ([]algo.Limit, bool, error) {
		if key != "user:abuser" {
			return nil, false, nil
		}
		select {
		case asked <- struct{}{}:
		default:
		}
		time.Sleep(time.Second) // a slow lookup (at most the second a LimitProvider call is given)
		return []algo.Limit{{Count: 1, Period: time.Minute}}, true, nil
	})
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "100/minute"
`), "hostile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New()), core.WithLimitProvider(prov))
	h := nethttp.New(
		lim,
		nethttp.WithKeyFunc(func(r *http.Request) (string, error) {
			return "user:" + r.Header.Get("X-User"), nil
		}),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}))
	base := adaptertest.ServeHTTP(t, h)
	addr := strings.TrimPrefix(base, "http://")
	first := make(chan int, 1)
	go func() { first <- userGet(t, base, "abuser") }() // starts the lookup
	<-asked
	served := 0
	for i := range 5 {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = conn.Write([]byte("GET /api HTTP/1.1\r\nHost: x\r\nX-User: abuser\r\n\r\n"))
		_ = conn.(*net.TCPConn).CloseWrite()
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		conn.Close()
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			served++
		}
	}
	if got := <-first; got == http.StatusOK {
		served++
	}
	if served > 1 {
		t.Errorf("a caller limited to 1/minute by its custom limits was served %d of 6 requests (5 from half-closed connections during the lookup)", served)
	}
}

// TestHostileOutcomeWavesTriggerPenalty checks that the following does not happen:
//
// A brute-force guard with a penalty: /login counts failures, 5 a minute,
// and 3 denials within a minute ban the caller for 15 minutes. A client
// that sends its guesses in waves of 20 at once, at the start of each
// window, gets every guess answered: each wave passes the check while
// the counter has room, 5 are counted and the other 15 counts are denied;
// but those denials are not denials for the penalty, and no request is
// ever refused at the check, so the ban never comes: 20 guesses a minute
// for ever, against a limit of 5 and a ban after 3 denials.
func TestHostileOutcomeWavesTriggerPenalty(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0))
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "5/minute"
      count: failures
      penalty: {after: 3, within: 1m, ban: 15m}
`), "hostile.yaml")
	if err != nil {
		t.Fatal(err)
	}
	const wave = 20
	var (
		mu      sync.Mutex
		arrived int
		gate    = make(chan struct{})
	)
	h := nethttp.New(core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock)))))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		arrived++
		if arrived == wave {
			close(gate)
		}
		g := gate
		mu.Unlock()
		select {
		case <-g:
		case <-time.After(5 * time.Second):
		}
		w.WriteHeader(http.StatusUnauthorized) // a wrong password
	}))
	base := adaptertest.ServeHTTP(t, h)
	for round := range 3 {
		mu.Lock()
		arrived, gate = 0, make(chan struct{})
		mu.Unlock()
		var wg sync.WaitGroup
		var guessed atomic.Int64
		for range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := http.Post(base+"/login", "text/plain", nil)
				if err != nil {
					return
				}
				resp.Body.Close()
				if resp.StatusCode == http.StatusUnauthorized {
					guessed.Add(1)
				}
			}()
		}
		wg.Wait()
		if round > 0 && guessed.Load() > 0 {
			t.Errorf("wave %d (next window): %d of %d guesses answered; after the first wave's %d uncounted failures the penalty (after 3 denials, ban 15m) should refuse them all", round+1, guessed.Load(), wave, wave-5)
		}
		clock.Advance(time.Minute) // the next window
	}
}

// An IPv6 client IP in allow.identities is refused with an error that
// sends it to allow.networks: the identity of an IPv6 client is its
// group's first address (its /64 by default), so such an entry could
// never match the client it names.
func TestHostileIPv6AllowIdentityNeverMatches(t *testing.T) {
	_, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: api
      paths: ["/api"]
      limit: "1/minute"
  allow:
    identities: ["2001:db8:0:3::1"]
`), "hostile.yaml")
	const want = `rate-limit config hostile.yaml:9: field "allow.identities": value "2001:db8:0:3::1": an IPv6 client counts under its group's address (its /64 by default): list it in allow.networks`
	if err == nil || err.Error() != want {
		t.Fatalf("an IPv6 address in allow.identities: error %v, want %q", err, want)
	}
}
