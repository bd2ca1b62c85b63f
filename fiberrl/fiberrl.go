package fiberrl

import (
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"unsafe"

	"github.com/gofiber/fiber/v2"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/clientip"
)

// KeyFunc returns the identity a request is counted under: a user id, an
// API key. An empty identity means "anonymous": the request is counted
// under its client IP. An error rejects the request (see WithErrorHandler).
// The identity is copied before use, so it may point into fasthttp's
// memory (c.Get, c.Params).
type KeyFunc func(c *fiber.Ctx) (string, error)

// Option configures the middleware. What concerns the limiter itself (its
// store, headers, failure policy, observer, client IP, the Decision in
// the request's context) is a core.Option of the core.Limiter New is
// given.
type Option func(*options)

type options struct {
	adapter.Options[*fiber.Ctx, func(*fiber.Ctx, error) error, DeniedHandler]
}

// DeniedHandler writes the response to a request the limiter refuses: d
// is its Decision (d.Status() is the status the default response has: 429
// over a limit or under a penalty, 503 when the store failed and the
// policy is fail-closed, 403 from a banned network, d.Banned).
// When it is called the response already carries the rate-limit headers
// and Retry-After (core.Decision.LimitHeader); it writes the status,
// Content-Type and body, and may change any header. The middleware returns
// what it returns, and the handler does not run.
type DeniedHandler func(c *fiber.Ctx, d *core.Decision) error

// DecisionKey is the key under which a middleware whose limiter was built
// with core.WithDecisionContext(true) stores the request's *core.Decision in the
// fiber.Ctx's locals (c.Locals(DecisionKey); DecisionOf reads it).
const DecisionKey = "rlkit.decision"

// WithKeyFunc sets how a request's identity is found. Default: none, so
// every request is counted under its client IP.
func WithKeyFunc(fn KeyFunc) Option { return func(o *options) { o.Key = fn } }

// WithBypass sets a predicate for callers that are never limited (a
// super-admin); their requests touch no counter. Default: none.
func WithBypass(fn func(*fiber.Ctx) bool) Option { return func(o *options) { o.Bypass = fn } }

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
func WithPlan(fn func(*fiber.Ctx) string) Option { return func(o *options) { o.Plan = fn } }

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
func WithCost(fn func(*fiber.Ctx) int64) Option { return func(o *options) { o.Cost = fn } }

// WithErrorHandler sets the response to a request whose KeyFunc failed;
// the middleware returns what fn returns, and the handler does not run.
// Default: 401 with {"detail": "Unauthorized"}.
func WithErrorHandler(fn func(*fiber.Ctx, error) error) Option {
	return func(o *options) { o.OnError = fn }
}

// WithDeniedHandler sets the response to every request the limiter
// refuses (every Decision not Allowed: over a limit, the store failed
// closed, and any other refusal), for example an RFC 9457
// application/problem+json body; see DeniedHandler. Default: nil, which
// writes the response of core.Decision's Header, Status and Body: 429
// with {"detail": "Rate limit exceeded for '<rule>' requests"}, or 503
// with {"detail": "Rate limiter unavailable"}, or 403 with
// {"detail": "Forbidden"} from a banned network, as application/json.
func WithDeniedHandler(fn DeniedHandler) Option { return func(o *options) { o.Denied = fn } }

// DecisionOf returns the Decision the middleware made for c's request,
// which a middleware whose limiter was built with
// core.WithDecisionContext(true) stores in c's locals (and in its user
// context, for core.FromContext), and ok false when there is none. A Decision whose Rule is nil counted
// nothing (an exempt path, a bypassed caller, limiting off). It holds no
// memory of fasthttp's: it may be kept after the handler returns.
func DecisionOf(c *fiber.Ctx) (*core.Decision, bool) {
	d, ok := c.Locals(DecisionKey).(*core.Decision)
	return d, ok && d != nil
}

var unauthorized = []byte(`{"detail": "Unauthorized"}`)

func defaultOnError(c *fiber.Ctx, _ error) error {
	c.Response().Header.SetContentType("application/json")
	c.Status(http.StatusUnauthorized)
	c.Response().SetBody(unauthorized)
	return nil
}

// New returns the middleware that limits requests by limits: a
// *core.Config, counted in a memory store of the middleware's own, or a
// *core.Limiter (core.NewLimiter), for any other store, an observer, a
// failure policy, a configuration reloaded while serving, or one limiter
// shared by several middlewares. A nil or disabled configuration passes
// every request untouched.
func New(limits core.Limits, opts ...Option) fiber.Handler {
	o := newOptions(opts)
	lim := adapter.Limiter(limits)
	flow := o.flow(lim)
	inCtx := lim.DecisionContext()
	// Fiber matches paths without regard to case unless the app sets
	// CaseSensitive; then the rules see each spelling in lower case too.
	folded := *flow
	folded.FoldCase = true
	var seen atomic.Pointer[appCase]
	return func(c *fiber.Ctx) error {
		f := flow
		if caseInsensitive(c.App(), &seen) {
			f = &folded
		}
		var d core.Decision
		err := f.DecideTo(c.UserContext(), &d, c, method(c.Method()), requestPath(c.Request().URI().PathOriginal()), route(c.Route()))
		if err != nil {
			return o.OnError(c, err)
		}
		if !d.Allowed && o.Denied != nil {
			return o.deny(c, d)
		}
		setHeaders(c, &d, false)
		if !d.Allowed {
			c.Status(d.Status())
			c.Response().SetBody(d.Body()) // a copy: Body is shared
			return nil
		}
		if inCtx || d.ChargesResponse() { // the handler reports its cost (core.SetCost)
			withDecision(c, d)
		}
		if !d.Deferred() {
			return c.Next()
		}
		return nextCounted(lim, c, &d) // counted by outcome: once the handler has answered
	}
}

// setHeaders sets on c's response the headers of d: core.Decision.Header,
// or, with limitOnly, LimitHeader (those without the default body's;
// for an allowed request they are the same).
func setHeaders(c *fiber.Ctx, d *core.Decision, limitOnly bool) {
	h := &c.Response().Header
	limitOnly = limitOnly || d.Allowed
	var buf [128]byte
	for i := 0; ; i++ {
		var name string
		var value []byte
		var ok bool
		if limitOnly {
			name, value, ok = d.LimitHeader(i, buf[:0])
		} else {
			name, value, ok = d.Header(i, buf[:0])
		}
		if !ok {
			return
		}
		h.SetCanonical(nameBytes(name), value) // both copied
	}
}

// deny answers a denied request with the application's handler. d is a
// copy, here and in withDecision, so that the caller's stays on its stack.
func (o *options) deny(c *fiber.Ctx, d core.Decision) error {
	setHeaders(c, &d, true)
	return o.Denied(c, &d)
}

// withDecision puts d in c's locals and in its user context.
func withDecision(c *fiber.Ctx, d core.Decision) {
	c.Locals(DecisionKey, &d)
	c.SetUserContext(core.NewContext(c.UserContext(), &d))
}

// nextCounted runs the handlers after the middleware for a request whose
// rule counts by outcome (d.Deferred), and counts it with the status the
// client gets (see status). A handler that panics counts as 500, which
// Fiber's recover middleware answers (a panic a client can cause must
// not let a request pass uncounted). The panic goes on.
func nextCounted(lim *core.Limiter, c *fiber.Ctx, d *core.Decision) (err error) {
	ctx := c.UserContext()
	returned := false
	defer func() {
		s := fiber.StatusInternalServerError
		if returned {
			s = status(c, err)
		}
		lim.Complete(ctx, d, s)
	}()
	err = c.Next()
	returned = true
	return err
}

// status is the status of the response to c once its handlers returned
// err: for an error, the one Fiber's default error handler answers with,
// the code of a *fiber.Error in err's chain, else 500 (an application's
// own Config.ErrorHandler may answer otherwise); else the response's
// status (200 unless a handler set another).
func status(c *fiber.Ctx, err error) int {
	if err == nil {
		return c.Response().StatusCode()
	}
	if fe, ok := errors.AsType[*fiber.Error](err); ok {
		return fe.Code
	}
	return fiber.StatusInternalServerError
}

// appCase records whether an app matches paths case-insensitively.
type appCase struct {
	app         *fiber.App
	insensitive bool
}

// caseInsensitive reports whether app matches paths without regard to case
// (fiber.Config.CaseSensitive false, the default). The answer for the last
// app seen is kept in seen: reading the app's configuration copies it.
func caseInsensitive(app *fiber.App, seen *atomic.Pointer[appCase]) bool {
	if a := seen.Load(); a != nil && a.app == app {
		return a.insensitive
	}
	a := &appCase{app: app, insensitive: !app.Config().CaseSensitive}
	seen.Store(a)
	return a.insensitive
}

// nameBytes returns the bytes of a header name from core.Decision.Header,
// which is already canonical, without copying: fasthttp only reads them.
func nameBytes(name string) []byte { return unsafe.Slice(unsafe.StringData(name), len(name)) }

// peerIP is the client IP when cfg trusts no proxy: the TCP peer's
// address, as cfg.ClientIP renders it (an IPv6 one grouped per
// cfg.IPv6PrefixLen; with whole, not grouped: see clientip.Config.ClientAddr).
// IPv4 peers come from ipv4Strings, so a returning
// client costs no allocation.
func peerIP(c *fiber.Ctx, cfg *clientip.Config, whole bool) string {
	if a, ok := c.Context().RemoteAddr().(*net.TCPAddr); ok {
		if ip4 := a.IP.To4(); ip4 != nil {
			return ipv4String([4]byte(ip4))
		}
	}
	if whole {
		return cfg.ClientAddr(remoteAddr(c), nil) // an IPv6 peer's whole address
	}
	return cfg.ClientIP(remoteAddr(c), nil)
}

// ipv4Strings caches the text of recently seen IPv4 addresses: a
// direct-mapped table, so a lookup is one load and a compare, and its size
// is fixed. A slot holds an immutable entry, replaced whole on a miss.
var ipv4Strings [4096]atomic.Pointer[ipv4Entry]

type ipv4Entry struct {
	addr [4]byte
	text string
}

// ipv4String returns a's dotted-decimal text, in memory of its own.
func ipv4String(a [4]byte) string {
	v := binary.BigEndian.Uint32(a[:])
	slot := &ipv4Strings[(v*0x9E3779B1)>>20] // Fibonacci hashing to 12 bits
	if e := slot.Load(); e != nil && e.addr == a {
		return e.text
	}
	e := &ipv4Entry{addr: a, text: netip.AddrFrom4(a).String()}
	slot.Store(e)
	return e.text
}

// remoteAddr is the TCP peer in http.Request.RemoteAddr form ("ip:port",
// "[ipv6]:port"), in new memory: ClientIP's answer is a substring of it
// or of a header line, never of fasthttp's buffers.
func remoteAddr(c *fiber.Ctx) string {
	addr := c.Context().RemoteAddr()
	if a, ok := addr.(*net.TCPAddr); ok {
		ap := a.AddrPort()
		var b [64]byte
		return string(netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()).AppendTo(b[:0]))
	}
	return addr.String()
}

// headerValues returns the values function of clientip.Config.ClientIP
// for c's request headers: all lines of one header, copied.
func headerValues(c *fiber.Ctx) func(string) []string {
	return func(name string) []string {
		lines := c.Request().Header.PeekAll(name)
		if len(lines) == 0 {
			return nil
		}
		vs := make([]string, len(lines))
		for i, l := range lines {
			vs[i] = string(l)
		}
		return vs
	}
}

// route returns the template of the route being served: for a middleware
// mounted with Use or Group, Fiber's route is the mount's prefix ("/",
// "/api"), which core uses only for a path that is literally one of its
// own, so the rule is then found by the path. A context without a route
// (Fiber's stand-in has the request's path and no handlers) gives "".
func route(r *fiber.Route) string {
	if len(r.Handlers) == 0 {
		return ""
	}
	return r.Path
}

// method returns m in memory of its own: core keeps (method, route) in its
// route cache, and Fiber's c.Method() points into fasthttp's buffer.
func method(m string) string {
	switch m {
	case fiber.MethodGet:
		return fiber.MethodGet
	case fiber.MethodHead:
		return fiber.MethodHead
	case fiber.MethodPost:
		return fiber.MethodPost
	case fiber.MethodPut:
		return fiber.MethodPut
	case fiber.MethodPatch:
		return fiber.MethodPatch
	case fiber.MethodDelete:
		return fiber.MethodDelete
	case fiber.MethodOptions:
		return fiber.MethodOptions
	}
	return strings.Clone(m)
}

// HeaderKey counts requests by the value of a request header (an API key)
// under the identity adapter.HeaderIdentity(canonical name, value), which
// the limiter stores and logs only as a keyed hash
// ("X-Api-Key:hmac:<hex>"; see core.WithIdentityKey); requests without it
// count under their client IP.
func HeaderKey(name string) KeyFunc { return adapter.HeaderKey(name, header) }

// JWTSubject counts requests by the subject of their bearer token, as
// "sub:<subject>". verify must check the token (signature, expiry, audience)
// and return its subject; rlkit parses nothing itself. The token is a copy,
// so verify may keep it (in a cache, say). A request without a bearer token
// counts under its client IP; one whose token fails verification is
// rejected (see WithErrorHandler).
func JWTSubject(verify func(c *fiber.Ctx, token string) (subject string, err error)) KeyFunc {
	return adapter.JWTSubject(func(c *fiber.Ctx, tok string) (string, error) { return verify(c, strings.Clone(tok)) }, header)
}

// header returns c's request header of the canonical name, in fasthttp's
// memory.
func header(c *fiber.Ctx, name string) string { return c.Get(name) }

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
func (o *options) flow(lim *core.Limiter) *core.Flow[*fiber.Ctx] {
	cip := lim.ClientIP()
	ip := adapter.ClientIP[*fiber.Ctx]{
		IP:   func(c *fiber.Ctx) string { return cip.ClientIP(remoteAddr(c), headerValues(c)) },
		Addr: func(c *fiber.Ctx) string { return cip.ClientAddr(remoteAddr(c), headerValues(c)) },
	}
	if len(cip.TrustedProxies) == 0 {
		// No header is believed: the client IP is the TCP peer's.
		ip.IP = func(c *fiber.Ctx) string { return peerIP(c, &cip, false) }
		ip.Addr = func(c *fiber.Ctx) string { return peerIP(c, &cip, true) }
	}
	flow := o.Flow(lim, ip, header)
	if key := o.Key; key != nil {
		flow.Key = func(c *fiber.Ctx) (string, error) {
			id, err := key(c)
			return strings.Clone(id), err // the store may keep it
		}
	}
	return flow
}

// Identity returns the identity a middleware that New builds with lim and
// opts counts a request under (Decision.Key hashes it): its key
// function's answer, else the client IP, as WithKeyFunc and lim's
// core.WithClientIP say. A handler resets the caller's counters with it
// (core.Limiter.Reset). The error is the key function's.
func Identity(c *fiber.Ctx, lim *core.Limiter, opts ...Option) (string, error) {
	return newOptions(opts).flow(lim).Identity(c)
}
