package grpcrl_test

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/grpcrl"
	"github.com/rlkit/rlkit/outbound"
)

// hostileYAML limits every method to 2 calls a minute per caller, exempts
// the health check, and gives the methods of test.Proxy (served by an
// UnknownServiceHandler) the rule say too.
const hostileYAML = `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say", "/test.Proxy/*"]
      limit: "2/minute"
  default: "2/minute"
  exempt_paths: ["/grpc.health.v1.Health/Check"]
`

// TestHostileIdentitySpellings: six calls of one caller, each spelling its
// identity another way, under a limit of 2 a minute. Where the spelling
// holds, exactly 2 pass and every served call counts under the one
// identity; an unchecked API key (MetadataKey) gives each new value a
// fresh quota, as documented, so all 6 pass.
func TestHostileIdentitySpellings(t *testing.T) {
	alice := "sub:alice"
	cases := []struct {
		name string
		md   func(i int) []string
		ok   int
		id   func(i int) string // the identity call i is served under
	}{
		{"same bearer", func(int) []string { return bearer("good-alice") }, 2, nil},
		{"bearer in any case", func(i int) []string {
			return []string{"authorization", []string{"Bearer ", "bearer ", "BEARER ", "bEaReR ", "BeArEr ", "bearer "}[i] + "good-alice"}
		}, 2, nil},
		{"bearer with extra spaces", func(i int) []string {
			return []string{"authorization", "Bearer" + strings.Repeat(" ", i+1) + "good-alice" + strings.Repeat(" ", i)}
		}, 2, nil},
		{"garbage authorization before the real one", func(i int) []string {
			return []string{"authorization", fmt.Sprintf("Basic x%d", i), "authorization", "Bearer good-alice"}
		}, 2, func(int) string { return "127.0.0.1" }},
		{"empty api key: the peer's IP", func(int) []string { return apiKey("") }, 2, func(int) string { return "127.0.0.1" }},
		{"api key as -bin: not read", func(i int) []string { return []string{"x-api-key-bin", fmt.Sprintf("b%d", i)} }, 2, func(int) string { return "127.0.0.1" }},
		{"x-forwarded-for from an untrusted peer", func(i int) []string {
			return []string{"x-forwarded-for", fmt.Sprintf("203.0.113.%d", i)}
		}, 2, func(int) string { return "127.0.0.1" }},
		{"x-real-ip from an untrusted peer", func(i int) []string { return []string{"x-real-ip", fmt.Sprintf("203.0.113.%d", i)} }, 2, func(int) string { return "127.0.0.1" }},
		{"forwarded from an untrusted peer", func(i int) []string { return []string{"forwarded", fmt.Sprintf("for=203.0.113.%d", i)} }, 2, func(int) string { return "127.0.0.1" }},
		// Documented: an unchecked key's every new value is a new caller.
		{"unchecked api key, a new value each call", func(i int) []string { return apiKey(fmt.Sprintf("k%d", i)) }, 6,
			func(i int) string { return adapter.HeaderIdentity("X-Api-Key", fmt.Sprintf("k%d", i)) }},
		{"unchecked api key, padded", func(i int) []string { return apiKey("secret" + strings.Repeat(" ", i)) }, 6, nil},
		{"unchecked api key, a new first value", func(i int) []string {
			return []string{"x-api-key", fmt.Sprintf("v%d", i), "x-api-key", "secret"}
		}, 6, func(i int) string { return adapter.HeaderIdentity("X-Api-Key", fmt.Sprintf("v%d", i)) }},
		{"unchecked api key, 6,000 bytes", func(i int) []string { return apiKey(strings.Repeat("A", 6000) + fmt.Sprint(i)) }, 6, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			conn, e := serve(t, config(t, hostileYAML), core.WithStore(memAt(t, store.NewManualClock(start))), keys)
			ok := 0
			var want []string
			for i := range 6 {
				r := say(t, conn, "hi", tc.md(i)...)
				switch r.code {
				case codes.OK:
					ok++
					if tc.id != nil {
						want = append(want, tc.id(i))
					}
				case codes.ResourceExhausted:
				default:
					t.Fatalf("call %d: %v %q", i, r.code, r.msg)
				}
			}
			if ok != tc.ok {
				t.Errorf("%d of 6 calls passed, want %d", ok, tc.ok)
			}
			got := e.identities()
			if tc.id == nil {
				if tc.ok == 2 {
					want = []string{alice, alice}
				} else {
					want = slices.Compact(slices.Clone(got)) // distinct, checked below
					if len(want) != 6 {
						t.Errorf("identities %q, want 6 distinct", got)
					}
					return
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("identities %q, want %q", got, want)
			}
		})
	}
}

// proxyServer starts a server whose only handler is an
// UnknownServiceHandler (a proxy: it echoes one message) under the stream
// interceptor New(cfg, opts...) builds, and returns a connection to it,
// the handler's count of calls served, and the rules the limiter's
// decisions fell under ("" for an exempt one), in order.
func proxyServer(t *testing.T, cfg *core.Config, opts ...any) (*grpc.ClientConn, *atomic.Int64, func() []string) {
	t.Helper()
	var mu sync.Mutex
	var rules []string
	opts = append(opts, core.WithObserver(func(e core.Event) {
		mu.Lock()
		rules = append(rules, e.Rule)
		mu.Unlock()
	}))
	rl, _, _ := interceptors(t, cfg, opts)
	served := new(atomic.Int64)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.ChainStreamInterceptor(rl.Stream()),
		grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
			served.Add(1)
			in := new(wrapperspb.StringValue)
			if err := ss.RecvMsg(in); err != nil {
				return err
			}
			return ss.SendMsg(in)
		}))
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(); s.Stop(); <-done })
	return conn, served, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(rules)
	}
}

// TestHostileUnknownServicePaths: under an UnknownServiceHandler the full
// method is the client's :path as it wrote it, and grpc-go refuses none of
// these spellings. Each, called three times against a fresh limiter of 2 a
// minute, is counted: 2 served, the third ResourceExhausted, under the
// rule its spelling matches ("/test.Proxy/*" for every spelling that
// keeps the prefix "/test.Proxy/", "/test.Proxy/Say/" included; the
// default limit for the rest). None is exempt, however close it comes to
// the exempt health check.
func TestHostileUnknownServicePaths(t *testing.T) {
	for _, tc := range []struct{ method, rule string }{
		{"/test.Proxy/Say", "say"},
		{"/test.Proxy/Say/", "say"},
		{"/test.Proxy//Say", "say"},
		{"//test.Proxy/Say", "say"},
		{"/test.Proxy/./Say", "say"},
		{"/test.Proxy/%53ay", "say"},
		{"/test.Proxy/Say?x=1", "say"},
		{"/test.Proxy/Say#", "say"},
		{"/test.Proxy/Say#x", "say"},
		{"/TEST.PROXY/Say", "default"},
		{"/test.Proxy/../test.Proxy/Say", "say"},
		{"/grpc.health.v1.Health/Check/../../../test.Proxy/Say", "say"},
		{"/grpc.health.v1.Health/Check/", "default"},
		{"/grpc.health.v1.Health//Check", "default"},
		{"//grpc.health.v1.Health/Check", "default"},
		{"/grpc.health.v1.Health/./Check", "default"},
		{"/grpc.health.v1.Health/%43heck", "default"},
		{"/grpc.health.v1.Health/Check/..", "default"},
		{"/grpc.health.v1.Health/Check?", "default"},
		{"/grpc.health.v1.Health/Check#", "default"},
		{"/grpc.health.v1.Health/Check;x", "default"},
		{"/GRPC.HEALTH.V1.HEALTH/CHECK", "default"},
	} {
		t.Run(tc.method, func(t *testing.T) {
			conn, served, rules := proxyServer(t, config(t, hostileYAML), core.WithStore(memAt(t, store.NewManualClock(start))))
			var got []codes.Code
			for range 3 {
				got = append(got, invoke(t, conn, tc.method, "x").code)
			}
			if want := []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}; !slices.Equal(got, want) {
				t.Errorf("codes %v, want %v", got, want)
			}
			if n := served.Load(); n != 2 {
				t.Errorf("handler ran %d times, want 2", n)
			}
			if want := []string{tc.rule, tc.rule, tc.rule}; !slices.Equal(rules(), want) {
				t.Errorf("rules %q, want %q", rules(), want)
			}
		})
	}
	// The health check itself, spelled as registered, is exempt.
	conn, served, rules := proxyServer(t, config(t, hostileYAML), core.WithStore(memAt(t, store.NewManualClock(start))))
	for i := range 3 {
		if r := invoke(t, conn, "/grpc.health.v1.Health/Check", "x"); r.code != codes.OK {
			t.Errorf("health check %d: %v", i, r.code)
		}
	}
	if n := served.Load(); n != 3 || !slices.Equal(rules(), []string{"", "", ""}) {
		t.Errorf("health check: served %d, rules %q; want 3 exempt", n, rules())
	}
}

// TestHostileRegisteredMethodSpellings: without an UnknownServiceHandler,
// another spelling of a registered method is no method at all: grpc-go
// answers Unimplemented before the interceptors, so it is neither served
// nor counted, and the method keeps its own 2 calls.
func TestHostileRegisteredMethodSpellings(t *testing.T) {
	conn, e := serve(t, config(t, hostileYAML), core.WithStore(memAt(t, store.NewManualClock(start))))
	for _, m := range []string{"/test.Echo/Say/", "//test.Echo/Say", "/test.Echo//Say", "/test.Echo/./Say", "/test.Echo/%53ay", "/TEST.ECHO/Say", "/test.Echo/say", "/test.Echo/Say?x", "test.Echo/Say"} {
		if r := invoke(t, conn, m, "x"); r.code != codes.Unimplemented {
			t.Errorf("%q: %v, want Unimplemented", m, r.code)
		}
	}
	if n := e.served.Load(); n != 0 {
		t.Fatalf("%d odd spellings served", n)
	}
	var got []codes.Code
	for range 3 {
		got = append(got, say(t, conn, "hi").code)
	}
	if want := []codes.Code{codes.OK, codes.OK, codes.ResourceExhausted}; !slices.Equal(got, want) {
		t.Errorf("Say after the odd spellings: %v, want %v", got, want)
	}
}

// TestHostileManyStreams: a stream is counted once, when it opens: 20
// streams of 4 messages each, opened one after another against 2 a
// minute, get exactly 2 served, and the handler runs twice.
func TestHostileManyStreams(t *testing.T) {
	conn, e := serve(t, config(t, hostileYAML), core.WithStore(memAt(t, store.NewManualClock(start))))
	ok, exhausted := 0, 0
	for range 20 {
		switch r := watch(t, conn, []string{"a", "b", "c", "d"}); r.code {
		case codes.OK:
			ok++
		case codes.ResourceExhausted:
			exhausted++
		default:
			t.Fatalf("stream: %v %q", r.code, r.msg)
		}
	}
	if ok != 2 || exhausted != 18 {
		t.Errorf("%d streams served, %d refused; want 2 and 18", ok, exhausted)
	}
	if got := e.served.Load(); got != 2 {
		t.Errorf("handler ran %d times, want 2", got)
	}
}

// TestHostileServerRetryInfo: a hostile server answers every call with a
// RetryInfo of 10,000 years and retry-after, ratelimit and
// x-ratelimit-reset far past int64; the client interceptor holds the key
// for outbound.MaxHold, no longer: Delay(MaxHold) on a Delayer, and an
// Observer's Signal capped at MaxHold everywhere.
func TestHostileServerRetryInfo(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		_ = ss.SetHeader(metadata.Pairs(
			"retry-after", "99999999999999999999",
			"ratelimit", `"x";r=0;t=99999999999999999999999`,
			"x-ratelimit-remaining", "0",
			"x-ratelimit-reset", "99999999999999999999"))
		st, err := status.New(codes.ResourceExhausted, "go away").WithDetails(&errdetails.RetryInfo{
			RetryDelay: &durationpb.Duration{Seconds: 315_576_000_000, Nanos: 999_999_999}})
		if err != nil {
			return err
		}
		return st.Err()
	}))
	done := make(chan struct{})
	go func() { defer close(done); _ = s.Serve(ln) }()
	t.Cleanup(func() { s.Stop(); <-done })
	// RetryInfo alone (no metadata) is capped too.
	bare := grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		st, err := status.New(codes.ResourceExhausted, "go away").WithDetails(&errdetails.RetryInfo{
			RetryDelay: &durationpb.Duration{Seconds: 315_576_000_000}})
		if err != nil {
			return err
		}
		return st.Err()
	}))
	bareLn, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	bareDone := make(chan struct{})
	go func() { defer close(bareDone); _ = bare.Serve(bareLn) }()
	t.Cleanup(func() { bare.Stop(); <-bareDone })

	call := func(conn *grpc.ClientConn) {
		t.Helper()
		err := conn.Invoke(context.Background(), "/x.Y/Z", wrapperspb.String("a"), new(wrapperspb.StringValue))
		if status.Code(err) != codes.ResourceExhausted {
			t.Fatalf("call: %v, want ResourceExhausted", err)
		}
	}
	key := grpcrl.WithCallKey(func(context.Context, string) string { return "k" })
	for _, target := range []string{ln.Addr().String(), bareLn.Addr().String()} {
		d := &delayWaiter{}
		call(dialPaced(t, target, d, key))
		d.mu.Lock()
		if want := []string{"delay k " + outbound.MaxHold.String()}; !slices.Equal(d.events, want) {
			t.Errorf("%s: Delayer got %q, want %q", target, d.events, want)
		}
		d.mu.Unlock()
	}
	w := newRecWaiter()
	call(dialPaced(t, ln.Addr().String(), w, key))
	want := []string{"wait POST /x.Y/Z k", "observe k retry=10m0s remaining=0 reset=10m0s"}
	if got := w.got(); !slices.Equal(got, want) {
		t.Errorf("Observer got %q, want %q", got, want)
	}
}
