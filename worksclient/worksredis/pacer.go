package worksredis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/outbound"
	"github.com/rlkit/rlkit/outbound/redishold"
	"github.com/rlkit/rlkit/worksclient"
)

// Defaults of the Pacer options.
const (
	DefaultKeyPrefix = "worksclient:pace:"
	DefaultTimeout   = time.Second
)

// PacerOption configures a Pacer.
type PacerOption func(*Pacer)

// WithKeyPrefix sets the prefix of the Redis keys the pacer writes: the
// counters of core/redisstore (one per rate-limit key, the key escaped and
// in a Cluster hash tag of its own, so keys spread over a Redis Cluster)
// under prefix, and the Retry-After holds of outbound/redishold (one per
// key held, the key's SHA-256) under prefix + "hold:". Braces are
// dropped from prefix ("{works}:pace:" is "works:pace:"): each counter's
// hash tag is the store's, and the prefix once recommended to keep every
// key in one Cluster slot is not needed for exactness, since a decision
// touches one key. Default: DefaultKeyPrefix ("worksclient:pace:").
func WithKeyPrefix(prefix string) PacerOption {
	return func(p *Pacer) { p.prefix = strings.NewReplacer("{", "", "}", "").Replace(prefix) }
}

// WithTimeout bounds each call of a Pacer to Redis; a call that takes
// longer fails Wait. Default: DefaultTimeout (1s).
func WithTimeout(d time.Duration) PacerOption {
	return func(p *Pacer) {
		if d > 0 {
			p.timeout = d
		}
	}
}

// Pacer is a worksclient.RateLimiter whose spacing is shared by every
// process that paces the same keys in the same Redis: for each key,
// requests start at least interval apart on the Redis server's clock,
// whichever process sends them.
//
// It is one configuration of outbound.Limiter: outbound.Rate(1, interval,
// 0) (GCRA, one start per interval, no burst) in core/redisstore, whose
// decisions are each one Lua script (EVALSHA, EVAL when the server lacks
// it) that reads the time with TIME on the server, so processes with
// skewed clocks agree; and with its holds (Delay, which a
// worksclient.Transport calls on a Retry-After) in outbound/redishold,
// on the server's clock too. The spacing is exact on the server's clock,
// at the instants the script admits the starts; a request leaves its
// process when the answer has come back, so the gaps seen locally, or at
// the API, also vary by the variation of that half round trip.
//
// Within a process, the requests of a key wait in a queue, first come
// first served, and only the head asks Redis: whether the key is held
// (PTTL), then whether it may start, and when it may not, it sleeps until
// the key's next slot and asks again. A free key costs two round trips; a
// request that waits, two more per ask. Across processes, whichever head
// asks first once the slot is free starts. A denied ask takes nothing, so
// a request whose ctx is done while it waits returns ctx.Err() at once and
// leaves no slot empty.
//
// When Redis fails or does not answer within the timeout, Wait returns the
// error (the store fails closed, and logs nothing), and the request must
// not be sent: a Transport returns it. A key's counter expires at most two
// intervals after its last start, a hold when it ends. A Pacer is safe
// for concurrent use.
type Pacer struct {
	interval time.Duration
	prefix   string
	timeout  time.Duration
	lim      *outbound.Limiter
	store    *redisstore.Store
	holds    *redishold.Store
	err      error // the configuration's error, returned by every call
}

var (
	_ worksclient.RateLimiter = (*Pacer)(nil)
	_ worksclient.Delayer     = (*Pacer)(nil)
)

// NewPacer returns a Pacer in client that starts requests of one key at
// least interval apart. An interval ≤ 0 means worksclient.DefaultInterval
// (250 ms, 240 a minute), one above 2^60 ns (36 years) is 2^60 ns; an
// interval is counted in whole microseconds. It does not contact Redis,
// but for the check of a Redis Cluster that redisstore.New makes (a
// ClusterClient's cluster-require-full-coverage, within a second, with a
// warning through slog.Default when a node has yes). A nil client makes
// every Wait and Delay fail with an error that says so.
func NewPacer(client redis.UniversalClient, interval time.Duration, opts ...PacerOption) *Pacer {
	if interval <= 0 {
		interval = worksclient.DefaultInterval
	}
	p := &Pacer{
		interval: max(min(interval, algo.MaxDrain).Truncate(time.Microsecond), time.Microsecond),
		prefix:   DefaultKeyPrefix,
		timeout:  DefaultTimeout,
	}
	for _, o := range opts {
		o(p)
	}
	p.err = p.init(client)
	return p
}

// init builds the Limiter, its store and its hold store.
func (p *Pacer) init(client redis.UniversalClient) error {
	if client == nil {
		return errors.New("worksclient: redis pacer: nil client")
	}
	cfg, err := outbound.Rate(1, p.interval, 0)
	if err != nil {
		return fmt.Errorf("worksclient: redis pacer: %w", err)
	}
	p.store, err = redisstore.New(client, redisstore.WithPrefix(p.prefix), redisstore.WithTimeout(p.timeout))
	if err != nil {
		return fmt.Errorf("worksclient: redis pacer: %w", err)
	}
	p.holds = redishold.New(client, redishold.WithPrefix(p.prefix+"hold:"), redishold.WithTimeout(p.timeout))
	// Fail closed, and log nothing: Wait returns every failure.
	p.lim, err = outbound.New(cfg, p.store, outbound.WithHoldStore(p.holds),
		outbound.WithCoreOptions(core.WithFailOpen(false), core.WithLogger(slog.New(slog.DiscardHandler))))
	if err != nil {
		return fmt.Errorf("worksclient: redis pacer: %w", err)
	}
	return nil
}

// Interval returns the spacing of starts per key.
func (p *Pacer) Interval() time.Duration { return p.interval }

// Wait implements worksclient.RateLimiter. It returns ctx.Err() when ctx
// is done first, and an error that begins "worksclient: redis pacer:" when
// Redis fails.
func (p *Pacer) Wait(ctx context.Context, key string) error {
	if p.err != nil {
		return p.err
	}
	return p.wrap(ctx, p.lim.Wait(ctx, "", "/", key))
}

// Delay implements worksclient.Delayer, on the server's clock: no request
// under key, from any process, starts until d from now has passed (at
// most outbound.MaxHold, 10 minutes). This process holds the key back even
// when Redis fails, and returns the error.
func (p *Pacer) Delay(ctx context.Context, key string, d time.Duration) error {
	if p.err != nil {
		return p.err
	}
	return p.wrap(ctx, p.lim.Delay(ctx, key, d))
}

// Close stops the Pacer: later calls fail. It waits for the calls to
// Redis running (and, with a client without ContextTimeoutEnabled, for
// those given up on at their timeout) and does not close the client.
func (p *Pacer) Close() error {
	if p.lim == nil {
		return nil
	}
	return errors.Join(p.store.Close(), p.holds.Close())
}

// wrap names the pacer in an error that is not ctx's.
func (p *Pacer) wrap(ctx context.Context, err error) error {
	if err == nil || err == ctx.Err() {
		return err
	}
	return fmt.Errorf("worksclient: redis pacer: %w", err)
}
