package grpcrl

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/rlkit/rlkit/outbound"
)

// ClientOption configures the client interceptors.
type ClientOption func(*client)

// WithCallKey sets the rate-limit key of an outbound call from its context
// and full method: a tenant's token, the method itself. A key fed by
// secrets should be core.SecretIdentity(label, secret), so that only a
// keyed hash is kept. Default: the connection's target
// (grpc.ClientConn.Target, "dns:///api.example.com:443"): one limit per
// upstream, the rules of the Waiter's configuration telling methods apart
// by their paths.
func WithCallKey(f func(ctx context.Context, fullMethod string) string) ClientOption {
	return func(c *client) { c.key = f }
}

// client is the configuration of the client interceptors.
type client struct {
	w   outbound.Waiter
	key func(ctx context.Context, fullMethod string) string
}

func newClient(w outbound.Waiter, opts []ClientOption) *client {
	c := &client{w: w}
	for _, o := range opts {
		o(c)
	}
	return c
}

// keyOf is the key of a call on cc.
func (c *client) keyOf(ctx context.Context, cc *grpc.ClientConn, method string) string {
	if c.key != nil {
		return c.key(ctx, method)
	}
	if cc == nil {
		return ""
	}
	return cc.Target()
}

// wait waits for the call's turn. A context that ends first gives its
// gRPC status (Canceled, DeadlineExceeded), as a call grpc had begun
// would; any other error of the Waiter's is returned as it is.
func (c *client) wait(ctx context.Context, method, key string) error {
	err := c.w.Wait(ctx, Method, method, key)
	if err != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)) {
		return status.FromContextError(err).Err()
	}
	return err
}

// UnaryClientInterceptor paces unary calls with w (an outbound.Limiter,
// say, under rules whose paths are full method names). Each call waits
// for its turn (w.Wait with method POST, the full method as the path and
// the key WithCallKey gives) and is not sent when the wait fails. Its
// answer, whatever its status, is read for the server's rate-limit
// metadata, header and trailer (ratelimit and ratelimit-policy,
// x-ratelimit-*, retry-after: outbound.ReadSignal) and a RetryInfo detail
// of its status (the longer of it and retry-after counts), and handed to
// w: Observe when w is an outbound.Observer, which slows the key down
// before the server refuses a call; else Delay with the wait the server
// asked for, when w is an outbound.Delayer. A nil w paces nothing.
func UnaryClientInterceptor(w outbound.Waiter, opts ...ClientOption) grpc.UnaryClientInterceptor {
	c := newClient(w, opts)
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, copts ...grpc.CallOption) error {
		if c.w == nil {
			return invoker(ctx, method, req, reply, cc, copts...)
		}
		key := c.keyOf(ctx, cc, method)
		if err := c.wait(ctx, method, key); err != nil {
			return err
		}
		md := new(answerMD) // one allocation for both
		err := invoker(ctx, method, req, reply, cc, append(copts[:len(copts):len(copts)], grpc.Header(&md.header), grpc.Trailer(&md.trailer))...)
		c.observe(ctx, key, md.header, md.trailer, err)
		return err
	}
}

// answerMD receives the metadata of a call's answer.
type answerMD struct{ header, trailer metadata.MD }

// StreamClientInterceptor paces streams with w as UnaryClientInterceptor
// paces calls: a stream waits once, before it opens (a server limited by
// grpcrl counts it once, then), and what the server said of its limit is
// handed to w once: when its header metadata is read (ClientStream.Header,
// or the first RecvMsg), or when the stream ends or fails first, with its
// trailer and status; a stream whose context ends before any of these is
// reported with nothing said.
func StreamClientInterceptor(w outbound.Waiter, opts ...ClientOption) grpc.StreamClientInterceptor {
	c := newClient(w, opts)
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, copts ...grpc.CallOption) (grpc.ClientStream, error) {
		if c.w == nil {
			return streamer(ctx, desc, cc, method, copts...)
		}
		key := c.keyOf(ctx, cc, method)
		if err := c.wait(ctx, method, key); err != nil {
			return nil, err
		}
		cs, err := streamer(ctx, desc, cc, method, copts...)
		if err != nil {
			c.observe(ctx, key, nil, nil, err)
			return nil, err
		}
		s := &pacedStream{ClientStream: cs, c: c, ctx: ctx, key: key}
		s.stop = context.AfterFunc(ctx, func() { s.once.Do(s.reportNothing) })
		return s, nil
	}
}

// pacedStream reports what the server said of its limit once.
type pacedStream struct {
	grpc.ClientStream
	c        *client
	ctx      context.Context
	key      string
	once     sync.Once
	reported atomic.Bool
	stop     func() bool // stops the report on the context's end
}

// report hands w what the stream's answer said, the first time only.
// (Called by the stream's user, after the interceptor set stop.)
func (s *pacedStream) report(header, trailer metadata.MD, err error) {
	s.once.Do(func() {
		s.stop()
		s.reported.Store(true)
		s.c.observe(s.ctx, s.key, header, trailer, err)
	})
}

// reportNothing tells w that the stream ended with nothing said: its
// context ended first.
func (s *pacedStream) reportNothing() {
	s.reported.Store(true)
	s.c.observe(s.ctx, s.key, nil, nil, nil)
}

func (s *pacedStream) Header() (metadata.MD, error) {
	md, err := s.ClientStream.Header()
	if err == nil && !s.reported.Load() {
		s.report(md, nil, nil)
	}
	return md, err
}

func (s *pacedStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	if s.reported.Load() {
		return err
	}
	md, _ := s.ClientStream.Header() // at once: received before any message, or the stream is over
	if err == nil {
		s.report(md, nil, nil)
	} else {
		s.report(md, s.ClientStream.Trailer(), err)
	}
	return err
}

// observe hands w the Signal of an answer: its header and trailer
// metadata and the RetryInfo of its status err.
func (c *client) observe(ctx context.Context, key string, header, trailer metadata.MD, err error) {
	get := func(name string) string {
		k := name // ReadSignal asks in lower case too: such a name is the key
		if k != "" && k[0] >= 'A' && k[0] <= 'Z' {
			k = lowerName(k)
		}
		if v := header[k]; len(v) > 0 {
			return v[0]
		}
		if v := trailer[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	s := outbound.ReadSignal(get, outbound.SystemClock.Now())
	if d := retryDelay(err); d > s.RetryAfter {
		s.RetryAfter = min(d, outbound.MaxHold)
	}
	outbound.Report(ctx, c.w, key, s)
}

// retryDelay is the retry_delay of a RetryInfo detail of the status err,
// 0 when none.
func retryDelay(err error) time.Duration {
	if err == nil {
		return 0
	}
	st, ok := status.FromError(err)
	if !ok {
		return 0
	}
	for _, d := range st.Details() {
		if ri, ok := d.(*errdetails.RetryInfo); ok {
			return max(ri.GetRetryDelay().AsDuration(), 0)
		}
	}
	return 0
}
