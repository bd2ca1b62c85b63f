// Package adapter holds what rlkit's middlewares share, for whoever writes
// one for another framework: the limiter a middleware's New decides with
// (Limiter), the settings every adapter has over its framework's request
// type (Settings: the key function, the bypass predicate, the plan; and
// Options, which adds its error and denied handlers), how it finds a
// request's client (ClientIP), and the key
// functions every adapter offers (HeaderKey, JWTSubject) with the
// identities they give (HeaderIdentity, SubjectIdentity, BearerToken).
//
// # Model
//
// A middleware translates; the engine decides. Settings.Flow builds the
// core.Flow of a middleware, generic over the framework's request type R,
// and core.Flow.DecideTo runs the request flow every adapter shares: a
// banned network is refused, an exempt path passes, a bypassed caller or
// an allowed network passes, the key function names the caller (else the
// client IP), and the limiter counts the request under its rule. Flow is
// in package core because those steps are the engine's own (one
// configuration snapshot per request, the route cache, the lists, the
// counting); this package holds only the helpers around it.
//
// The middleware then writes the core.Decision:
//
//   - not Allowed: Decision.WriteDenied on an http.ResponseWriter (or
//     Header, Status and Body for a framework without http.Header), or
//     Decision.SetLimitHeaders (LimitHeader) before the application's own
//     denied handler; the handler behind the middleware does not run;
//   - Allowed: Decision.SetHeaders (Header) before the handler, and
//     core.NewContext when the limiter asks for the Decision in the
//     request's context (core.Limiter.DecisionContext);
//   - Deferred (a rule counts by the response's status): once the handler
//     has answered, core.Limiter.Complete with the status the client gets,
//     500 when the handler panicked before writing one.
//
// New takes core.Limits, a *core.Config or a *core.Limiter: Limiter turns
// either into the limiter to decide with. What concerns the limiter (its
// store, headers, failure policy, observer, client IP configuration) is a
// core.Option; an adapter's own options are only its framework-typed
// ones, which set its Options: WithKeyFunc, WithBypass and WithPlan
// (Settings), WithErrorHandler (OnError) and WithDeniedHandler (Denied).
//
// # Identities
//
// Every adapter's HeaderKey and JWTSubject are this package's over the
// adapter's request type, so that one caller has one identity, and one
// counter, whichever adapter counts it: HeaderKey(name) gives
// HeaderIdentity (a core.SecretIdentity, stored and logged only as a
// keyed hash), JWTSubject(verify) gives "sub:<subject>".
//
// # Paths, routes and memory
//
// The flow takes the request path as the router reads it, escapes and all
// (core.URLPath for a *url.URL), and the router's route template
// ("/api/kb/:id" or "/api/kb/{id}"; "" when there is none), which lets the
// rule be found once per route. A router that matches paths without
// regard to case sets core.Flow.FoldCase. Over a framework that reuses a
// request's memory (fasthttp), the route and the identity outlive the call
// and must be copies; the method and the path need none (see
// core.Flow.Decide).
//
// The rlkit adapters pass a conformance suite (internal/adaptertest, in
// the repository) that runs one table of requests through each
// framework's real server and requires the same status, headers and body
// from all of them.
package adapter
