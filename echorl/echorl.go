package echorl

import (
	"context"
	"net/http"
	"sync/atomic"
	"unsafe"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
)

// KeyFunc returns the identity a request is counted under: a user id, an
// API key. An empty identity means "anonymous": the request is counted
// under its client IP. An error rejects the request (see WithErrorHandler).
type KeyFunc func(c echo.Context) (string, error)

// Option configures the middleware. What concerns the limiter itself (its
// store, headers, failure policy, observer, client IP, the Decision in
// the request's context) is a core.Option of the core.Limiter New is
// given.
type Option func(*options)

type options struct {
	adapter.Options[echo.Context, func(echo.Context, error) error, DeniedHandler]

	// run is the flow New decides with; inCtx, whether it puts the
	// Decision in the request's context.
	run   *core.Flow[echo.Context]
	inCtx bool
	// wrapped holds the handlers built in front of the nexts Echo passes.
	wrapped handlerCache
}

// DeniedHandler writes the response to a request the limiter refuses: d
// is its Decision (d.Status() is the status the default response has: 429
// over a limit or under a penalty, 503 when the store failed and the
// policy is fail-closed, 403 from a banned network, d.Banned).
// When it is called the response already carries the rate-limit headers
// and Retry-After (core.Decision.SetLimitHeaders); it writes the status,
// Content-Type and body, and may change any header. The middleware returns
// what it returns, and the handler does not run.
type DeniedHandler func(c echo.Context, d *core.Decision) error

// DecisionKey is the key under which a middleware whose limiter was built
// with core.WithDecisionContext(true) stores the request's *core.Decision in the
// echo.Context (c.Get(DecisionKey); DecisionOf reads it).
const DecisionKey = "rlkit.decision"

// WithKeyFunc sets how a request's identity is found. Default: none, so
// every request is counted under its client IP.
func WithKeyFunc(fn KeyFunc) Option { return func(o *options) { o.Key = fn } }

// WithBypass sets a predicate for callers that are never limited (a
// super-admin); their requests touch no counter. Default: none.
func WithBypass(fn func(echo.Context) bool) Option { return func(o *options) { o.Bypass = fn } }

// WithPlan sets how a request's plan is found (a claim of its token, a
// customer record): the configuration's tiers give each plan its own
// limits (see core.TierSpec), and the rate-limit headers and the 429 show
// the plan's. It is called only when the configuration has tiers, after
// the key function; "" or a plan the configuration lacks counts under the
// rules' own limits. The plan picks the caller's limits: take it from
// what the client cannot forge (a verified token's claim, a customer
// record), never from a plain request header. It runs for every request
// unless the limiter caches plans (core.WithLimitCache: once per caller
// per TTL, the plan's name kept); else its string is used for the lookup
// only, never kept.
// Default: none (every caller counts under the rules' own limits).
func WithPlan(fn func(echo.Context) string) Option { return func(o *options) { o.Plan = fn } }

// WithCost sets the cost of a request known before the handler, from the
// request itself (the size of a batch, from a header or a query
// parameter): above 0 it replaces the weight of the request's path
// (rules[].weights), 0 or less keeps it. A cost above the rule's
// capacity is refused (429), as a request with no room left is; under a
// rule charged by response (cost: response) it is the cost charged when
// the handler reports none (core.SetCost). The client controls what it
// sends: a cost it can lower is a cost it can dodge, so take it from
// what the handler will do (the batch it will process), not from a
// plain claim. See core.Flow.Cost. Default: none (the weights).
func WithCost(fn func(echo.Context) int64) Option { return func(o *options) { o.Cost = fn } }

// WithErrorHandler sets the response to a request whose KeyFunc failed;
// the middleware returns what fn returns, and the handler does not run.
// Default: 401 with {"detail": "Unauthorized"}.
func WithErrorHandler(fn func(echo.Context, error) error) Option {
	return func(o *options) { o.OnError = fn }
}

// WithDeniedHandler sets the response to every request the limiter
// refuses (every Decision not Allowed: over a limit, the store failed
// closed, and any other refusal), for example an RFC 9457
// application/problem+json body; see DeniedHandler. Default: nil, which
// writes core.Decision.WriteDenied's response: 429 with
// {"detail": "Rate limit exceeded for '<rule>' requests"}, or 503 with
// {"detail": "Rate limiter unavailable"}, or 403 with
// {"detail": "Forbidden"} from a banned network, as application/json.
func WithDeniedHandler(fn DeniedHandler) Option { return func(o *options) { o.Denied = fn } }

// DecisionOf returns the Decision the middleware made for c's request,
// which a middleware whose limiter was built with
// core.WithDecisionContext(true) stores in c (and in its request's
// context, for core.FromContext), and ok
// false when there is none. A Decision whose Rule is nil counted nothing
// (an exempt path, a bypassed caller, limiting off).
func DecisionOf(c echo.Context) (*core.Decision, bool) {
	d, ok := c.Get(DecisionKey).(*core.Decision)
	return d, ok && d != nil
}

var unauthorized = []byte(`{"detail": "Unauthorized"}`)

func defaultOnError(c echo.Context, _ error) error {
	w := c.Response()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(unauthorized)
	return nil
}

// New returns the middleware that limits requests by limits: a
// *core.Config, counted in a memory store of the middleware's own, or a
// *core.Limiter (core.NewLimiter), for any other store, an observer, a
// failure policy, a configuration reloaded while serving, or one limiter
// shared by several middlewares. A nil or disabled configuration passes
// every request untouched.
func New(limits core.Limits, opts ...Option) echo.MiddlewareFunc {
	o := newOptions(opts)
	lim := adapter.Limiter(limits)
	o.run = o.flow(lim)
	o.inCtx = lim.DecisionContext()
	return func(next echo.HandlerFunc) echo.HandlerFunc { return o.wrapped.get(next, o.handler) }
}

// handler returns the middleware's handler in front of next.
func (o *options) handler(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		var d core.Decision
		err := o.run.DecideTo(r.Context(), &d, c, r.Method, core.URLPath(r.URL), c.Path())
		switch {
		case err != nil:
			return o.OnError(c, err)
		case !d.Allowed:
			if o.Denied != nil {
				return o.deny(c, d)
			}
			d.WriteDenied(c.Response())
			return nil
		}
		d.SetHeaders(c.Response().Header())
		if o.inCtx || d.ChargesResponse() { // the handler reports its cost (core.SetCost)
			withDecision(c, d)
		}
		if !d.Deferred() {
			return next(c)
		}
		return nextCounted(o.run.Limiter, next, c, r.Context(), &d) // counted by outcome: once the handler has answered
	}
}

// handlerCache keeps the handlers the middleware built in front of the
// nexts it was given more than once. Echo builds the chain of middlewares
// again for every request, calling each middleware with the handler that
// follows it: when no middleware follows this one, that is the route's
// handler, the same function value every time, and its cached handler
// spares the request an allocation. A next is recognised by the address
// of its function value (its closure), which an entry keeps alive, so the
// address stands for no other function while the entry holds it. A slot
// holds an immutable entry, replaced whole; a next seen once is only
// remembered (in seen), so that a middleware after this one, whose next is
// new on each request, costs no allocation more than building the handler.
type handlerCache struct {
	built [64]atomic.Pointer[builtHandler]
	seen  [64]atomic.Pointer[byte] // a next's closure, seen once
}

type builtHandler struct {
	next, handler echo.HandlerFunc
}

// get returns the handler build makes in front of next: the cached one
// when next was seen before.
func (hc *handlerCache) get(next echo.HandlerFunc, build func(echo.HandlerFunc) echo.HandlerFunc) echo.HandlerFunc {
	p := funcAddr(next)
	i := uint64(uintptr(p)) >> 4 * 0x9E3779B97F4A7C15 >> 58 // Fibonacci hashing to 6 bits
	if e := hc.built[i].Load(); e != nil && funcAddr(e.next) == p {
		return e.handler
	}
	h := build(next)
	switch seen := &hc.seen[i]; {
	case p == nil:
	case unsafe.Pointer(seen.Load()) == p:
		hc.built[i].Store(&builtHandler{next: next, handler: h})
	default:
		seen.Store((*byte)(p))
	}
	return h
}

// funcAddr is the address of fn's function value: its closure, or the
// static value of a function that captures nothing.
func funcAddr(fn echo.HandlerFunc) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&fn)) }

// deny answers a denied request with the application's handler. d is a
// copy, here and in withDecision, so that the caller's stays on its stack.
func (o *options) deny(c echo.Context, d core.Decision) error {
	d.SetLimitHeaders(c.Response().Header())
	return o.Denied(c, &d)
}

// withDecision puts d in c and in its request's context.
func withDecision(c echo.Context, d core.Decision) {
	c.Set(DecisionKey, &d)
	r := c.Request()
	c.SetRequest(r.WithContext(core.NewContext(r.Context(), &d)))
}

// nextCounted runs next for a request whose rule counts by outcome
// (d.Deferred), and counts it with the status the client gets (see
// status). A handler that panics before committing the response counts
// as 500, which Echo's Recover middleware answers (a panic a client can
// cause must not let a request pass uncounted); one that panics after
// counts the status it wrote. The panic goes on.
func nextCounted(lim *core.Limiter, next echo.HandlerFunc, c echo.Context, ctx context.Context, d *core.Decision) (err error) {
	returned := false
	defer func() {
		s := http.StatusInternalServerError
		if returned || c.Response().Committed {
			s = status(c, err)
		}
		lim.Complete(ctx, d, s)
	}()
	err = next(c)
	returned = true
	return err
}

// status is the status of the response to c once its handler returned
// err: the status written when the response is committed; else, for an
// error, the one Echo's default error handler (v4.16) answers with, the
// code of an *echo.HTTPError (of the one it holds as Internal, when it
// holds one), 500 for any other error; else 200, which net/http writes
// for a handler that wrote nothing. (An application's own
// Echo.HTTPErrorHandler may answer otherwise.)
func status(c echo.Context, err error) int {
	res := c.Response()
	switch {
	case res.Committed:
		return res.Status
	case err == nil:
		return http.StatusOK
	}
	he, ok := err.(*echo.HTTPError) // as Echo asserts it: not errors.As
	if !ok {
		return http.StatusInternalServerError
	}
	if in, ok := he.Internal.(*echo.HTTPError); ok {
		he = in
	}
	return he.Code
}

// HeaderKey counts requests by the value of a request header (an API key)
// under the identity adapter.HeaderIdentity(canonical name, value), which
// the limiter stores and logs only as a keyed hash
// ("X-Api-Key:hmac:<hex>"; see core.WithIdentityKey); requests without it
// count under their client IP.
func HeaderKey(name string) KeyFunc { return adapter.HeaderKey(name, header) }

// JWTSubject counts requests by the subject of their bearer token, as
// "sub:<subject>". verify must check the token (signature, expiry, audience)
// and return its subject; rlkit parses nothing itself. A request without a
// bearer token counts under its client IP; one whose token fails
// verification is rejected (see WithErrorHandler).
func JWTSubject(verify func(c echo.Context, token string) (subject string, err error)) KeyFunc {
	return adapter.JWTSubject(verify, header)
}

// header returns the header of the canonical name of c's request.
func header(c echo.Context, name string) string { return c.Request().Header.Get(name) }

// newOptions applies opts to the defaults.
func newOptions(opts []Option) *options {
	o := new(options)
	for _, fn := range opts {
		fn(o)
	}
	if o.OnError == nil {
		o.OnError = defaultOnError
	}
	return o
}

// flow is the flow of o deciding with lim.
func (o *options) flow(lim *core.Limiter) *core.Flow[echo.Context] {
	cip := lim.ClientIP()
	return o.Flow(lim, adapter.ClientIP[echo.Context]{
		IP: func(c echo.Context) string {
			r := c.Request()
			return cip.ClientIP(r.RemoteAddr, r.Header.Values)
		},
		Addr: func(c echo.Context) string {
			r := c.Request()
			return cip.ClientAddr(r.RemoteAddr, r.Header.Values)
		},
	}, header)
}

// Identity returns the identity a middleware that New builds with lim and
// opts counts a request under (Decision.Key hashes it): its key
// function's answer, else the client IP, as WithKeyFunc and lim's
// core.WithClientIP say. A handler resets the caller's counters with it
// (core.Limiter.Reset). The error is the key function's.
func Identity(c echo.Context, lim *core.Limiter, opts ...Option) (string, error) {
	return newOptions(opts).flow(lim).Identity(c)
}
