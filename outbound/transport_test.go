package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// adaptiveClient returns a client whose Transport waits on a Limiter with
// nothing configured (only what the upstream says paces it), on clk.
func adaptiveClient(t *testing.T, clk *fakeClock, opts ...TransportOption) (*http.Client, *Limiter) {
	t.Helper()
	l := mustNew(t, nil, clk)
	tr := NewTransport(nil, l, append([]TransportOption{WithTransportClock(clk)}, opts...)...)
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}, l
}

// get sends a GET and returns the status, failing the test on an error.
func get(t *testing.T, c *http.Client, url string) int {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Error(err)
		return 0
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestTransportHeaderFamilies: an upstream answering with each family of
// rate-limit headers holds the next request back as long as it says.
func TestTransportHeaderFamilies(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header func(now time.Time) map[string]string
		want   time.Duration
	}{
		{"ietf structured", 200, func(time.Time) map[string]string {
			return map[string]string{"RateLimit-Policy": `"default";q=5;w=1`, "RateLimit": `"default";r=0;t=3`}
		}, 3 * time.Second},
		{"ietf draft-07", 200, func(time.Time) map[string]string {
			return map[string]string{"RateLimit": "limit=5, remaining=0, reset=4"}
		}, 4 * time.Second},
		{"ratelimit-remaining/-reset", 200, func(time.Time) map[string]string {
			return map[string]string{"RateLimit-Limit": "5", "RateLimit-Remaining": "0", "RateLimit-Reset": "2"}
		}, 2 * time.Second},
		{"x-ratelimit delta", 200, func(time.Time) map[string]string {
			return map[string]string{"X-RateLimit-Limit": "5", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "5"}
		}, 5 * time.Second},
		{"x-ratelimit unix reset", 200, func(now time.Time) map[string]string {
			return map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": strconv.FormatInt(now.Add(6*time.Second).Unix(), 10), "Date": now.Format(http.TimeFormat)}
		}, 6 * time.Second},
		{"retry-after on 200", 200, func(time.Time) map[string]string {
			return map[string]string{"Retry-After": "7"}
		}, 7 * time.Second},
		{"retry-after on 429", 429, func(time.Time) map[string]string {
			return map[string]string{"Retry-After": "8"}
		}, 8 * time.Second},
		{"retry-after on 503", 503, func(time.Time) map[string]string {
			return map[string]string{"Retry-After": "9"}
		}, 9 * time.Second},
		{"retry-after http-date", 429, func(now time.Time) map[string]string {
			return map[string]string{"Retry-After": now.Add(time.Hour + 11*time.Second).Format(http.TimeFormat), "Date": now.Add(time.Hour).Format(http.TimeFormat)}
		}, 11 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) == 1 {
					for k, v := range tc.header(clk.Now()) {
						w.Header().Set(k, v)
					}
					w.WriteHeader(tc.status)
				}
			}))
			defer srv.Close()
			c, _ := adaptiveClient(t, clk)
			if got := get(t, c, srv.URL); got != tc.status {
				t.Fatalf("status %d, want %d", got, tc.status)
			}
			done := make(chan int, 1)
			go func() { done <- get(t, c, srv.URL+"/next") }()
			if d := clk.waitTimers(t, 1); d != tc.want {
				t.Fatalf("next request held %v, want %v", d, tc.want)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("the upstream saw %d requests before the hold ended, want 1", n)
			}
			clk.Advance(tc.want)
			if got := <-done; got != 200 {
				t.Fatalf("after the hold: status %d", got)
			}
		})
	}
}

// TestTransportBudgetBeforeThe429: an upstream saying "2 remaining" lets
// exactly 2 more requests start before its reset.
func TestTransportBudgetBeforeThe429(t *testing.T) {
	clk := newFakeClock()
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := hits.Add(1)
		w.Header().Set("X-RateLimit-Remaining", strconv.FormatInt(max(3-n, 0), 10))
		w.Header().Set("X-RateLimit-Reset", "10")
	}))
	defer srv.Close()
	c, _ := adaptiveClient(t, clk)
	for range 3 {
		get(t, c, srv.URL)
	}
	done := make(chan int, 1)
	go func() { done <- get(t, c, srv.URL) }()
	if d := clk.waitTimers(t, 1); d != 10*time.Second {
		t.Fatalf("4th request held %v, want 10s", d)
	}
	clk.Advance(10 * time.Second)
	<-done
	if n := hits.Load(); n != 4 {
		t.Fatalf("upstream saw %d, want 4", n)
	}
}

func TestTransportRetry(t *testing.T) {
	clk := newFakeClock()
	var mu sync.Mutex
	var bodies []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, r.Method+" "+string(b))
		n := len(bodies)
		mu.Unlock()
		if n == 1 {
			w.Header().Set("Retry-After", "2")
			w.WriteHeader(http.StatusTooManyRequests)
			io.WriteString(w, "slow down")
			return
		}
		io.WriteString(w, "ok")
	}))
	defer srv.Close()
	c, _ := adaptiveClient(t, clk, WithRetry(3, time.Minute))

	req, _ := http.NewRequest(http.MethodPut, srv.URL+"/r", strings.NewReader("payload"))
	done := make(chan *http.Response, 1)
	go func() {
		resp, err := c.Do(req)
		if err != nil {
			t.Error(err)
		}
		done <- resp
	}()
	if d := clk.waitTimers(t, 1); d != 2*time.Second {
		t.Fatalf("retry waits %v, want the Retry-After 2s", d)
	}
	clk.Advance(2 * time.Second)
	resp := <-done
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("got %d %q, want the retry's 200 ok", resp.StatusCode, b)
	}
	mu.Lock()
	if len(bodies) != 2 || bodies[0] != "PUT payload" || bodies[1] != "PUT payload" {
		t.Fatalf("upstream saw %q, want the PUT twice with its body", bodies)
	}
	bodies = nil
	mu.Unlock()

	// A POST without an idempotency key is not retried: the 429 is
	// returned as it is, and its Retry-After still holds the key.
	clk2 := newFakeClock()
	c2, l2 := adaptiveClient(t, clk2, WithRetry(3, time.Minute))
	resp, err := c2.Post(srv.URL, "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 429 || string(b) != "slow down" {
		t.Fatalf("POST: got %d %q, want the 429 unread", resp.StatusCode, b)
	}
	if tryWait(t, l2, clk2, KeyHost(resp.Request)) {
		t.Fatal("the 429's Retry-After did not hold the key")
	}
	mu.Lock()
	bodies = nil
	mu.Unlock()

	// Over budget: the Retry-After ends past it, so the 429 comes back.
	clk3 := newFakeClock()
	c3, _ := adaptiveClient(t, clk3, WithRetry(3, time.Second))
	if got := get(t, c3, srv.URL); got != 429 {
		t.Fatalf("over budget: %d, want 429", got)
	}
}

// failWaiter fails every Wait.
type failWaiter struct{}

var errWait = errors.New("no slot")

func (failWaiter) Wait(context.Context, string, string, string) error { return errWait }

type trackedBody struct {
	io.Reader
	closed atomic.Bool
}

func (b *trackedBody) Close() error { b.closed.Store(true); return nil }

func TestTransportWaitErrorClosesBodyAndSendsNothing(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { hits.Add(1) }))
	defer srv.Close()
	tr := NewTransport(nil, failWaiter{})
	body := &trackedBody{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest(http.MethodPost, srv.URL, body)
	resp, err := tr.RoundTrip(req)
	if resp != nil || !errors.Is(err, errWait) {
		t.Fatalf("got %v, %v; want no response and the Waiter's error", resp, err)
	}
	if !body.closed.Load() || hits.Load() != 0 {
		t.Fatalf("body closed %v, upstream hits %d; want closed and 0", body.closed.Load(), hits.Load())
	}
}

func TestTransportNeverModifiesRequest(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "0")
		w.WriteHeader(503)
	}))
	defer srv.Close()
	c, _ := adaptiveClient(t, newFakeClock(), WithRetry(2, time.Minute))
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/a?b=c", nil)
	req.Header.Set("X-Mine", "1")
	before := req.Header.Clone()
	url := req.URL.String()
	resp, err := c.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if req.URL.String() != url || len(req.Header) != len(before) || req.Header.Get("X-Mine") != "1" {
		t.Fatalf("request modified: %v %v", req.URL, req.Header)
	}
}

// failRT fails every round trip.
type failRT struct{}

func (failRT) RoundTrip(*http.Request) (*http.Response, error) { return nil, errors.New("dial failed") }

func TestTransportObservesFailedRequests(t *testing.T) {
	clk := newFakeClock()
	l := mustNew(t, nil, clk)
	tr := NewTransport(failRT{}, l, WithTransportClock(clk))
	req, _ := http.NewRequest(http.MethodGet, "http://upstream.test/", nil)
	if _, err := tr.RoundTrip(req); err == nil {
		t.Fatal("no error")
	}
	if n := l.states(); n != 0 {
		t.Fatalf("%d key states after a failed request, want 0 (it is no longer in flight)", n)
	}
}

// delayer is a Waiter and Delayer only.
type delayer struct {
	mu     sync.Mutex
	delays []string
}

func (*delayer) Wait(context.Context, string, string, string) error { return nil }
func (d *delayer) Delay(_ context.Context, key string, dur time.Duration) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.delays = append(d.delays, key+" "+dur.String())
	return nil
}

func TestTransportDelayerOnly(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3") // on a 200
	}))
	defer srv.Close()
	for _, adaptive := range []bool{true, false} {
		d := &delayer{}
		tr := NewTransport(nil, d, WithAdaptive(adaptive), WithKey(func(*http.Request) string { return "api" }))
		defer tr.CloseIdleConnections()
		c := &http.Client{Transport: tr}
		get(t, c, srv.URL)
		want := 0
		if adaptive {
			want = 1
		}
		if len(d.delays) != want || (want == 1 && d.delays[0] != "api 3s") {
			t.Fatalf("adaptive %v: delays %q, want %d of \"api 3s\"", adaptive, d.delays, want)
		}
	}
}

func TestKeyHost(t *testing.T) {
	req, _ := http.NewRequest(http.MethodGet, "https://api.example.com:8443/v1/x", nil)
	if got := KeyHost(req); got != "api.example.com:8443" {
		t.Fatalf("KeyHost = %q", got)
	}
	// One upstream, however its URL spells the host.
	for url, want := range map[string]string{
		"https://api.example.com/":      "api.example.com",
		"https://API.example.com/":      "api.example.com",
		"https://api.example.com./":     "api.example.com",
		"https://api.example.com:443/":  "api.example.com",
		"HTTPS://Api.Example.Com.:443/": "api.example.com",
		"http://api.example.com:80/":    "api.example.com",
		"http://api.example.com:443/":   "api.example.com:443",
		"https://api.example.com:80/":   "api.example.com:80",
		"https://api.example.com:8443/": "api.example.com:8443",
		"http://[::1]:8080/":            "[::1]:8080",
		"http://[::1]/":                 "[::1]",
		"http://[2001:DB8::1]:80/":      "[2001:db8::1]",
		"http://127.0.0.1:8080/":        "127.0.0.1:8080",
	} {
		req, err := http.NewRequest(http.MethodGet, url, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got := KeyHost(req); got != want {
			t.Errorf("KeyHost(%s) = %q, want %q", url, got, want)
		}
	}
	req.URL.Host, req.Host = "", "Example.COM"
	if got := KeyHost(req); got != "example.com" {
		t.Errorf("KeyHost of a request with only Host = %q", got)
	}
	if n := testing.AllocsPerRun(100, func() { KeyHost(req) }); n != 1 {
		t.Errorf("KeyHost of a host to lower-case: %v allocations, want 1", n)
	}
	req.Host = "example.com:8080"
	if n := testing.AllocsPerRun(100, func() { KeyHost(req) }); n != 0 {
		t.Errorf("KeyHost of a clean host: %v allocations, want 0", n)
	}
	tr := NewTransport(nil, nil, WithKey(func(r *http.Request) string { return r.Method + " " + r.URL.Path }))
	if got := tr.Key(req); got != "GET /v1/x" {
		t.Fatalf("Key = %q", got)
	}
}

// TestTransportForbiddenRateLimit: a 403 that reports a spent limit
// (GitHub's primary limit: X-RateLimit-Remaining: 0 with X-RateLimit-Reset
// a Unix time; its secondary limits: Retry-After) is a rate-limit answer as
// a 429 is: the key is held until the reset it gives, and WithRetry sends
// the request again then, once. A 429 with only a remaining count of 0 is
// one too.
func TestTransportForbiddenRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header func(now time.Time) map[string]string
		want   time.Duration
	}{
		{"403 x-ratelimit unix reset", 403, func(now time.Time) map[string]string {
			return map[string]string{"X-RateLimit-Limit": "5000", "X-RateLimit-Remaining": "0", "X-RateLimit-Used": "5000",
				"X-RateLimit-Reset": strconv.FormatInt(now.Add(30*time.Second).Unix(), 10), "Date": now.Format(http.TimeFormat)}
		}, 30 * time.Second},
		{"403 x-ratelimit delta reset", 403, func(time.Time) map[string]string {
			return map[string]string{"X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "12"}
		}, 12 * time.Second},
		{"403 ietf structured", 403, func(time.Time) map[string]string {
			return map[string]string{"RateLimit": `"default";r=0;t=4`}
		}, 4 * time.Second},
		{"403 retry-after", 403, func(time.Time) map[string]string {
			return map[string]string{"Retry-After": "5", "X-RateLimit-Remaining": "4000", "X-RateLimit-Reset": "600"}
		}, 5 * time.Second},
		{"403 retry-after before the reset", 403, func(time.Time) map[string]string {
			return map[string]string{"Retry-After": "2", "X-RateLimit-Remaining": "0", "X-RateLimit-Reset": "9"}
		}, 9 * time.Second},
		{"429 x-ratelimit unix reset", 429, func(now time.Time) map[string]string {
			return map[string]string{"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset": strconv.FormatInt(now.Add(20*time.Second).Unix(), 10), "Date": now.Format(http.TimeFormat)}
		}, 20 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if hits.Add(1) == 1 {
					for k, v := range tc.header(clk.Now()) {
						w.Header().Set(k, v)
					}
					w.WriteHeader(tc.status)
					io.WriteString(w, "API rate limit exceeded")
					return
				}
				io.WriteString(w, "ok")
			}))
			defer srv.Close()
			c, l := adaptiveClient(t, clk, WithRetry(3, time.Hour))
			done := make(chan *http.Response, 1)
			go func() {
				resp, err := c.Get(srv.URL + "/repos")
				if err != nil {
					t.Error(err)
				}
				done <- resp
			}()
			if d := clk.waitTimers(t, 1); d != tc.want {
				t.Fatalf("retry held %v, want %v", d, tc.want)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("the upstream saw %d requests during the hold, want 1", n)
			}
			clk.Advance(tc.want - time.Nanosecond)
			if n, _ := clk.pending(); n != 1 || hits.Load() != 1 {
				t.Fatalf("before the reset: %d timers, %d requests; want 1 and 1", n, hits.Load())
			}
			clk.Advance(time.Nanosecond)
			resp := <-done
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || string(b) != "ok" {
				t.Fatalf("got %d %q, want the retry's 200 ok", resp.StatusCode, b)
			}
			if n := hits.Load(); n != 2 {
				t.Fatalf("the upstream saw %d requests, want 2", n)
			}
			if !tryWait(t, l, clk, KeyHost(resp.Request)) {
				t.Fatal("the key is still held after the reset")
			}
		})
	}
}

// TestTransportForbiddenHoldsWithoutRetry: without WithRetry, a 403 that
// reports a spent limit is returned as it is, and the next request under
// its key waits for the reset; in non-adaptive mode too, and with a Waiter
// that is only a Delayer, which is told the reset.
func TestTransportForbiddenHoldsWithoutRetry(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 { // before any clock has moved from t0
			w.Header().Set("X-RateLimit-Remaining", "0")
			w.Header().Set("X-RateLimit-Reset", strconv.FormatInt(t0.Add(45*time.Second).Unix(), 10))
			w.Header().Set("Date", t0.Format(http.TimeFormat))
			w.WriteHeader(http.StatusForbidden)
		}
	}))
	defer srv.Close()
	for _, adaptive := range []bool{true, false} {
		hits.Store(0)
		clk := newFakeClock()
		c, _ := adaptiveClient(t, clk, WithAdaptive(adaptive))
		if got := get(t, c, srv.URL); got != 403 {
			t.Fatalf("adaptive %v: status %d, want the 403", adaptive, got)
		}
		done := make(chan int, 1)
		go func() { done <- get(t, c, srv.URL+"/next") }()
		if d := clk.waitTimers(t, 1); d != 45*time.Second {
			t.Fatalf("adaptive %v: next request held %v, want 45s", adaptive, d)
		}
		if n := hits.Load(); n != 1 {
			t.Fatalf("adaptive %v: the upstream saw %d requests during the hold, want 1", adaptive, n)
		}
		clk.Advance(45 * time.Second)
		if got := <-done; got != 200 || hits.Load() != 2 {
			t.Fatalf("adaptive %v: after the hold %d, %d requests; want 200, 2", adaptive, got, hits.Load())
		}
	}

	for _, adaptive := range []bool{true, false} {
		hits.Store(0)
		d := &delayer{}
		tr := NewTransport(nil, d, WithAdaptive(adaptive), WithTransportClock(newFakeClock()), WithKey(func(*http.Request) string { return "api" }))
		defer tr.CloseIdleConnections()
		get(t, &http.Client{Transport: tr}, srv.URL)
		if len(d.delays) != 1 || d.delays[0] != "api 45s" {
			t.Fatalf("adaptive %v: delays %q, want [\"api 45s\"]", adaptive, d.delays)
		}
	}
}

// TestTransportOrdinaryForbidden: a 403 that reports no spent limit (no
// header, a positive remaining count, a count of 0 with no reset or one
// already past) is returned to the caller as it is, headers and body,
// sent once, and holds nothing back.
func TestTransportOrdinaryForbidden(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header func(now time.Time) map[string]string
	}{
		{"no header", func(time.Time) map[string]string { return nil }},
		{"remaining above 0", func(now time.Time) map[string]string {
			return map[string]string{"X-RateLimit-Remaining": "4999",
				"X-RateLimit-Reset": strconv.FormatInt(now.Add(time.Hour).Unix(), 10), "Date": now.Format(http.TimeFormat)}
		}},
		{"remaining 0, no reset", func(time.Time) map[string]string {
			return map[string]string{"X-RateLimit-Remaining": "0"}
		}},
		{"remaining 0, reset past", func(now time.Time) map[string]string {
			return map[string]string{"X-RateLimit-Remaining": "0",
				"X-RateLimit-Reset": strconv.FormatInt(now.Add(-time.Minute).Unix(), 10), "Date": now.Format(http.TimeFormat)}
		}},
		{"invalid retry-after", func(time.Time) map[string]string {
			return map[string]string{"Retry-After": "soon"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := newFakeClock()
			var hits atomic.Int64
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				hits.Add(1)
				for k, v := range tc.header(clk.Now()) {
					w.Header().Set(k, v)
				}
				w.Header().Set("X-Reason", "scope")
				w.WriteHeader(http.StatusForbidden)
				io.WriteString(w, `{"message":"Resource not accessible by integration"}`)
			}))
			defer srv.Close()
			c, l := adaptiveClient(t, clk, WithRetry(3, time.Hour))
			resp, err := c.Get(srv.URL + "/repos")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 403 || resp.Header.Get("X-Reason") != "scope" || string(b) != `{"message":"Resource not accessible by integration"}` {
				t.Fatalf("got %d %v %q, want the 403 as it was sent", resp.StatusCode, resp.Header, b)
			}
			if n := hits.Load(); n != 1 {
				t.Fatalf("the upstream saw %d requests, want 1 (no retry)", n)
			}
			if !tryWait(t, l, clk, KeyHost(resp.Request)) {
				t.Fatal("an ordinary 403 held the key")
			}
		})
	}
}
