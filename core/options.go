package core

import (
	"log/slog"
	"math/bits"
	"slices"
	"time"

	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/store"
)

// Option configures a Limiter (NewLimiter). Each option's comment ends
// with its default.
type Option func(*Limiter)

// WithStore sets where the limiter counts: a memstore.Store in this
// process, a redisstore.Store for the replicas of a service, or any
// store.Store that passes package storetest. A nil s panics (a store
// variable left unset would otherwise count each replica apart, in
// memory, without a word): leave the option out for the default.
// Default: a new memstore.Store on the limiter's clock (see WithClock).
func WithStore(s store.Store) Option {
	if s == nil {
		panic("core.WithStore: nil store (leave the option out for a memory store)")
	}
	return func(l *Limiter) { l.store = s }
}

// WithClientIP sets whose forwarding headers the limiter's middlewares
// believe when they work out a request's client IP: the identity of a
// request with no other, and the address the configuration's allow and
// ban networks are matched against (see clientip.Config). Default: the
// zero clientip.Config, which trusts no proxy and takes the TCP peer's
// address, an IPv6 one per /64. The option keeps a copy of cfg, so
// changing cfg (or its TrustedProxies) afterwards changes nothing. Every
// middleware of the limiter derives client IPs so: an adapter reached by
// other proxies (a gRPC port behind none, say) needs a limiter of its own
// (over the same store, to share the counters).
func WithClientIP(cfg clientip.Config) Option {
	cfg.TrustedProxies = slices.Clone(cfg.TrustedProxies)
	return func(l *Limiter) { l.clientIP = cfg }
}

// WithDecisionContext, when on, makes the limiter's middlewares put the
// Decision of every request they pass on into its context (NewContext),
// where the handler reads it with FromContext or the adapter's
// DecisionOf: the rule, the remaining quota (d.Result.Remaining), the
// store key. It costs each request a few allocations (a copy of the
// Decision on the heap, a context, the framework's own request or
// context copy). Default: false (no Decision in the context, and no
// allocation for it).
func WithDecisionContext(on bool) Option { return func(l *Limiter) { l.inContext = on } }

// WithHeaders overrides the configuration's header style, also across
// reloads. Default: the configuration's (draft unless it says otherwise).
func WithHeaders(s HeaderStyle) Option {
	return func(l *Limiter) { l.style, l.styleSet = s, true }
}

// WithFailOpen overrides the configuration's failure policy, also across
// reloads: true lets requests pass when the store fails, false denies them
// with 503. Default: the configuration's (open unless it says closed).
func WithFailOpen(open bool) Option {
	return func(l *Limiter) { l.failOpen, l.failOpenSet = open, true }
}

// WithShadowHeaders makes requests under a rule in shadow mode carry the
// rate-limit headers the rule would write if it were enforced. Default:
// false (a shadow rule writes no header: clients see no change).
func WithShadowHeaders(on bool) Option { return func(l *Limiter) { l.shadowHeaders = on } }

// WithIdentityKey sets the key of the HMAC under which secret identities
// (SecretIdentity; every adapter's HeaderKey) are stored and logged. Every
// limiter sharing a store (the servers of one Redis) must use the same key,
// or each counts a caller apart. Keep it secret, as a signing key: with it,
// a reader of the store's key names can test guesses of a secret. Default:
// a key built into rlkit, which is public.
func WithIdentityKey(key []byte) Option {
	return func(l *Limiter) { l.identityKey = slices.Clone(key) }
}

// WithObserver sets a hook that sees every decision (see Observer).
// Default: none.
func WithObserver(o Observer) Option { return func(l *Limiter) { l.observer = o } }

// WithLatencySampling sets how many store calls there are for each one
// timed for the Observer (Event.Latency), at random: timing a call reads
// the clock twice, which costs tens of nanoseconds on some machines, while
// a latency distribution needs only a sample. n is rounded up to a power
// of two (at most 2^20); 1 times every call. The calls of an in-process
// store (a store.LocalStore) are never timed. Default: 16.
func WithLatencySampling(n int) Option {
	return func(l *Limiter) {
		l.sampleMask = uint32(1)<<bits.Len(uint(min(max(n, 1), 1<<20)-1)) - 1
	}
}

// WithLogger sets where store failures, shadow denials and reloads are
// reported. Default: slog.Default().
func WithLogger(log *slog.Logger) Option { return func(l *Limiter) { l.log = log } }

// WithClock sets the clock used for latencies, for spacing warnings and
// for the waits of rules with a wait (RuleSpec.Wait), and by the memory
// store NewLimiter makes when no WithStore is given (a store given has
// its own). The waits are timed by the clock's own timers when it has a
// method NewTimer(d time.Duration) (<-chan time.Time, func() bool), as
// store.ManualClock does, so that a test moves them with the clock; else
// by the runtime's. Default: store.SystemClock.
func WithClock(c store.Clock) Option { return func(l *Limiter) { l.clock = c } }

// WithLeaseKeys sets how many keys' blocks of lease rules
// (RuleSpec.Consistency) the limiter keeps at most, all rules together,
// spread over 64 locks of n/64 keys each (at least 1): a new key in a full
// one evicts, of 8 keys it looks at, one holding no live block, else the
// one that decided the fewest units; an evicted block's unspent units are
// lost (refused, never admitted). Default: 65,536 (about 20 MB at most).
func WithLeaseKeys(n int) Option { return func(l *Limiter) { l.leaseKeys = n } }

// WithWarnInterval sets the least time between two log lines about store
// failures, and between two about one shadow rule's denials; the ones in
// between are counted and the count goes in the next line. Default: 10s.
func WithWarnInterval(d time.Duration) Option { return func(l *Limiter) { l.warnEvery = int64(d) } }

// WithLimitProvider sets where per-customer limits come from (see
// LimitProvider). Default: none (plans and rules only).
func WithLimitProvider(p LimitProvider) Option {
	return func(l *Limiter) { l.providerOpts.p = p }
}

// WithLimitCache sets how many answers of the LimitProvider are cached
// (size; at least 16; 0 means the default) and for how long each is used
// (ttl, at least a millisecond; 0 means the default), for positive and
// negative answers alike (an error is used for at most 5 seconds); and
// caches the plan resolver's answers (Flow.Plan, every adapter's
// WithPlan) the same way, per caller's store key, in a cache of their
// own of the same size and ttl. Each cache is bounded: past size
// entries, the oldest answer is dropped, so a flood of distinct callers
// costs at most size entries of memory; concurrent misses of one caller
// wait for one lookup. Provider answers cached under a configuration are
// not used under another (a reload): its rules are new. A cached plan is
// a name, looked up in each request's configuration; it assumes that a
// caller's plan depends on its identity alone, and a caller whose plan
// changes gets it within ttl. Default: 10,000 entries, a minute, for the
// LimitProvider's answers; plans asked for on every request, uncached,
// unless this option is given (WithLimitCache(0, 0): the defaults).
func WithLimitCache(size int, ttl time.Duration) Option {
	return func(l *Limiter) {
		l.providerOpts.size, l.providerOpts.ttl, l.providerOpts.cached = size, ttl, true
	}
}
