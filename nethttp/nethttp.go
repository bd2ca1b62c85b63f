// Package nethttp is rlkit's middleware for net/http: func(http.Handler)
// http.Handler, so it fits http.ServeMux, chi and anything else that takes
// standard middleware.
//
//	cfg, err := core.LoadConfig("ratelimit.yaml")
//	if err != nil { ... }
//	handler := nethttp.New(cfg,
//		nethttp.WithKeyFunc(myUserID),        // else the client IP
//		nethttp.WithBypass(isSuperAdmin),
//	)(mux)
//
// The middleware only translates: request → (method, path, identity,
// bypass) → core decision → response. Rules, algorithms, headers and the
// 429 body come from package core, so every rlkit adapter answers the same.
//
// A refused request (429 over a limit, 503 when the store fails closed,
// 403 from a banned network) gets core's JSON body unless
// WithDeniedHandler gives the application's own (an RFC 9457
// application/problem+json, say), written after the middleware has set
// the rate-limit headers and Retry-After (none on a 403):
//
//	nethttp.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d *core.Decision) {
//		w.Header().Set("Content-Type", "application/problem+json")
//		w.WriteHeader(d.Status())
//		fmt.Fprintf(w, `{"title": %q, "status": %d}`, http.StatusText(d.Status()), d.Status())
//	})
//
// WithDecisionContext(true) puts the Decision of every request passed on
// into its context, where the handler finds it with DecisionOf (the rule,
// the remaining quota d.Result.Remaining); it is off by default, since it
// costs three allocations a request.
package nethttp

import (
	"context"
	"log/slog"
	"net/http"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// KeyFunc returns the identity a request is counted under: a user id, an
// API key. An empty identity means "anonymous": the request is counted
// under its client IP. An error rejects the request (see WithErrorHandler).
type KeyFunc func(r *http.Request) (string, error)

// Option configures the middleware.
type Option func(*options)

type options struct {
	store   store.Store
	key     KeyFunc
	bypass  func(*http.Request) bool
	plan    func(*http.Request) string
	ip      clientip.Config
	onError func(http.ResponseWriter, *http.Request, error)
	core    []core.Option
	limiter *core.Limiter
	denied  DeniedHandler
	inCtx   bool
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

// WithLimiter makes the middleware decide with l, a limiter the
// application keeps: to swap its configuration while serving
// (SetConfig, ReloadFile, reload.Watch), to reset what a caller was
// counted under (Reset, with Identity), or to share one between
// middlewares. New's configuration must then be nil, and WithStore and
// the limiter's options (WithHeaders, WithFailOpen, WithObserver,
// WithLogger, WithLimiterOptions) not given: they belong to
// core.NewLimiter, and New panics when it gets them with a limiter.
// Default: a limiter New makes.
func WithLimiter(l *core.Limiter) Option { return func(o *options) { o.limiter = l } }

// WithStore sets where counters live. Default: a new memstore.Store.
func WithStore(s store.Store) Option { return func(o *options) { o.store = s } }

// WithKeyFunc sets how a request's identity is found. Default: none, so
// every request is counted under its client IP.
func WithKeyFunc(fn KeyFunc) Option { return func(o *options) { o.key = fn } }

// WithBypass sets a predicate for callers that are never limited (a
// super-admin); their requests touch no counter. Default: none.
func WithBypass(fn func(*http.Request) bool) Option { return func(o *options) { o.bypass = fn } }

// WithPlan sets how a request's plan is found (a claim of its token, a
// customer record): the configuration's tiers give each plan its own
// limits (see core.TierSpec), and the rate-limit headers and the 429 show
// the plan's. It is called only when the configuration has tiers, after
// the key function; "" or a plan the configuration lacks counts under the
// rules' own limits. The plan picks the caller's limits: take it from
// what the client cannot forge (a verified token's claim, a customer
// record), never from a plain request header. The string is used for the
// lookup only, never kept.
// Default: none (every caller counts under the rules' own limits).
func WithPlan(fn func(*http.Request) string) Option { return func(o *options) { o.plan = fn } }

// WithClientIP sets whose forwarding headers are believed when working out
// the client IP (see core.ClientIPConfig). Default: the zero config, which
// trusts no proxy and uses the TCP peer address, an IPv6 one per /64
// (core.ClientIPConfig.IPv6PrefixLen).
func WithClientIP(cfg clientip.Config) Option { return func(o *options) { o.ip = cfg } }

// WithErrorHandler sets the response to a request whose KeyFunc failed.
// Default: 401 with {"detail": "Unauthorized"}.
func WithErrorHandler(fn func(http.ResponseWriter, *http.Request, error)) Option {
	return func(o *options) { o.onError = fn }
}

// WithHeaders overrides the configuration's rate-limit header style.
// Default: the configuration's (the IETF draft headers unless it says otherwise).
func WithHeaders(s core.HeaderStyle) Option { return WithLimiterOptions(core.WithHeaders(s)) }

// WithFailOpen overrides the configuration's failure policy: true lets
// requests through when the store fails, false answers 503. Default: the
// configuration's (open unless it says closed).
func WithFailOpen(open bool) Option { return WithLimiterOptions(core.WithFailOpen(open)) }

// WithObserver sets a hook that sees every decision (see core.Observer).
// Default: none.
func WithObserver(fn core.Observer) Option { return WithLimiterOptions(core.WithObserver(fn)) }

// WithLogger sets where store failures are reported. Default: slog.Default().
func WithLogger(l *slog.Logger) Option { return WithLimiterOptions(core.WithLogger(l)) }

// WithLimiterOptions passes options to the core.Limiter. Default: none.
func WithLimiterOptions(opts ...core.Option) Option {
	return func(o *options) { o.core = append(o.core, opts...) }
}

// WithDeniedHandler sets the response to every request the limiter
// refuses (every Decision not Allowed: over a limit, the store failed
// closed, and any other refusal), for example an RFC 9457
// application/problem+json body; see DeniedHandler. Default: nil, which
// writes core.Decision.WriteDenied's response: 429 with
// {"detail": "Rate limit exceeded for '<rule>' requests"}, or 503 with
// {"detail": "Rate limiter unavailable"}, or 403 with
// {"detail": "Forbidden"} from a banned network, as application/json.
func WithDeniedHandler(fn DeniedHandler) Option { return func(o *options) { o.denied = fn } }

// WithDecisionContext, when on, puts the Decision of every request the
// middleware passes on into the request's context (core.NewContext), so
// that the handler can report the remaining quota it read with DecisionOf.
// It costs each request three allocations, about 590 bytes: a copy of the
// Decision on the heap, a context and a shallow copy of the *http.Request
// (r.WithContext). Default: false (no Decision in the context, and no
// allocation for it).
func WithDecisionContext(on bool) Option { return func(o *options) { o.inCtx = on } }

// DecisionOf returns the Decision the middleware made for r, which a
// middleware built WithDecisionContext(true) puts in r's context, and ok
// false when there is none. A Decision whose Rule is nil counted nothing
// (an exempt path, a bypassed caller, limiting off).
func DecisionOf(r *http.Request) (*core.Decision, bool) { return core.FromContext(r.Context()) }

var unauthorized = []byte(`{"detail": "Unauthorized"}`)

func defaultOnError(w http.ResponseWriter, _ *http.Request, _ error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(unauthorized)
}

// New returns the middleware for cfg. A nil or disabled cfg passes every
// request untouched. With WithLimiter, cfg must be nil: the limiter
// decides with its own configuration.
func New(cfg *core.Config, opts ...Option) func(http.Handler) http.Handler {
	o := newOptions(opts)
	lim := core.AdapterLimiter("nethttp", o.limiter, cfg, o.store, func() store.Store { return memstore.New() }, o.core)
	flow := o.flow()
	flow.Limiter = lim
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			var d core.Decision
			err := flow.DecideTo(r.Context(), &d, r, r.Method, core.URLPath(r.URL), route(r.Pattern))
			switch {
			case err != nil:
				o.onError(w, r, err)
			case !d.Allowed:
				if o.denied != nil {
					o.deny(w, r, d)
				} else {
					d.WriteDenied(w)
				}
			case d.Deferred(): // counted by outcome: once the handler has answered
				d.SetHeaders(w.Header())
				in := r
				if o.inCtx {
					in = withDecision(r, d)
				}
				serveCounted(lim, next, w, in, r.Context(), &d)
			default:
				d.SetHeaders(w.Header())
				if o.inCtx {
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
	o.denied(w, r, &d)
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
// under the identity core.HeaderIdentity(canonical name, value), which the
// limiter stores and logs only as a keyed hash ("X-Api-Key:hmac:<hex>";
// see core.WithIdentityKey); requests without it count under their client
// IP.
func HeaderKey(name string) KeyFunc {
	canonical := http.CanonicalHeaderKey(name)
	return func(r *http.Request) (string, error) {
		return core.HeaderIdentity(canonical, r.Header.Get(canonical)), nil
	}
}

// JWTSubject counts requests by the subject of their bearer token, as
// "sub:<subject>". verify must check the token (signature, expiry, audience)
// and return its subject; rlkit parses nothing itself. A request without a
// bearer token counts under its client IP; one whose token fails
// verification is rejected (see WithErrorHandler).
func JWTSubject(verify func(r *http.Request, token string) (subject string, err error)) KeyFunc {
	return func(r *http.Request) (string, error) {
		return core.SubjectIdentity(r.Header.Get("Authorization"), func(tok string) (string, error) { return verify(r, tok) })
	}
}

// newOptions applies opts to the defaults.
func newOptions(opts []Option) *options {
	o := &options{onError: defaultOnError}
	for _, fn := range opts {
		fn(o)
	}
	return o
}

// flow is the flow of o, without its limiter.
func (o *options) flow() *core.Flow[*http.Request] {
	flow := &core.Flow[*http.Request]{
		Key:        o.key,
		Bypass:     o.bypass,
		Plan:       o.plan,
		ClientIP:   func(r *http.Request) string { return o.ip.ClientIP(r.RemoteAddr, r.Header.Values) },
		ClientAddr: func(r *http.Request) string { return o.ip.ClientAddr(r.RemoteAddr, r.Header.Values) },
	}
	return flow
}

// Identity returns the identity a middleware that New builds with opts
// counts a request under (Decision.Key hashes it): its key function's
// answer, else the client IP, as WithKeyFunc and WithClientIP say. A
// handler resets the caller's counters with it (core.Limiter.Reset; see
// WithLimiter). The error is the key function's.
func Identity(r *http.Request, opts ...Option) (string, error) {
	return newOptions(opts).flow().Identity(r)
}
