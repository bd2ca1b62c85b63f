package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/grpcrl"
	"github.com/rlkit/rlkit/outbound"
)

// serverYAML is the server's configuration: the rule format of the HTTP
// adapters, with full method names as paths.
const serverYAML = `
rate_limit:
  enabled: true
  exempt_paths: ["/grpc.health.v1.Health/Check"]
  rules:
    - name: hello
      paths: ["/demo.Greeter/Hello"]
      limit: "5/second"
    - name: chat
      paths: ["/demo.Greeter/Chat"]
      limit: "2/minute"
  default: "60/minute"
`

const (
	helloMethod = "/demo.Greeter/Hello"
	chatMethod  = "/demo.Greeter/Chat"
)

func main() { demo.Command(run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("grpc", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serve := fs.String("serve", "", "only serve, on this address (host:port), until interrupted")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return demo.ErrUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintln(stderr, "grpc: no arguments expected")
		fs.Usage()
		return demo.ErrUsage
	}
	addr := *serve
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	srv, ln, err := startServer(addr)
	if err != nil {
		return err
	}
	defer srv.Stop()
	fmt.Fprintf(stdout, "gRPC server on %s: %s 5 a second, %s 2 streams a minute, per x-api-key\n", ln.Addr(), helloMethod, chatMethod)
	if *serve != "" {
		<-ctx.Done()
		srv.GracefulStop()
		return nil
	}
	r, err := runDemo(ctx, ln.Addr().String(), stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "unpaced client: %d OK, %d ResourceExhausted; paced client: %d OK, %d ResourceExhausted in %.1f s; chat: %d streams opened, %d refused\n",
		r.unpacedOK, r.unpacedRefused, r.pacedOK, r.pacedRefused, r.pacedTime.Seconds(), r.chatOK, r.chatRefused)
	return nil
}

// startServer listens on addr and serves demo.Greeter behind grpcrl.
func startServer(addr string) (*grpc.Server, net.Listener, error) {
	cfg, err := core.ParseConfig([]byte(serverYAML), "server.yaml")
	if err != nil {
		return nil, nil, err
	}
	rl := grpcrl.New(cfg, grpcrl.WithKeyFunc(grpcrl.MetadataKey("x-api-key"))) // else the peer's IP
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(rl.Unary()), grpc.ChainStreamInterceptor(rl.Stream()))
	srv.RegisterService(&greeterDesc, greeter{})
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, err
	}
	go srv.Serve(ln)
	return srv, ln, nil
}

// greeter is the service: Hello answers "hello, <name>"; Chat echoes.
type greeter struct{}

var greeterDesc = grpc.ServiceDesc{
	ServiceName: "demo.Greeter",
	HandlerType: (*any)(nil),
	Methods: []grpc.MethodDesc{{
		MethodName: "Hello",
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(_ context.Context, req any) (any, error) {
				return wrapperspb.String("hello, " + req.(*wrapperspb.StringValue).GetValue()), nil
			}
			if ic == nil {
				return h(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: helloMethod}, h)
		},
	}},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Chat",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(_ any, ss grpc.ServerStream) error {
			for {
				in := new(wrapperspb.StringValue)
				if err := ss.RecvMsg(in); err != nil {
					if errors.Is(err, io.EOF) {
						return nil
					}
					return err
				}
				if err := ss.SendMsg(in); err != nil {
					return err
				}
			}
		},
	}},
}

// result is what the clients saw.
type result struct {
	unpacedOK, unpacedRefused int
	pacedOK, pacedRefused     int
	pacedTime                 time.Duration
	chatOK, chatRefused       int
}

func runDemo(ctx context.Context, addr string, stdout io.Writer) (*result, error) {
	var r result

	// An unpaced client: 8 calls at once, at the start of a second, so that
	// they fall in one of the fixed window's one-second windows.
	if err := sleepUntilNextSecond(ctx); err != nil {
		return nil, err
	}
	plain, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	teamA := metadata.AppendToOutgoingContext(ctx, "x-api-key", "team-a")
	type answer struct {
		header metadata.MD
		err    error
	}
	answers := make(chan answer, 8)
	for i := range 8 {
		go func() {
			var header metadata.MD
			out := new(wrapperspb.StringValue)
			err := plain.Invoke(teamA, helloMethod, wrapperspb.String(fmt.Sprint("a", i)), out, grpc.Header(&header))
			answers <- answer{header, err}
		}()
	}
	printed := false
	for range 8 {
		a := <-answers
		st := status.Convert(a.err)
		switch st.Code() {
		case codes.OK:
			r.unpacedOK++
		case codes.ResourceExhausted:
			r.unpacedRefused++
			if !printed {
				printed = true
				var wait time.Duration
				for _, d := range st.Details() {
					if ri, ok := d.(*errdetails.RetryInfo); ok {
						wait = ri.GetRetryDelay().AsDuration()
					}
				}
				fmt.Fprintf(stdout, "team-a, unpaced: %s %q; RetryInfo %v; ratelimit %q, retry-after %q\n",
					st.Code(), st.Message(), wait.Round(time.Millisecond), a.header.Get("ratelimit"), a.header.Get("retry-after"))
			}
		default:
			return nil, fmt.Errorf("unpaced call: %w", a.err)
		}
	}

	// A client paced by the server's answers: its own limit (1,000 a
	// second) never binds; the ratelimit metadata does.
	cfg, err := outbound.Rate(1000, time.Second, 1000)
	if err != nil {
		return nil, err
	}
	lim, err := outbound.New(cfg, nil)
	if err != nil {
		return nil, err
	}
	paced, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithChainUnaryInterceptor(grpcrl.UnaryClientInterceptor(lim)),
		grpc.WithChainStreamInterceptor(grpcrl.StreamClientInterceptor(lim)))
	if err != nil {
		return nil, err
	}
	defer paced.Close()
	teamB := metadata.AppendToOutgoingContext(ctx, "x-api-key", "team-b")
	start := time.Now()
	for i := range 12 {
		out := new(wrapperspb.StringValue)
		err := paced.Invoke(teamB, helloMethod, wrapperspb.String(fmt.Sprint("b", i)), out)
		switch status.Code(err) {
		case codes.OK:
			r.pacedOK++
		case codes.ResourceExhausted:
			r.pacedRefused++
		default:
			return nil, fmt.Errorf("paced call: %w", err)
		}
	}
	r.pacedTime = time.Since(start)
	fmt.Fprintf(stdout, "team-b, paced by the server's metadata: %d OK, %d ResourceExhausted\n", r.pacedOK, r.pacedRefused)

	// Streams count once each, when they open: the third is refused.
	for i := range 3 {
		cs, err := plain.NewStream(teamA, &greeterDesc.Streams[0], chatMethod)
		if err == nil {
			err = cs.SendMsg(wrapperspb.String(fmt.Sprint("message ", i)))
			if err == nil {
				err = cs.CloseSend()
			}
			if err == nil {
				out := new(wrapperspb.StringValue)
				if err = cs.RecvMsg(out); err == nil {
					err = cs.RecvMsg(out) // io.EOF at the end of the stream
				}
			}
		}
		switch code := status.Code(err); {
		case errors.Is(err, io.EOF):
			r.chatOK++
		case code == codes.ResourceExhausted:
			r.chatRefused++
		default:
			return nil, fmt.Errorf("chat stream: %w", err)
		}
	}
	return &r, nil
}

// sleepUntilNextSecond waits until 10 ms past the next whole second.
func sleepUntilNextSecond(ctx context.Context) error {
	now := time.Now()
	t := time.NewTimer(now.Truncate(time.Second).Add(time.Second + 10*time.Millisecond).Sub(now))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
