// Package core is rlkit's framework-agnostic engine: rules, limits,
// policies, the Store interface, the Limiter that turns a request into a
// Decision, and the one response writer every adapter uses.
//
// # Model
//
// A Config (from YAML with LoadConfig/ParseConfig, or from a Spec with
// NewConfig) holds rules tried in order: the first rule whose paths match a
// request applies, alone; '*' in a path matches exactly one segment, and so
// does a whole segment ":name" or "{name}" (router syntax; catch-alls such
// as "*path" or "{path...}" are refused); a request no rule matches counts against the default limit (rule
// "default", 120/minute unless configured). A rule's Policy has one
// algorithm and one to four limits that must all admit a request; a denial
// consumes from none. Weights give some paths a higher cost. Exempt paths
// never touch a counter.
//
// # Paths
//
// A request path is a Path: the path as the framework's router reads it,
// still escaped (URLPath gives it for a *url.URL). Routers and handlers
// read one path several ways — as sent, decoded ("%2F" a slash or not),
// cleaned, with or without a trailing slash — so rules and exempt paths
// are matched against every such spelling: a request is exempt only when
// every spelling is exempt, and it counts under the first rule any
// spelling matches (the strictest, when the spellings' first rules differ). "/api%2Fsearch" counts as "/api/search"; "/health/",
// "/health%2F" and "/x/../health" are not exempt by "/health". A program
// that decides something else by path (authentication that exempt paths
// skip) asks Config.Exempt and Config.Match for the limiter's own answer.
//
// Counting is per identity (a user id, an API key, a client IP), per rule,
// per window, in a Store: package memstore in one process, a Redis store
// across replicas. Stores apply the algorithms of package algo.
//
// A Limiter decides: Limiter.Decide(ctx, method, path, identity, bypass)
// returns a Decision (the path a Path, as above), which writes the rate-limit headers (the IETF httpapi
// draft RateLimit-Policy and RateLimit by default, legacy X-RateLimit-* or
// none on request) and, when denied, the 429 response with Retry-After and
// {"detail": "Rate limit exceeded for '<rule>' requests"}. When the store
// fails the Limiter fails open (the request passes, a warning is logged at
// most once per interval) unless configured to fail closed (503).
//
// An application may write the denied response itself (each adapter's
// WithDeniedHandler): the adapter sets the same rate-limit headers and
// Retry-After first (Decision.SetLimitHeaders, LimitHeader). An adapter
// can put an allowed request's Decision into its context (NewContext,
// FromContext), so that the handler reports the remaining quota.
//
// A rule in shadow mode (Spec.Mode) counts beside the enforced rules and
// reports the requests it would deny, denying none.
//
// # Plans and per-customer limits
//
// The tiers of a configuration (Spec.Tiers, TierSpec) give each plan its
// own limits per rule and its own counters (policy "<rule>@<plan>"); a
// request's plan comes from the adapter's WithPlan (Flow.Plan;
// Limiter.DecidePlan). A LimitProvider (WithLimitProvider, WithLimitCache)
// gives a caller limits of its own, from a database, cached and bounded;
// they take precedence over the plan's, which take precedence over the
// rule's. Decision.Plan names the plan whose limits applied.
//
// Allow and ban lists (Spec.Allow, Spec.Ban): identities (as store keys)
// and networks never limited nor counted, and networks refused with 403
// before anything else (Decision.Banned). A rule's penalty
// (RuleSpec.Penalty) refuses a caller denied too often for a while
// without counting (Decision.Penalty), kept in the store so that replicas
// share it.
//
// A rule may count by outcome (RuleSpec.Count): only the
// requests answered with a failure (status 400 and above), or only
// successes. It checks a request before the handler without counting it
// (Store.Peek), refuses it there when the counter is full, and counts it
// once the adapter hands the status to Limiter.Complete (a Deferred
// Decision); RuleSpec.Count states how far requests in flight together can
// pass the limit.
//
// # Operating
//
// A Limiter's configuration can be swapped while it serves (SetConfig,
// ReloadFile; package reload watches a file): each request is decided
// wholly under one configuration, and a rule whose policy is unchanged
// keeps its counters. An Observer sees every decision's Outcome, for
// metrics (packages metrics/prom and metrics/otel, which core does not
// import). Identities that are secrets (SecretIdentity; every adapter's
// HeaderKey) are stored and logged only as a keyed hash (Limiter.Key),
// and Limiter.Reset forgets what an identity has counted.
//
// Most programs use an adapter — nethttp, ginrl, echorl, fiberrl — and
// only LoadConfig from this package. The adapters share one request flow,
// Flow (ban → exempt → bypass or allow → key → client IP → count), and pass their router's
// route template so that the rule is found once per route.
//
// # Time
//
// Exactly one place reads the real clock: SystemClock. Everything else takes
// the instant as an argument or asks a Clock, so a ManualClock controls
// every decision in tests.
package core
