// Package nethttp is rlkit's middleware for net/http: func(http.Handler)
// http.Handler, so it fits http.ServeMux, chi and anything else that takes
// standard middleware.
//
//	cfg, err := core.LoadConfig("ratelimit.yaml")
//	if err != nil { ... }
//	handler := nethttp.New(cfg,
//		nethttp.WithKeyFunc(myUserID), // else the client IP
//		nethttp.WithBypass(isSuperAdmin),
//	)(mux)
//
// The middleware only translates: request → (method, path, identity,
// bypass) → core decision → response, through core.Flow. Rules,
// algorithms, headers and the 429 body come from package core, so it
// answers byte for byte like every other rlkit adapter.
//
// # Limits and options
//
// New takes a core.Limits. A *core.Config is decided by a limiter of the
// middleware's own, counting in a memory store. Everything about the
// limiter itself is a core.Option of a *core.Limiter handed to New
// instead: its store (core.WithStore: a Redis store shared by replicas),
// whose forwarding headers are believed (core.WithClientIP), the
// rate-limit headers (core.WithHeaders), the failure policy
// (core.WithFailOpen), an observer for metrics (core.WithObserver), the
// Decision in the request's context (core.WithDecisionContext); so is a
// configuration reloaded while serving (package core/reload), and one
// limiter shared by several middlewares.
//
//	lim := core.NewLimiter(cfg,
//		core.WithStore(store),
//		core.WithClientIP(clientip.Config{TrustedProxies: proxies}),
//		core.WithDecisionContext(true),
//	)
//	handler := nethttp.New(lim, nethttp.WithKeyFunc(nethttp.HeaderKey("X-API-Key")))(mux)
//
// The middleware's own options say how a request is read and answered:
// WithKeyFunc finds its identity (HeaderKey, JWTSubject, or the
// application's own; none: the client IP), WithBypass the callers never
// limited, WithPlan a caller's plan when the configuration has tiers,
// WithErrorHandler the answer when the key function fails (401 by
// default), and WithDeniedHandler the answer to a refused request.
//
// # Routes
//
// Inside a ServeMux handler (mux.Handle("GET /users/{id}", mw(h))) the
// rule is found from the pattern's path (r.Pattern) once per route;
// around the mux it is found from the request path. Rules and exempt paths
// are matched against every spelling of the request path a router or
// handler may act on (core.URLPath, core.Path).
//
// A rule that counts by outcome (core.RuleSpec.Count) counts a request
// once the handler has answered, with the status it wrote: 200 when it
// wrote none, 500 when it panicked before writing.
//
// # Answers
//
// A refused request (429 over a limit, 503 when the store fails closed,
// 403 from a banned network) gets core's JSON body unless
// WithDeniedHandler gives the application's own (an RFC 9457
// application/problem+json, say), written after the middleware has set
// the rate-limit headers and Retry-After (none on a 403); the handler
// behind the middleware does not run:
//
//	nethttp.WithDeniedHandler(func(w http.ResponseWriter, r *http.Request, d *core.Decision) {
//		w.Header().Set("Content-Type", "application/problem+json")
//		w.WriteHeader(d.Status())
//		fmt.Fprintf(w, `{"title": %q, "status": %d}`, http.StatusText(d.Status()), d.Status())
//	})
//
// core.WithDecisionContext(true) on the limiter puts the Decision of
// every request passed on into its context, where the handler finds it
// with DecisionOf (the rule, the remaining quota d.Result.Remaining); it
// is off by default, since it costs three allocations a request. Identity
// gives the identity a request counts under, for core.Limiter.Reset.
//
// # Client IP
//
// The client IP is worked out by the limiter's clientip.Config (see
// core.WithClientIP): the TCP peer's address (r.RemoteAddr), and a
// forwarding header only when the peer is a proxy it trusts. By default
// no proxy is trusted.
package nethttp
