package worksclient_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/worksclient"
)

// call is one request that reached a fakeAPI.
type call struct {
	method, path, body string
	header             http.Header
	at                 time.Time
}

// fakeAPI is a base RoundTripper with no network (it works in a synctest
// bubble): it records each request and answers with respond.
type fakeAPI struct {
	respond func(n int, req *http.Request) *http.Response // n counts from 0

	mu    sync.Mutex
	calls []call
}

func (f *fakeAPI) RoundTrip(req *http.Request) (*http.Response, error) {
	var body []byte
	if req.Body != nil {
		body, _ = io.ReadAll(req.Body)
		req.Body.Close()
	}
	f.mu.Lock()
	n := len(f.calls)
	f.calls = append(f.calls, call{req.Method, req.URL.Path, string(body), req.Header.Clone(), time.Now()})
	f.mu.Unlock()
	if f.respond == nil {
		return response(req, http.StatusOK, nil, "ok"), nil
	}
	return f.respond(n, req), nil
}

func (f *fakeAPI) get() []call {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]call(nil), f.calls...)
}

func response(req *http.Request, status int, h http.Header, body string) *http.Response {
	if h == nil {
		h = make(http.Header)
	}
	return &http.Response{
		StatusCode: status, Status: fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: req,
	}
}

// throttle answers the first n requests with status and Retry-After ra.
func throttle(n int, status int, ra string) func(int, *http.Request) *http.Response {
	return func(i int, req *http.Request) *http.Response {
		if i < n {
			return response(req, status, http.Header{"Retry-After": {ra}}, "slow down")
		}
		return response(req, http.StatusOK, nil, "ok")
	}
}

func send(t *testing.T, rt http.RoundTripper, method, url, body string) (*http.Response, error) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := rt.RoundTrip(req)
	if resp != nil {
		t.Cleanup(func() { resp.Body.Close() })
	}
	return resp, err
}

const api = "https://www.worksapis.com"

// TestTransportPaces: requests are paced per APIKey through the Transport,
// measured where they reach the (fake) API.
func TestTransportPaces(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeAPI{}
		tr := worksclient.NewTransport(f, worksclient.NewPacer(iv))
		t0 := time.Now()
		var wg sync.WaitGroup
		for i := range 4 {
			for _, path := range []string{"/v1.0/users/u%d@example.com", "/scim/v2/Users/%d"} {
				wg.Go(func() {
					if _, err := send(t, tr, "PATCH", api+fmt.Sprintf(path, i), ""); err != nil {
						t.Error(err)
					}
				})
			}
		}
		wg.Wait()
		byKey := map[string][]time.Duration{}
		for _, c := range f.get() {
			k := worksclient.APIKey(c.method, c.path)
			byKey[k] = append(byKey[k], c.at.Sub(t0))
		}
		want := []time.Duration{0, iv, 2 * iv, 3 * iv}
		for _, k := range []string{"PATCH /v1.0/users/{id}", "PATCH /scim/v2/Users/{id}"} {
			if fmt.Sprint(byKey[k]) != fmt.Sprint(want) {
				t.Errorf("%s reached the API at %v, want %v", k, byKey[k], want)
			}
		}
	})
}

// TestTransportRetryAfter: a 429 or 503 with Retry-After, in seconds or as
// an HTTP-date, holds the key back until then; with WithRetry the request
// is sent again then, the same.
func TestTransportRetryAfter(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
		header func(now time.Time) http.Header
	}{
		{"429 seconds", 429, func(time.Time) http.Header { return http.Header{"Retry-After": {"2"}} }},
		{"503 seconds", 503, func(time.Time) http.Header { return http.Header{"Retry-After": {" 2 "}} }},
		{"429 date", 429, func(now time.Time) http.Header {
			return http.Header{"Retry-After": {now.Add(2 * time.Second).UTC().Format(http.TimeFormat)}}
		}},
		// The server's Date says it is an hour behind us: the wait is
		// measured on its clock.
		{"429 date with Date", 429, func(now time.Time) http.Header {
			srv := now.Add(-time.Hour)
			return http.Header{
				"Date":        {srv.UTC().Format(http.TimeFormat)},
				"Retry-After": {srv.Add(2 * time.Second).UTC().Format(http.TimeFormat)},
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, retry := range []bool{false, true} {
				synctest.Test(t, func(t *testing.T) {
					f := &fakeAPI{respond: func(n int, req *http.Request) *http.Response {
						if n == 0 {
							return response(req, tc.status, tc.header(time.Now()), "busy")
						}
						return response(req, http.StatusOK, nil, "ok")
					}}
					var opts []worksclient.TransportOption
					if retry {
						opts = append(opts, worksclient.WithRetry(3, 10*time.Second))
					}
					tr := worksclient.NewTransport(f, worksclient.NewPacer(iv), opts...)
					t0 := time.Now()
					resp, err := send(t, tr, "PUT", api+"/v1.0/users/kim@example.com", `{"a":1}`)
					if err != nil {
						t.Fatal(err)
					}
					if !retry {
						if resp.StatusCode != tc.status {
							t.Fatalf("status %d, want %d (no retry)", resp.StatusCode, tc.status)
						}
						// The next request on the key waits for Retry-After.
						if _, err := send(t, tr, "PUT", api+"/v1.0/users/lee@example.com", `{"a":2}`); err != nil {
							t.Fatal(err)
						}
					} else if resp.StatusCode != http.StatusOK {
						t.Fatalf("status %d after retry, want 200", resp.StatusCode)
					}
					calls := f.get()
					if len(calls) != 2 {
						t.Fatalf("%d calls, want 2", len(calls))
					}
					if got := calls[1].at.Sub(t0); got != 2*time.Second {
						t.Errorf("retry=%v: second request after %v, want 2s", retry, got)
					}
					if retry && calls[1].body != `{"a":1}` {
						t.Errorf("retried body %q, want the original", calls[1].body)
					}
				})
			}
		})
	}
}

// TestTransportForbiddenRateLimit: a 403 that reports a spent limit
// (X-RateLimit-Remaining: 0 with X-RateLimit-Reset, or Retry-After) holds
// the key back until the reset, as a 429 does, and with WithRetry is sent
// again then; an ordinary 403 is returned at once, sent once, and holds
// nothing.
func TestTransportForbiddenRateLimit(t *testing.T) {
	for _, tc := range []struct {
		name   string
		header func(now time.Time) http.Header
		want   time.Duration // when the second request reaches the API; 0: an ordinary 403
	}{
		{"x-ratelimit unix reset", func(now time.Time) http.Header {
			return http.Header{"X-Ratelimit-Remaining": {"0"}, "X-Ratelimit-Reset": {fmt.Sprint(now.Add(3 * time.Second).Unix())},
				"Date": {now.UTC().Format(http.TimeFormat)}}
		}, 3 * time.Second},
		{"retry-after", func(time.Time) http.Header { return http.Header{"Retry-After": {"2"}} }, 2 * time.Second},
		{"no header", func(time.Time) http.Header { return nil }, 0},
		{"remaining above 0", func(time.Time) http.Header {
			return http.Header{"X-Ratelimit-Remaining": {"12"}, "X-Ratelimit-Reset": {"30"}}
		}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, retry := range []bool{false, true} {
				synctest.Test(t, func(t *testing.T) {
					// The bubble starts in 2000, whose Unix times are
					// below 10^9, which reads as delta seconds: move on.
					time.Sleep(time.Until(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)))
					f := &fakeAPI{respond: func(n int, req *http.Request) *http.Response {
						if n == 0 {
							return response(req, http.StatusForbidden, tc.header(time.Now()), "forbidden")
						}
						return response(req, http.StatusOK, nil, "ok")
					}}
					var opts []worksclient.TransportOption
					if retry {
						opts = append(opts, worksclient.WithRetry(3, 10*time.Second))
					}
					tr := worksclient.NewTransport(f, worksclient.NewPacer(iv), opts...)
					t0 := time.Now()
					resp, err := send(t, tr, "GET", api+"/v1.0/users", "")
					if err != nil {
						t.Fatal(err)
					}
					limited := tc.want > 0
					if want := map[bool]int{false: 403, true: 200}[retry && limited]; resp.StatusCode != want {
						t.Fatalf("retry=%v: status %d, want %d", retry, resp.StatusCode, want)
					}
					if resp.StatusCode == 403 {
						if b, _ := io.ReadAll(resp.Body); string(b) != "forbidden" {
							t.Fatalf("retry=%v: body %q, want the 403's", retry, b)
						}
						if len(f.get()) != 1 {
							t.Fatalf("retry=%v: %d calls, want 1", retry, len(f.get()))
						}
						if _, err := send(t, tr, "GET", api+"/v1.0/users", ""); err != nil {
							t.Fatal(err)
						}
					}
					calls := f.get()
					if len(calls) != 2 {
						t.Fatalf("retry=%v: %d calls, want 2", retry, len(calls))
					}
					want := tc.want
					if !limited {
						want = iv // the pacing alone
					}
					if got := calls[1].at.Sub(t0); got != want {
						t.Errorf("retry=%v: second request after %v, want %v", retry, got, want)
					}
				})
			}
		})
	}
}

// TestTransportMaxRetryAfter: a Retry-After of a day, a date years ahead
// or one that overflows holds the key back for MaxRetryAfter only.
func TestTransportMaxRetryAfter(t *testing.T) {
	if worksclient.MaxRetryAfter != 10*time.Minute {
		t.Fatalf("MaxRetryAfter = %v, want 10m", worksclient.MaxRetryAfter)
	}
	for _, ra := range []string{"86400", "99999999999999999999999", "Fri, 31 Dec 2100 23:59:59 GMT"} {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeAPI{respond: throttle(1, 429, ra)}
			tr := worksclient.NewTransport(f, worksclient.NewPacer(iv))
			t0 := time.Now()
			if resp, err := send(t, tr, "GET", api+"/v1.0/users", ""); err != nil || resp.StatusCode != 429 {
				t.Fatalf("Retry-After %q: %v, %v; want the 429", ra, resp, err)
			}
			if _, err := send(t, tr, "GET", api+"/v1.0/users", ""); err != nil {
				t.Fatal(err)
			}
			if got := f.get()[1].at.Sub(t0); got != worksclient.MaxRetryAfter {
				t.Errorf("Retry-After %q: next request after %v, want %v", ra, got, worksclient.MaxRetryAfter)
			}
		})
	}
}

// TestTransportRetryBudget: a Retry-After past the budget, or too many
// attempts, gives the last response back unread.
func TestTransportRetryBudget(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeAPI{respond: throttle(10, 429, "5")}
		tr := worksclient.NewTransport(f, worksclient.NewPacer(iv), worksclient.WithRetry(5, 3*time.Second))
		t0 := time.Now()
		resp, err := send(t, tr, "GET", api+"/v1.0/users", "")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 429 || string(body) != "slow down" || len(f.get()) != 1 || time.Since(t0) != 0 {
			t.Fatalf("got %d %q after %d calls and %v, want the first 429 unread at once", resp.StatusCode, body, len(f.get()), time.Since(t0))
		}
	})
	synctest.Test(t, func(t *testing.T) {
		f := &fakeAPI{respond: throttle(10, 429, "1")}
		tr := worksclient.NewTransport(f, worksclient.NewPacer(iv), worksclient.WithRetry(3, time.Minute))
		t0 := time.Now()
		resp, err := send(t, tr, "GET", api+"/v1.0/users", "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 429 || len(f.get()) != 3 || time.Since(t0) != 2*time.Second {
			t.Fatalf("got %d after %d calls and %v, want 429 after 3 calls and 2s", resp.StatusCode, len(f.get()), time.Since(t0))
		}
	})
	// The wait in the limiter counts too: when requests queued on the key
	// first push the retry past the budget, the 429 comes back at the
	// budget's end, and the queue moves on without it.
	synctest.Test(t, func(t *testing.T) {
		p := worksclient.NewPacer(iv)
		var wg sync.WaitGroup
		f := &fakeAPI{respond: func(n int, req *http.Request) *http.Response {
			if n == 0 {
				for range 4 { // queued before the retry: they go at 1s, 1s+iv, ...
					wg.Go(func() { _ = p.Wait(context.Background(), "GET /v1.0/users") })
				}
				synctest.Wait()
			}
			return throttle(1, 429, "1")(n, req)
		}}
		tr := worksclient.NewTransport(f, p, worksclient.WithRetry(3, 1500*time.Millisecond))
		t0 := time.Now()
		resp, err := send(t, tr, "GET", api+"/v1.0/users", "")
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 429 || len(f.get()) != 1 || time.Since(t0) != 1500*time.Millisecond {
			t.Fatalf("got %d after %d calls and %v, want the 429 after 1 call and 1.5s", resp.StatusCode, len(f.get()), time.Since(t0))
		}
		wg.Wait()
		if got := time.Since(t0); got != time.Second+3*iv {
			t.Errorf("the queue ended at %v, want %v (the retry's slot given back)", got, time.Second+3*iv)
		}
	})
}

// TestTransportRetryRules: which requests are sent again.
func TestTransportRetryRules(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		status     int
		body       bool
		getBody    bool
		header     string
		wantFinish int // status returned
	}{
		{"GET 503", "GET", 503, false, false, "", 200},
		{"DELETE 503", "DELETE", 503, false, false, "", 200},
		{"PUT 503 rewindable", "PUT", 503, true, true, "", 200},
		{"POST 503", "POST", 503, true, true, "", 503},
		{"POST 503 Idempotency-Key", "POST", 503, true, true, "Idempotency-Key", 200},
		{"PATCH 503 X-Idempotency-Key", "PATCH", 503, true, true, "X-Idempotency-Key", 200},
		{"POST 429 rewindable", "POST", 429, true, true, "", 429},
		{"POST 429 no body", "POST", 429, false, false, "", 429},
		{"PATCH 429", "PATCH", 429, true, true, "", 429},
		{"POST 429 Idempotency-Key", "POST", 429, true, true, "Idempotency-Key", 200},
		{"PATCH 429 X-Idempotency-Key", "PATCH", 429, true, true, "X-Idempotency-Key", 200},
		{"GET 429", "GET", 429, false, false, "", 200},
		{"PUT 429 rewindable", "PUT", 429, true, true, "", 200},
		{"POST 429 Idempotency-Key one-shot body", "POST", 429, true, false, "Idempotency-Key", 429},
		{"PUT 429 one-shot body", "PUT", 429, true, false, "", 429},
		{"PUT 503 one-shot body", "PUT", 503, true, false, "", 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeAPI{respond: throttle(1, tt.status, "1")}
				tr := worksclient.NewTransport(f, worksclient.NewPacer(iv), worksclient.WithRetry(2, time.Minute))
				var body io.Reader
				if tt.body {
					body = strings.NewReader(`{"x":1}`)
					if !tt.getBody {
						body = io.MultiReader(body) // not a type NewRequest can rewind
					}
				}
				req, _ := http.NewRequestWithContext(t.Context(), tt.method, api+"/v1.0/users", body)
				if tt.header != "" {
					req.Header[tt.header] = []string{"abc"}
				}
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != tt.wantFinish {
					t.Errorf("status %d, want %d", resp.StatusCode, tt.wantFinish)
				}
				if resp.StatusCode != http.StatusOK {
					// Not retried: the Retry-After still holds the key.
					if _, err := send(t, tr, tt.method, api+"/v1.0/users", ""); err != nil {
						t.Fatal(err)
					}
				}
				calls := f.get()
				if len(calls) != 2 {
					t.Fatalf("%d calls, want 2", len(calls))
				}
				if d := calls[1].at.Sub(calls[0].at); d != time.Second {
					t.Errorf("second call %v after the first, want the Retry-After, 1s", d)
				}
			})
		})
	}
}

// TestTransportNoRetryWithoutRetryAfter: a 429 without (or with an invalid)
// Retry-After is returned as it is and holds nothing.
func TestTransportNoRetryWithoutRetryAfter(t *testing.T) {
	for _, ra := range []string{"", "soon", "-1", "1.5"} {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeAPI{respond: throttle(1, 429, ra)}
			tr := worksclient.NewTransport(f, worksclient.NewPacer(iv), worksclient.WithRetry(3, time.Minute))
			t0 := time.Now()
			if resp, err := send(t, tr, "GET", api+"/v1.0/users", ""); err != nil || resp.StatusCode != 429 {
				t.Fatalf("Retry-After %q: %v, %v; want the 429", ra, resp, err)
			}
			_, _ = send(t, tr, "GET", api+"/v1.0/users", "")
			if got := f.get()[1].at.Sub(t0); got != iv {
				t.Errorf("Retry-After %q: next request after %v, want %v", ra, got, iv)
			}
		})
	}
}

// notDelayer paces but cannot hold a key: the Transport waits Retry-After
// itself before a retry.
type notDelayer struct{ p *worksclient.Pacer }

func (n notDelayer) Wait(ctx context.Context, key string) error { return n.p.Wait(ctx, key) }

func TestTransportRetryWithoutDelayer(t *testing.T) {
	for _, l := range []worksclient.RateLimiter{nil, notDelayer{worksclient.NewPacer(iv)}} {
		synctest.Test(t, func(t *testing.T) {
			f := &fakeAPI{respond: throttle(1, 503, "3")}
			tr := worksclient.NewTransport(f, l, worksclient.WithRetry(2, time.Minute))
			t0 := time.Now()
			resp, err := send(t, tr, "GET", api+"/v1.0/users", "")
			if err != nil || resp.StatusCode != 200 || time.Since(t0) != 3*time.Second {
				t.Fatalf("limiter %T: %v %v after %v, want 200 after 3s", l, resp, err, time.Since(t0))
			}
		})
	}
}

// closeCounter is a request body that counts its Close calls.
type closeCounter struct {
	io.Reader
	closed atomic.Int32
}

func (c *closeCounter) Close() error { c.closed.Add(1); return nil }

// TestTransportCancelWhileWaiting: the request's context ends while it
// waits for its slot: RoundTrip returns ctx.Err() at once, closes the
// body, sends nothing, and the slot goes to the next request.
func TestTransportCancelWhileWaiting(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeAPI{}
		tr := worksclient.NewTransport(f, worksclient.NewPacer(iv))
		t0 := time.Now()
		_, _ = send(t, tr, "POST", api+"/v1.0/users", "first")

		ctx, cancel := context.WithCancel(t.Context())
		body := &closeCounter{Reader: strings.NewReader("second")}
		req, _ := http.NewRequestWithContext(ctx, "POST", api+"/v1.0/users", body)
		errc := make(chan error, 1)
		go func() {
			resp, err := tr.RoundTrip(req)
			if resp != nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		synctest.Wait()
		time.Sleep(100 * time.Millisecond)
		cancel()
		if err := <-errc; !errors.Is(err, context.Canceled) || time.Since(t0) != 100*time.Millisecond {
			t.Fatalf("RoundTrip = %v after %v, want %v at once", err, time.Since(t0), context.Canceled)
		}
		if n := body.closed.Load(); n != 1 {
			t.Errorf("body closed %d times, want 1", n)
		}
		_, _ = send(t, tr, "POST", api+"/v1.0/users", "third")
		calls := f.get()
		if len(calls) != 2 || calls[1].body != "third" || calls[1].at.Sub(t0) != iv {
			t.Fatalf("calls %+v, want first at 0 and third at %v", calls, iv)
		}
	})
}

// TestTransportDoesNotMutate: the caller's request is the same after a
// paced, retried round trip, and every attempt carries the same content.
func TestTransportDoesNotMutate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeAPI{respond: throttle(2, 429, "1")}
		tr := worksclient.NewTransport(f, worksclient.NewPacer(iv), worksclient.WithRetry(3, time.Minute))
		req, _ := http.NewRequestWithContext(t.Context(), "PATCH", api+"/v1.0/users/kim@example.com?x=1", bytes.NewReader([]byte(`{"name":"Kim"}`)))
		req.Header.Set("Authorization", "Bearer t")
		req.Header.Set("Idempotency-Key", "k1") // a PATCH is retried only with one
		before := struct {
			url    string
			header http.Header
			body   io.ReadCloser
			cl     int64
		}{req.URL.String(), req.Header.Clone(), req.Body, req.ContentLength}
		resp, err := tr.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if req.URL.String() != before.url || fmt.Sprint(req.Header) != fmt.Sprint(before.header) ||
			req.Body != before.body || req.ContentLength != before.cl {
			t.Errorf("request changed by RoundTrip")
		}
		calls := f.get()
		if len(calls) != 3 {
			t.Fatalf("%d calls, want 3", len(calls))
		}
		for i, c := range calls {
			if c.body != `{"name":"Kim"}` || c.header.Get("Authorization") != "Bearer t" {
				t.Errorf("attempt %d sent %q with %v", i, c.body, c.header)
			}
		}
	})
}

// failing is a limiter that fails.
type failing struct{}

var errLimiter = errors.New("limiter down")

func (failing) Wait(context.Context, string) error { return errLimiter }

// TestTransportLimiterError: the limiter's error is returned, the body
// closed, nothing sent.
func TestTransportLimiterError(t *testing.T) {
	f := &fakeAPI{}
	tr := worksclient.NewTransport(f, failing{})
	body := &closeCounter{Reader: strings.NewReader("x")}
	req, _ := http.NewRequest("POST", api+"/v1.0/users", body)
	resp, err := tr.RoundTrip(req)
	if resp != nil || !errors.Is(err, errLimiter) {
		t.Fatalf("RoundTrip = %v, %v; want nil, %v", resp, err, errLimiter)
	}
	if body.closed.Load() != 1 || len(f.get()) != 0 {
		t.Errorf("body closed %d times, %d calls; want 1 and 0", body.closed.Load(), len(f.get()))
	}
}

// TestTransportNilLimiter: no limiter, no retry: the base transport alone.
func TestTransportNilLimiter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := &fakeAPI{}
		tr := worksclient.NewTransport(f, nil)
		for range 5 {
			_, _ = send(t, tr, "GET", api+"/v1.0/users", "")
		}
		for _, c := range f.get() {
			if !c.at.Equal(f.get()[0].at) {
				t.Fatal("unpaced requests waited")
			}
		}
	})
}

// TestTransportCloseIdleConnections reaches the base transport.
func TestTransportCloseIdleConnections(t *testing.T) {
	base := &idleCloser{}
	(&http.Client{Transport: worksclient.NewTransport(base, worksclient.NewPacer(iv))}).CloseIdleConnections()
	if !base.closed {
		t.Error("CloseIdleConnections did not reach the base transport")
	}
}

type idleCloser struct {
	fakeAPI
	closed bool
}

func (c *idleCloser) CloseIdleConnections() { c.closed = true }

// TestTransportRetryAfterForms: every form of Retry-After a 429 may carry,
// as the Transport honours it: a valid one (seconds, an HTTP-date in any
// of its three formats, measured from the response's Date when that is
// valid) is retried when it has passed (and the key's interval), one too
// long at MaxRetryAfter; an invalid one is not retried.
func TestTransportRetryAfterForms(t *testing.T) {
	date := func(t time.Time) string { return t.UTC().Format(http.TimeFormat) }
	tests := []struct {
		name     string
		ra, date func(now time.Time) string
		want     time.Duration // when the retry starts; -1: no retry
	}{
		{"0", func(time.Time) string { return "0" }, nil, iv},
		{"120", func(time.Time) string { return "120" }, nil, 2 * time.Minute},
		{"spaces", func(time.Time) string { return " 7 " }, nil, 7 * time.Second},
		{"overflow", func(time.Time) string { return "99999999999999999999999" }, nil, worksclient.MaxRetryAfter},
		{"negative", func(time.Time) string { return "-1" }, nil, -1},
		{"fraction", func(time.Time) string { return "1.5" }, nil, -1},
		{"trailing letters", func(time.Time) string { return "12abc" }, nil, -1},
		{"word", func(time.Time) string { return "soon" }, nil, -1},
		{"date", func(now time.Time) string { return date(now.Add(30 * time.Second)) }, nil, 30 * time.Second},
		{"date past", func(now time.Time) string { return date(now.Add(-30 * time.Second)) }, nil, iv},
		{"RFC 850", func(now time.Time) string { return now.UTC().Add(time.Minute).Format(time.RFC850) }, nil, time.Minute},
		{"ANSI C", func(now time.Time) string { return now.UTC().Add(time.Minute).Format(time.ANSIC) }, nil, time.Minute},
		{"date from Date", func(now time.Time) string { return date(now.Add(-time.Hour + 10*time.Second)) },
			func(now time.Time) string { return date(now.Add(-time.Hour)) }, 10 * time.Second},
		{"date with a bad Date", func(now time.Time) string { return date(now.Add(10 * time.Second)) },
			func(time.Time) string { return "garbage" }, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				f := &fakeAPI{respond: func(n int, req *http.Request) *http.Response {
					if n > 0 {
						return response(req, http.StatusOK, nil, "ok")
					}
					h := http.Header{"Retry-After": {tt.ra(time.Now())}}
					if tt.date != nil {
						h.Set("Date", tt.date(time.Now()))
					}
					return response(req, http.StatusTooManyRequests, h, "slow down")
				}}
				tr := worksclient.NewTransport(f, worksclient.NewPacer(iv), worksclient.WithRetry(2, time.Hour))
				t0 := time.Now()
				resp, err := send(t, tr, "GET", api+"/v1.0/users", "")
				if err != nil {
					t.Fatal(err)
				}
				calls := f.get()
				if tt.want < 0 {
					if resp.StatusCode != http.StatusTooManyRequests || len(calls) != 1 {
						t.Fatalf("%d after %d calls, want the 429 after 1 (no retry)", resp.StatusCode, len(calls))
					}
					return
				}
				if resp.StatusCode != http.StatusOK || len(calls) != 2 {
					t.Fatalf("%d after %d calls, want 200 after 2", resp.StatusCode, len(calls))
				}
				if got := calls[1].at.Sub(t0); got != tt.want {
					t.Errorf("retried after %v, want %v", got, tt.want)
				}
			})
		})
	}
}
