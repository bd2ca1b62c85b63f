package redislimiter

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/jwtissuer"
)

// DefaultName is the default policy name of the limiter's counters.
const DefaultName = "jwt"

// Option configures a RateLimiter.
type Option func(*RateLimiter)

// WithFailOpen sets what a request gets when Redis fails: false denies it
// (issuance refused), true admits it. Default: false (fail-closed).
func WithFailOpen(open bool) Option { return func(l *RateLimiter) { l.failOpen = open } }

// WithErrorHook sets a function called with the key and the error each
// time the store fails, on the caller's goroutine; it must be safe for
// concurrent use. Default: none.
func WithErrorHook(fn func(key string, err error)) Option {
	return func(l *RateLimiter) { l.hook = fn }
}

// WithName sets the policy name the counters are kept under, so that two
// limiters of the same window in one Redis count apart, whatever their
// rates (names as in store.Policy). Default: "jwt".
func WithName(name string) Option { return func(l *RateLimiter) { l.policy.Name = name } }

// RateLimiter is a token bucket per key in Redis. It is safe for
// concurrent use.
type RateLimiter struct {
	store    *redisstore.Store
	policy   store.Policy
	rate     int64
	failOpen bool
	hook     func(key string, err error)
	closed   atomic.Bool
}

var (
	_ jwtissuer.FallibleRateLimitProvider   = (*RateLimiter)(nil)
	_ jwtissuer.RetryAfterRateLimitProvider = (*RateLimiter)(nil)
)

// New returns a RateLimiter that admits rate tokens per window for each
// key, with bursts of up to rate, counted in st. It does not contact
// Redis. rate must be 1 to 2,147,483,647 and at most one per nanosecond of
// window; window must be a whole number of microseconds (the store counts
// in microseconds).
func New(st *redisstore.Store, rate int, window time.Duration, opts ...Option) (*RateLimiter, error) {
	if st == nil {
		return nil, errors.New("redislimiter: nil store")
	}
	if rate < 1 || rate > math.MaxInt32 {
		return nil, fmt.Errorf("redislimiter: rate %d out of range [1, %d]", rate, math.MaxInt32)
	}
	if window <= 0 || window%time.Microsecond != 0 {
		return nil, fmt.Errorf("redislimiter: window %v must be a positive whole number of microseconds", window)
	}
	l := &RateLimiter{
		store: st,
		rate:  int64(rate),
		policy: store.Policy{
			Name:      DefaultName,
			Algorithm: algo.TokenBucket,
			Limits:    []algo.Limit{{Count: int64(rate), Period: window}},
		},
	}
	for _, o := range opts {
		o(l)
	}
	if err := l.policy.Validate(); err != nil {
		return nil, fmt.Errorf("redislimiter: %w", err)
	}
	return l, nil
}

// Allow is AllowN(key, 1).
func (l *RateLimiter) Allow(key string) bool { return l.AllowN(key, 1) }

// AllowN reports whether n tokens may be taken from key's bucket now, and
// takes them if so; the table is jwtissuer.RateLimiter.AllowN's:
//
//	n < 0              false
//	n == 0             true (no round trip)
//	n > rate           false (no round trip)
//	key == ""          false
//	tokens ≥ n         true, n tokens taken
//	tokens < n         false, nothing taken
//
// When the store fails, AllowN answers with the failure policy (false
// unless WithFailOpen(true)); after Close it reports false.
func (l *RateLimiter) AllowN(key string, n int) bool {
	ok, _ := l.AllowNContext(context.Background(), key, n)
	return ok
}

// AllowErr is AllowN(key, 1) with the store's error: it implements
// jwtissuer.FallibleRateLimitProvider, so that an Issuer reports a failing
// Redis instead of a denial.
func (l *RateLimiter) AllowErr(key string) (bool, error) {
	return l.AllowNContext(context.Background(), key, 1)
}

// AllowNContext is AllowN with a context for the call to Redis (bounded
// by the store's timeout too) and its error: when the store fails, it
// returns the failure policy's answer and the error, after calling the
// error hook. After Close it returns false and jwtissuer.ErrClosed.
func (l *RateLimiter) AllowNContext(ctx context.Context, key string, n int) (bool, error) {
	ok, _, err := l.take(ctx, key, n)
	return ok, err
}

// AllowRetryAfter is AllowErr that also returns, when Redis denies, how
// long until the same request would be admitted: the store's RetryAfter,
// computed by the decision's script from the bucket's state at the Redis
// server's time, in whole microseconds (rounded up). It is 0 when allowed,
// when the store failed, and for an empty key. It implements
// jwtissuer.RetryAfterRateLimitProvider, so that an Issuer's
// *jwtissuer.RateLimitError carries the wait.
func (l *RateLimiter) AllowRetryAfter(key string) (bool, time.Duration, error) {
	return l.take(context.Background(), key, 1)
}

// take is AllowNContext with the wait of a denial.
func (l *RateLimiter) take(ctx context.Context, key string, n int) (bool, time.Duration, error) {
	switch {
	case n < 0:
		return false, 0, nil
	case n == 0:
		return true, 0, nil
	case int64(n) > l.rate:
		return false, 0, nil
	case key == "":
		return false, 0, nil
	case l.closed.Load():
		return false, 0, jwtissuer.ErrClosed
	}
	r, err := l.store.Take(ctx, key, &l.policy, int64(n))
	if err != nil {
		if l.hook != nil {
			l.hook(key, err)
		}
		return l.failOpen, 0, err
	}
	return r.Allowed, r.RetryAfter, nil
}

// Reset forgets key's bucket. A failure goes to the error hook; use
// ResetContext to see it.
func (l *RateLimiter) Reset(key string) { _ = l.ResetContext(context.Background(), key) }

// ResetContext forgets key's bucket and returns the store's error, after
// calling the error hook with it.
func (l *RateLimiter) ResetContext(ctx context.Context, key string) error {
	if l.closed.Load() {
		return jwtissuer.ErrClosed
	}
	_, err := l.store.Reset(ctx, key, &l.policy)
	if err != nil && l.hook != nil {
		l.hook(key, err)
	}
	return err
}

// Close stops the limiter: later requests are denied with
// jwtissuer.ErrClosed. It does not close the store, which belongs to the
// caller (and may serve other limiters).
func (l *RateLimiter) Close() { l.closed.Store(true) }
