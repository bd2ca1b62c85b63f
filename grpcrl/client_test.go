package grpcrl_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/grpcrl"
	"github.com/rlkit/rlkit/outbound"
)

// recWaiter records what the client interceptors ask of a Waiter that is
// an Observer.
type recWaiter struct {
	mu      sync.Mutex
	events  []string
	waitErr error
	seen    chan struct{} // gets a value on every Observe
}

func newRecWaiter() *recWaiter { return &recWaiter{seen: make(chan struct{}, 100)} }

func (w *recWaiter) add(e string) {
	w.mu.Lock()
	w.events = append(w.events, e)
	w.mu.Unlock()
}

func (w *recWaiter) Wait(ctx context.Context, method, path, key string) error {
	w.add(fmt.Sprintf("wait %s %s %s", method, path, key))
	return w.waitErr
}

func (w *recWaiter) Observe(ctx context.Context, key string, s outbound.Signal) {
	w.add(fmt.Sprintf("observe %s %s", key, signal(s)))
	w.seen <- struct{}{}
}

func (w *recWaiter) got() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.events...)
}

// delayWaiter is a Waiter that is only a Delayer.
type delayWaiter struct {
	mu     sync.Mutex
	events []string
}

func (w *delayWaiter) Wait(context.Context, string, string, string) error { return nil }

func (w *delayWaiter) Delay(_ context.Context, key string, d time.Duration) error {
	w.mu.Lock()
	w.events = append(w.events, fmt.Sprintf("delay %s %v", key, d))
	w.mu.Unlock()
	return nil
}

func signal(s outbound.Signal) string {
	out := fmt.Sprintf("retry=%v", s.RetryAfter)
	if s.HasRemaining {
		out += fmt.Sprintf(" remaining=%d", s.Remaining)
	}
	return out + fmt.Sprintf(" reset=%v", s.Reset)
}

// dialPaced returns a connection to the server conn serves, with the
// client interceptors of w.
func dialPaced(t *testing.T, target string, w outbound.Waiter, opts ...grpcrl.ClientOption) *grpc.ClientConn {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpcrl.UnaryClientInterceptor(w, opts...)),
		grpc.WithChainStreamInterceptor(grpcrl.StreamClientInterceptor(w, opts...)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// TestClientUnarySignals: each call waits first (POST, the full method,
// the connection's target as key), and then hands the Observer what the
// server's metadata said: the remaining count and reset of each allowed
// call, and for the refused one its wait (retry-after and RetryInfo).
func TestClientUnarySignals(t *testing.T) {
	server, _ := serve(t, config(t, testConfig), core.WithStore(memAt(t, store.NewManualClock(start))))
	w := newRecWaiter()
	target := server.Target()
	conn := dialPaced(t, target, w)
	var codesGot []codes.Code
	for range 4 {
		codesGot = append(codesGot, say(t, conn, "hi").code)
	}
	if want := []codes.Code{codes.OK, codes.OK, codes.OK, codes.ResourceExhausted}; !slices.Equal(codesGot, want) {
		t.Fatalf("codes %v, want %v", codesGot, want)
	}
	wait := "wait POST " + sayMethod + " " + target
	obs := func(s string) string { return "observe " + target + " " + s }
	want := []string{
		wait, obs("retry=0s remaining=2 reset=1m0s"),
		wait, obs("retry=0s remaining=1 reset=1m0s"),
		wait, obs("retry=0s remaining=0 reset=1m0s"),
		wait, obs("retry=1m0s remaining=0 reset=1m0s"),
	}
	if got := w.got(); !slices.Equal(got, want) {
		t.Errorf("waiter saw\n %q\nwant\n %q", got, want)
	}
}

// TestClientRetryInfo: a RetryInfo longer than retry-after wins (a server
// that is not rlkit may send only RetryInfo, with sub-second waits).
func TestClientRetryInfo(t *testing.T) {
	exhausted := func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		st, _ := status.New(codes.ResourceExhausted, "slow down").WithDetails(retryInfo(1500 * time.Millisecond))
		return st.Err()
	}
	w := newRecWaiter()
	conn, err := grpc.NewClient("passthrough:///unused", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpcrl.UnaryClientInterceptor(w, grpcrl.WithCallKey(func(_ context.Context, m string) string { return "k" + m })), exhausted))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	err = conn.Invoke(context.Background(), sayMethod, wrapperspb.String("x"), new(wrapperspb.StringValue))
	if status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("got %v", err)
	}
	want := []string{"wait POST " + sayMethod + " k" + sayMethod, "observe k" + sayMethod + " retry=1.5s reset=0s"}
	if got := w.got(); !slices.Equal(got, want) {
		t.Errorf("waiter saw %q, want %q", got, want)
	}
}

// TestClientDelayer: a Waiter that is only a Delayer is held back by the
// wait a refused call was told, and by nothing else.
func TestClientDelayer(t *testing.T) {
	server, _ := serve(t, config(t, testConfig), core.WithStore(memAt(t, store.NewManualClock(start))))
	w := &delayWaiter{}
	conn := dialPaced(t, server.Target(), w)
	for range 4 {
		say(t, conn, "hi")
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if want := []string{"delay " + server.Target() + " 1m0s"}; !slices.Equal(w.events, want) {
		t.Errorf("delays %q, want %q", w.events, want)
	}
}

// TestClientWaitFails: a call whose wait fails is never sent; a context
// that ends while waiting gives its gRPC status.
func TestClientWaitFails(t *testing.T) {
	server, e := serve(t, config(t, testConfig))
	cfg, err := outbound.Rate(1, time.Hour, 0)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := outbound.New(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := dialPaced(t, server.Target(), lim)
	if r := say(t, conn, "first"); r.code != codes.OK {
		t.Fatalf("first call: %v", r.code)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	err = conn.Invoke(ctx, sayMethod, wrapperspb.String("second"), new(wrapperspb.StringValue))
	if status.Code(err) != codes.DeadlineExceeded {
		t.Errorf("second call: %v, want DeadlineExceeded while waiting", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	cancel()
	if _, err := conn.NewStream(ctx, &echoDesc.Streams[0], watchMethod); status.Code(err) != codes.Canceled {
		t.Errorf("stream: %v, want Canceled", err)
	}
	// A Waiter's own error comes back as it is.
	boom := errors.New("boom")
	w := newRecWaiter()
	w.waitErr = boom
	if err := dialPaced(t, server.Target(), w).Invoke(context.Background(), sayMethod, wrapperspb.String("x"), new(wrapperspb.StringValue)); !errors.Is(err, boom) {
		t.Errorf("got %v, want the Waiter's error", err)
	}
	if got := e.served.Load(); got != 1 {
		t.Errorf("served %d calls, want 1", got)
	}
}

// TestClientStream: a stream waits once and is observed once, when its
// header arrives (before its messages), however many messages it
// carries; a refused stream reports its wait; a stream whose context ends
// before anything was read is reported with nothing said.
func TestClientStream(t *testing.T) {
	server, _ := serve(t, config(t, testConfig), core.WithStore(memAt(t, store.NewManualClock(start))))
	w := newRecWaiter()
	target := server.Target()
	conn := dialPaced(t, target, w)
	for range 3 {
		watch(t, conn, []string{"a", "b", "c"})
	}
	wait := "wait POST " + watchMethod + " " + target
	obs := func(s string) string { return "observe " + target + " " + s }
	want := []string{
		wait, obs("retry=0s remaining=1 reset=1m0s"),
		wait, obs("retry=0s remaining=0 reset=1m0s"),
		wait, obs("retry=1m0s remaining=0 reset=1m0s"),
	}
	if got := w.got(); !slices.Equal(got, want) {
		t.Errorf("waiter saw\n %q\nwant\n %q", got, want)
	}

	// Abandoned: opened, never read, its context cancelled.
	w2 := newRecWaiter()
	conn2 := dialPaced(t, target, w2)
	ctx, cancel := context.WithCancel(context.Background())
	if _, err := conn2.NewStream(ctx, &echoDesc.Streams[0], watchMethod); err != nil {
		t.Fatal(err)
	}
	cancel()
	select {
	case <-w2.seen:
	case <-time.After(10 * time.Second):
		t.Fatal("an abandoned stream was never observed")
	}
	if got, want := w2.got(), []string{wait, obs("retry=0s reset=0s")}; !slices.Equal(got, want) {
		t.Errorf("abandoned stream: waiter saw %q, want %q", got, want)
	}
}

// TestClientNilWaiter: without a Waiter the interceptors pass calls on.
func TestClientNilWaiter(t *testing.T) {
	server, e := serve(t, nil)
	conn := dialPaced(t, server.Target(), nil)
	if r := say(t, conn, "hi"); r.code != codes.OK {
		t.Fatal(r.code)
	}
	if r := watch(t, conn, []string{"a"}); r.code != codes.OK {
		t.Fatal(r.code)
	}
	if e.served.Load() != 2 {
		t.Errorf("served %d", e.served.Load())
	}
}

// TestPacedClientNoResourceExhausted: end to end, a client paced by an
// outbound.Limiter whose own limit is far above the server's (1000 a
// second) reads the server's metadata and waits for the window's reset
// instead of being refused: 12 calls against 4 a second all pass, in at
// least a second. The same calls without the interceptor are refused
// (the control). Real time: one to three seconds of waiting.
func TestPacedClientNoResourceExhausted(t *testing.T) {
	cfg := config(t, `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say"]
      limit: "4/second"
`)
	server, e := serve(t, cfg)
	refused := 0
	for range 12 {
		if say(t, server, "hi").code == codes.ResourceExhausted {
			refused++
		}
	}
	if refused == 0 {
		t.Fatal("control: an unpaced client was never refused")
	}
	server, e = serve(t, cfg)
	rate, err := outbound.Rate(1000, time.Second, 1000)
	if err != nil {
		t.Fatal(err)
	}
	lim, err := outbound.New(rate, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn := dialPaced(t, server.Target(), lim)
	began := time.Now()
	for i := range 12 {
		if r := say(t, conn, "hi"); r.code != codes.OK {
			t.Fatalf("paced call %d: %v %q %v", i+1, r.code, r.msg, limitMD(r.header))
		}
	}
	if got := e.served.Load(); got != 12 {
		t.Errorf("served %d, want 12", got)
	}
	// Three windows of a second: the client waited at least the whole
	// second between the second's start and the third's, and (a bound for
	// a loaded machine) not much more than the three.
	if took := time.Since(began); took < time.Second || took > 20*time.Second {
		t.Errorf("12 paced calls took %v, want from 1s to 20s", took)
	}
}

func retryInfo(d time.Duration) *errdetails.RetryInfo {
	return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
}

// TestClientTrailers: a server that is not rlkit may say its limit in the
// trailer of a trailers-only answer (a proxy in front of it, say): the
// client reads it there as well.
func TestClientTrailers(t *testing.T) {
	trailing := func(ctx context.Context, _ any, _ *grpc.UnaryServerInfo, _ grpc.UnaryHandler) (any, error) {
		_ = grpc.SetTrailer(ctx, metadata.Pairs("x-ratelimit-remaining", "0", "x-ratelimit-reset", "30"))
		return nil, status.Error(codes.Unavailable, "busy")
	}
	server, _ := serveWith(t, nil, nil, grpc.UnaryInterceptor(trailing))
	w := newRecWaiter()
	conn := dialPaced(t, server.Target(), w)
	if r := say(t, conn, "hi"); r.code != codes.Unavailable || len(r.header) != 0 || get(t, r.trailer, "x-ratelimit-reset") != "30" {
		t.Fatalf("got %v header %v trailer %v, want Unavailable with the limit in the trailer only", r.code, r.header, r.trailer)
	}
	want := []string{"wait POST " + sayMethod + " " + server.Target(), "observe " + server.Target() + " retry=0s remaining=0 reset=30s"}
	if got := w.got(); !slices.Equal(got, want) {
		t.Errorf("waiter saw %q, want %q", got, want)
	}
}

// TestClientNoAnswer: a call that got no answer (nothing listens) is
// still reported once, with nothing said, so that the Observer knows it
// is no longer in flight.
func TestClientNoAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	target := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	w := newRecWaiter()
	conn := dialPaced(t, target, w)
	if r := say(t, conn, "hi"); r.code != codes.Unavailable {
		t.Fatalf("got %v, want Unavailable", r.code)
	}
	want := []string{"wait POST " + sayMethod + " " + target, "observe " + target + " retry=0s reset=0s"}
	if got := w.got(); !slices.Equal(got, want) {
		t.Errorf("waiter saw %q, want %q", got, want)
	}
}
