package core

import (
	"context"
	"log/slog"
	"slices"
	"time"

	"github.com/rlkit/rlkit/core/algo"
)

// LimitProvider gives per-customer limits from code: quotas kept in a
// database, negotiated per customer. It is asked, for a request's caller
// and rule, whether the caller has limits of its own there; they take
// precedence over the caller's plan (see TierSpec) and the rule's own
// limits.
//
// key is the caller's store key (Limiter.Key; Decision.Key under a rule
// keyed by user, the default: under a rule with a key of its own,
// RuleSpec.Key, the caller's limits count under that key): the identity
// as the key function gave it ("sub:alice" for JWTSubject), but a secret
// identity (an API key, see SecretIdentity) as its keyed hash
// ("X-Api-Key:hmac:<hex>"), so no secret reaches the provider or its
// cache; a database of such customers holds the same key, worked out with
// Limiter.Key when the quota is recorded. rule is the rule's name
// ("default" for the default limit).
//
// ok false means the caller has no limits of its own under the rule. The
// limits are counted with the rule's algorithm, and must be valid for it
// (store.Policy.Validate; periods of whole seconds, as a configuration's; a
// burst only on token_bucket and gcra; a capacity no smaller than the
// rule's largest weight; for a rule with window: calendar, calendar
// limits, algo.ParseCalendarLimit's, counted in the rule's time zone, and
// for any other rule none): an invalid answer is logged
// and the plan's or rule's limits apply. An error (a database down) is
// logged, at most once per warn interval, and the plan's or rule's
// limits apply.
//
// Answers are cached (see WithLimitCache): Limits is called once per
// (key, rule) per TTL, concurrent requests for the same pair waiting for
// one call, and at most 64 calls run at once: a request that finds them
// all busy waits for one to end, at most a second, and past that counts
// under the answer it had before (expired) or, without one, under its
// plan's or rule's limits. A call's context is the request's, without its
// cancellation, ending after a second: a request's cancellation changes
// nothing of its limits. A call that overruns that deadline (a Limits
// that ignores its context) is not waited for: the request counts under
// its expired answer or the plan's or rule's limits, and the call keeps
// its slot until it returns. A panic in Limits is logged at ERROR and the
// plan's or rule's limits apply. Limits must be safe for concurrent use.
//
// A caller's custom limits count under a policy of their own,
// "<rule>@custom" (CustomPlan), apart from any plan's counters. As a
// reloaded rule's, a limit whose count or burst changes keeps what the
// caller spent, and one of a new period starts afresh.
type LimitProvider interface {
	Limits(ctx context.Context, key, rule string) (limits []algo.Limit, ok bool, err error)
}

// LimitProviderFunc is a function that is a LimitProvider.
type LimitProviderFunc func(ctx context.Context, key, rule string) ([]algo.Limit, bool, error)

// Limits calls f.
func (f LimitProviderFunc) Limits(ctx context.Context, key, rule string) ([]algo.Limit, bool, error) {
	return f(ctx, key, rule)
}

// The defaults and bounds of a LimitProvider's cache.
const (
	// defaultLimitCacheSize is how many (key, rule) answers are cached
	// unless WithLimitCache says otherwise.
	defaultLimitCacheSize = 10_000
	// defaultLimitCacheTTL is how long an answer is used unless
	// WithLimitCache says otherwise.
	defaultLimitCacheTTL = time.Minute
	// limitProviderErrorTTL bounds how long an error is remembered: for
	// that long (or the TTL, when shorter) the pair is not asked again.
	limitProviderErrorTTL = 5 * time.Second
	// maxLimitProviderCalls bounds the provider's calls running at once.
	maxLimitProviderCalls = 64
	// limitProviderTimeout bounds one call, and the wait for a call to
	// start.
	limitProviderTimeout = time.Second
)

// providerOptions are what WithLimitProvider and WithLimitCache set.
type providerOptions struct {
	p      LimitProvider
	size   int
	ttl    time.Duration
	cached bool // WithLimitCache was given: plan lookups are cached too
}

// provider is a LimitProvider with its cache of answers per (rule, key).
type provider struct {
	p      LimitProvider
	cache  *cache[*Rule] // the custom variant; nil: none (no limits, an error)
	errTTL int64
	calls  chan struct{} // a token per call running
	errs   logGate       // errors
	bad    logGate       // invalid answers
}

// newProvider is the provider o sets, or nil.
func newProvider(o providerOptions) *provider {
	if o.p == nil {
		return nil
	}
	c := newCache[*Rule](o.size, o.ttl)
	p := &provider{
		p:      o.p,
		cache:  c,
		errTTL: min(c.ttl, int64(limitProviderErrorTTL)),
		calls:  make(chan struct{}, maxLimitProviderCalls),
	}
	p.errs.init()
	p.bad.init()
	return p
}

// rule returns the custom variant of base for the caller of key, or nil
// when it has none (or its limits cannot be had now). It asks the
// provider on a miss, once for all the requests that miss together. What
// it answers never depends on ctx's cancellation (a client that closes
// its side of the connection must not pick its limits): a request that
// finds the answer being asked for waits for it, and a call ignores the
// cancellation (see ask).
func (p *provider) rule(ctx context.Context, l *Limiter, base *Rule, key string) *Rule {
	return p.cache.get(l.clock, cacheKey{base, key}, func(stale *Rule) (*Rule, int64) {
		return p.call(ctx, l, base, key, stale)
	})
}

// call asks the provider for the caller of key under base, on a miss of
// the cache, and returns the answer and how long it holds. Another
// request of the caller that misses meanwhile waits for it, within about
// twice limitProviderTimeout (a call slot, then the call, which call
// stops waiting for past its deadline). When no call slot frees within
// limitProviderTimeout, the stale answer (or none: the plan's or rule's
// limits) serves this request and the next asks again.
func (p *provider) call(ctx context.Context, l *Limiter, base *Rule, key string, stale *Rule) (*Rule, int64) {
	if !p.acquire() {
		return stale, 0
	}
	// The call runs on a goroutine of its own, which holds the call slot
	// until the provider returns: a provider that ignores its context's
	// deadline (a driver that blocks) costs a slot, not this request, nor
	// every later request of the caller that would wait for it.
	type answer struct {
		rule *Rule
		ttl  int64
	}
	got := make(chan answer, 1)
	go func() {
		a := answer{stale, 0}
		defer func() {
			<-p.calls
			if v := recover(); v != nil {
				l.log.Error("rlkit: limit provider panicked; the plan's or rule's limits apply",
					slog.String("rule", base.Name), slog.String("key", key), slog.Any("panic", v))
			}
			got <- a
		}()
		a.rule, a.ttl = p.ask(ctx, l, base, key)
	}()
	t := time.NewTimer(limitProviderTimeout + limitProviderTimeout/10) // ask's own deadline first
	defer t.Stop()
	select {
	case a := <-got:
		return a.rule, a.ttl
	case <-t.C:
		// The provider overran its deadline: the stale answer (or none),
		// asked again by the next request.
		return stale, 0
	}
}

// acquire takes a call slot, waiting for one at most limitProviderTimeout:
// a flood of new callers queues for the provider (at most
// maxLimitProviderCalls calls run at once) rather than sending their
// callers to other limits than theirs. It reports false when none freed.
func (p *provider) acquire() bool {
	select {
	case p.calls <- struct{}{}:
		return true
	default:
	}
	t := time.NewTimer(limitProviderTimeout)
	defer t.Stop()
	select {
	case p.calls <- struct{}{}:
		return true
	case <-t.C:
		return false
	}
}

// ask calls the provider for the caller of key under base, and returns
// the custom variant (nil: none) and how long the answer holds.
func (p *provider) ask(ctx context.Context, l *Limiter, base *Rule, key string) (*Rule, int64) {
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), limitProviderTimeout)
	lims, ok, err := p.p.Limits(cctx, key, base.Name)
	cancel()
	switch {
	case err != nil:
		if suppressed, ok := p.errs.pass(l.clock.Now(), l.warnEvery); ok {
			l.log.Warn("rlkit: limit provider failed; the plan's or rule's limits apply",
				slog.String("rule", base.Name), slog.String("key", key),
				slog.String("error", err.Error()), slog.Int64("suppressed", suppressed))
		}
		return nil, p.errTTL
	case !ok:
		return nil, p.cache.ttl
	}
	lims = slices.Clone(lims) // the provider may reuse its slice
	if err := checkVariant(base, lims); err != nil {
		if suppressed, ok := p.bad.pass(l.clock.Now(), l.warnEvery); ok {
			l.log.Warn("rlkit: limit provider gave invalid limits; the plan's or rule's limits apply",
				slog.String("rule", base.Name), slog.String("key", key),
				slog.String("error", err.Error()), slog.Int64("suppressed", suppressed))
		}
		return nil, p.cache.ttl
	}
	return variant(base, CustomPlan, lims), p.cache.ttl
}
