package worksclient_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/rlkit/rlkit/worksclient"
)

// keyRecorder is a RateLimiter that lets everything through and records
// the keys it was asked about.
type keyRecorder struct {
	mu   sync.Mutex
	keys []string
}

func (r *keyRecorder) Wait(_ context.Context, key string) error {
	r.mu.Lock()
	r.keys = append(r.keys, key)
	r.mu.Unlock()
	return nil
}

func (r *keyRecorder) get() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.keys...)
}

func newAPIServer(t *testing.T, h http.HandlerFunc) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv
}

func TestClientDo(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Header.Get("Authorization") != "Bearer tok-1":
			w.WriteHeader(http.StatusUnauthorized)
		case r.Method == "PATCH" && r.URL.Path == "/v1.0/users/kim@example.com":
			var in map[string]string
			if err := json.NewDecoder(r.Body).Decode(&in); err != nil || r.Header.Get("Content-Type") != "application/json" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]string{"userName": in["userName"], "query": r.URL.RawQuery})
		case r.Method == "DELETE":
			w.WriteHeader(http.StatusNoContent)
		default:
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotFound)
			_, _ = io.WriteString(w, `{"code":"NOT_FOUND","description":"no such user"}`)
		}
	})
	c, err := worksclient.NewClient(srv.URL+"/", worksclient.WithHTTPClient(srv.Client()),
		worksclient.WithTokenSource(worksclient.TokenFunc(func(context.Context) (string, error) { return "tok-1", nil })))
	if err != nil {
		t.Fatal(err)
	}
	if c.BaseURL() != srv.URL {
		t.Errorf("BaseURL = %q, want %q", c.BaseURL(), srv.URL)
	}
	var out map[string]string
	if err := c.Do(t.Context(), "PATCH", "/v1.0/users/kim@example.com?x=1", map[string]string{"userName": "kim"}, &out); err != nil {
		t.Fatal(err)
	}
	if out["userName"] != "kim" || out["query"] != "x=1" {
		t.Errorf("decoded %v", out)
	}
	if err := c.Do(t.Context(), "DELETE", "/v1.0/users/kim@example.com", nil, &out); err != nil {
		t.Errorf("204: %v", err)
	}
	err = c.Do(t.Context(), "GET", "/v1.0/users/nobody@example.com", nil, &out)
	apiErr, ok := errors.AsType[*worksclient.APIError](err)
	if !ok || apiErr.Status != 404 || !strings.Contains(string(apiErr.Body), "NOT_FOUND") {
		t.Fatalf("Do = %v, want an *APIError 404 with the body", err)
	}
	if want := `worksclient: GET /v1.0/users/nobody@example.com: 404 Not Found: {"code":"NOT_FOUND","description":"no such user"}`; err.Error() != want {
		t.Errorf("Error() = %q, want %q", err.Error(), want)
	}
	if err := c.Do(t.Context(), "GET", "v1.0/users", nil, nil); err == nil {
		t.Error("a path without a leading '/' was accepted")
	}
	if err := c.Do(t.Context(), "GET", "/x", func() {}, nil); err == nil {
		t.Error("an unencodable body was accepted")
	}

	errTok := errors.New("no token")
	bad, _ := worksclient.NewClient(srv.URL, worksclient.WithHTTPClient(srv.Client()),
		worksclient.WithTokenSource(worksclient.TokenFunc(func(context.Context) (string, error) { return "", errTok })))
	if err := bad.Do(t.Context(), "GET", "/v1.0/users", nil, nil); !errors.Is(err, errTok) {
		t.Errorf("Do with a failing token source = %v, want %v", err, errTok)
	}
}

func TestNewClientBaseURL(t *testing.T) {
	for _, u := range []string{"", "www.worksapis.com", "ftp://x", "https://", "https://x/?q=1", "https://x/#f", "http://[::1"} {
		if _, err := worksclient.NewClient(u); err == nil {
			t.Errorf("NewClient(%q) succeeded, want an error", u)
		}
	}
	c, err := worksclient.NewClient(worksclient.DefaultBaseURL)
	if err != nil || c.BaseURL() != "https://www.worksapis.com" || c.HTTPClient().Timeout != worksclient.DefaultTimeout {
		t.Fatalf("NewClient(DefaultBaseURL) = %v, %v", c, err)
	}
}

// TestClientWithRateLimiter: the copy paces; the original and its
// http.Client stay as they were.
func TestClientWithRateLimiter(t *testing.T) {
	srv := newAPIServer(t, func(w http.ResponseWriter, r *http.Request) {})
	hc := srv.Client()
	base := hc.Transport
	c, err := worksclient.NewClient(srv.URL, worksclient.WithHTTPClient(hc),
		worksclient.WithTransportOptions(worksclient.WithTemplates("/v1.0/users/{userId}")))
	if err != nil {
		t.Fatal(err)
	}
	rec := &keyRecorder{}
	paced := c.WithRateLimiter(rec)
	if paced == c || paced.HTTPClient() == hc {
		t.Fatal("WithRateLimiter did not copy")
	}
	if hc.Transport != base || c.HTTPClient() != hc {
		t.Fatal("WithRateLimiter changed the original client")
	}
	if _, ok := paced.HTTPClient().Transport.(*worksclient.Transport); !ok {
		t.Fatalf("paced transport is %T, want *worksclient.Transport", paced.HTTPClient().Transport)
	}
	if err := c.Do(t.Context(), "GET", "/v1.0/users/alice", nil, nil); err != nil {
		t.Fatal(err)
	}
	if len(rec.get()) != 0 {
		t.Fatal("the original client was paced")
	}
	if err := paced.Do(t.Context(), "GET", "/v1.0/users/alice", nil, nil); err != nil {
		t.Fatal(err)
	}
	if got := rec.get(); len(got) != 1 || got[0] != "GET /v1.0/users/{id}" {
		t.Fatalf("paced keys %q, want [GET /v1.0/users/{id}] (by the template)", got)
	}
	if plain := c.WithRateLimiter(nil); plain.HTTPClient() != hc {
		t.Error("WithRateLimiter(nil) changed the transport")
	}
	// A client over the default transport is paced over it.
	d, _ := worksclient.NewClient(srv.URL)
	if tr, ok := d.WithRateLimiter(rec).HTTPClient().Transport.(*worksclient.Transport); !ok || tr == nil {
		t.Fatal("no Transport over the default transport")
	}
	if d.HTTPClient().Transport != nil {
		t.Fatal("the original default client was changed")
	}
}
