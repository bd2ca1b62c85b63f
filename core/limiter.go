package core

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// The forms of store key that store.BoundKey reserves, so that no
// identity a caller chooses spells one: hmacMark follows the label of a
// secret identity's key (see Key) and 32 hex digits follow it, hmacTail
// bytes in all; digestPrefix starts a digest of a key too long to keep.
const (
	hmacMark     = ":hmac:"
	hmacTail     = len(hmacMark) + 32
	digestPrefix = "sha256:"
)

// Decision is the outcome of one request. Adapters write it with
// SetHeaders and, when not Allowed, WriteDenied (or Header, Status and
// Body), or SetLimitHeaders before the application's own denied handler.
// NewContext puts it in a request's context, FromContext reads it there.
type Decision struct {
	// Allowed reports whether the request may proceed.
	Allowed bool
	// ShadowDenied reports that a rule in shadow mode would have denied
	// the request (see Spec.Mode). It says nothing of Allowed, which the
	// enforced rule decides.
	ShadowDenied bool
	// Banned reports a request from a network of the configuration's ban
	// list (BanSpec): not Allowed, answered 403 with the body
	// {"detail": "Forbidden"} and no rate-limit header nor Retry-After;
	// nothing was counted and Rule is nil.
	Banned bool
	// Penalty reports a request refused under its rule's penalty (see
	// PenaltySpec): not Allowed, 429 with the rule's body, Retry-After
	// the rest of the ban or the rule's own wait, whichever is longer,
	// and rate-limit headers that show nothing remaining until then. It
	// is set on the request whose denial started the ban too.
	Penalty bool
	// ConcurrencyDenied reports a request refused by its rule's
	// concurrency limit (RuleSpec.Concurrent): as many requests of its
	// identity under the rule as the limit allows were in flight, and,
	// under a rule with a wait, none came back within it (Waited). Not
	// Allowed: 429 with the rule's body, Retry-After 1, and no rate-limit
	// header (nothing was counted against the rule's limits).
	ConcurrencyDenied bool

	style HeaderStyle
	waits bool          // Rule's count (at Cost; Err its Peek's error) waits for the status (see Deferred)
	bill  *atomic.Int64 // the cost the handler reports (SetCost), when a rule charges by response

	// Rule is the rule the request counted against: the enforced rule
	// that applies, else (when only a rule in shadow mode applies) that
	// rule, whose denials let the request through; nil when nothing was
	// counted (limiting off, exempt path, bypass).
	Rule *Rule
	// Cost is what the request weighed under Rule.
	Cost int64
	// Result is the store's answer (zero when Err is set).
	Result store.Result
	// Err is the store's error. With fail-open the request is Allowed and
	// carries no rate-limit headers; with fail-closed it is denied with 503.
	Err error
	// Key is the store key the request counted under: Limiter.Key of its
	// identity under a rule keyed by user (the default), the rule's own
	// key under another (see RuleSpec.Key); that of Rule. Never a secret,
	// so it may be logged; Limiter.ResetKey takes it. "" when nothing was
	// counted.
	Key string
	// Plan is the caller's plan as the configuration knows it: a tier's
	// name, or "" (no plan, or one the configuration lacks). Rule counted
	// under that plan's limits, or under the caller's custom limits when
	// a LimitProvider gave them, which Rule.Plan tells (CustomPlan) and
	// which leave Plan as it is.
	Plan string
	// Waited is how long Rule's wait (RuleSpec.Wait) held the request
	// before it was decided, waiting for a slot of its concurrency limit
	// or for room under its limits: admitted after the wait, Result is
	// the store's answer then; refused, the refusal's (ConcurrencyDenied
	// when no slot came). 0 when it was not held.
	Waited time.Duration

	// shadow is the count of the rule in shadow mode beside the enforced
	// Rule, when it waits for the status (see Deferred). The flags above
	// share one word, and a count that waits is kept apart only when Rule
	// does not hold it, so that the Decision, which adapters copy, stays small.
	shadow pending
	// hold is the slots the request holds of its rules' concurrency
	// limits (RuleSpec.Concurrent), which Complete gives back; nil when
	// none.
	hold *hold
	// stack is what the request counted under beside Rule, when stacked
	// rules (RuleSpec.Stack) counted it too; nil otherwise.
	stack *stackRecord
}

// Limiter turns requests into decisions: it matches the rule, asks the store,
// and applies the failure policy. It is safe for concurrent use.
//
// Its configuration can be swapped while it serves (SetConfig, ReloadFile,
// or package reload's Watch): each request reads the configuration once, atomically, and
// is decided wholly under it; no lock is taken on the request path.
type Limiter struct {
	cfg           atomic.Pointer[Config]
	store         store.Store
	style         HeaderStyle
	styleSet      bool
	failOpen      bool
	failOpenSet   bool
	shadowHeaders bool
	observer      Observer
	log           *slog.Logger
	clock         store.Clock
	warnEvery     int64
	identityKey   []byte
	charger       store.Charger          // the store, when it can charge by response; else nil
	slots         store.ConcurrencyStore // the store, when it bounds requests in flight; else nil
	local         bool                   // the store is a store.LocalStore: its calls are not timed
	sampleMask    uint32                 // a store call is timed when a random number & sampleMask is 0
	hmacs         sync.Pool              // of *mac: HMAC-SHA256 under identityKey

	providerOpts providerOptions
	provider     *provider      // nil: no LimitProvider
	plans        *cache[string] // plan lookups per store key; nil: not cached (no WithLimitCache)
	unknownPlans atomic.Uint64  // see UnknownPlans

	waits      waitRoom   // the requests held by their rules' wait
	blocks     blockTable // the blocks of lease rules (see blocks.go)
	leaseKeys  int        // WithLeaseKeys
	storeWarn  logGate    // store failures
	shadowLogs sync.Map   // rule name → *logGate: each shadow rule's denials

	loadMu   sync.Mutex // held by each reload, from reading to swapping
	reloadMu sync.Mutex // guards reload
	reload   ReloadStats

	// What the limiter's middlewares read once, when they are built.
	clientIP  clientip.Config // how they derive client IPs (WithClientIP)
	inContext bool            // they put Decisions in contexts (WithDecisionContext)
}

// NewLimiter returns a Limiter for cfg, configured by opts (counting in a
// memory store unless WithStore gives another). A nil or disabled cfg
// passes every request untouched. A cfg with a rule charged by response
// (RuleSpec.Cost) over a store that is not a store.Charger panics, naming
// the rule and the store: a program that could never charge must not
// start. So does a cfg with a rule that bounds requests in flight
// (RuleSpec.Concurrent) over a store that cannot (it is no
// store.ConcurrencyStore), and one with stacked rules (RuleSpec.Stack)
// over a store that cannot take several limits at once (it is no
// store.MultiTaker).
func NewLimiter(cfg *Config, opts ...Option) *Limiter {
	l := &Limiter{
		log:         slog.Default(),
		clock:       store.SystemClock,
		warnEvery:   int64(10 * time.Second),
		identityKey: []byte(defaultIdentityKey),
		sampleMask:  15, // one call in 16
		leaseKeys:   defaultLeaseKeys,
	}
	for _, o := range opts {
		if o != nil {
			o(l)
		}
	}
	if l.store == nil {
		l.store = memstore.New(memstore.WithClock(l.clock))
	}
	l.cfg.Store(cfg)
	l.storeWarn.init()
	l.blocks.init(l.leaseKeys)
	l.provider = newProvider(l.providerOpts)
	if l.providerOpts.cached {
		l.plans = newCache[string](l.providerOpts.size, l.providerOpts.ttl)
	}
	if ls, ok := l.store.(store.LocalStore); ok && ls.Local() {
		l.local = true
	}
	l.charger, _ = l.store.(store.Charger)
	l.slots, _ = l.store.(store.ConcurrencyStore)
	if err := l.chargeError(cfg); err != nil {
		panic("core.NewLimiter: " + err.Error())
	}
	if err := l.runnable(cfg); err != nil {
		panic("core.NewLimiter: " + err.Error())
	}
	return l
}

// Config returns the limiter's configuration now.
func (l *Limiter) Config() *Config { return l.cfg.Load() }

// Logger returns where the limiter reports (see WithLogger).
func (l *Limiter) Logger() *slog.Logger { return l.log }

// Store returns the limiter's store.
func (l *Limiter) Store() store.Store { return l.store }

// ClientIP returns a copy of how the limiter's middlewares derive a
// request's client IP (WithClientIP); a nil limiter's is the zero
// clientip.Config. Changing the copy changes nothing of the limiter's.
func (l *Limiter) ClientIP() clientip.Config {
	if l == nil {
		return clientip.Config{}
	}
	c := l.clientIP
	c.TrustedProxies = slices.Clone(c.TrustedProxies)
	return c
}

// DecisionContext reports whether the limiter's middlewares put each
// Decision into its request's context (WithDecisionContext).
func (l *Limiter) DecisionContext() bool { return l.inContext }

// Limits is what a middleware limits requests by: every adapter's New
// takes one. A *Config is decided by a Limiter of the middleware's own,
// NewLimiter(cfg), counting in a memory store; a *Limiter is for
// everything else (another store, an observer, a failure policy, a
// configuration reloaded while serving, one limiter shared by several
// middlewares). *Config and *Limiter are the only Limits.
type Limits interface {
	limits() // sealed: *Config and *Limiter only
}

func (*Config) limits()  {}
func (*Limiter) limits() {}

// headerStyle is the header style of decisions under cfg.
func (l *Limiter) headerStyle(cfg *Config) HeaderStyle {
	if l.styleSet || cfg == nil {
		return l.style // HeadersDraft unless set
	}
	return cfg.headers
}

// FailsOpen reports whether a request passes when the store fails: the
// policy WithFailOpen set, else the current configuration's. Packages
// that call other stores for the same requests (package outbound's hold
// store) follow it too.
func (l *Limiter) FailsOpen() bool { return l.failsOpen(l.Config()) }

// failsOpen reports whether, under cfg, a request passes when the store
// fails.
func (l *Limiter) failsOpen(cfg *Config) bool {
	if l.failOpenSet {
		return l.failOpen
	}
	return cfg.FailOpen()
}

// Decide decides one request. path is the request path as the router
// reads it (see Path: a plain constant such as "/api/search" is one,
// URLPath gives one for a *url.URL); identity is the caller's key (a user
// id, an API key, a client IP); bypass lets a request through uncounted (a
// super-admin). Exempt paths (Config.Exempt) pass uncounted too, and so
// do identities of the allow list (AllowSpec); every other request counts
// under the rule Config.Match gives. An identity that is an IP address is
// also the client IP of the network lists: in a banned network it is
// refused (Decision.Banned) before anything else, in an allowed one it
// passes uncounted. Under a rule with a key of its own (RuleSpec.Key),
// Decide has no request but path: identity is both the user part (the
// client IP's, "ip:<address>", when it is an IP address) and the ip part
// (and so what a header part, which no request carries here, falls back
// to), and a param part is read from path.
//
// When the Decision is Deferred, the caller owes the limiter a call of
// Complete once the request is answered, with its status: a rule that
// counts by outcome (RuleSpec.Count) counts it then, and a rule with a
// concurrency limit (RuleSpec.Concurrent) gets its slot back then. Call
// it in a defer, so that a panic completes the request too:
//
//	d := l.Decide(ctx, "GET", "/api/search", user, false)
//	if !d.Allowed {
//		return // answer d.Status() with d.Body()
//	}
//	status := http.StatusOK
//	defer func() { l.Complete(ctx, &d, status) }()
//
// A slot also comes back when ctx ends, should Complete not have come
// first; a Decision that is not Deferred (refused, exempt, bypassed, or
// under a rule that needs nothing after the request) holds nothing, and
// Complete does nothing for it.
func (l *Limiter) Decide(ctx context.Context, method string, path Path, identity string, bypass bool) Decision {
	return l.DecidePlan(ctx, method, path, identity, "", bypass)
}

// observe passes e to the observer, if any.
func (l *Limiter) observe(e Event) {
	if l.observer != nil {
		l.observer(e)
	}
}

// ErrUnknownRule is returned by Reset for a rule name the configuration
// does not hold.
var ErrUnknownRule = errors.New("no such rule")

// Reset forgets identity's counters under the named rule ("default" for
// the default limit) in the configuration now, under every plan (see
// TierSpec) and under the limits a LimitProvider gives it (asked, when
// its answer is not cached), and reports whether a counter existed and
// was removed: false means identity had nothing counted under the rule
// (never counted, its counters expired, or spelled otherwise than it was
// counted under). It also lifts identity's ban under the rule's penalty,
// if any, and forgets its denials (see PenaltySpec); cleared is then true
// when either was live too. identity is what the request was counted
// under, as the adapter's Identity function gives it for a request: the
// key function's answer (HeaderIdentity(name, value) for an adapter's
// HeaderKey, "sub:<subject>" for JWTSubject, what the application's own
// returns), else the client IP (for IPv6, its network's
// first address under clientip.Config.IPv6PrefixLen, e.g.
// "2001:db8:0:1::" for any address of 2001:db8:0:1::/64). An unknown rule
// is ErrUnknownRule.
//
// A rule that counts per another key than the caller (RuleSpec.Key) takes
// identity as that key's value: for ip the client IP (as above: for
// IPv6 its network's first address); for header:<Name> the header's value
// (or adapter.HeaderIdentity(name, value)), hashed as the requests'; for
// param:<name> the parameter's value, decoded (lower case behind a router
// that ignores case, Flow.FoldCase). A request without the header counted
// under its client IP, "ip:<address>": reset that counter, and any of a
// key of several parts (for which Reset returns an error), by its store
// key, with ResetKey. Under such a rule the limits a LimitProvider gives
// a caller count under the rule's key, and neither Reset nor ResetKey
// finds those counters (the provider is asked by caller, not by key):
// they end with their windows.
func (l *Limiter) Reset(ctx context.Context, identity, rule string) (cleared bool, err error) {
	r := l.cfg.Load().Rule(rule)
	if r == nil {
		return false, fmt.Errorf("rate-limit reset: rule %q: %w", rule, ErrUnknownRule)
	}
	key, err := l.resetKey(r, identity)
	if err != nil {
		return false, err
	}
	return l.ResetKey(ctx, key, rule)
}

// RuleKey returns the store key the named rule counts identity under:
// the key Reset resets, and Decision.Key or Event.Key name, given
// identity as Reset takes it. Under a rule keyed by user (the default)
// it is Key(identity); under a rule keyed by one other part, that part's
// key with identity as its value (see Reset). A rule whose key has
// several parts is an error, as for Reset; an unknown rule is
// ErrUnknownRule.
func (l *Limiter) RuleKey(identity, rule string) (string, error) {
	r := l.cfg.Load().Rule(rule)
	if r == nil {
		return "", fmt.Errorf("rate-limit key: rule %q: %w", rule, ErrUnknownRule)
	}
	return l.resetKey(r, identity)
}

// ResetKey is Reset by store key: the key a log line, an Event or
// Decision.Key names (see Key).
func (l *Limiter) ResetKey(ctx context.Context, key, rule string) (cleared bool, err error) {
	cfg := l.cfg.Load()
	r := cfg.Rule(rule)
	if r == nil {
		return false, fmt.Errorf("rate-limit reset: rule %q: %w", rule, ErrUnknownRule)
	}
	if cleared, err = l.resetAll(ctx, cfg, key, r); err != nil {
		return false, err
	}
	lifted, err := l.resetPenalty(ctx, key, r)
	return cleared || lifted, err
}

// Key returns the store key a request of identity counts under: for a
// SecretIdentity, "<label>:hmac:<hex>", the first 128 bits of
// HMAC-SHA256(identity key, secret) in hex (see WithIdentityKey); for any
// other, identity bounded by store.BoundKey. It is the key stores hold, the
// Observer sees and log lines name, under every rule keyed by user (the
// default; see RuleSpec.Key): a rule keyed otherwise counts under a key of
// its own, which Decision.Key and Event.Key name.
func (l *Limiter) Key(identity string) string {
	label, secret, ok := secretParts(identity)
	if !ok {
		return store.BoundKey(identity)
	}
	var buf [store.MaxKeyLen]byte
	return string(l.secretKey(buf[:0], label, secret))
}

// secretKey appends the store key of SecretIdentity(label, secret) to b
// (see Key), allocating nothing when b has room.
func (l *Limiter) secretKey(b []byte, label, secret string) []byte {
	m, _ := l.hmacs.Get().(*mac)
	if m == nil {
		m = &mac{h: hmac.New(sha256.New, l.identityKey)}
	}
	m.h.Reset()
	m.in = append(m.in[:0], secret...)
	m.h.Write(m.in)
	clear(m.in) // keep no secret in pooled memory
	sum := m.h.Sum(m.sum[:0])
	start := len(b)
	b = append(b, label...)
	b = append(b, hmacMark...)
	b = hex.AppendEncode(b, sum[:16])
	if cap(m.in) <= 4096 {
		l.hmacs.Put(m)
	}
	if len(b)-start > store.MaxKeyLen {
		return append(b[:start], store.BoundKey(string(b[start:]))...)
	}
	return b
}

// mac is an HMAC with its buffers, reused (Limiter.hmacs) so that hashing
// a secret allocates nothing.
type mac struct {
	h   hash.Hash
	in  []byte
	sum [sha256.Size]byte
}

// defaultIdentityKey keys the hash of secret identities when no
// WithIdentityKey is given. It is public: anyone who reads the store's key
// names can test a guess of a secret against them. Set your own.
const defaultIdentityKey = "rlkit default identity key: set your own with core.WithIdentityKey"

// logGate spaces log lines: at most one per interval, with the number of
// events held back since the last line.
type logGate struct {
	mu         sync.Mutex // serializes the start of an interval
	last       atomic.Int64
	suppressed atomic.Int64
}

func (g *logGate) init() { g.last.Store(-1 << 62) }

// pass reports whether an event at now, with lines at least every apart,
// gets a line, and how many events the gate held back before it. The
// count is taken before the new interval starts, under mu, so that an
// event held back because it saw the new interval is counted in the next
// line, never in this one.
func (g *logGate) pass(now, every int64) (suppressed int64, ok bool) {
	if now-g.last.Load() < every {
		g.suppressed.Add(1)
		return 0, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if now-g.last.Load() < every {
		g.suppressed.Add(1)
		return 0, false
	}
	suppressed = g.suppressed.Swap(0)
	g.last.Store(now)
	return suppressed, true
}

// warn logs a store failure, at most once per warn interval, with the number
// of failures it did not log since the last line.
func (l *Limiter) warn(rule *Rule, passed bool, err error) {
	policy := "open: requests pass"
	switch {
	case rule.shadow:
		policy = "shadow rule: requests pass"
	case !passed:
		policy = "closed: requests get 503"
	}
	l.warnAs(rule, policy, err)
}

// warnAs is warn with what became of the request (failure_policy).
func (l *Limiter) warnAs(rule *Rule, policy string, err error) {
	suppressed, ok := l.storeWarn.pass(l.clock.Now(), l.warnEvery)
	if !ok {
		return
	}
	l.log.Warn("rlkit: rate-limit store failed",
		slog.String("rule", rule.Name),
		slog.String("error", err.Error()),
		slog.String("failure_policy", policy),
		slog.Int64("suppressed", suppressed))
}

// shadowDenied logs a shadow rule's would-be denial of a request of key
// at cost, whose answer is res: at most once per warn interval per rule
// (of this limiter), naming the key (never a secret: see SecretIdentity)
// and the denials held back since the rule's last line.
func (l *Limiter) shadowDenied(rule *Rule, key string, cost int64, res *store.Result) {
	suppressed, ok := l.shadowGate(rule)
	if !ok {
		return
	}
	l.log.Warn("rlkit: shadow rule would deny",
		slog.String("rule", rule.Name),
		slog.String("key", key),
		slog.Int64("cost", cost),
		slog.String("limit", res.Limit.String()),
		slog.Duration("retry_after", res.RetryAfter.Round(time.Millisecond)),
		slog.Int64("suppressed", suppressed))
}

// shadowGate is the log gate of rule's would-be denials: it reports
// whether one gets a line now, and how many it held back before.
func (l *Limiter) shadowGate(rule *Rule) (suppressed int64, ok bool) {
	g, ok := l.shadowLogs.Load(rule.Name)
	if !ok {
		fresh := new(logGate)
		fresh.init()
		g, _ = l.shadowLogs.LoadOrStore(rule.Name, fresh)
	}
	return g.(*logGate).pass(l.clock.Now(), l.warnEvery)
}
