package grpcrl_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/grpcrl"
)

// signalling is a memory store that tells each slot given back.
type signalling struct {
	*memstore.Store
	released chan struct{}
}

func (s signalling) Release(ctx context.Context, key string, c *store.Concurrency, lease uint64) error {
	err := s.Store.Release(ctx, key, c, lease)
	s.released <- struct{}{}
	return err
}

// holder is an interceptor inside the limiter's: a call "hold" waits in
// it until its channel (sent on in) is closed; a call "panic" panics.
type holder struct{ in chan chan struct{} }

func (h *holder) unary(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (any, error) {
	switch req.(*wrapperspb.StringValue).GetValue() {
	case "hold":
		release := make(chan struct{})
		h.in <- release
		<-release
	case "panic":
		panic("the handler panics")
	}
	return next(ctx, req)
}

// recovering turns a panic of the handler into Internal, as a recovery
// interceptor does.
func recovering(ctx context.Context, req any, _ *grpc.UnaryServerInfo, next grpc.UnaryHandler) (resp any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = status.Error(codes.Internal, fmt.Sprint(r))
		}
	}()
	return next(ctx, req)
}

// TestConcurrent: under a rule of concurrent 2, two calls held in the
// handler take the slots; the third ends with ResourceExhausted, a
// RetryInfo of one second and retry-after 1 (no rate-limit metadata); a
// slot comes back when a call returns, panics, or its client cancels it
// (while its handler still runs).
func TestConcurrent(t *testing.T) {
	cfg := config(t, `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say"]
      concurrent: 2
`)
	mem := memAt(t, store.NewManualClock(start))
	sig := signalling{mem, make(chan struct{}, 16)}
	lim := core.NewLimiter(cfg, core.WithStore(sig))
	rl := grpcrl.New(lim)
	h := &holder{in: make(chan chan struct{}, 8)}
	conn, _ := serveWith(t, lim, nil, grpc.ChainUnaryInterceptor(recovering, rl.Unary(), h.unary))
	var releases []chan struct{}
	t.Cleanup(func() {
		for _, r := range releases {
			select {
			case <-r:
			default:
				close(r)
			}
		}
	})
	// hold starts a held call under ctx and returns once it is in the
	// handler, with its result channel.
	hold := func(ctx context.Context) (chan struct{}, chan error) {
		done := make(chan error, 1)
		go func() {
			done <- conn.Invoke(ctx, sayMethod, wrapperspb.String("hold"), new(wrapperspb.StringValue))
		}()
		select {
		case r := <-h.in:
			releases = append(releases, r)
			return r, done
		case err := <-done:
			t.Fatalf("a held call ended at once: %v", err)
		case <-time.After(10 * time.Second):
			t.Fatal("a held call never reached the handler")
		}
		return nil, nil
	}
	busy := func(what string) {
		t.Helper()
		checkExhausted(t, what, say(t, conn, "hi"), "say", time.Second, map[string]string{"retry-after": "1"})
	}
	inFlight := func() int64 {
		return mem.InFlight(lim.Key("127.0.0.1"), &store.Concurrency{Name: "say", Limit: 2})
	}
	bg := context.Background()
	r1, d1 := hold(bg)
	r2, d2 := hold(bg)
	busy("third in flight")
	close(r2)
	if err := <-d2; err != nil {
		t.Fatal(err)
	}
	checkOK(t, "after one returned", say(t, conn, "hi"), map[string]string{})
	if r := say(t, conn, "panic"); r.code != codes.Internal {
		t.Fatalf("a handler that panics: %v, want Internal", r.code)
	}
	ctx, cancel := context.WithCancel(bg)
	_, d3 := hold(ctx) // the panic gave its slot back
	busy("third in flight after the panic")
	cancel()
	if err := <-d3; status.Code(err) != codes.Canceled {
		t.Fatalf("a cancelled call: %v", err)
	}
	// Its handler still holds the call; the slot comes back with the
	// cancellation.
	for range 4 { // r2's call, the call after it, the panic's and the cancelled one's
		select {
		case <-sig.released:
		case <-time.After(10 * time.Second):
			t.Fatalf("in flight: %d, and no slot given back", inFlight())
		}
	}
	if n := inFlight(); n != 1 {
		t.Fatalf("in flight once a client cancelled: %d, want 1", n)
	}
	r4, d4 := hold(bg)
	busy("third in flight after the cancellation")
	close(r1)
	close(r4)
	for _, d := range []chan error{d1, d4} {
		if err := <-d; err != nil {
			t.Fatal(err)
		}
	}
	if n := inFlight(); n != 0 {
		t.Fatalf("in flight at the end: %d, want 0", n)
	}
}
