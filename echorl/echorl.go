package echorl

import (
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
)

// KeyFunc returns the identity a request is counted under: a user id, an
// API key. An empty identity means "anonymous": the request is counted
// under its client IP. An error rejects the request (see WithErrorHandler).
type KeyFunc func(c echo.Context) (string, error)

// Option configures the middleware.
type Option func(*options)

type options struct {
	store   core.Store
	key     KeyFunc
	bypass  func(echo.Context) bool
	ip      core.ClientIPConfig
	onError func(echo.Context, error) error
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
func WithBypass(fn func(echo.Context) bool) Option { return func(o *options) { o.bypass = fn } }

// WithClientIP sets whose forwarding headers are believed when working out
// the client IP (see core.ClientIPConfig). Default: the zero config, which
// trusts no proxy and uses the TCP peer address, an IPv6 one per /64
// (core.ClientIPConfig.IPv6PrefixLen).
func WithClientIP(cfg core.ClientIPConfig) Option { return func(o *options) { o.ip = cfg } }

// WithErrorHandler sets the response to a request whose KeyFunc failed;
// the middleware returns what fn returns, and the handler does not run.
// Default: 401 with {"detail": "Unauthorized"}.
func WithErrorHandler(fn func(echo.Context, error) error) Option {
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

func defaultOnError(c echo.Context, _ error) error {
	w := c.Response()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusUnauthorized)
	_, _ = w.Write(unauthorized)
	return nil
}

// New returns the middleware for cfg. A nil or disabled cfg passes every
// request untouched. With WithLimiter, cfg must be nil: the limiter
// decides with its own configuration.
func New(cfg *core.Config, opts ...Option) echo.MiddlewareFunc {
	o := newOptions(opts)
	lim := core.AdapterLimiter("echorl", o.limiter, cfg, o.store, func() core.Store { return memstore.New() }, o.core)
	flow := o.flow()
	flow.Limiter = lim
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			r := c.Request()
			d, err := flow.Decide(r.Context(), c, r.Method, core.URLPath(r.URL), c.Path())
			switch {
			case err != nil:
				return o.onError(c, err)
			case !d.Allowed:
				d.WriteDenied(c.Response())
				return nil
			}
			d.SetHeaders(c.Response().Header())
			if !d.Deferred() {
				return next(c)
			}
			err = next(c) // counted by outcome: once the handler has answered
			lim.Complete(r.Context(), &d, status(c, err))
			return err
		}
	}
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
// under the identity core.HeaderIdentity(canonical name, value), which the
// limiter stores and logs only as a keyed hash ("X-Api-Key:hmac:<hex>";
// see core.WithIdentityKey); requests without it count under their client
// IP.
func HeaderKey(name string) KeyFunc {
	canonical := http.CanonicalHeaderKey(name)
	return func(c echo.Context) (string, error) {
		return core.HeaderIdentity(canonical, c.Request().Header.Get(canonical)), nil
	}
}

// JWTSubject counts requests by the subject of their bearer token, as
// "sub:<subject>". verify must check the token (signature, expiry, audience)
// and return its subject; rlkit parses nothing itself. A request without a
// bearer token counts under its client IP; one whose token fails
// verification is rejected (see WithErrorHandler).
func JWTSubject(verify func(c echo.Context, token string) (subject string, err error)) KeyFunc {
	return func(c echo.Context) (string, error) {
		return core.SubjectIdentity(c.Request().Header.Get("Authorization"), func(tok string) (string, error) { return verify(c, tok) })
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
func (o *options) flow() *core.Flow[echo.Context] {
	flow := &core.Flow[echo.Context]{
		Key:    o.key,
		Bypass: o.bypass,
		ClientIP: func(c echo.Context) string {
			r := c.Request()
			return o.ip.ClientIP(r.RemoteAddr, r.Header.Values)
		},
	}
	return flow
}

// Identity returns the identity a middleware that New builds with opts
// counts a request under (Decision.Key hashes it): its key function's
// answer, else the client IP, as WithKeyFunc and WithClientIP say. A
// handler resets the caller's counters with it (core.Limiter.Reset; see
// WithLimiter). The error is the key function's.
func Identity(c echo.Context, opts ...Option) (string, error) {
	return newOptions(opts).flow().Identity(c)
}
