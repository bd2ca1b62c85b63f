package outbound

import (
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"net/http"
	"sync"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// MaxHold is the longest hold any upstream header can cause (Retry-After,
// a reset time): a longer one (a day, a date years ahead, a number too
// large for a time.Duration) holds the key for MaxHold only, so that a
// bogus header cannot block a key for good.
const MaxHold = 10 * time.Minute

// ErrNeverAdmitted is the error (errors.Is) of Wait for a request whose
// cost is more than its rule's capacity: no wait would ever let it start.
var ErrNeverAdmitted = errors.New("outbound: the request's cost exceeds its rule's capacity: it could never start")

// ErrBanned is the error (errors.Is) of Wait for a key that is an IP
// address in a network of the configuration's ban list (core.BanSpec).
var ErrBanned = errors.New("outbound: the key is in a banned network")

// Option configures a Limiter.
type Option func(*Limiter)

// WithClock sets the time of the Limiter: its timers, its holds, and the
// "now" of the decisions of the store New makes when given none (through
// memstore.WithClock) and of the core limiter (core.WithClock). A store
// given to New keeps its own clock. Default: SystemClock.
func WithClock(c Clock) Option {
	return func(l *Limiter) {
		if c != nil {
			l.clock = c
		}
	}
}

// WithHoldStore shares holds between processes: every hold (Delay, and
// what Observe derives from Retry-After or a remaining count of 0) is
// written there too, and a request starts only when the store has no hold
// on its key. The local budget Observe derives from a positive remaining
// count stays in the process. A failure of the HoldStore is handled as a
// failure of the rate-limit store is (core.Limiter.FailsOpen: a
// core.WithFailOpen given through WithCoreOptions, else the
// configuration's core.Spec.Failure): open, the request starts; closed,
// Wait returns an error wrapping the HoldStore's. A Wait may call both
// stores, so it may take up to both timeouts when both fail slowly. Delay returns the HoldStore's error (the hold
// still applies in the process). Default: none, holds are kept in the
// process only.
func WithHoldStore(h HoldStore) Option { return func(l *Limiter) { l.holds = h } }

// WithCoreOptions passes options to the core limiter that decides each
// request (core.NewLimiter): the identity key of secret keys, fail-open or
// closed, an Observer for metrics, a logger, a LimitProvider. They are
// applied after New's store and WithClock's clock: a core.WithStore or
// core.WithClock among them takes their place. Default: none (core's
// defaults).
func WithCoreOptions(opts ...core.Option) Option {
	return func(l *Limiter) { l.coreOpts = append(l.coreOpts, opts...) }
}

// Limiter waits (it never fails for being over a limit) until a request
// may start, under the same rules and policies as the inbound side
// (core.Config, from YAML or Rate), on any store.Store (memstore in one
// process; redisstore shared by replicas). It implements Waiter, Delayer
// and Observer, and is safe for concurrent use.
//
// Requests of one key under one rule wait in a queue, first come first
// served, within the process; only the request at the head asks the store,
// and sleeps the store's RetryAfter between asks, so a waiting queue costs
// one store call per admission, not one per waiter. A request whose
// context is done leaves the queue at once with ctx.Err() and takes no
// slot: the one behind it becomes the head at once. Different keys (and
// different rules) never wait on each other.
//
// Before asking the store, the head checks the key's holds: those Delay
// sets and those Observe derives from an upstream's response headers
// (Retry-After; a remaining count of 0 until the reset), and the key's
// budget (a positive remaining count: at most that many more starts before
// the reset, less the requests still in flight). A key whose latest
// answer reported a remaining count and that has no budget in force (its
// window has reset) starts one request, a probe, and holds the others
// until the next answer under the key is observed, for at most a second
// (see Observe). Holds, budgets and probes apply to every request under the
// key, even on an exempt path or when limiting is off: they are what the
// upstream said.
//
// Memory is bounded: a key's queue is dropped when empty, and the state of
// a key with no waiter, no hold or budget in force and no request in
// flight (requests never observed are forgotten within a minute) is
// dropped at once, or by a sweep that runs when a shard's table doubles
// (amortised O(1) per new key) and at least once a minute while the shard
// holds more than 64 keys (so a spike's state goes within a minute of
// later requests once what the upstream gave has ended).
type Limiter struct {
	core     *core.Limiter
	remote   bool // the store is not a store.LocalStore: its calls may block
	clock    Clock
	holds    HoldStore
	coreOpts []core.Option
	seed     maphash.Seed
	shards   [numShards]shard
}

var (
	_ Starter  = (*Limiter)(nil)
	_ Delayer  = (*Limiter)(nil)
	_ Observer = (*Limiter)(nil)
)

// New returns a Limiter deciding under cfg (nil or disabled: nothing is
// counted, only holds apply) in store (nil: a new memstore on the
// Limiter's clock). A rule that counts by outcome (core.RuleSpec.Count
// failures or successes) is an error naming the rule: an outbound request
// is decided before its response exists; so is a rule with a wait
// (core.RuleSpec.Wait): Wait waits for the room itself.
func New(cfg *core.Config, st store.Store, opts ...Option) (*Limiter, error) {
	if err := checkConfig(cfg, nil); err != nil {
		return nil, err
	}
	l := &Limiter{clock: SystemClock, seed: maphash.MakeSeed()}
	for _, o := range opts {
		o(l)
	}
	cc := CoreClock(l.clock)
	if st == nil {
		st = memstore.New(memstore.WithClock(cc))
	}
	copts := append([]core.Option{core.WithStore(st), core.WithClock(cc)}, l.coreOpts...)
	// The store the core limiter counts in (WithCoreOptions may name
	// another) must bound requests in flight for a concurrency limit.
	if err := checkConfig(cfg, core.NewLimiter(nil, copts...).Store()); err != nil {
		return nil, err
	}
	l.core = core.NewLimiter(cfg, copts...)
	ls, local := l.core.Store().(store.LocalStore) // the store it counts in, WithCoreOptions' or st
	l.remote = !local || !ls.Local()
	for i := range l.shards {
		l.shards[i].init()
	}
	return l, nil
}

// checkConfig refuses rules that count by outcome, rules with a wait
// and, with st not nil, concurrency limits when st cannot bound requests
// in flight.
func checkConfig(cfg *core.Config, st store.Store) error {
	if cfg == nil {
		return nil
	}
	for _, r := range cfg.Rules() {
		if r.Count() != "all" {
			return fmt.Errorf("outbound: rule %q counts by outcome (count: %v): an outbound request is decided before its response, so only count: all can be used", r.Name, r.Count())
		}
		if r.Wait() != 0 {
			return fmt.Errorf("outbound: rule %q has wait: %v: an outbound request waits for its room anyway (Wait), on the limiter's clock; leave wait out", r.Name, r.Wait())
		}
		if _, ok := st.(store.ConcurrencyStore); st != nil && r.Concurrent() > 0 && !ok {
			return fmt.Errorf("outbound: rule %q sets concurrent, and the store (%T) bounds no requests in flight (it is no store.ConcurrencyStore)", r.Name, st)
		}
	}
	return nil
}

// SetConfig swaps cfg in (see core.Limiter.SetConfig): requests waiting
// ask the store under cfg from their next ask. A rule that counts by
// outcome is an error naming the rule, and the running configuration
// stays.
func (l *Limiter) SetConfig(cfg *core.Config) error {
	if err := checkConfig(cfg, l.core.Store()); err != nil {
		return err
	}
	l.core.SetConfig(cfg)
	return nil
}

// Core returns the core limiter that decides each request: its Config,
// Store, Key, Reset.
func (l *Limiter) Core() *core.Limiter { return l.core }

// now is the clock's instant in Unix nanoseconds.
func (l *Limiter) now() int64 { return l.clock.Now().UnixNano() }

// Wait implements Waiter: it returns nil when a request of method on path
// (escaped) under key may start, after the requests that were waiting
// under the same key and rule before it. It returns ctx.Err() as soon as
// ctx is done (also when it is done on entry), taking no slot, even while
// a store in another process (Redis) is deciding the request: that call
// then ends on its own goroutine, within the store's timeout, and should
// it admit the request, the admission stays counted (a store.Store cannot
// give one back), so the key may start one request fewer in its window
// than the limit allows. It returns an error
// wrapping the store's when the store fails and the configuration fails
// closed; ErrNeverAdmitted at once for a cost above the rule's capacity;
// ErrBanned for a banned key. A request on an exempt path, or with
// limiting off, waits only for the key's holds; one under a rule in shadow
// mode is counted and never waits for it.
//
// Under a rule with a concurrency limit (core.RuleSpec.Concurrent), a
// request also waits for a slot: at most that many requests of the key
// are in flight at once. A request Wait starts holds its slot until
// Observe is told of an answer under the key (each Observe gives back
// the oldest slot a request Wait started under the key holds): a caller
// that reports every request (Report, as package grpcrl's client
// interceptors do) frees each slot once its answer came. Start gives the
// caller the end of the request instead.
func (l *Limiter) Wait(ctx context.Context, method, path, key string) error {
	var q request
	if err := l.wait(ctx, method, path, key, &q); err != nil || q.held == nil {
		return err
	}
	done := l.finish(q.skey, q.held)
	sh := l.shard(q.skey)
	sh.mu.Lock()
	ks := sh.state(q.skey, l.now())
	ks.held = append(ks.held, done)
	sh.mu.Unlock()
	return nil
}

// Start implements Starter: it waits as Wait does, and returns done,
// which the caller calls once the request is over (its response read and
// closed, or no response): under a rule with a concurrency limit
// (core.RuleSpec.Concurrent) it gives back the request's slot and wakes
// the next request of the key waiting for one. Calls of done after the
// first do nothing; done is never nil when err is nil. A request whose
// context ends gives its slot back then (core.Limiter.Complete), should
// done not have come first.
func (l *Limiter) Start(ctx context.Context, method, path, key string) (done func(), err error) {
	var q request
	if err := l.wait(ctx, method, path, key, &q); err != nil {
		return nil, err
	}
	if q.held == nil {
		return nop, nil
	}
	return l.finish(q.skey, q.held), nil
}

func nop() {}

// finish returns the done of a request of the store key skey admitted
// with d, which holds slots: it completes d, once, and wakes the
// requests of the key waiting for a slot.
func (l *Limiter) finish(skey string, d *core.Decision) func() {
	var once sync.Once
	return func() {
		once.Do(func() {
			l.core.Complete(context.Background(), d, http.StatusOK)
			l.shard(skey).freed(skey)
		})
	}
}

// wait is Wait, filling q: the request it decides; q.held is the
// admitting Decision when it holds slots to give back.
func (l *Limiter) wait(ctx context.Context, method, path, key string, q *request) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	cfg := l.core.Config()
	p := core.Path(path)
	// With limiting on, every request asks the core limiter (which lets
	// an exempt path through uncounted, and refuses a banned network
	// first); an exempt path waits in a queue of its own, behind no rule.
	counted := cfg.Enabled()
	rule := ""
	bounded := false // the rule bounds requests in flight
	if counted && !cfg.Exempt(p) {
		if r, cost := cfg.Match(method, p); r != nil {
			rule, bounded = r.Name, r.Concurrent() > 0
			if c := r.Policy.Capacity(); cost > c {
				return fmt.Errorf("%w (rule %q: cost %d, capacity %d)", ErrNeverAdmitted, r.Name, cost, c)
			}
		}
	}
	skey := l.core.Key(key)
	sh := l.shard(skey)
	now := l.now()
	ks, w, r := sh.enqueue(skey, rule, now)
	if w != nil {
		select {
		case <-w.turn:
		case <-ctx.Done():
			sh.leave(skey, ks, rule, w, l.now())
			return ctx.Err()
		}
		now = l.now()
		r = sh.reserve(ks, now)
	}
	*q = request{method: method, path: p, key: key, skey: skey, counted: counted, bounded: bounded}
	now, err := l.head(ctx, q, sh, ks, r, now)
	sh.leave(skey, ks, rule, nil, now)
	return err
}

// request is one request Wait decides: method on path under the identity
// key, whose store key is skey; counted says that the core limiter decides
// it (limiting is on), bounded that its rule bounds requests in flight.
// held is the Decision that admitted it when it holds slots to give back
// (core.Decision.Deferred).
type request struct {
	method  string
	path    core.Path
	key     string
	skey    string
	counted bool
	bounded bool
	held    *core.Decision
}

// head is the wait of request q, at the head of its queue (ks in shard
// sh), whose first reservation r was made at now: until the key's holds
// and budget let it start and the store admits it. It returns the instant
// of its last reservation (a recent enough "now" for the queue's
// clean-up, without reading the clock again).
func (l *Limiter) head(ctx context.Context, q *request, sh *shard, ks *keyState, r reservation, now int64) (int64, error) {
	for {
		if r.wait > 0 {
			if err := sleepOr(ctx, l.clock, r.wait, r.probed); err != nil {
				return now, err
			}
			now = l.now()
			r = sh.reserve(ks, now)
			continue
		}
		if err := ctx.Err(); err != nil { // done as the turn came
			sh.unreserve(ks, r)
			return now, err
		}
		var freed <-chan struct{} // closed when a slot comes back in this process
		if q.bounded {
			freed = sh.watchFreed(ks) // before asking: a slot given back after the answer wakes it
		}
		retry, err := l.ask(ctx, q)
		if err == nil && retry == 0 {
			return now, nil // started: the reservation stands
		}
		sh.unreserve(ks, r)
		if err != nil {
			return now, err
		}
		if err := sleepOr(ctx, l.clock, retry, freed); err != nil {
			return now, err
		}
		now = l.now()
		r = sh.reserve(ks, now)
	}
}

// ask asks the hold store (when there is one, under the store key) and
// then the core limiter (with the identity key) whether q may start now:
// 0 and nil when it may; how long to wait before asking again; or the
// error Wait returns.
func (l *Limiter) ask(ctx context.Context, q *request) (time.Duration, error) {
	if l.holds != nil {
		skey := q.skey // q stays on the caller's stack
		type held struct {
			left time.Duration
			err  error
		}
		h, ok := detach(ctx, func() held {
			left, err := l.holds.Held(ctx, skey)
			return held{left, err}
		})
		if !ok {
			return 0, ctx.Err()
		}
		left, err := h.left, h.err
		switch {
		case err != nil && ctx.Err() != nil:
			return 0, ctx.Err()
		case err != nil && !l.core.FailsOpen():
			return 0, fmt.Errorf("outbound: hold store: %w", err)
		case err == nil && left > 0:
			left = min(left, MaxHold)
			l.holdLocal(q.skey, left)
			return left, nil
		}
	}
	if !q.counted {
		return 0, nil
	}
	var d core.Decision
	ok := true
	if l.remote {
		method, path, key := q.method, q.path, q.key // q stays on the caller's stack
		d, ok = detach(ctx, func() core.Decision { return l.core.Decide(ctx, method, path, key, false) })
	} else {
		d = l.core.Decide(ctx, q.method, q.path, q.key, false) // in this process: no goroutine, no allocation
	}
	switch {
	case !ok || (l.remote && ctx.Err() != nil):
		// Done while a store in another process decided: the request is
		// not sent, though an admission the store made stays counted (a
		// store.Store cannot give it back; a slot it took goes back with
		// the end of ctx).
		return 0, ctx.Err()
	case d.Allowed:
		if d.Deferred() { // it holds a slot to give back
			q.held = new(core.Decision)
			*q.held = d
		}
		return 0, nil
	case d.ConcurrencyDenied:
		// Every slot is held: ask again when one comes back in this
		// process, or after busyRetry (one given back elsewhere).
		return busyRetry, nil
	case ctx.Err() != nil:
		return 0, ctx.Err()
	case d.Err != nil:
		return 0, fmt.Errorf("outbound: rate-limit store: %w", d.Err)
	case d.Banned:
		return 0, ErrBanned
	case d.Rule != nil && d.Cost > d.Rule.Policy.Capacity():
		return 0, fmt.Errorf("%w (rule %q: cost %d, capacity %d)", ErrNeverAdmitted, d.Rule.Name, d.Cost, d.Rule.Policy.Capacity())
	}
	return max(d.Result.RetryAfter, minRetry), nil
}

// detach returns the result of f, a call to another process (a remote
// store), or ok false as soon as ctx is done: f then goes on, on a
// goroutine of its own, until it returns, which its store's own timeout
// bounds. With a ctx that cannot end, f runs on the caller's goroutine.
func detach[T any](ctx context.Context, f func() T) (v T, ok bool) {
	if ctx.Done() == nil {
		return f(), true
	}
	ch := make(chan T, 1)
	go func() { ch <- f() }()
	select {
	case v = <-ch:
		return v, true
	case <-ctx.Done():
		return v, false
	}
}

// minRetry is the least sleep between two asks of the store, should a
// store deny with no RetryAfter.
const minRetry = time.Millisecond

// busyRetry is the longest a request waiting for a slot of a concurrency
// limit sleeps between two asks: a slot given back in this process wakes
// it at once, one given back by another process (a shared store), or by
// the end of a request's context, is seen at the next ask.
const busyRetry = 50 * time.Millisecond

// Delay implements Delayer: no request under key starts until d from now
// has passed, however long d is (the program asks for it; what upstreams
// say is capped at MaxHold before it becomes a hold). With a HoldStore the
// hold is written there too, and its error returned.
func (l *Limiter) Delay(ctx context.Context, key string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	skey := l.core.Key(key)
	l.holdLocal(skey, d)
	return l.share(ctx, skey, d)
}

// share writes a hold of d on the store key key to the HoldStore, if any.
func (l *Limiter) share(ctx context.Context, key string, d time.Duration) error {
	if l.holds == nil {
		return nil
	}
	if err := l.holds.Hold(ctx, key, d); err != nil {
		return fmt.Errorf("outbound: hold store: %w", err)
	}
	return nil
}

// holdLocal holds the store key key back in this process for d from now.
func (l *Limiter) holdLocal(key string, d time.Duration) {
	sh := l.shard(key)
	sh.mu.Lock()
	now := l.now()
	ks := sh.state(key, now)
	until := now + int64(d)
	if until < now { // past the end of time
		until = math.MaxInt64
	}
	ks.hold = max(ks.hold, until)
	sh.mu.Unlock()
}

// Observe implements Observer: it learns what a response under key said.
// A Retry-After holds the key for that long; a remaining count of 0 with a
// reset holds it until the reset; a positive remaining count r with a
// reset lets at most r more requests start under key before the reset,
// less the requests under key still in flight (started, not yet observed),
// which the upstream may not have counted yet. A response from an older
// window (its reset more than a second before the budget's) never raises
// the budget of a newer one; within one window the lower count wins. Holds
// (at most MaxHold) apply as Delay's do (and so go to the HoldStore); the
// budget stays in the process. Each call also counts one request under key
// as no longer in flight, and gives back the oldest slot of a concurrency
// limit that a request Wait started under key holds (see Wait; a request
// Start started gives its slot back with its done).
//
// While the latest answer observed under key reported a remaining count
// (with a reset), the key probes whenever it has no budget in force (none
// yet, or its window has reset): one request starts and the others wait until the next
// Observe under key (of any request: a response, or a zero Signal for
// none), whose count or hold then applies; should none come within a
// second of the probe's start, they start as they would with no budget,
// until the next Observe under key. So the requests waiting for a reset
// do not all start at it. What holds, in one process, against an upstream
// that reports its remaining count and a reset no earlier than the real
// one (an rlkit server rounds it up) and answers within a second: no more
// requests start in a window than the upstream said remain, once an
// answer under the key has been observed. The requests that start before
// that (the key's first contact, or its next one after its state was
// dropped) are not paced by the upstream, and processes do not share
// budgets or probes (only holds, through a HoldStore). An answer without
// a count (or a zero Signal: no answer) ends the probing, so an upstream
// that reports its count on some responses only never leaves the key one
// request at a time; a key never observed with a remaining count never
// probes (a Waiter whose caller never calls Observe is unaffected). The key's state, and with it what
// it learned, is dropped once nothing of it is in force and nothing is in
// flight.
func (l *Limiter) Observe(ctx context.Context, key string, s Signal) {
	skey := l.core.Key(key)
	sh := l.shard(skey)
	sh.mu.Lock()
	now := l.now()
	ks := sh.state(skey, now)
	ks.roll(now)
	ks.landed(true)
	hold := min(s.RetryAfter, MaxHold)
	// The latest answer decides whether the key probes: one without a
	// count (or no answer) ends it, so that an upstream that reports its
	// count on some responses only never leaves the key one at a time.
	ks.reports = s.HasRemaining && s.Reset > 0
	if ks.reports {
		if s.Remaining <= 0 {
			hold = max(hold, min(s.Reset, MaxHold))
		} else {
			ks.limit(now, s.Remaining, min(s.Reset, MaxHold))
		}
	}
	if hold > 0 { // before the probe's waiters wake
		ks.hold = max(ks.hold, now+int64(hold))
	}
	ks.probeDone()
	var done func() // the oldest slot a request Wait started holds
	if len(ks.held) > 0 {
		done = ks.held[0]
		ks.held[0] = nil
		ks.held = ks.held[1:]
	}
	sh.drop(skey, ks, now)
	sh.mu.Unlock()
	if done != nil {
		done()
	}
	if hold > 0 {
		// The hold is what the upstream said, whatever becomes of the
		// request: write it even when ctx is ending (the hold store's own
		// timeout bounds the call).
		_ = l.share(context.WithoutCancel(ctx), skey, hold)
	}
}
