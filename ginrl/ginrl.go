package ginrl

import (
	"context"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
)

// KeyFunc returns the identity a request is counted under: a user id, an
// API key. An empty identity means "anonymous": the request is counted
// under its client IP. An error rejects the request (see WithErrorHandler).
type KeyFunc func(c *gin.Context) (string, error)

// Option configures the middleware. What concerns the limiter itself (its
// store, headers, failure policy, observer, client IP, the Decision in
// the request's context) is a core.Option of the core.Limiter New is
// given.
type Option func(*options)

type options struct {
	adapter.Options[*gin.Context, func(*gin.Context, error), DeniedHandler]
}

// DeniedHandler writes the response to a request the limiter refuses: d
// is its Decision (d.Status() is the status the default response has: 429
// over a limit or under a penalty, 503 when the store failed and the
// policy is fail-closed, 403 from a banned network, d.Banned).
// When it is called the response already carries the rate-limit headers
// and Retry-After (core.Decision.SetLimitHeaders); it writes the status,
// Content-Type and body, and may change any header. The middleware aborts
// the chain after it.
type DeniedHandler func(c *gin.Context, d *core.Decision)

// DecisionKey is the key under which a middleware whose limiter was built
// with core.WithDecisionContext(true) stores the request's *core.Decision in the
// gin.Context (c.Get(DecisionKey); DecisionOf reads it).
const DecisionKey = "rlkit.decision"

// WithKeyFunc sets how a request's identity is found. Default: none, so
// every request is counted under its client IP.
func WithKeyFunc(fn KeyFunc) Option { return func(o *options) { o.Key = fn } }

// WithBypass sets a predicate for callers that are never limited (a
// super-admin); their requests touch no counter. Default: none.
func WithBypass(fn func(*gin.Context) bool) Option { return func(o *options) { o.Bypass = fn } }

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
func WithPlan(fn func(*gin.Context) string) Option { return func(o *options) { o.Plan = fn } }

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
func WithCost(fn func(*gin.Context) int64) Option { return func(o *options) { o.Cost = fn } }

// WithErrorHandler sets the response to a request whose KeyFunc failed;
// the middleware aborts the chain after it. Default: 401 with
// {"detail": "Unauthorized"}.
func WithErrorHandler(fn func(*gin.Context, error)) Option {
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
func DecisionOf(c *gin.Context) (*core.Decision, bool) {
	v, _ := c.Get(DecisionKey)
	d, ok := v.(*core.Decision)
	return d, ok && d != nil
}

var unauthorized = []byte(`{"detail": "Unauthorized"}`)

func defaultOnError(c *gin.Context, _ error) {
	c.Writer.Header().Set("Content-Type", "application/json")
	c.Writer.WriteHeader(http.StatusUnauthorized)
	_, _ = c.Writer.Write(unauthorized)
}

// New returns the middleware that limits requests by limits: a
// *core.Config, counted in a memory store of the middleware's own, or a
// *core.Limiter (core.NewLimiter), for any other store, an observer, a
// failure policy, a configuration reloaded while serving, or one limiter
// shared by several middlewares. A nil or disabled configuration passes
// every request untouched.
func New(limits core.Limits, opts ...Option) gin.HandlerFunc {
	o := newOptions(opts)
	lim := adapter.Limiter(limits)
	flow := o.flow(lim)
	inCtx := lim.DecisionContext()
	return func(c *gin.Context) {
		r := c.Request
		var d core.Decision
		err := flow.DecideTo(r.Context(), &d, c, r.Method, core.URLPath(r.URL), c.FullPath())
		switch {
		case err != nil:
			o.OnError(c, err)
			c.Abort()
		case !d.Allowed:
			if o.Denied != nil {
				o.deny(c, d)
			} else {
				d.WriteDenied(c.Writer)
			}
			c.Abort()
		default:
			d.SetHeaders(c.Writer.Header())
			if inCtx || d.ChargesResponse() { // the handler reports its cost (core.SetCost)
				withDecision(c, d)
			}
			if d.Deferred() { // counted by outcome: once the handler has answered
				nextCounted(lim, c, r.Context(), &d)
				return
			}
			c.Next()
		}
	}
}

// nextCounted runs the handlers after the middleware for a request whose
// rule counts by outcome (d.Deferred), and counts it with the status the
// client gets: the one written (200 when none was). A handler that panics
// before writing counts as 500, which gin.Recovery answers (a panic a
// client can cause must not let a request pass uncounted); one that
// panics after writing counts the status it wrote. The panic goes on.
func nextCounted(lim *core.Limiter, c *gin.Context, ctx context.Context, d *core.Decision) {
	returned := false
	defer func() {
		status := c.Writer.Status()
		if !returned && !c.Writer.Written() {
			status = http.StatusInternalServerError
		}
		lim.Complete(ctx, d, status)
	}()
	c.Next()
	returned = true
}

// deny answers a denied request with the application's handler. d is a
// copy, here and in withDecision, so that the caller's stays on its stack.
func (o *options) deny(c *gin.Context, d core.Decision) {
	d.SetLimitHeaders(c.Writer.Header())
	o.Denied(c, &d)
}

// withDecision puts d in c and in its request's context.
func withDecision(c *gin.Context, d core.Decision) {
	c.Set(DecisionKey, &d)
	c.Request = c.Request.WithContext(core.NewContext(c.Request.Context(), &d))
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
func JWTSubject(verify func(c *gin.Context, token string) (subject string, err error)) KeyFunc {
	return adapter.JWTSubject(verify, header)
}

// header returns the header of the canonical name of c's request.
func header(c *gin.Context, name string) string { return c.Request.Header.Get(name) }

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
func (o *options) flow(lim *core.Limiter) *core.Flow[*gin.Context] {
	cip := lim.ClientIP()
	return o.Flow(lim, adapter.ClientIP[*gin.Context]{
		IP:   func(c *gin.Context) string { return cip.ClientIP(c.Request.RemoteAddr, c.Request.Header.Values) },
		Addr: func(c *gin.Context) string { return cip.ClientAddr(c.Request.RemoteAddr, c.Request.Header.Values) },
	}, header)
}

// Identity returns the identity a middleware that New builds with lim and
// opts counts a request under (Decision.Key hashes it): its key
// function's answer, else the client IP, as WithKeyFunc and lim's
// core.WithClientIP say. A handler resets the caller's counters with it
// (core.Limiter.Reset). The error is the key function's.
func Identity(c *gin.Context, lim *core.Limiter, opts ...Option) (string, error) {
	return newOptions(opts).flow(lim).Identity(c)
}
