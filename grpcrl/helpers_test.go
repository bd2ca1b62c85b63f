package grpcrl_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/grpcrl"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The test service, written by hand (no protoc): test.Echo with the unary
// Say, Other and Ping and the bidirectional stream Watch, all on
// wrapperspb.StringValue.
const (
	sayMethod   = "/test.Echo/Say"
	watchMethod = "/test.Echo/Watch"
)

// echo is the test service. A request "code:N" makes Say (and Watch,
// after its first answer) end with status code N; "hold" makes Watch
// answer once and then wait for the client to go.
type echo struct {
	served atomic.Int64
	mu     sync.Mutex
	seen   []*core.Decision // DecisionOf's answer for each call served
	ids    []string         // Identity's answer for each call served
	lim    *core.Limiter    // the limiter the interceptors decide with
	opts   []grpcrl.Option  // the options the interceptors were built with
}

func (e *echo) record(ctx context.Context, method string) {
	e.served.Add(1)
	d, _ := grpcrl.DecisionOf(ctx)
	id, err := grpcrl.Identity(ctx, method, e.lim, e.opts...)
	if err != nil {
		id = "error: " + err.Error()
	}
	e.mu.Lock()
	e.seen = append(e.seen, d)
	e.ids = append(e.ids, id)
	e.mu.Unlock()
}

func (e *echo) identities() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.ids...)
}

// answer is what a request asks for: its echo, or a status error.
func answer(in string) error {
	if c, ok := strings.CutPrefix(in, "code:"); ok {
		n, _ := strconv.Atoi(c)
		return status.Error(codes.Code(n), "asked for")
	}
	return nil
}

// unaryMethod is the echo service's unary method name: it answers its
// request (see answer).
func unaryMethod(name string) grpc.MethodDesc {
	full := "/test.Echo/" + name
	return grpc.MethodDesc{
		MethodName: name,
		Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
			in := new(wrapperspb.StringValue)
			if err := dec(in); err != nil {
				return nil, err
			}
			h := func(ctx context.Context, req any) (any, error) {
				srv.(*echo).record(ctx, full)
				v := req.(*wrapperspb.StringValue).GetValue()
				if err := answer(v); err != nil {
					return nil, err
				}
				return wrapperspb.String(v), nil
			}
			if ic == nil {
				return h(ctx, in)
			}
			return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: full}, h)
		},
	}
}

var echoDesc = grpc.ServiceDesc{
	ServiceName: "test.Echo",
	HandlerType: (*any)(nil),
	Methods:     []grpc.MethodDesc{unaryMethod("Say"), unaryMethod("Other"), unaryMethod("Ping")},
	Streams: []grpc.StreamDesc{{
		StreamName:    "Watch",
		ServerStreams: true,
		ClientStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			srv.(*echo).record(ss.Context(), watchMethod)
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
				if err := answer(in.GetValue()); err != nil {
					return err
				}
			}
		},
	}},
}

// interceptors returns the interceptors over limits that opts say: each
// a core.Option of the limiter (which limits must then be a *core.Config,
// or nil) or a grpcrl.Option; and the limiter and interceptor options.
func interceptors(t testing.TB, limits core.Limits, opts []any) (*grpcrl.Interceptor, *core.Limiter, []grpcrl.Option) {
	t.Helper()
	var lopts []core.Option
	var gopts []grpcrl.Option
	for _, o := range opts {
		switch o := o.(type) {
		case core.Option:
			lopts = append(lopts, o)
		case grpcrl.Option:
			gopts = append(gopts, o)
		default:
			t.Fatalf("option %T is neither a core.Option nor a grpcrl.Option", o)
		}
	}
	lim, ok := limits.(*core.Limiter)
	switch {
	case ok && len(lopts) > 0:
		t.Fatal("a limiter and options of a limiter")
	case !ok:
		cfg, _ := limits.(*core.Config)
		lim = core.NewLimiter(cfg, lopts...)
	}
	return grpcrl.New(lim, gopts...), lim, gopts
}

// serve starts a gRPC server on a 127.0.0.1 port with the interceptors
// over limits that opts say (see interceptors) around the echo service,
// and returns a client connection to it and the service. Both are closed
// at t.Cleanup.
func serve(t testing.TB, limits core.Limits, opts ...any) (*grpc.ClientConn, *echo) {
	t.Helper()
	rl, lim, gopts := interceptors(t, limits, opts)
	return serveWith(t, lim, gopts, grpc.ChainUnaryInterceptor(rl.Unary()), grpc.ChainStreamInterceptor(rl.Stream()))
}

// serveWith starts the echo service with the given server options; lim
// and opts are the interceptors' (for Identity).
func serveWith(t testing.TB, lim *core.Limiter, opts []grpcrl.Option, sopts ...grpc.ServerOption) (*grpc.ClientConn, *echo) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	e := &echo{lim: lim, opts: opts}
	s := grpc.NewServer(sopts...)
	s.RegisterService(&echoDesc, e)
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = conn.Close()
		s.Stop()
		<-done
	})
	return conn, e
}

// result is what one call got: its status, header and trailer metadata,
// and its RetryInfo detail's delay (-1 without one).
type result struct {
	code    codes.Code
	msg     string
	header  metadata.MD
	trailer metadata.MD
	retry   time.Duration
}

func resultOf(err error, header, trailer metadata.MD) result {
	st := status.Convert(err)
	r := result{code: st.Code(), msg: st.Message(), header: header, trailer: trailer, retry: -1}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			r.retry = ri.GetRetryDelay().AsDuration()
		}
	}
	return r
}

// say makes one Say call with the metadata pairs md (key, value...).
func say(t testing.TB, conn *grpc.ClientConn, in string, md ...string) result {
	t.Helper()
	return invoke(t, conn, sayMethod, in, md...)
}

// invoke makes one call of a unary method with the metadata pairs md.
func invoke(t testing.TB, conn *grpc.ClientConn, method, in string, md ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	var header, trailer metadata.MD
	out := new(wrapperspb.StringValue)
	err := conn.Invoke(ctx, method, wrapperspb.String(in), out, grpc.Header(&header), grpc.Trailer(&trailer))
	if err == nil && out.GetValue() != in {
		t.Fatalf("%s(%q) answered %q", method, in, out.GetValue())
	}
	return resultOf(err, header, trailer)
}

// watch opens a Watch stream with the metadata pairs md, sends each of
// msgs and reads its echo, closes its side and reads to the end.
func watch(t testing.TB, conn *grpc.ClientConn, msgs []string, md ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ctx = metadata.AppendToOutgoingContext(ctx, md...)
	cs, err := conn.NewStream(ctx, &echoDesc.Streams[0], watchMethod)
	if err != nil {
		return resultOf(err, nil, nil)
	}
	var end error
	for _, m := range msgs {
		if err := cs.SendMsg(wrapperspb.String(m)); err != nil {
			break // the status comes from RecvMsg
		}
		out := new(wrapperspb.StringValue)
		if end = cs.RecvMsg(out); end != nil {
			break
		}
		if out.GetValue() != m {
			t.Fatalf("Watch echoed %q, want %q", out.GetValue(), m)
		}
	}
	if end == nil {
		_ = cs.CloseSend()
		end = cs.RecvMsg(new(wrapperspb.StringValue))
		if errors.Is(end, io.EOF) {
			end = nil
		}
	}
	header, _ := cs.Header()
	return resultOf(end, header, cs.Trailer())
}

// get is the one value of md[key], "" when absent; it fails t when there
// are several.
func get(t testing.TB, md metadata.MD, key string) string {
	t.Helper()
	v := md.Get(key)
	switch len(v) {
	case 0:
		return ""
	case 1:
		return v[0]
	}
	t.Fatalf("metadata %s has %d values: %q", key, len(v), v)
	return ""
}

// limitKeys are the metadata keys the interceptors may write.
var limitKeys = []string{"ratelimit-policy", "ratelimit", "x-ratelimit-limit", "x-ratelimit-remaining", "x-ratelimit-reset", "retry-after"}

// limitMD is the rate-limit entries of md, as key=value lines sorted by key.
func limitMD(md metadata.MD) map[string]string {
	out := map[string]string{}
	for _, k := range limitKeys {
		if v := md.Get(k); len(v) > 0 {
			out[k] = strings.Join(v, "|")
		}
	}
	return out
}

// config parses yaml.
func config(t testing.TB, yaml string) *core.Config {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// start is the instant the tests' clocks start at: the start of a minute.
var start = time.Unix(1_700_000_040, 0)

// memAt returns a memory store reading clock, closed at t.Cleanup.
func memAt(t testing.TB, clock store.Clock) *memstore.Store {
	mem := memstore.New(memstore.WithClock(clock))
	t.Cleanup(func() { _ = mem.Close() })
	return mem
}

// spyStore counts the calls to a store, records the keys Take is asked
// for, and fails every call while fail is set.
type spyStore struct {
	store.Store
	calls atomic.Int64
	fail  atomic.Bool
	mu    sync.Mutex
	taken []string // "key rule cost" of each Take
}

// takes returns what Take was asked, in order.
func (s *spyStore) takes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.taken...)
}

var errDown = errors.New("store down")

func (s *spyStore) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	s.calls.Add(1)
	s.mu.Lock()
	s.taken = append(s.taken, key+" "+p.Name+" "+strconv.FormatInt(cost, 10))
	s.mu.Unlock()
	if s.fail.Load() {
		return store.Result{}, errDown
	}
	return s.Store.Take(ctx, key, p, cost)
}

func (s *spyStore) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	s.calls.Add(1)
	if s.fail.Load() {
		return store.Result{}, errDown
	}
	return s.Store.Peek(ctx, key, p, cost)
}

// discard is a logger that keeps nothing.
var discard = slog.New(slog.DiscardHandler)

// verify is the tests' token check: "good-<name>" is the subject <name>,
// anything else is forged.
func verify(_ context.Context, tok string) (string, error) {
	if name, ok := strings.CutPrefix(tok, "good-"); ok {
		return name, nil
	}
	return "", errors.New("bad signature")
}

// bearer is the metadata of a bearer token.
func bearer(tok string) []string { return []string{"authorization", "Bearer " + tok} }

// apiKey is the metadata of an API key.
func apiKey(k string) []string { return []string{"x-api-key", k} }

// keys is the documented identity order: bearer subject, API key, peer IP.
var keys = grpcrl.WithKeyFunc(grpcrl.FirstKey(grpcrl.JWTSubject(verify), grpcrl.MetadataKey("x-api-key")))
