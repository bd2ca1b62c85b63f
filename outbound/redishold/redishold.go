package redishold

import (
	"context"
	"crypto/sha256"
	_ "embed"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redisbound"
	"github.com/rlkit/rlkit/outbound"
)

// Defaults of the options.
const (
	DefaultPrefix  = "rl:hold:"
	DefaultTimeout = 100 * time.Millisecond
	// DefaultBreakerFailures and DefaultBreakerCooldown are WithBreaker's
	// defaults: 5 failures in a row open the circuit for 1s.
	DefaultBreakerFailures = 5
	DefaultBreakerCooldown = time.Second
)

var (
	//go:embed hold.lua
	holdLua    string
	holdScript = redis.NewScript(holdLua)
)

// Option configures a Store.
type Option func(*Store)

// WithPrefix sets the prefix of the Redis keys the Store writes, one per
// rate-limit key held: prefix + the unpadded base64url SHA-256 of the key
// (43 characters). With no hash tag in the prefix, holds spread over a
// Redis Cluster; a prefix such as "{holds}:" puts them all in one slot.
// Default: DefaultPrefix ("rl:hold:").
func WithPrefix(prefix string) Option { return func(s *Store) { s.prefix = prefix } }

// WithTimeout bounds each call to Redis; a call that takes longer fails
// with an error that is context.DeadlineExceeded to errors.Is. A timeout
// ≤ 0 is ignored. Default: DefaultTimeout (100ms).
func WithTimeout(d time.Duration) Option {
	return func(s *Store) {
		if d > 0 {
			s.timeout = d
		}
	}
}

// WithBreaker sets the Store's circuit breaker: after failures calls in a
// row failed (an error from Redis or the network, or the timeout; not a
// caller's context that ended), every call fails at once with
// ErrCircuitOpen for cooldown, so that a Redis that is down or stopped
// costs a Limiter's requests no time; then one call probes Redis, and its
// success closes the circuit (its failure opens it for another cooldown).
// failures ≤ 0 turns the breaker off. Default: DefaultBreakerFailures (5)
// and DefaultBreakerCooldown (1s).
func WithBreaker(failures int, cooldown time.Duration) Option {
	return func(s *Store) { s.threshold, s.cooldown = int64(failures), max(cooldown, 0) }
}

// ErrCircuitOpen is the error (errors.Is) of a call made while the
// Store's circuit is open (see WithBreaker).
var ErrCircuitOpen = errors.New("redishold: circuit open after repeated Redis failures")

// Store is an outbound.HoldStore in Redis. It holds no state of its own
// besides its options and is safe for concurrent use.
type Store struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	bounded bool // the client bounds its calls by the context's deadline

	// The breaker: failures in a row, and until when the circuit is open
	// (Unix ns; 0: closed). A call after that instant is the probe, which
	// moves it on by a cool-down first, so that one call probes at a time.
	threshold int64
	cooldown  time.Duration
	failures  atomic.Int64
	openUntil atomic.Int64

	// mu is held (shared) by every call and (exclusive) by Close, which so
	// waits for the calls running; inflight counts the calls given up on
	// at their timeout, still running.
	mu       sync.RWMutex
	closed   atomic.Bool
	inflight sync.WaitGroup
}

var _ outbound.HoldStore = (*Store)(nil)

// New returns a Store that keeps holds in client. It does not contact
// Redis. A nil client makes every call fail.
func New(client redis.UniversalClient, opts ...Option) *Store {
	s := &Store{client: client, prefix: DefaultPrefix, timeout: DefaultTimeout,
		threshold: DefaultBreakerFailures, cooldown: DefaultBreakerCooldown}
	for _, o := range opts {
		o(s)
	}
	s.bounded = redisbound.Bounded(client)
	return s
}

// errNilClient is the error of every call of a Store without a client.
var errNilClient = errors.New("redishold: nil client")

// ErrClosed is the error of every call after Close.
var ErrClosed = errors.New("redishold: store closed")

// Close stops the Store: later calls fail with ErrClosed. It waits for the
// calls running (and, with a client without ContextTimeoutEnabled, for
// those given up on at their timeout) and does not close the client, which
// belongs to the caller.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.mu.Lock() // no call holds mu now, and none can start
	s.mu.Unlock()
	s.inflight.Wait()
	return nil
}

// Hold implements outbound.HoldStore: no request under key starts until d
// from now has passed, on the Redis server's clock, unless a later hold is
// in place already, which stays. d is rounded up to whole milliseconds; d
// ≤ 0 does nothing.
func (s *Store) Hold(ctx context.Context, key string, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	ms := int64(d / time.Millisecond) // rounded up, without overflow
	if d%time.Millisecond != 0 {
		ms++
	}
	_, err := s.call(ctx, holdArgs{s, key, ms}, runHold)
	return err
}

// Held implements outbound.HoldStore: the time left on key's hold, on the
// Redis server's clock, in whole milliseconds; 0 when there is none.
func (s *Store) Held(ctx context.Context, key string) (time.Duration, error) {
	ms, err := s.call(ctx, holdArgs{s, key, 0}, runHeld)
	switch {
	case err != nil || ms <= 0:
		return 0, err
	case ms > math.MaxInt64/int64(time.Millisecond): // set by another writer
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// holdArgs is one call: the Store, the rate-limit key and, for Hold, the
// hold in milliseconds.
type holdArgs struct {
	s   *Store
	key string
	ms  int64
}

func runHold(ctx context.Context, a holdArgs) (int64, error) {
	return holdScript.Run(ctx, a.s.client, []string{a.s.redisKey(a.key)}, a.ms).Int64()
}

// runHeld returns the key's PTTL in ms: -2 when it does not exist, -1
// when it has no expiry. It reads the reply as a number, not through
// go-redis's DurationCmd, whose nanoseconds overflow past 292 years.
func runHeld(ctx context.Context, a holdArgs) (int64, error) {
	return a.s.client.Do(ctx, "PTTL", a.s.redisKey(a.key)).Int64()
}

// call runs f bounded by the timeout. When ctx is done it returns
// ctx.Err() itself; other errors name the package.
func (s *Store) call(ctx context.Context, a holdArgs, f func(context.Context, holdArgs) (int64, error)) (int64, error) {
	if s.client == nil {
		return 0, errNilClient
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed.Load() {
		return 0, ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if !s.admit() {
		return 0, ErrCircuitOpen
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	v, err := redisbound.Call(cctx, s.bounded, &s.inflight, a, f)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return 0, cerr
		}
		s.failed()
		if err == redisbound.ErrTimeout {
			err = fmt.Errorf("%w after %v: %w", redisbound.ErrTimeout, s.timeout, context.DeadlineExceeded)
		}
		return 0, fmt.Errorf("redishold: %w", err)
	}
	if s.threshold > 0 {
		s.failures.Store(0)
		s.openUntil.Store(0)
	}
	return v, nil
}

// admit reports whether a call may go to Redis: the circuit is closed,
// or its cool-down has passed and this call is the probe.
func (s *Store) admit() bool {
	if s.threshold <= 0 {
		return true
	}
	until := s.openUntil.Load()
	if until == 0 {
		return true
	}
	now := time.Now().UnixNano()
	return now >= until && s.openUntil.CompareAndSwap(until, now+int64(s.cooldown))
}

// failed counts a failed call, and opens the circuit at the threshold (a
// failed probe opens it again).
func (s *Store) failed() {
	if s.threshold <= 0 {
		return
	}
	if s.failures.Add(1) >= s.threshold || s.openUntil.Load() != 0 {
		s.openUntil.Store(time.Now().UnixNano() + int64(s.cooldown))
	}
}

// redisKey returns the Redis key of a rate-limit key: the prefix and the
// key's SHA-256, so that the key itself never reaches Redis.
func (s *Store) redisKey(key string) string {
	sum := sha256.Sum256([]byte(key))
	return s.prefix + base64.RawURLEncoding.EncodeToString(sum[:])
}
