// Package fiberrl is rlkit's middleware for Fiber (gofiber/fiber/v2): a
// fiber.Handler.
//
//	cfg, err := core.LoadConfig("ratelimit.yaml")
//	if err != nil { ... }
//	app := fiber.New()
//	app.Use(fiberrl.New(cfg,
//		fiberrl.WithKeyFunc(myUserID), // else the client IP
//		fiberrl.WithBypass(isSuperAdmin),
//	))
//
// The middleware only translates: request → (method, path, identity,
// bypass) → core decision → response, through core.Flow. Rules,
// algorithms, headers and the 429 body come from package core, so it
// answers like every other rlkit adapter: the same status, headers and
// body. New takes a core.Limits: the *core.Config, counted in a memory
// store of the middleware's own, or a *core.Limiter, whose core.Options
// say everything about the limiter itself (its store, headers, failure
// policy, observer, client IP, the Decision in the request's context).
//
// The middleware hands core the path Fiber routes on, fasthttp's raw path
// as sent, and core matches rules and exempt paths against every spelling
// of it a router or handler may act on (as sent, decoded, cleaned; see
// core.Path). Registered on a route
// (app.Get("/api/kb/:id/reindex", mw, h)) the middleware finds the rule
// from Fiber's route template once per route; registered with app.Use or
// Group it finds it from the path, since Fiber then hands over only the
// middleware's prefix.
//
// fasthttp reuses a request's memory once the handler returns. The
// middleware keeps nothing of it: the identity handed to the store (a
// KeyFunc's result, the client IP) is always a copy, so a KeyFunc may
// return strings from c.Get or c.Params as they are.
//
// A refused request (429 over a limit, 503 when the store fails closed,
// 403 from a banned network) gets core's JSON body unless
// WithDeniedHandler gives the application's own (an RFC 9457
// application/problem+json, say), written after the middleware has set
// the rate-limit headers and Retry-After (none on a 403); the
// middleware returns its error. core.WithDecisionContext(true) puts the
// Decision of every request passed on into the fiber.Ctx's locals
// (DecisionOf, c.Locals(DecisionKey)) and its user context
// (core.FromContext(c.UserContext())), so that the handler can report the
// remaining quota; it is off by default, since it costs two allocations a
// request.
//
// The client IP is worked out by clientip.Config (see core.WithClientIP)
// from the TCP peer and the request headers, not by fiber.Ctx.IP, which
// believes the configured proxy header from any peer unless Fiber's
// trusted-proxy check is enabled.
package fiberrl
