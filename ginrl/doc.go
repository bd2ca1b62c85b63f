// Package ginrl is rlkit's middleware for Gin: a gin.HandlerFunc.
//
//	cfg, err := core.LoadConfig("ratelimit.yaml")
//	if err != nil { ... }
//	r := gin.New()
//	r.Use(ginrl.New(cfg,
//		ginrl.WithKeyFunc(myUserID), // else the client IP
//		ginrl.WithBypass(isSuperAdmin),
//	))
//
// The middleware only translates: request → (method, path, identity,
// bypass) → core decision → response, through core.Flow. Rules,
// algorithms, headers and the 429 body come from package core, so it
// answers byte for byte like every other rlkit adapter. New takes a
// core.Limits: the *core.Config, counted in a memory store of the
// middleware's own, or a *core.Limiter, whose core.Options say everything
// about the limiter itself (its store, headers, failure policy, observer,
// client IP, the Decision in the request's context).
//
// The rule is found from Gin's route template (c.FullPath) once per route;
// for a request no route matched it is found from the path. Rules and
// exempt paths are matched against every spelling of the request path a
// router or handler may act on (core.URLPath, core.Path), never against
// Gin's parameters.
//
// A refused request (429 over a limit, 503 when the store fails closed,
// 403 from a banned network) gets core's JSON body unless
// WithDeniedHandler gives the application's own (an RFC 9457
// application/problem+json, say), written after the middleware has set
// the rate-limit headers and Retry-After (none on a 403); the chain is
// aborted after it. core.WithDecisionContext(true) puts the Decision of every
// request passed on into the gin.Context (DecisionOf, c.Get(DecisionKey))
// and the request's context (core.FromContext), so that the handler can
// report the remaining quota; it is off by default, since it costs five
// allocations a request.
//
// The client IP is worked out by clientip.Config (see core.WithClientIP),
// not by gin.Context.ClientIP, which believes forwarding headers from any
// peer unless the engine's trusted proxies are set.
package ginrl
