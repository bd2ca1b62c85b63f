package core

import (
	"context"
	"errors"
	"time"
)

// Flow is the request flow every adapter shares, over the framework's own
// request type R (*http.Request, *gin.Context, echo.Context, *fiber.Ctx):
//
//  1. an exempt path, or limiting off, passes uncounted;
//  2. a request the bypass predicate accepts (a super-admin) passes
//     uncounted;
//  3. the key function names the caller; an error rejects the request
//     (the adapter answers with its error handler), and an empty identity
//     falls back to the client IP;
//  4. the limiter counts the request under the rule that applies.
//
// The adapter then writes the Decision: Decision.WriteDenied (or
// Header, Status and Body) when it is not Allowed, else
// Decision.SetHeaders (or Header) before calling the handler. A Flow
// is safe for concurrent use.
type Flow[R any] struct {
	Limiter *Limiter
	// Key returns the caller's identity; nil means none (the client IP).
	Key func(R) (string, error)
	// Bypass reports callers never limited; nil means none.
	Bypass func(R) bool
	// ClientIP returns the request's client IP (see ClientIPConfig).
	ClientIP func(R) string
	// FoldCase says that the router matches paths without regard to ASCII
	// case (Fiber's default): every spelling of a path is then also taken
	// in lower case (see Path), so that "/API/search", which such a router
	// serves by the handler of "/api/search", counts under its rule.
	FoldCase bool
}

// Decide runs the flow for request r. path is the request path as the
// framework's router reads it (URLPath for a *url.URL; see Path); route is
// the framework's route template ("/api/kb/:id/reindex" or
// "/api/kb/{id}/reindex": segments where ":name" or "{name}" stands for
// one segment; "" when unknown), which lets the rule be found once per route
// instead of once per request. The error is the key function's; the
// Decision is then zero.
//
// What outlives the call: route (for the standard methods) stays in the
// configuration's route cache, and the identity the key function or
// ClientIP returns goes to the store, which may keep it (the Redis store's
// deny cache does). Adapters over reused memory (fasthttp) pass copies of
// those; method and path are not kept.
func (f *Flow[R]) Decide(ctx context.Context, r R, method string, path Path, route string) (d Decision, err error) {
	l := f.Limiter
	cfg := l.cfg.Load() // the one configuration this request is decided under
	if !cfg.Enabled() {
		return Decision{Allowed: true}, nil
	}
	// 1. An exempt path passes uncounted.
	rule, cost := cfg.decide(method, path, route, f.FoldCase)
	if rule == nil {
		l.observe(Event{Outcome: OutcomeExempt, Allowed: true})
		return Decision{Allowed: true}, nil
	}
	// 2. So does a bypassed caller.
	if f.Bypass != nil && f.Bypass(r) {
		l.observe(Event{Rule: rule.Name, Outcome: OutcomeBypassed, Allowed: true})
		return Decision{Allowed: true}, nil
	}
	// 3. The key function names the caller, else the client IP.
	var id string
	if f.Key != nil {
		if id, err = f.Key(r); err != nil {
			return Decision{}, err
		}
	}
	if id == "" && f.ClientIP != nil {
		id = f.ClientIP(r)
	}
	// 4. The request counts under its rule.
	d.Rule, d.Cost, d.Identity = rule, cost, id
	l.count(ctx, cfg, &d)
	return d, nil
}

// retryTimeout bounds the second call to the store for a request that was
// cancelled while the first one ran (see count).
const retryTimeout = time.Second

// count asks the store about one request of d.Identity under d.Rule (of
// cfg) at d.Cost and applies the failure policy and the rule's mode,
// filling d in place (a Decision is large to copy).
func (l *Limiter) count(ctx context.Context, cfg *Config, d *Decision) {
	rule, cost := d.Rule, d.Cost
	d.style = l.headerStyle(cfg)
	if rule.shadow && !l.shadowHeaders {
		d.style = HeadersNone
	}
	var start int64
	if l.observer != nil {
		start = l.clock.Now()
	}
	key := l.Key(d.Identity)
	d.Result, d.Err = l.store.Take(ctx, key, rule.Policy, cost)
	if d.Err != nil && errors.Is(ctx.Err(), context.Canceled) {
		// The request was cancelled (net/http cancels it when the client
		// closes its side of the connection, though it may still read
		// the answer): the decision must not depend on that, or a client
		// could make the store fail and pass uncounted. Ask again without
		// the cancellation, for at most retryTimeout. (A store that had
		// counted the request before failing counts it twice: the safe
		// side.)
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), retryTimeout)
		d.Result, d.Err = l.store.Take(rctx, key, rule.Policy, cost)
		cancel()
	}
	o := OutcomeAllowed
	d.Allowed = d.Result.Allowed
	switch {
	case d.Err != nil:
		// A shadow rule denies nothing, whatever the failure policy.
		o, d.Result, d.Allowed = OutcomeStoreError, Result{}, rule.shadow || l.failsOpen(cfg)
		l.warn(rule, d.Allowed, d.Err)
	case !d.Allowed && rule.shadow:
		o, d.Allowed, d.ShadowDenied = OutcomeShadowDenied, true, true
		l.shadowDenied(rule, key, d)
	case !d.Allowed:
		o = OutcomeDenied
	}
	if l.observer != nil {
		l.observer(Event{Rule: rule.Name, Key: key, Outcome: o, Allowed: d.Allowed, Cost: cost, Err: d.Err, Latency: time.Duration(l.clock.Now() - start)})
	}
}
