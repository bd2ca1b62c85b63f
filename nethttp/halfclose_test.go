package nethttp_test

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/adaptertest"
	"github.com/rlkit/rlkit/nethttp"
)

// waitCancelStore is a memstore behind a store that, like a remote one
// whose call takes a while, fails a call whose context is cancelled within
// 200ms with the context's error, and answers the others after 200ms.
type waitCancelStore struct{ *memstore.Store }

func (s waitCancelStore) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	select {
	case <-ctx.Done():
		if errors.Is(ctx.Err(), context.Canceled) {
			return store.Result{}, ctx.Err()
		}
	case <-time.After(200 * time.Millisecond):
	}
	return s.Store.Take(ctx, key, p, cost)
}

// TestHalfClosedClient: net/http cancels a request's context when the
// client closes its write side, though the client still reads the answer.
// Such a request is counted like any other: it cannot make the store fail
// and pass uncounted.
func TestHalfClosedClient(t *testing.T) {
	cfg := adaptertest.Config(t, adaptertest.ExampleConfig) // reindex: 2/minute
	srv := httptest.NewServer(nethttp.New(
		core.NewLimiter(cfg, core.WithStore(waitCancelStore{memstore.New(memstore.WithClock(store.NewManualClock(time.Unix(1_700_000_040, 0))))})),
		nethttp.WithKeyFunc(nethttp.HeaderKey("X-User")),
	)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	defer srv.Close()
	for i, want := range []int{200, 200, 429, 429} {
		conn, err := net.Dial("tcp", srv.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := conn.Write([]byte("POST /api/kb/k1/reindex HTTP/1.1\r\nHost: x\r\nX-User: alice\r\nContent-Length: 0\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if err := conn.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		resp.Body.Close()
		conn.Close()
		if resp.StatusCode != want || resp.Header.Get("RateLimit-Policy") == "" {
			t.Errorf("request %d from a half-closed client: %d with RateLimit-Policy %q, want %d with the reindex policy", i, resp.StatusCode, resp.Header.Get("RateLimit-Policy"), want)
		}
	}
}
