package grpcrl

import (
	"context"
	"hash/maphash"
	"net"
	"sync/atomic"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
)

// Method is the HTTP method every call is decided under: gRPC calls are
// HTTP/2 POSTs, so a rule restricted to methods must name POST.
const Method = "POST"

// KeyFunc returns the identity a call is counted under: a user id, an API
// key. fullMethod is the call's "/pkg.Service/Method"; ctx carries its
// incoming metadata (metadata.FromIncomingContext) and peer. An empty
// identity means "anonymous": the call is counted under the peer's IP. An
// error rejects the call (see WithErrorHandler).
type KeyFunc func(ctx context.Context, fullMethod string) (string, error)

// DeniedHandler returns the error a call the limiter refuses ends with: d
// is its Decision (d.Status() is the HTTP status an HTTP adapter would
// answer: 429 over a limit or under a penalty, 503 when the store failed
// and the policy is fail-closed, 403 from a banned network). When it is
// called the rate-limit metadata and retry-after are already set as the
// call's header metadata (ratelimit, ratelimit-policy or x-ratelimit-*, and retry-after); DeniedStatus(d).Err() is the
// default answer. The handler behind the interceptor does not run.
type DeniedHandler func(ctx context.Context, fullMethod string, d *core.Decision) error

// Option configures the interceptors. What concerns the limiter itself
// (its store, metadata style, failure policy, observer, client IP, the
// Decision in the call's context) is a core.Option of the core.Limiter
// New is given.
type Option func(*options)

type options struct {
	key     KeyFunc
	bypass  func(ctx context.Context, fullMethod string) bool
	plan    func(ctx context.Context, fullMethod string) string
	onError func(ctx context.Context, fullMethod string, err error) error
	denied  DeniedHandler
	cost    func(ctx context.Context, fullMethod string) int64
}

// WithKeyFunc sets how a call's identity is found (JWTSubject,
// MetadataKey, several of them in order with FirstKey, or the
// application's own). Default: none, so every call is counted under the
// peer's IP.
func WithKeyFunc(fn KeyFunc) Option { return func(o *options) { o.key = fn } }

// WithBypass sets a predicate for callers that are never limited (a
// super-admin); their calls touch no counter. Default: none.
func WithBypass(fn func(ctx context.Context, fullMethod string) bool) Option {
	return func(o *options) { o.bypass = fn }
}

// WithPlan sets how a call's plan is found (a claim of its token, a
// customer record): the configuration's tiers give each plan its own
// limits (see core.TierSpec), and the rate-limit metadata and the
// ResourceExhausted status show the plan's. It is called only when the
// configuration has tiers, after the key function; "" or a plan the
// configuration lacks counts under the rules' own limits. The plan picks
// the caller's limits: take it from what the client cannot forge (a
// verified token's claim, a customer record), never from a plain metadata
// entry. It runs for every call unless the limiter caches plans
// (core.WithLimitCache: once per caller per TTL). Default: none (every
// caller counts under the rules' own limits).
func WithPlan(fn func(ctx context.Context, fullMethod string) string) Option {
	return func(o *options) { o.plan = fn }
}

// WithCost sets the cost of a call known before the handler runs (the
// size of a batch a metadata entry or the method announces), beside the
// rules' weights: above 0 it replaces the weight of the call's method, 0
// or less keeps it; a cost above the rule's capacity is refused with
// ResourceExhausted, nothing taken. Under a rule charged by response
// (cost: response) it is what a handler that reports no cost with
// core.SetCost is charged. Take it from what the handler will do, not
// from what the client merely says. Default: none (the weights).
func WithCost(fn func(ctx context.Context, fullMethod string) int64) Option {
	return func(o *options) { o.cost = fn }
}

// WithErrorHandler sets the error a call whose KeyFunc failed ends with
// (err is the KeyFunc's). Default: status Unauthenticated with the
// message "Unauthorized".
func WithErrorHandler(fn func(ctx context.Context, fullMethod string, err error) error) Option {
	return func(o *options) { o.onError = fn }
}

// WithDeniedHandler sets the error every call the limiter refuses ends
// with; see DeniedHandler. Default: nil, which ends it with
// DeniedStatus(d): ResourceExhausted with a RetryInfo detail, Unavailable
// when the store failed closed, PermissionDenied from a banned network.
func WithDeniedHandler(fn DeniedHandler) Option { return func(o *options) { o.denied = fn } }

// DecisionOf returns the Decision the interceptors made for the call of
// ctx, which interceptors whose limiter was built with
// core.WithDecisionContext(true) put there, and
// ok false when there is none. A Decision whose Rule is nil counted
// nothing (an exempt method, a bypassed caller, limiting off).
func DecisionOf(ctx context.Context) (*core.Decision, bool) { return core.FromContext(ctx) }

// errUnauthorized is the default answer to a call whose KeyFunc failed.
var errUnauthorized = status.Error(codes.Unauthenticated, "Unauthorized")

func defaultOnError(context.Context, string, error) error { return errUnauthorized }

// Interceptor holds the server interceptors of one configuration: Unary
// and Stream count under the same limiter and options. It is safe for
// concurrent use.
type Interceptor struct {
	o     *options
	lim   *core.Limiter
	flow  *core.Flow[call]
	inCtx bool
}

// call is what the flow decides on: the call's context and full method.
type call struct {
	ctx    context.Context
	method string
}

// New returns the interceptors that limit calls by limits: a
// *core.Config, counted in a memory store of the interceptors' own, or a
// *core.Limiter (core.NewLimiter), for any other store, an observer, a
// failure policy, a configuration reloaded while serving, or one limiter
// shared with an HTTP adapter serving the same API. A nil or disabled
// configuration passes every call untouched.
func New(limits core.Limits, opts ...Option) *Interceptor {
	o := newOptions(opts)
	lim := adapter.Limiter(limits)
	return &Interceptor{o: o, lim: lim, flow: o.flow(lim), inCtx: lim.DecisionContext()}
}

// Unary returns the unary server interceptor (grpc.ChainUnaryInterceptor
// or grpc.UnaryInterceptor).
func (i *Interceptor) Unary() grpc.UnaryServerInterceptor { return i.unary }

// Stream returns the stream server interceptor
// (grpc.ChainStreamInterceptor or grpc.StreamInterceptor). A stream is
// counted once, when it opens, whatever it sends or receives after.
func (i *Interceptor) Stream() grpc.StreamServerInterceptor { return i.stream }

func (i *Interceptor) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	var d core.Decision
	if err := i.decide(ctx, info.FullMethod, &d, func(md metadata.MD) { _ = grpc.SetHeader(ctx, md) }); err != nil {
		return nil, err
	}
	if i.inCtx || d.ChargesResponse() { // the handler reports its cost (core.SetCost)
		ctx = withDecision(ctx, d)
	}
	if !d.Deferred() {
		return handler(ctx, req)
	}
	// Counted by outcome: once the handler has answered.
	returned := false
	var err error
	defer func() { i.lim.Complete(ctx, &d, httpStatus(err, returned)) }()
	resp, err := handler(ctx, req)
	returned = true
	return resp, err
}

func (i *Interceptor) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, handler grpc.StreamHandler) error {
	ctx := ss.Context()
	var d core.Decision
	if err := i.decide(ctx, info.FullMethod, &d, func(md metadata.MD) { _ = ss.SetHeader(md) }); err != nil {
		return err
	}
	in := ss
	if i.inCtx || d.ChargesResponse() {
		in = &decisionStream{ServerStream: ss, ctx: withDecision(ctx, d)}
	}
	if !d.Deferred() {
		return handler(srv, in)
	}
	returned := false
	var err error
	defer func() { i.lim.Complete(ctx, &d, httpStatus(err, returned)) }()
	err = handler(srv, in)
	returned = true
	return err
}

// decide decides the call of ctx into *d and sets its rate-limit metadata
// with setHeader. A non-nil error ends the call: the key function failed,
// or the limiter refused it.
func (i *Interceptor) decide(ctx context.Context, method string, d *core.Decision, setHeader func(metadata.MD)) error {
	if err := i.flow.DecideTo(ctx, d, call{ctx, method}, Method, core.Path(method), ""); err != nil {
		return i.o.onError(ctx, method, err)
	}
	if md := limitMetadata(d); md != nil {
		setHeader(md)
	}
	if d.Allowed {
		return nil
	}
	if i.o.denied != nil {
		c := *d // the handler's own copy: d stays on the caller's stack
		return i.o.denied(ctx, method, &c)
	}
	return DeniedStatus(d).Err()
}

// withDecision returns ctx with a copy of d.
func withDecision(ctx context.Context, d core.Decision) context.Context {
	return core.NewContext(ctx, &d)
}

// decisionStream is a ServerStream whose context carries the Decision.
type decisionStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *decisionStream) Context() context.Context { return s.ctx }

// newOptions applies opts to the defaults.
func newOptions(opts []Option) *options {
	o := new(options)
	for _, fn := range opts {
		fn(o)
	}
	if o.onError == nil {
		o.onError = defaultOnError
	}
	return o
}

// flow is the flow of o deciding with lim.
func (o *options) flow(lim *core.Limiter) *core.Flow[call] {
	cip := lim.ClientIP()
	f := &core.Flow[call]{
		Limiter:    lim,
		ClientIP:   func(c call) string { return cip.ClientIP(peerAddr(c.ctx), incoming(c.ctx)) },
		ClientAddr: func(c call) string { return cip.ClientAddr(peerAddr(c.ctx), incoming(c.ctx)) },
		Header:     func(c call, name string) string { return first(c.ctx, lowerName(name)) },
	}
	if o.key != nil {
		f.Key = func(c call) (string, error) { return o.key(c.ctx, c.method) }
	}
	if o.bypass != nil {
		f.Bypass = func(c call) bool { return o.bypass(c.ctx, c.method) }
	}
	if o.plan != nil {
		f.Plan = func(c call) string { return o.plan(c.ctx, c.method) }
	}
	if o.cost != nil {
		f.Cost = func(c call) int64 { return o.cost(c.ctx, c.method) }
	}
	return f
}

// peerAddr is the address of ctx's peer ("ip:port"), "" when unknown.
func peerAddr(ctx context.Context) string {
	p, ok := peer.FromContext(ctx)
	if !ok || p.Addr == nil {
		return ""
	}
	tcp, ok := p.Addr.(*net.TCPAddr)
	if !ok {
		return p.Addr.String()
	}
	slot := &peers[maphash.Comparable(peerSeed, tcp)%uint64(len(peers))]
	if e := slot.Load(); e != nil && e.addr == tcp {
		return e.s
	}
	s := tcp.String()
	slot.Store(&peerEntry{addr: tcp, s: s})
	return s
}

// peers remembers the text of recent TCP peer addresses by the identity of
// their *net.TCPAddr: grpc gives every call of a connection the same one
// (its net.Conn's RemoteAddr), so that the calls of a connection after its
// first format none. A direct-mapped table of fixed size, chosen by a
// seeded hash of the pointer; an entry holds the address it was made for,
// so that its pointer stands for it while the entry is there.
var (
	peers    [256]atomic.Pointer[peerEntry]
	peerSeed = maphash.MakeSeed()
)

type peerEntry struct {
	addr *net.TCPAddr
	s    string
}

// incoming returns the getter of ctx's incoming metadata that
// clientip.Config asks for forwarding headers by their canonical
// names; it calls it only for a trusted peer.
func incoming(ctx context.Context) func(name string) []string {
	return func(name string) []string { return metadata.ValueFromIncomingContext(ctx, lowerName(name)) }
}

// Identity returns the identity interceptors that New builds with lim
// and opts count the call of ctx under (Decision.Key hashes it): the key
// function's answer, else the peer's IP, as WithKeyFunc and lim's
// core.WithClientIP say. A handler resets the caller's counters with it
// (core.Limiter.Reset). The error is the key function's.
func Identity(ctx context.Context, fullMethod string, lim *core.Limiter, opts ...Option) (string, error) {
	return newOptions(opts).flow(lim).Identity(call{ctx, fullMethod})
}
