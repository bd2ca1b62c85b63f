package redisstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redisbound"
)

// Defaults of the options.
const (
	DefaultPrefix        = "rl:"
	DefaultTimeout       = 100 * time.Millisecond
	DefaultBreakerFails  = 5
	DefaultBreakerPause  = time.Second
	DefaultDenyCacheSize = 100_000
)

// Option configures a Store.
type Option func(*Store)

// WithPrefix sets the prefix of every key the store writes. It must not
// contain '{' or '}', which would move the Cluster hash tag. Default: "rl:".
func WithPrefix(prefix string) Option { return func(s *Store) { s.prefix = prefix } }

// WithTimeout bounds every call to Redis, including the wait for a pooled
// connection and go-redis's retries; past it the call fails (and the
// limiter's failure policy answers). Calls that start within one grain
// (a twentieth of the timeout, 1ms to 10ms) share one deadline, so a call
// may run up to one grain longer. Default: 100ms.
func WithTimeout(d time.Duration) Option { return func(s *Store) { s.timeout = d } }

// WithBreaker sets the circuit breaker of each Redis node (each Cluster
// master, each Ring shard; a Client's server): after failures consecutive
// failed calls to a node, the store stops calling it for cooldown and fails
// the keys it serves at once with ErrCircuitOpen; then one call probes the
// node, and its success closes the circuit. What counts is evidence
// against the node: a refused or reset connection, a connection it
// closed, an error reply from Redis (LOADING, CLUSTERDOWN, READONLY, any
// other), an error the store does not know. A call that ended at a
// deadline — waiting for a pooled connection, a dial go-redis runs in the
// background, a retry back-off (context.DeadlineExceeded,
// redis.ErrPoolTimeout, redis.ErrPoolExhausted, or the store's own timeout
// of a client that ignores deadlines), or a dial, read or write that timed
// out — counts only when the node answered no other call of this store
// while it lasted: a busy pool on a healthy node fails its calls but
// opens no circuit. Nothing counts after the
// caller's own context ended. failures ≤ 0 turns the breakers off.
// Default: 5 failures, 1s.
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(s *Store) { s.nodes.threshold, s.nodes.cooldown = int64(failures), int64(cooldown) }
}

// WithDenyCache turns the local deny cache on or off. When on, a key that
// Redis denied a request of some cost, with a known retry-after, is denied
// locally, without a round trip, for requests of at least that cost until
// the retry-after has passed: a hot key over its limit costs Redis nothing.
// Reset through this store clears the key's entry; a Reset made by another
// process is seen here only when the entry ends. Default: on.
func WithDenyCache(on bool) Option { return func(s *Store) { s.denyOn = on } }

// WithDenyCacheSize bounds the deny cache: it holds 16 shards of n/16
// entries (at least one) each; a full shard drops its expired entries and,
// when that frees less than an eighth, arbitrary ones up to an eighth.
// Default: 100,000.
func WithDenyCacheSize(n int) Option { return func(s *Store) { s.denySize = n } }

// WithClock sets the local clock of the deny cache, the breakers and the
// record of failed dials (the counters themselves always use the Redis
// server's clock). Default: store.SystemClock.
func WithClock(c store.Clock) Option { return func(s *Store) { s.clock = c } }

// WithLogger sets where the store reports what New finds when it checks a
// Redis Cluster: one warning when a node has cluster-require-full-coverage
// yes, and, at debug level, a check the cluster refused or did not answer
// in time (see New). Give it the limiter's logger (core.WithLogger) to
// have both in one place. nil keeps the default. Default: slog.Default(),
// as it is when New is called.
func WithLogger(l *slog.Logger) Option {
	return func(s *Store) {
		if l != nil {
			s.log = l
		}
	}
}

// WithIncrExpireKeys, when on, makes every policy of one fixed-window
// limit count where, and as, a limiter built on INCR and EXPIRE counts: the key
// of window w is prefix + "{" + user + "}:" + rule + ":" + w, where rule is
// the policy's name alone (no counter identity) and w = floor(server time /
// period), the window's value is the count as a plain integer, and the
// first request of a window sets its TTL to one period (INCR, then EXPIRE
// when the count is new, in the same script). A service that counts in
// rl:{<user>}:<rule>:<window> that way and this store, under the same
// rule names, periods and user ids (and the default prefix, "rl:"), then
// share their counters, for a rolling migration between them. user and
// rule are escaped as in the default layout ('@' in a rule name is
// escaped too, as %40, so that these keys never meet the default
// layout's); a user id or rule name of letters, digits and -._+=/,! is
// written as it is. What differs from such a limiter: a request this
// store denies is not counted (its cost is given back), while one that
// INCRs before comparing counts its denied requests, and those count here
// too. A rule whose count changes keeps its window's count, as in the
// default layout; one whose period changes finds another window's key.
// Policies with several limits or another algorithm keep the default
// layout: a rule that gains a limit counts afresh there. Default: false
// (the default layout, described in the package documentation).
func WithIncrExpireKeys(on bool) Option { return func(s *Store) { s.incrExpire = on } }

// Store is a store.Store in Redis. Every decision is one Lua script (one
// round trip, EVALSHA with an EVAL fallback) that reads the server's clock
// (TIME), evaluates every limit of the policy, and writes only when all
// admit, with a TTL on every key it writes; under load, the decisions that
// wait for one node together share one such call (WithBatch), each still
// evaluated as it is alone. Replicas whose clocks disagree therefore agree
// on every count.
//
// It works with every go-redis client: Client (standalone or Sentinel
// through NewFailoverClient), ClusterClient and Ring. All counters of one
// user share a Cluster hash slot. Failures are accounted per node: a
// Cluster master or a Ring shard that fails opens its own circuit, and only
// the keys it serves fail. A Store is safe for concurrent use.
type Store struct {
	client   redis.UniversalClient
	prefix   string
	timeout  time.Duration
	grain    time.Duration
	bounded  bool // the client honours context deadlines on its sockets
	clock    store.Clock
	log      *slog.Logger
	nodes    nodes
	denyOn   bool
	denySize int
	deny     *denyCache
	// incrExpire: one-limit fixed windows use the INCR+EXPIRE layout.
	incrExpire bool
	// batch is the most decisions one call carries (WithBatch); noBatch is
	// set once the server refused the batch script.
	batch   int
	noBatch atomic.Bool

	plans  sync.Map // policy fingerprint (its terms) → *plan
	nplans atomic.Int64
	tick   atomic.Pointer[tick]
	// resets counts Resets (and give-backs), so that a denial read before
	// one is never cached after it.
	resets atomic.Uint64
	// held: the store has given back takes of a stacked request across
	// masters (see gaveBack).
	held atomic.Bool

	// mu is held (shared) by every call to Redis and (exclusive) by Close,
	// which therefore waits for the calls running; inflight counts the
	// goroutines of calls that gave up waiting on a client that ignores
	// context deadlines.
	mu       sync.RWMutex
	closed   atomic.Bool
	inflight sync.WaitGroup
}

var _ store.StatsStore = (*Store)(nil)

// New returns a Store that counts in client. The client should have
// ContextTimeoutEnabled set, so that go-redis bounds its socket reads and
// writes by the store's timeout; with a client that does not, the store
// runs each call on its own goroutine and stops waiting at the timeout (a
// few hundred nanoseconds more per call).
//
// New contacts Redis only for a ClusterClient (one that loads its slot map
// from the cluster, not from a ClusterSlots function): it asks every node
// for its cluster-require-full-coverage (CONFIG GET), within a second at
// most, and when any node has yes, Redis's default, under which one failed
// master stops every key's counting, it logs one warning (WithLogger)
// naming those nodes and the section "Cluster full coverage" of
// docs/redis.md. A node that refuses CONFIG (managed services often
// disable it) or a cluster that does not answer in time is logged at debug
// level only. The check never makes New fail.
//
// New adds a hook to the client (and, for a ClusterClient or a Ring, to
// each node's client as the store meets it) that records the outcome of
// every dial, so that a call that times out while dials to its node fail
// can name the cause (NodeError.LastDial). It touches no command.
func New(client redis.UniversalClient, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, errors.New("redisstore: nil client")
	}
	s := &Store{
		client:   client,
		prefix:   DefaultPrefix,
		timeout:  DefaultTimeout,
		clock:    store.SystemClock,
		denyOn:   true,
		denySize: DefaultDenyCacheSize,
		batch:    DefaultBatch,
	}
	s.nodes.threshold, s.nodes.cooldown = DefaultBreakerFails, int64(DefaultBreakerPause)
	for _, o := range opts {
		o(s)
	}
	switch {
	case strings.ContainsAny(s.prefix, "{}"):
		return nil, fmt.Errorf("redisstore: prefix %q contains '{' or '}', which would break the Cluster hash tag", s.prefix)
	case s.timeout <= 0:
		return nil, fmt.Errorf("redisstore: timeout %v must be positive", s.timeout)
	case s.nodes.threshold > 0 && s.nodes.cooldown <= 0:
		return nil, fmt.Errorf("redisstore: breaker cool-down %v must be positive", time.Duration(s.nodes.cooldown))
	case s.denyOn && s.denySize <= 0:
		return nil, fmt.Errorf("redisstore: deny cache size %d must be positive", s.denySize)
	}
	if s.denyOn {
		s.deny = newDenyCache(s.denySize)
	}
	s.grain = min(max(s.timeout/20, time.Millisecond), 10*time.Millisecond)
	s.nodes.init(client, s.clock)
	s.bounded = redisbound.Bounded(client)
	if s.log == nil {
		s.log = slog.Default()
	}
	if c, ok := client.(*redis.ClusterClient); ok {
		s.checkCoverage(c)
	}
	return s, nil
}

// Close stops the store: later calls fail with ErrClosed. It waits for the
// calls running (and, with a client that ignores context deadlines, for
// the goroutines of calls that timed out) and does not close the client,
// which belongs to the caller.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock() // no call holds mu now, and none can start
	s.mu.Unlock()
	s.inflight.Wait()
	return nil
}

// ErrClosed is returned by a Store after Close. Its StoreErrorKind is
// "closed".
var ErrClosed error = &kindError{"redisstore: store closed", "closed"}

// kindError is a sentinel error with a kind, for store.ErrorKind.
type kindError struct{ msg, kind string }

func (e *kindError) Error() string          { return e.msg }
func (e *kindError) StoreErrorKind() string { return e.kind }

var (
	evalshaCmd any = "evalsha"
	evalCmd    any = "eval"
	oneKey     any = int64(1)
)

// Take implements store.Store. It returns an error when the policy cannot be
// counted exactly in Redis (store.ErrBadPolicy: a period that is not a whole
// number of microseconds, or an extreme count), when the circuit of the
// key's node is open (a *NodeError wrapping ErrCircuitOpen), or when Redis
// fails or does not answer in time (a *NodeError naming the node).
func (s *Store) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.decide(ctx, key, p, cost, false)
}

// Peek implements store.Store: one script call, the decision script of
// Take in a dry run (-c - 1 in its ARGV[1] asks it to evaluate cost c and
// write nothing), on the server's clock. It writes nothing at any cost, 0
// included: a state kept under other terms of the counter (another count,
// burst or time unit, as after a reload) is read under the policy's terms
// and left as it is, and no TTL is extended. A key the deny cache holds
// is answered from it without a round trip, and a denial is cached as
// Take's is. It fails as Take does.
func (s *Store) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.decide(ctx, key, p, cost, true)
}

// decide is Take, or Peek when dry is set.
func (s *Store) decide(ctx context.Context, key string, p *store.Policy, cost int64, dry bool) (store.Result, error) {
	var r store.Result
	if s.closed.Load() {
		return r, ErrClosed
	}
	pl, err := s.plan(p)
	if err != nil {
		return r, err
	}
	cost = max(cost, 0)
	dk := denyKey{rule: p.CounterID(0), key: key}
	terms := p.Fingerprint()
	now := s.clock.Now()
	if s.deny != nil && cost > 0 && s.deny.get(dk, terms, cost, now, &r) {
		return r, nil
	}
	resets := s.resets.Load()
	k := redisKey(s.prefix, key, pl.rule)
	arg := cost
	if dry {
		// A dry run of cost c is -c - 1: one of cost 0 is told from a
		// take of cost 0, which may write (a state kept under other
		// terms is rewritten under the policy's, a TTL extended).
		arg = ^cost
	}
	reply, err := s.decideCall(ctx, k, pl, pl.tailAt(p, now), arg)
	if err != nil {
		return r, err
	}
	if err := parse(p, pl, reply, cost, &r); err != nil {
		return store.Result{}, err
	}
	if !r.Allowed && s.deny != nil && cost > 0 && s.resets.Load() == resets {
		s.deny.put(dk, terms, cost, now, &r, s.denyKeep())
	}
	return r, nil
}

// Reset implements store.Store: one script deletes key's counters under p
// (for a fixed window, those of the window holding the server's time and
// of its two neighbours) and reports whether any was live at the server's
// time: for a fixed window, a counter of the current window (or of the
// next, after the server's clock went back); for the other algorithms, a
// state not yet back to its initial one (their keys outlive that by up to
// a period: such a key is deleted and not reported). It also drops key's
// deny-cache entry. It fails as Take does.
func (s *Store) Reset(ctx context.Context, key string, p *store.Policy) (cleared bool, _ error) {
	return s.reset(ctx, part(key), key, true, p)
}

// ResetTag is Reset by hash tag (see InspectTags), so that a key Scan
// found as a digest can be reset. It drops the deny-cache entry of the key
// a tag names; a digest names none, and a denial this store cached for
// its key stands until the entry ends.
func (s *Store) ResetTag(ctx context.Context, tag string, p *store.Policy) (cleared bool, _ error) {
	if err := checkTag(tag); err != nil {
		return false, err
	}
	key, named := unpart(tag)
	return s.reset(ctx, tag, key, named, p)
}

// reset is Reset of the counters under p of the hash tag tag, which is
// key's when named is set.
func (s *Store) reset(ctx context.Context, tag, key string, named bool, p *store.Policy) (cleared bool, _ error) {
	pl, err := s.plan(p)
	if err != nil {
		return false, err
	}
	sc := resets[pl.algorithm]
	resetArgs := pl.resetArgs
	if pl.algorithm == calendarWindow {
		resetArgs = pl.tailAt(p, s.clock.Now())
	}
	args := make([]any, 0, 4+len(resetArgs))
	k := s.prefix + "{" + tag + "}:" + pl.rule
	args = append(args, evalshaCmd, sc.sha, oneKey, k)
	args = append(args, resetArgs...)
	v, err := s.call(ctx, k, sc, args)
	if s.deny != nil {
		// After the reset: a Take running meanwhile that read a denial
		// sees the count of resets change and does not cache it.
		s.resets.Add(1)
		if named {
			s.deny.drop(denyKey{rule: p.CounterID(0), key: key})
		}
	}
	if err != nil {
		return false, err
	}
	live, ok := v.(int64)
	if !ok {
		return false, fmt.Errorf("redisstore: unexpected reply %T to a reset", v)
	}
	return live > 0, nil
}

// Stats implements store.StatsStore: Store "redis", Keys -1 (counting keys
// would cost Redis a scan), the deny cache's hits, and one entry per node
// the store knows, with its breaker's state: the server of a Client; a
// ClusterClient's masters and a Ring's shards once a call has gone to
// them, sorted by address, and the whole cluster (or ring), named as in
// NodeError, while a ClusterClient has not loaded its slot map or while
// that entry's own breaker holds a failure. Half-open is a circuit whose
// cool-down has ended: its next call probes. It locks each of the deny
// cache's 16 shards briefly and copies the node list: its cost does not
// grow with the keys.
func (s *Store) Stats() store.Stats {
	st := store.Stats{Store: "redis", Keys: -1}
	if s.deny != nil {
		st.DenyCacheHits = s.deny.hitCount()
	}
	st.Nodes = s.nodes.stats(s.clock.Now())
	return st
}

// plan returns the precomputed form of p.
func (s *Store) plan(p *store.Policy) (*plan, error) {
	f := p.Fingerprint()
	if v, ok := s.plans.Load(f); ok {
		return v.(*plan), nil
	}
	pl, err := newPlan(p, s.incrExpire)
	if err != nil {
		return nil, err
	}
	// Policies live as long as their configuration; a program that makes
	// them per request must not grow this map without bound.
	if s.nplans.Add(1) > 10_000 {
		s.plans.Clear()
		s.nplans.Store(1)
	}
	s.plans.Store(f, pl)
	return pl, nil
}

// parse turns the script's reply into r.
func parse(p *store.Policy, pl *plan, reply any, cost int64, r *store.Result) error {
	v, ok := reply.([]any)
	n := len(p.Limits)
	if ok && n == 1 && pl.algorithm == algo.FixedWindow && len(v) == 2 {
		return parseFixed(p, v, cost, r)
	}
	if ok && pl.algorithm == calendarWindow && len(v) == 2 {
		// {-1, the server's time}: outside the periods sent.
		us, _ := v[1].(int64)
		return fmt.Errorf("redisstore: policy %q: the Redis server's clock (%s) is more than a calendar period away from this process's clock: calendar limits need them within a period of each other", p.Name, time.UnixMicro(us).UTC().Format(time.RFC3339))
	}
	if !ok || len(v) != 4*n {
		return fmt.Errorf("redisstore: unexpected reply %T of length %d to a decision over %d limits", reply, len(v), n)
	}
	var out [store.MaxLimits]algo.Outcome
	if err := readOutcomes(v, n, &out); err != nil {
		return err
	}
	*r = store.Combine(p, &out)
	return nil
}

// readOutcomes reads the reply v of a decision over n limits, four
// integers per limit (admitted, remaining, reset-after and retry-after in
// µs), into out.
func readOutcomes(v []any, n int, out *[store.MaxLimits]algo.Outcome) error {
	for i := range n {
		var x [4]int64
		for j := range x {
			var ok bool
			if x[j], ok = v[4*i+j].(int64); !ok {
				return fmt.Errorf("redisstore: unexpected reply element %T", v[4*i+j])
			}
		}
		out[i] = algo.Outcome{Allowed: x[0] == 1, Remaining: x[1], ResetAfter: x[2] * 1000, RetryAfter: x[3] * 1000}
	}
	return nil
}

// parseFixed reads the lean reply of a one-limit fixed window: the count
// after the request (with its cost, admitted or not) and the reset-after.
func parseFixed(p *store.Policy, v []any, cost int64, r *store.Result) error {
	count, ok1 := v[0].(int64)
	reset, ok2 := v[1].(int64)
	if !ok1 || !ok2 {
		return fmt.Errorf("redisstore: unexpected reply elements %T, %T", v[0], v[1])
	}
	l := p.Limits[0]
	o := fixedOutcome(l, count, reset, cost)
	r.SetOutcome(l, &o)
	return nil
}

// fixedOutcome is the outcome of a one-limit fixed window's lean reply:
// the count after a request of cost (with its cost, admitted or not) and
// the reset-after (µs).
func fixedOutcome(l algo.Limit, count, reset, cost int64) algo.Outcome {
	o := algo.Outcome{ResetAfter: reset * 1000}
	switch {
	case cost > l.Count: // never admitted; nothing was taken
		o.Remaining = max(l.Count-count+cost, 0)
		o.RetryAfter = max(o.ResetAfter, int64(l.Period))
	case cost == 0: // only read; a count kept under a larger limit may exceed it
		o.Allowed, o.Remaining = true, max(l.Count-count, 0)
	case count <= l.Count:
		o.Allowed, o.Remaining = true, l.Count-count
	default: // denied, and the cost given back
		o.Remaining = max(l.Count-count+cost, 0)
		o.RetryAfter = o.ResetAfter
	}
	return o
}

// call runs one script on key through the breaker of key's node, bounded
// by the timeout.
func (s *Store) call(ctx context.Context, key string, sc *script, args []any) (any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, err := s.admit(ctx, key)
	if err != nil {
		return nil, err
	}
	return s.callNode(ctx, a, sc, args)
}

// admission is a call the breaker of node n let through at now: as its
// probe, when probe is set; located is the error of finding n, which
// fails the call as the call's own would.
type admission struct {
	n       *node
	now     int64
	probe   bool
	located error
}

// admit is the start of every call on key, under s.mu's read lock: it
// fails when the store is closed, ctx has ended or the breaker of key's
// node is open, and otherwise returns the call's admission (with the
// error of locating the node, for callNode, which counts it).
func (s *Store) admit(ctx context.Context, key string) (admission, error) {
	if s.closed.Load() {
		return admission{}, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return admission{}, err
	}
	a := admission{now: s.clock.Now()}
	a.n, a.located = s.nodes.locate(ctx, key, a.now, s.timeout)
	ok, probe := a.n.br.allow(a.now)
	if !ok {
		return admission{}, a.n.openErr
	}
	a.probe = probe
	return a, nil
}

// callNode runs one script on the node a admitted the call to. The
// caller holds s.mu.
func (s *Store) callNode(ctx context.Context, a admission, sc *script, args []any) (any, error) {
	n, probe := a.n, a.probe
	answered := n.answered.Load()
	var v any
	err := a.located
	if err == nil {
		cctx := s.callContext(ctx)
		v, err = s.do(cctx, args)
		if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
			args[0], args[1] = evalCmd, sc.eval
			v, err = s.do(cctx, args)
		}
	}
	if err != nil {
		// A call that only waited (for a pooled connection, a dial, a
		// retry back-off) while the node answered other calls says
		// nothing against the node; neither does a caller that gave up.
		if ctx.Err() == nil && counts(err, n.answered.Load() != answered) {
			n.br.failure(s.clock.Now(), probe)
		} else if probe {
			n.br.probing.Store(false) // let another call probe
		}
		return nil, s.nodeError(n, err, a.now)
	}
	n.answered.Add(1)
	n.br.success(probe)
	return v, nil
}

// counts reports whether err, ending a call to a node, counts as a failure
// of the node, given whether the node answered another call meanwhile.
//
// Evidence against the node counts always: a connection to it refused,
// reset or closed (a *net.OpError that is not a timeout, io.EOF,
// io.ErrUnexpectedEOF), an error reply from Redis (LOADING, CLUSTERDOWN,
// READONLY, …), and any error not known to be a timeout. A call that
// ended at a deadline counts only when the node answered no call while it
// lasted: a dial, read or write that timed out (a net.Error whose Timeout
// is true), context.DeadlineExceeded (the store's deadline or the
// caller's; go-redis returns it when its wait for a pooled connection, for
// a dial running in the background, or in a retry back-off ends),
// redis.ErrPoolTimeout, redis.ErrPoolExhausted and the store's own
// errTimeout. For a node that answers others it is a local queue: a pool
// too small for the load, whose callers reach the connection with little
// of their time left, or a starved process. For a silent node it is the
// only sign go-redis gives of a node that hangs, or of a dial that hangs or
// is refused and is retried in the background past the timeout.
func counts(err error, answered bool) bool {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout(),
		errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled),
		errors.Is(err, redis.ErrPoolTimeout), errors.Is(err, redis.ErrPoolExhausted),
		errors.Is(err, errTimeout):
		return !answered
	}
	return true
}

// waited reports whether err ended a call that waited past a deadline
// (for a pooled connection, a dial running in the background, a retry
// back-off) without a network error of its own: the calls whose cause
// a failed dial may be.
func waited(err error) bool {
	if !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, errTimeout) && !errors.Is(err, redis.ErrPoolTimeout) {
		return false
	}
	_, op := errors.AsType[*net.OpError](err)
	return !op
}

// errTimeout is returned when a call to a client that ignores context
// deadlines did not end in time.
var errTimeout = redisbound.ErrTimeout

// do runs one command, bounded by ctx's deadline whether or not the client
// honours it (see redisbound.Call); a call given up on is counted in
// s.inflight until it ends.
func (s *Store) do(ctx *callCtx, args []any) (any, error) {
	v, err := redisbound.Call(ctx, s.bounded, &s.inflight, doArgs{s.client, args}, doCall)
	if err == errTimeout {
		return nil, fmt.Errorf("%w after %v", errTimeout, s.timeout)
	}
	return v, err
}

// doArgs is a command and the client that runs it.
type doArgs struct {
	client redis.UniversalClient
	args   []any
}

func doCall(ctx context.Context, a doArgs) (any, error) { return a.client.Do(ctx, a.args...).Result() }
