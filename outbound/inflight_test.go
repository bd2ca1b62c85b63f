package outbound

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// serialConfig lets one request of a key be in flight at once on
// /repos/* (as GitHub asks of its clients), and two on /search.
const serialConfig = `
rate_limit:
  enabled: true
  rules:
    - name: repos
      paths: ["/repos/*"]
      concurrent: 1
    - name: search
      paths: ["/search"]
      limit: "100/minute"
      concurrent: 2
  default: "1000/minute"
  exempt_paths: []
`

// startIn starts a request of l under key in a goroutine, and returns the
// channel its done (or error) comes on.
type started struct {
	done func()
	err  error
	at   time.Time
}

// recv receives from ch within a (fake) hour, failing t otherwise.
func recv(t *testing.T, ch chan started) started {
	t.Helper()
	select {
	case s := <-ch:
		return s
	case <-time.After(time.Hour):
		t.Fatal("still waiting an hour later")
	}
	return started{}
}

func startIn(l *Limiter, ctx context.Context, path, key string) chan started {
	ch := make(chan started, 1)
	go func() {
		done, err := l.Start(ctx, "GET", path, key)
		ch <- started{done, err, time.Now()}
	}()
	return ch
}

// TestStartWaitsForASlot: under concurrent: 2, two requests start at
// once and the third waits; the done of one starts it at that instant;
// a waiting request whose context ends leaves with its error and takes
// no slot; a done called twice frees one slot.
func TestStartWaitsForASlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(mustParse(t, serialConfig), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		d1, err1 := l.Start(ctx, "GET", "/search", "api")
		d2, err2 := l.Start(ctx, "GET", "/search", "api")
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		third := startIn(l, ctx, "/search", "api")
		time.Sleep(time.Hour) // the fake clock: busyRetry passes many times
		synctest.Wait()
		select {
		case s := <-third:
			t.Fatalf("a third request started while two were in flight: %+v", s)
		default:
		}
		// One waiting whose context ends leaves, and takes nothing.
		cctx, cancel := context.WithCancel(ctx)
		fourth := startIn(l, cctx, "/search", "api")
		synctest.Wait()
		cancel()
		if s := recv(t, fourth); !errors.Is(s.err, context.Canceled) || s.done != nil {
			t.Fatalf("a cancelled wait: %+v, want context.Canceled and no done", s)
		}
		at := time.Now()
		d1()
		d1() // once
		s := recv(t, third)
		if s.err != nil || !s.at.Equal(at) {
			t.Fatalf("the third started at +%v (err %v), want the instant a slot came back", s.at.Sub(at), s.err)
		}
		fifth := startIn(l, ctx, "/search", "api")
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case s := <-fifth:
			t.Fatalf("a done called twice freed two slots: %+v", s)
		default:
		}
		d2()
		if s := recv(t, fifth); s.err != nil {
			t.Fatal(s.err)
		}
		// Other keys and rules never wait on these.
		if d, err := l.Start(ctx, "GET", "/search", "other"); err != nil || d == nil {
			t.Fatal(err)
		}
		if d, err := l.Start(ctx, "GET", "/unbounded", "api"); err != nil || d == nil {
			t.Fatal(err)
		}
	})
}

// TestStartSlotsOfAnotherProcess: two Limiters over one store (as two
// processes over Redis): a slot the other gives back is seen within
// busyRetry.
func TestStartSlotsOfAnotherProcess(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		mem := memstore.New()
		cfg := mustParse(t, serialConfig)
		a, errA := New(cfg, mem)
		b, errB := New(cfg, mem)
		if errA != nil || errB != nil {
			t.Fatal(errA, errB)
		}
		ctx := context.Background()
		done, err := a.Start(ctx, "GET", "/repos/x", "gh")
		if err != nil {
			t.Fatal(err)
		}
		waiting := startIn(b, ctx, "/repos/y", "gh")
		time.Sleep(10 * time.Second)
		synctest.Wait()
		at := time.Now()
		done()
		s := recv(t, waiting)
		if s.err != nil || s.at.Sub(at) > busyRetry {
			t.Fatalf("started %v after the other process gave the slot back (err %v), want within %v", s.at.Sub(at), s.err, busyRetry)
		}
	})
}

// TestWaitHoldsUntilObserve: a request Wait starts holds its slot until
// Observe reports an answer under its key.
func TestWaitHoldsUntilObserve(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(mustParse(t, serialConfig), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		if err := l.Wait(ctx, "GET", "/repos/x", "gh"); err != nil {
			t.Fatal(err)
		}
		waiting := startIn(l, ctx, "/repos/x", "gh")
		time.Sleep(time.Minute)
		synctest.Wait()
		select {
		case s := <-waiting:
			t.Fatalf("started while a request Wait started was unobserved: %+v", s)
		default:
		}
		l.Observe(ctx, "gh", Signal{})
		if s := recv(t, waiting); s.err != nil {
			t.Fatal(s.err)
		}
	})
}

// TestNewRefusesStoreWithoutSlots: a configuration with a concurrency
// limit over a store that cannot bound requests in flight is an error of
// New and SetConfig.
func TestNewRefusesStoreWithoutSlots(t *testing.T) {
	type plain struct{ store.Store }
	cfg := mustParse(t, serialConfig)
	_, err := New(cfg, plain{memstore.New()})
	if err == nil || !strings.Contains(err.Error(), `rule "repos" sets concurrent`) {
		t.Fatalf("New: %v", err)
	}
	l, err := New(nil, plain{memstore.New()})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.SetConfig(cfg); err == nil || l.Core().Config() != nil {
		t.Fatalf("SetConfig: %v, config %v", err, l.Core().Config())
	}
}

// heldServer is a RoundTripper whose responses stream their bodies from
// a pipe the test closes, counting the requests in flight (sent, body not
// closed).
type heldServer struct {
	mu       sync.Mutex
	inFlight int
	most     int
	sent     atomic.Int64
	fail     atomic.Bool
}

func (s *heldServer) RoundTrip(r *http.Request) (*http.Response, error) {
	s.sent.Add(1)
	if s.fail.Load() {
		return nil, errors.New("connection refused")
	}
	s.mu.Lock()
	s.inFlight++
	s.most = max(s.most, s.inFlight)
	s.mu.Unlock()
	return &http.Response{StatusCode: 200, Header: http.Header{}, Body: &countedBody{Reader: strings.NewReader("ok"), s: s}, Request: r}, nil
}

type countedBody struct {
	io.Reader
	s    *heldServer
	once sync.Once
}

func (b *countedBody) Close() error {
	b.once.Do(func() {
		b.s.mu.Lock()
		b.s.inFlight--
		b.s.mu.Unlock()
	})
	return nil
}

// TestTransportOneInFlight: through a Transport, a request under
// concurrent: 1 waits until the previous one's response body is closed
// (not only its headers), and one that got no response frees its slot
// at once.
func TestTransportOneInFlight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(mustParse(t, serialConfig), nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := &heldServer{}
		client := &http.Client{Transport: NewTransport(srv, l, WithKey(func(*http.Request) string { return "gh" }))}
		first, err := client.Get("http://api.example/repos/a")
		if err != nil {
			t.Fatal(err)
		}
		second := make(chan *http.Response, 1)
		go func() {
			resp, err := client.Get("http://api.example/repos/b")
			if err != nil {
				t.Error(err)
			}
			second <- resp
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := srv.sent.Load(); n != 1 {
			t.Fatalf("%d requests sent while the first's body was open, want 1", n)
		}
		_, _ = io.ReadAll(first.Body)
		synctest.Wait()
		if n := srv.sent.Load(); n != 1 {
			t.Fatalf("%d requests sent once the first's body was read to its end, unclosed; want 1", n)
		}
		_ = first.Body.Close()
		var resp *http.Response
		select {
		case resp = <-second:
		case <-time.After(time.Hour):
			t.Fatal("the second request never started")
		}
		_ = resp.Body.Close()
		if srv.most != 1 || srv.sent.Load() != 2 {
			t.Fatalf("at most %d in flight, %d sent; want 1, 2", srv.most, srv.sent.Load())
		}
		srv.fail.Store(true)
		for range 3 { // each error frees its slot: none waits
			if _, err := client.Get("http://api.example/repos/c"); err == nil {
				t.Fatal("no error")
			}
		}
		if n := srv.sent.Load(); n != 5 {
			t.Fatalf("%d sent, want 5", n)
		}
	})
}

// TestTransportRetryHoldsItsSlot: a request retried after a 429 starts
// its retry with a slot of its own, held until the retry's body is
// closed (the retry's wait is bounded by the budget; its slot is not).
func TestTransportRetryHoldsItsSlot(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(mustParse(t, serialConfig), nil)
		if err != nil {
			t.Fatal(err)
		}
		srv := &heldServer{}
		var calls atomic.Int64
		throttleFirst := roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if calls.Add(1) == 1 {
				return &http.Response{StatusCode: 429, Header: http.Header{"Retry-After": {"1"}}, Body: http.NoBody, Request: r}, nil
			}
			return srv.RoundTrip(r)
		})
		client := &http.Client{Transport: NewTransport(throttleFirst, l, WithKey(func(*http.Request) string { return "gh" }), WithRetry(2, time.Minute))}
		first, err := client.Get("http://api.example/repos/a")
		if err != nil || first.StatusCode != 200 || calls.Load() != 2 {
			t.Fatalf("retried: %v, %v after %d calls; want 200 after 2", first, err, calls.Load())
		}
		second := make(chan error, 1)
		go func() {
			resp, err := client.Get("http://api.example/repos/b")
			if err == nil {
				_ = resp.Body.Close()
			}
			second <- err
		}()
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d calls while the retry's body was open, want 2", n)
		}
		_ = first.Body.Close()
		select {
		case err := <-second:
			if err != nil || calls.Load() != 3 {
				t.Fatalf("the second: %v after %d calls", err, calls.Load())
			}
		case <-time.After(time.Hour):
			t.Fatal("the second request never started")
		}
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
