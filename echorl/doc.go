// Package echorl is rlkit's middleware for Echo (labstack/echo/v4): an
// echo.MiddlewareFunc.
//
//	cfg, err := core.LoadConfig("ratelimit.yaml")
//	if err != nil { ... }
//	e := echo.New()
//	e.Use(echorl.New(cfg,
//		echorl.WithKeyFunc(myUserID), // else the client IP
//		echorl.WithBypass(isSuperAdmin),
//	))
//
// The middleware only translates: request → (method, path, identity,
// bypass) → core decision → response, through core.Flow. Rules,
// algorithms, headers and the 429 body come from package core, so it
// answers byte for byte like every other rlkit adapter. A denial is
// written by the middleware itself, not returned as an *echo.HTTPError,
// so Echo's error handler never rewrites it. New takes a core.Limits: the
// *core.Config, counted in a memory store of the middleware's own, or a
// *core.Limiter, whose core.Options say everything about the limiter
// itself (its store, headers, failure policy, observer, client IP, the
// Decision in the request's context).
//
// With e.Use the rule is found from Echo's route template (c.Path) once
// per route; with e.Pre, which runs before routing, it is found from the
// path. Rules and exempt paths are matched against every spelling of the
// request path a router or handler may act on (core.URLPath, core.Path),
// never against Echo's parameters.
//
// A refused request (429 over a limit, 503 when the store fails closed,
// 403 from a banned network) gets core's JSON body unless
// WithDeniedHandler gives the application's own (an RFC 9457
// application/problem+json, say), written after the middleware has set
// the rate-limit headers and Retry-After (none on a 403); the
// middleware returns its error. core.WithDecisionContext(true) puts the
// Decision of every request passed on into the echo.Context (DecisionOf,
// c.Get(DecisionKey)) and the request's context (core.FromContext), so
// that the handler can report the remaining quota; it is off by default,
// since it costs five allocations a request.
//
// The client IP is worked out by clientip.Config (see core.WithClientIP),
// not by echo.Context.RealIP, which believes forwarding headers from any
// peer unless the Echo instance's IPExtractor says otherwise.
package echorl
