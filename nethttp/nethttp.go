package nethttp

import (
	"context"
	"net/http"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
)

// KeyFunc returns the identity a request is counted under: a user id, an
// API key. An empty identity means "anonymous": the request is counted
// under its client IP. An error rejects the request (see WithErrorHandler).
type KeyFunc func(r *http.Request) (string, error)

// Option configures the middleware. What concerns the limiter itself (its
// store, headers, failure policy, observer, client IP, the Decision in
// the request's context) is a core.Option of the core.Limiter New is
// given.
type Option func(*options)

type options struct {
	adapter.Options[*http.Request, func(http.ResponseWriter, *http.Request, error), DeniedHandler]
}

// DeniedHandler writes the response to a request the limiter refuses: d
// is its Decision (d.Status() is the status the default response has: 429
// over a limit or under a penalty, 503 when the store failed and the
// policy is fail-closed, 403 from a banned network, d.Banned).
// When it is called the response already carries the rate-limit headers
// and Retry-After (core.Decision.SetLimitHeaders); it writes the status,
// Content-Type and body, and may change any header. The handler behind
// the middleware does not run.
type DeniedHandler func(w http.ResponseWriter, r *http.Request, d *core.Decision)

// WithKeyFunc sets how a request's identity is found (see KeyFunc).
// Default: none, so every request is counted under its client IP.
func WithKeyFunc(fn KeyFunc) Option { return func(o *options) { o.Key = fn } }

// WithBypass sets a predicate for callers that are never limited (a
// super-admin); their requests touch no counter. Default: none.
func WithBypass(fn func(*http.Request) bool) Option { return func(o *options) { o.Bypass = fn } }

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
func WithPlan(fn func(*http.Request) string) Option { return func(o *options) { o.Plan = fn } }

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
func WithCost(fn func(*http.Request) int64) Option { return func(o *options) { o.Cost = fn } }

// WithErrorHandler sets the response to a request whose KeyFunc failed.
// Default: 401 with {"detail": "Unauthorized"}.
func WithErrorHandler(fn func(http.ResponseWriter, *http.Request, error)) Option {
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

// DecisionOf returns the Decision the middleware made for r, which a
// middleware whose limiter was built with core.WithDecisionContext(true)
// puts in r's context, and ok false when there is none. A Decision whose
// Rule is nil counted nothing (an exempt path, a bypassed caller,
// limiting off).
func DecisionOf(r *http.Request) (*core.Decision, bool) { return core.FromContext(r.Context()) }

var unauthorized = []byte(`{"detail": "Unauthorized"}`)

func defaultOnError(w http.ResponseWriter, _ *http.Request, _ error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(unauthorized)
}

// New returns the middleware that limits requests by limits: a
// *core.Config, counted in a memory store of the middleware's own, or a
// *core.Limiter (core.NewLimiter), for any other store, an observer, a
// failure policy, a configuration reloaded while serving, or one limiter
// shared by several middlewares. A nil or disabled configuration passes
// every request untouched.
func New(limits core.Limits, opts ...Option) func(http.Handler) http.Handler {
	o := newOptions(opts)
	lim := adapter.Limiter(limits)
	flow := o.flow(lim)
	inCtx := lim.DecisionContext()
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var d core.Decision
			err := flow.DecideTo(r.Context(), &d, r, r.Method, core.URLPath(r.URL), route(r.Pattern))
			switch {
			case err != nil:
				o.OnError(w, r, err)
			case !d.Allowed:
				if o.Denied != nil {
					o.deny(w, r, d)
				} else {
					d.WriteDenied(w)
				}
			case d.Deferred(): // counted by outcome: once the handler has answered
				d.SetHeaders(w.Header())
				in := r
				if inCtx || d.ChargesResponse() { // the handler reports its cost (core.SetCost)
					in = withDecision(r, d)
				}
				serveCounted(lim, next, w, in, r.Context(), &d)
			default:
				d.SetHeaders(w.Header())
				if inCtx {
					r = withDecision(r, d)
				}
				next.ServeHTTP(w, r)
			}
		})
	}
}

// serveCounted serves r, whose rule counts by outcome (d.Deferred), and
// counts it with the status the client gets once the handler is done:
// the one written, 200 when the handler wrote nothing. A handler that
// panics before writing a status counts as 500 (a panic a client can
// cause, such as http.ErrAbortHandler when it closes the connection
// under a streaming reverse proxy, must not let a request pass
// uncounted); one that panics after writing counts the status it wrote.
// The panic goes on.
func serveCounted(lim *core.Limiter, next http.Handler, w http.ResponseWriter, r *http.Request, ctx context.Context, d *core.Decision) {
	sw := &statusWriter{ResponseWriter: w}
	returned := false
	defer func() {
		status := sw.status()
		if !returned && sw.code == 0 {
			status = http.StatusInternalServerError
		}
		lim.Complete(ctx, d, status)
	}()
	next.ServeHTTP(sw, r)
	returned = true
}

// deny answers a denied request with the application's handler. d is a
// copy, here and in withDecision, so that the caller's stays on its stack.
func (o *options) deny(w http.ResponseWriter, r *http.Request, d core.Decision) {
	d.SetLimitHeaders(w.Header())
	o.Denied(w, r, &d)
}

// withDecision returns r with d in its context.
func withDecision(r *http.Request, d core.Decision) *http.Request {
	return r.WithContext(core.NewContext(r.Context(), &d))
}

// route returns the path of a ServeMux pattern ("GET host/users/{id}" →
// "/users/{id}"). r.Pattern is set when the middleware runs inside a
// ServeMux handler; around the mux it is empty, and the rule is found by
// the request path.
func route(pattern string) string {
	for i := 0; i < len(pattern); i++ {
		if pattern[i] == '/' {
			return pattern[i:]
		}
	}
	return ""
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
func JWTSubject(verify func(r *http.Request, token string) (subject string, err error)) KeyFunc {
	return adapter.JWTSubject(verify, header)
}

// header returns r's header of the canonical name.
func header(r *http.Request, name string) string { return r.Header.Get(name) }

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
func (o *options) flow(lim *core.Limiter) *core.Flow[*http.Request] {
	cip := lim.ClientIP()
	return o.Flow(lim, adapter.ClientIP[*http.Request]{
		IP:   func(r *http.Request) string { return cip.ClientIP(r.RemoteAddr, r.Header.Values) },
		Addr: func(r *http.Request) string { return cip.ClientAddr(r.RemoteAddr, r.Header.Values) },
	}, header)
}

// Identity returns the identity a middleware that New builds with lim and
// opts counts a request under (Decision.Key hashes it): its key
// function's answer, else the client IP, as WithKeyFunc and lim's
// core.WithClientIP say. A handler resets the caller's counters with it
// (core.Limiter.Reset). The error is the key function's.
func Identity(r *http.Request, lim *core.Limiter, opts ...Option) (string, error) {
	return newOptions(opts).flow(lim).Identity(r)
}
