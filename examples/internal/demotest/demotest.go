package demotest

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/examples/internal/demo"
)

// RunFunc is an example's entry point: it serves until ctx ends.
type RunFunc = func(ctx context.Context, args []string, stdout io.Writer) error

// Start starts run (an example's entry point) on 127.0.0.1:0, with args
// after -addr, and returns its base URL ("http://127.0.0.1:port"), found in
// the banner's "listening on" line. At the end of the test it cancels
// run's context and fails unless run returns nil within 10 seconds.
func Start(t *testing.T, run RunFunc, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0"}, args...), pw)
		pw.Close()
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("run did not return after its context ended")
		}
	})
	lines := bufio.NewScanner(pr)
	var base string
	for lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
			base = "http://" + strings.TrimPrefix(strings.Fields(rest)[0], "http://")
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if base == "" {
		t.Fatal("no address in the banner")
	}
	return base
}

// Run starts run (an example's entry point) with Start and checks the
// limits the banner's curl lines show.
func Run(t *testing.T, run RunFunc) {
	base := Start(t, run)
	client := &http.Client{Timeout: 5 * time.Second}
	send := func(method, path, key string) (*http.Response, string) {
		t.Helper()
		var resp *http.Response
		var err error
		for range 50 { // the listener is up; the server may still be starting
			req, _ := http.NewRequest(method, base+path, nil)
			if key != "" {
				req.Header.Set(demo.KeyHeader, key)
			}
			if resp, err = client.Do(req); err == nil {
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(body)
	}
	// Search: 10/second. Align to a second so that all 11 share one window.
	time.Sleep(time.Until(time.Now().Truncate(time.Second).Add(time.Second + 20*time.Millisecond)))
	for i := range 11 {
		resp, body := send("GET", "/api/search", "alice")
		want := 200
		if i == 10 {
			want = 429
		}
		if resp.StatusCode != want {
			t.Fatalf("search %d: status %d, want %d (body %s)", i+1, resp.StatusCode, want, body)
		}
		if want == 429 {
			if wantBody := `{"detail": "Rate limit exceeded for 'search' requests"}`; body != wantBody || resp.Header.Get("Retry-After") != "1" {
				t.Fatalf("search 429: body %q, Retry-After %q; want %q and 1", body, resp.Header.Get("Retry-After"), wantBody)
			}
		} else if body != string(demo.OK) || resp.Header.Get("RateLimit-Policy") == "" {
			t.Fatalf("search %d: body %q, RateLimit-Policy %q", i+1, body, resp.Header.Get("RateLimit-Policy"))
		}
	}
	// Reindex: 2/minute per caller, in one fixed window: not across a minute.
	if now := time.Now(); now.Second() == 59 {
		time.Sleep(time.Until(now.Truncate(time.Minute).Add(time.Minute + 20*time.Millisecond)))
	}
	for i, want := range []int{200, 200, 429} {
		if resp, _ := send("POST", "/api/kb/kb1/reindex", "carol"); resp.StatusCode != want {
			t.Fatalf("reindex %d: status %d, want %d", i+1, resp.StatusCode, want)
		}
	}
	if resp, _ := send("POST", "/api/kb/kb2/docs/d1/reindex", "dave"); resp.StatusCode != 200 {
		t.Fatalf("another caller's reindex: status %d, want 200", resp.StatusCode)
	}
	// Health is exempt.
	for i := range 30 {
		resp, body := send("GET", "/health", "carol")
		if resp.StatusCode != 200 || resp.Header.Get("RateLimit") != "" || body != string(demo.OK) {
			t.Fatalf("health %d: %d, RateLimit %q, body %q", i+1, resp.StatusCode, resp.Header.Get("RateLimit"), body)
		}
	}
}
