package core

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// MaxKeyLen is the longest identity used as it is. Longer ones (a header
// value is user input) are replaced by a SHA-256 digest, so no caller can
// make a store hold keys of unbounded size.
const MaxKeyLen = 128

// BoundKey returns key, or "sha256:<hex digest>" when key is longer than
// MaxKeyLen or itself starts with "sha256:". Distinct keys stay distinct.
func BoundKey(key string) string {
	if len(key) <= MaxKeyLen && !strings.HasPrefix(key, digestPrefix) {
		return key
	}
	sum := sha256.Sum256([]byte(key))
	return digestPrefix + hex.EncodeToString(sum[:])
}

// digestPrefix starts every digest BoundKey makes. A short key that starts
// with it is hashed too, so that no caller can name another's digest.
const digestPrefix = "sha256:"

// Decision is the outcome of one request. Adapters write it with
// SetHeaders and, when not Allowed, WriteDenied (or Header, Status and
// Body).
type Decision struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// Rule is the rule the request counted against; nil when nothing was
	// counted (limiting off, exempt path, bypass).
	Rule *Rule
	// Cost is what the request weighed under Rule.
	Cost int64
	// Result is the store's answer (zero when Err is set).
	Result Result
	// Err is the store's error. With fail-open the request is Allowed and
	// carries no rate-limit headers; with fail-closed it is denied with 503.
	Err error

	style HeaderStyle
}

// Option configures a Limiter.
type Option func(*Limiter)

// WithHeaders overrides the configuration's header style. Default: the
// configuration's (draft unless it says otherwise).
func WithHeaders(s HeaderStyle) Option { return func(l *Limiter) { l.style = s } }

// WithFailOpen overrides the configuration's failure policy: true lets
// requests pass when the store fails, false denies them with 503. Default:
// the configuration's (open unless it says closed).
func WithFailOpen(open bool) Option { return func(l *Limiter) { l.failOpen = open } }

// WithObserver sets a hook that sees every counted decision. Default: none.
func WithObserver(o Observer) Option { return func(l *Limiter) { l.observer = o } }

// WithLogger sets where store failures are reported. Default: slog.Default().
func WithLogger(log *slog.Logger) Option { return func(l *Limiter) { l.log = log } }

// WithClock sets the clock used for latencies and for spacing warnings; a
// store has its own. Default: SystemClock.
func WithClock(c Clock) Option { return func(l *Limiter) { l.clock = c } }

// WithWarnInterval sets the least time between two warnings about store
// failures; the ones in between are counted and the count goes in the next
// warning. Default: 10s.
func WithWarnInterval(d time.Duration) Option { return func(l *Limiter) { l.warnEvery = int64(d) } }

// Limiter turns requests into decisions: it matches the rule, asks the store,
// and applies the failure policy. It is safe for concurrent use.
type Limiter struct {
	cfg       *Config
	store     Store
	style     HeaderStyle
	failOpen  bool
	observer  Observer
	log       *slog.Logger
	clock     Clock
	warnEvery int64

	warnMu     sync.Mutex // serializes the start of a warning interval
	lastWarn   atomic.Int64
	suppressed atomic.Int64
}

// NewLimiter returns a Limiter for cfg counting in store. A nil or disabled
// cfg passes every request untouched.
func NewLimiter(cfg *Config, store Store, opts ...Option) *Limiter {
	l := &Limiter{
		cfg:       cfg,
		store:     store,
		style:     cfg.Headers(),
		failOpen:  cfg.FailOpen(),
		log:       slog.Default(),
		clock:     SystemClock,
		warnEvery: int64(10 * time.Second),
	}
	for _, o := range opts {
		o(l)
	}
	l.lastWarn.Store(-1 << 62)
	return l
}

// Config returns the limiter's configuration.
func (l *Limiter) Config() *Config { return l.cfg }

// Store returns the limiter's store.
func (l *Limiter) Store() Store { return l.store }

// Decide decides one request. path is the request path as the router
// reads it (see Path: a plain constant such as "/api/search" is one,
// URLPath gives one for a *url.URL); identity is the caller's key (a user
// id, an API key, a client IP); bypass lets a request through uncounted (a
// super-admin). Exempt paths (Config.Exempt) pass uncounted too; every
// other request counts under the rule Config.Match gives.
func (l *Limiter) Decide(ctx context.Context, method string, path Path, identity string, bypass bool) (d Decision) {
	if bypass || !l.cfg.Enabled() {
		return Decision{Allowed: true}
	}
	if d.Rule, d.Cost = l.cfg.decide(method, path, "", false); d.Rule == nil {
		return Decision{Allowed: true}
	}
	l.count(ctx, identity, &d)
	return d
}

// Reset forgets identity's counters under the named rule ("default" for the
// default limit). It reports false when no such rule exists.
func (l *Limiter) Reset(ctx context.Context, identity, rule string) (bool, error) {
	if l.cfg == nil || l.cfg.def == nil {
		return false, nil
	}
	for _, r := range append([]*Rule{l.cfg.def}, l.cfg.rules...) {
		if r.Name == rule {
			_, err := l.store.Reset(ctx, BoundKey(identity), r.Policy)
			return true, err
		}
	}
	return false, nil
}

// warn logs a store failure, at most once per warn interval, with the number
// of failures it did not log since the last line.
func (l *Limiter) warn(rule *Rule, err error) {
	now := l.clock.Now()
	if now-l.lastWarn.Load() < l.warnEvery {
		l.suppressed.Add(1)
		return
	}
	// One failure an interval logs. The count it reports is taken before
	// the interval starts, under warnMu, so that a failure suppressed
	// because it saw the new interval is counted in the next line, never
	// in this one.
	l.warnMu.Lock()
	if now-l.lastWarn.Load() < l.warnEvery {
		l.warnMu.Unlock()
		l.suppressed.Add(1)
		return
	}
	suppressed := l.suppressed.Swap(0)
	l.lastWarn.Store(now)
	l.warnMu.Unlock()
	policy := "open: requests pass"
	if !l.failOpen {
		policy = "closed: requests get 503"
	}
	l.log.Warn("rlkit: rate-limit store failed",
		slog.String("rule", rule.Name),
		slog.String("error", err.Error()),
		slog.String("failure_policy", policy),
		slog.Int64("suppressed", suppressed))
}
