package grpcrl_test

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlkit/rlkit/grpcrl"
	"github.com/rlkit/rlkit/outbound"
)

// benchConfig admits every call a benchmark makes (2,000,000,000 an hour),
// so each writes its rate-limit metadata.
const benchConfig = `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say"]
      limit: "2000000000/hour"
`

// BenchmarkUnary compares a unary call to a real gRPC server on a
// 127.0.0.1 listener, over one client connection, without interceptors
// ("bare") and with the unary interceptor ("rlkit": default in-memory
// store, peer-IP key, admitted, ratelimit-policy and ratelimit sent as
// header metadata, which the client reads). The difference is what the
// interceptor costs a call end to end, client and server in one process.
func BenchmarkUnary(b *testing.B) {
	run := func(b *testing.B, sopts ...grpc.ServerOption) {
		conn, _ := serveWith(b, nil, nil, sopts...)
		ctx := context.Background()
		in, out := wrapperspb.String("hi"), new(wrapperspb.StringValue)
		var header metadata.MD
		if err := conn.Invoke(ctx, sayMethod, in, out, grpc.Header(&header)); err != nil {
			b.Fatal(err)
		}
		if len(sopts) > 0 && len(header.Get("ratelimit")) != 1 {
			b.Fatalf("no rate-limit metadata: %v", header)
		}
		b.ReportAllocs()
		for b.Loop() {
			if err := conn.Invoke(ctx, sayMethod, in, out); err != nil {
				b.Fatal(err)
			}
		}
	}
	cfg := config(b, benchConfig)
	b.Run("bare", func(b *testing.B) { run(b) })
	b.Run("rlkit", func(b *testing.B) { run(b, grpc.UnaryInterceptor(grpcrl.New(cfg).Unary())) })
}

// BenchmarkUnaryInterceptor measures the interceptor alone, in process:
// "bare" calls the handler directly, "rlkit" calls it through the unary
// interceptor with a context that carries a peer (192.0.2.1) and a
// transport stream that keeps the header metadata, as grpc's server gives
// it. The difference is the interceptor's cost per call: finding the
// peer's IP, the decision, and the metadata it sets.
func BenchmarkUnaryInterceptor(b *testing.B) {
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}})
	stream := &headerStream{}
	ctx = grpc.NewContextWithServerTransportStream(ctx, stream)
	info := &grpc.UnaryServerInfo{FullMethod: sayMethod}
	in := wrapperspb.String("hi")
	handler := func(context.Context, any) (any, error) { return in, nil }
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := handler(ctx, in); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("rlkit", func(b *testing.B) {
		unary := grpcrl.New(config(b, benchConfig)).Unary()
		if _, err := unary(ctx, in, info, handler); err != nil || len(stream.header.Get("ratelimit")) != 1 {
			b.Fatalf("err %v, metadata %v", err, stream.header)
		}
		b.ReportAllocs()
		for b.Loop() {
			if _, err := unary(ctx, in, info, handler); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// headerStream is a grpc.ServerTransportStream that keeps the last header
// metadata set.
type headerStream struct{ header metadata.MD }

func (s *headerStream) Method() string                  { return sayMethod }
func (s *headerStream) SetHeader(md metadata.MD) error  { s.header = md; return nil }
func (s *headerStream) SendHeader(md metadata.MD) error { s.header = md; return nil }
func (s *headerStream) SetTrailer(metadata.MD) error    { return nil }

// TestUnaryAllocs pins what the unary interceptor allocates for an
// admitted call from a known peer: the metadata's values (one string),
// its entries (one array) and the map (two), nothing for the decision.
func TestUnaryAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector changes allocation counts")
	}
	ctx := peer.NewContext(context.Background(), &peer.Peer{Addr: &net.TCPAddr{IP: net.IPv4(192, 0, 2, 1), Port: 1234}})
	ctx = grpc.NewContextWithServerTransportStream(ctx, &headerStream{})
	info := &grpc.UnaryServerInfo{FullMethod: sayMethod}
	in := wrapperspb.String("hi")
	handler := func(context.Context, any) (any, error) { return in, nil }
	unary := grpcrl.New(config(t, benchConfig)).Unary()
	if n := testing.AllocsPerRun(1000, func() { _, _ = unary(ctx, in, info, handler) }); n > 4 {
		t.Errorf("unary interceptor: %v allocations a call, want at most 4", n)
	}
}

// BenchmarkUnaryClientInterceptor measures the client interceptor alone,
// in process: "bare" calls an invoker that answers at once, "paced" calls
// it through UnaryClientInterceptor on an outbound.Limiter that admits
// every call (2,000,000,000 an hour, default in-memory store, one key):
// the wait, the header and trailer options, reading a Signal (none here)
// and Observe.
func BenchmarkUnaryClientInterceptor(b *testing.B) {
	invoker := func(context.Context, string, any, any, *grpc.ClientConn, ...grpc.CallOption) error { return nil }
	ctx := context.Background()
	in, out := wrapperspb.String("hi"), new(wrapperspb.StringValue)
	key := grpcrl.WithCallKey(func(context.Context, string) string { return "upstream" })
	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := invoker(ctx, sayMethod, in, out, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("paced", func(b *testing.B) {
		cfg, err := outbound.Rate(2_000_000_000, time.Hour, 2_000_000_000)
		if err != nil {
			b.Fatal(err)
		}
		lim, err := outbound.New(cfg, nil)
		if err != nil {
			b.Fatal(err)
		}
		unary := grpcrl.UnaryClientInterceptor(lim, key)
		b.ReportAllocs()
		for b.Loop() {
			if err := unary(ctx, sayMethod, in, out, nil, invoker); err != nil {
				b.Fatal(err)
			}
		}
	})
}
