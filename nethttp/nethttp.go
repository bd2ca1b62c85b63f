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
package nethttp

import (
	"log/slog"
	"net/http"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
)

// KeyFunc returns the identity a request is counted under: a user id, an
// API key. An empty identity means "anonymous": the request is counted
// under its client IP. An error rejects the request (see WithErrorHandler).
type KeyFunc func(r *http.Request) (string, error)

// Option configures the middleware.
type Option func(*options)

type options struct {
	store   core.Store
	key     KeyFunc
	bypass  func(*http.Request) bool
	ip      core.ClientIPConfig
	onError func(http.ResponseWriter, *http.Request, error)
	core    []core.Option
	limiter *core.Limiter
}

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
func WithStore(s core.Store) Option { return func(o *options) { o.store = s } }

// WithKeyFunc sets how a request's identity is found. Default: none, so
// every request is counted under its client IP.
func WithKeyFunc(fn KeyFunc) Option { return func(o *options) { o.key = fn } }

// WithBypass sets a predicate for callers that are never limited (a
// super-admin); their requests touch no counter. Default: none.
func WithBypass(fn func(*http.Request) bool) Option { return func(o *options) { o.bypass = fn } }

// WithClientIP sets whose forwarding headers are believed when working out
// the client IP (see core.ClientIPConfig). Default: the zero config, which
// trusts no proxy and uses the TCP peer address, an IPv6 one per /64
// (core.ClientIPConfig.IPv6PrefixLen).
func WithClientIP(cfg core.ClientIPConfig) Option { return func(o *options) { o.ip = cfg } }

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
	lim := core.AdapterLimiter("nethttp", o.limiter, cfg, o.store, func() core.Store { return memstore.New() }, o.core)
	flow := o.flow()
	flow.Limiter = lim
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			d, err := flow.Decide(r.Context(), r, r.Method, core.URLPath(r.URL), route(r.Pattern))
			switch {
			case err != nil:
				o.onError(w, r, err)
			case !d.Allowed:
				d.WriteDenied(w)
			case d.Deferred(): // counted by outcome: once the handler has answered
				d.SetHeaders(w.Header())
				sw := &statusWriter{ResponseWriter: w}
				next.ServeHTTP(sw, r)
				lim.Complete(r.Context(), &d, sw.status())
			default:
				d.SetHeaders(w.Header())
				next.ServeHTTP(w, r)
			}
		})
	}
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
		Key:      o.key,
		Bypass:   o.bypass,
		ClientIP: func(r *http.Request) string { return o.ip.ClientIP(r.RemoteAddr, r.Header.Values) },
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
