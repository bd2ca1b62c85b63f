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
// so Echo's error handler never rewrites it.
//
// With e.Use the rule is found from Echo's route template (c.Path) once
// per route; with e.Pre, which runs before routing, it is found from the
// path. Rules and exempt paths are matched against every spelling of the
// request path a router or handler may act on (core.URLPath, core.Path),
// never against Echo's parameters.
//
// The client IP is worked out by core.ClientIPConfig (see WithClientIP),
// not by echo.Context.RealIP, which believes forwarding headers from any
// peer unless the Echo instance's IPExtractor says otherwise.
package echorl
