// Package core is rlkit's engine and the application's API: a
// configuration of rules (Config, from a YAML rule file), a Limiter that
// turns a request into a Decision, the options of a Limiter, and the
// Observer that sees every decision. Most programs use core only to load
// their rule file and, when they need more than a memory store, to build
// a Limiter; a middleware of package nethttp, ginrl, echorl, fiberrl or
// grpcrl does the rest:
//
//	cfg, err := core.LoadConfig("ratelimit.yaml")
//	if err != nil {
//		log.Fatal(err) // names the file, line, rule, field and value at fault
//	}
//	r.Use(ginrl.New(cfg)) // a memory store, one counter per client IP
//
//	st, err := redisstore.New(rdb) // counters shared by the replicas
//	if err != nil {
//		log.Fatal(err)
//	}
//	lim := core.NewLimiter(cfg, core.WithStore(st), core.WithObserver(metrics.Observe))
//	r.Use(ginrl.New(lim, ginrl.WithKeyFunc(ginrl.JWTSubject(verify))))
//
// # Configuration
//
// A Config (LoadConfig, ParseConfig, or NewConfig from a Spec) holds rules
// tried in order: the first rule whose paths match a request applies; '*'
// in a path matches exactly one segment, and so does a whole segment
// ":name" or "{name}" (router syntax); a last segment "**" matches the
// path before it and everything below; a request no rule matches counts
// against the default limit (rule "default", 120/minute unless
// configured). A rule has one algorithm (package algo) and one to four
// limits that must all admit a request; a denial consumes from none.
// Weights give some paths a higher cost; exempt paths never touch a
// counter. A Config is immutable; a bad file is refused whole, with every
// problem named (ConfigError).
//
// A rule in shadow mode (Spec.Mode) counts beside the enforced rules and
// reports the requests it would deny, denying none. The tiers of a
// configuration (TierSpec) give each plan its own limits, and a
// LimitProvider gives a caller limits of its own; allow and ban lists
// (AllowSpec, BanSpec) pass or refuse identities and networks; a rule's
// penalty (PenaltySpec) refuses a caller denied too often for a while; a
// rule may count by outcome, only the requests answered with a failure or
// only successes (RuleSpec.Count); a rule's wait (RuleSpec.Wait) holds a
// request the store would admit soon, first come, first served, instead
// of refusing it.
//
// # Deciding
//
// A Limiter (NewLimiter) decides under one configuration at a time,
// counting in a store (WithStore: package memstore in one process, package
// redisstore across replicas; any store.Store that passes package
// storetest). Counting is per identity (a user id, an API key, a client
// IP), per rule, per window; a rule's key (RuleSpec.Key) may count it per
// client IP, request header or path parameter instead, or per several. A Decision says whether the request may
// proceed, under which rule and key, with what remains; it writes the
// rate-limit headers (the IETF draft RateLimit-Policy and RateLimit by
// default, legacy X-RateLimit-* or none) and, when denied, the 429 with
// Retry-After and {"detail": "Rate limit exceeded for '<rule>' requests"}.
// When the store fails the Limiter fails open (the request passes, a
// warning is logged at most once per interval) unless configured to fail
// closed (503).
//
// A request path is a Path, as the framework's router reads it (URLPath
// for a *url.URL). Rules and exempt paths are matched against every
// spelling a router or handler may act on: a request is exempt only when
// every spelling is, and counts under the first rule any spelling matches.
// A program that decides something else by path (authentication that
// exempt paths skip) asks Config.Exempt and Config.Match for the limiter's
// own answer.
//
// # Operating
//
// A Limiter's configuration can be swapped while it serves (SetConfig,
// ReloadFile; package reload watches a file): each request is decided
// wholly under one configuration, and a rule whose policy is unchanged
// keeps its counters. An Observer sees every decision's Outcome, for
// metrics (packages metrics/prom and metrics/otel, which core does not
// import). Identities that are secrets (SecretIdentity; every adapter's
// HeaderKey) are stored and logged only as a keyed hash (Limiter.Key,
// WithIdentityKey), and Limiter.Reset forgets what an identity has
// counted.
//
// # Time
//
// Every decision reads the time once, from a store.Clock
// (store.SystemClock unless WithClock gives another), and passes the
// instant down, so a store.ManualClock controls every decision in tests.
//
// # Other audiences
//
// A store implementer reads package store and package storetest; an
// adapter author reads package adapter, which builds the Flow every
// adapter shares (Flow is here because it runs the engine's own steps).
package core
