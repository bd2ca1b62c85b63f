package worksredis

import (
	"context"
	crand "crypto/rand"
	_ "embed"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redisbound"
	"github.com/rlkit/rlkit/outbound"
)

// The Works relay's leader lock: the Redis key a LeaderLock takes unless
// given another (WithKey), and its time to live unless given another
// (WithTTL). Every replica of one relay must agree on both.
const (
	LeaderKey = "baron:worksmobile:relay:leader"
	LeaderTTL = 30 * time.Second
)

// DefaultLockTimeout bounds each call of a LeaderLock to Redis.
const DefaultLockTimeout = 2 * time.Second

// ErrLeadershipLost is returned by LeaderLock.Run when the lock was lost
// while fn ran: a renewal failed, the lock was found taken, or no renewal
// succeeded for two thirds of the TTL.
var ErrLeadershipLost = errors.New("worksclient: leadership lost")

// errLockTaken is the cause of a loss found by a renewal.
var errLockTaken = errors.New("the lock is held by another owner or has expired")

var (
	//go:embed lua/acquire.lua
	acquireLua string
	//go:embed lua/renew.lua
	renewLua string
	//go:embed lua/release.lua
	releaseLua string

	acquireScript = redis.NewScript(acquireLua)
	renewScript   = redis.NewScript(renewLua)
	releaseScript = redis.NewScript(releaseLua)
)

// LockOption configures a LeaderLock.
type LockOption func(*LeaderLock)

// WithKey sets the Redis key of the lock, so that several jobs (or several
// relays sharing a Redis) each have a leader of their own; every replica
// of one job must use the same key. An empty key is ignored. Default:
// LeaderKey ("baron:worksmobile:relay:leader").
func WithKey(key string) LockOption {
	return func(l *LeaderLock) {
		if key != "" {
			l.key = key
		}
	}
}

// WithTTL sets the lock's time to live: how long a holder that vanished
// keeps the others out. A TTL under 1 ms is ignored. Default: LeaderTTL
// (30s).
func WithTTL(d time.Duration) LockOption {
	return func(l *LeaderLock) {
		if d >= time.Millisecond {
			l.ttl = d
		}
	}
}

// WithRenewInterval sets how often the holder renews the lock; an interval
// that is not below half the TTL is ignored. Default: a third of the TTL.
func WithRenewInterval(d time.Duration) LockOption {
	return func(l *LeaderLock) { l.renew = d }
}

// WithPollInterval sets how often a contender tries to take the lock (each
// wait varies by ±20% at random, so that contenders spread out). Default:
// a tenth of the TTL.
func WithPollInterval(d time.Duration) LockOption {
	return func(l *LeaderLock) { l.poll = d }
}

// WithLockTimeout bounds each call to Redis; a renewal is also bounded by
// the time left before the holder would give up. Default:
// DefaultLockTimeout (2s).
func WithLockTimeout(d time.Duration) LockOption {
	return func(l *LeaderLock) {
		if d > 0 {
			l.timeout = d
		}
	}
}

// LeaderLock lets one replica at a time run a job, the Works relay: the
// holder of one Redis key, LeaderKey unless WithKey gives another. A holder sets it with SET NX PX and
// its own token (the owner, '/', 16 random base32 characters), renews it
// (every third of the TTL by default) with a compare-and-expire script,
// and deletes it when done with a compare-and-delete script, so no replica
// ever renews or releases a lock it does not hold.
//
// A holder stops before another replica can take over: the context of the
// job is cancelled as soon as a renewal fails (an error, or no answer in
// time) or finds the lock gone or another's, and in any case once no
// renewal has succeeded for two thirds of the TTL, counted from when the
// last successful call was sent (so from before Redis restarted the TTL),
// even when a call hangs. The job then has at least a third of the TTL
// (10 s by default) to stop. Times are measured on the local monotonic
// clock; only their rate must agree with the Redis server's.
//
// This is a lease, not a fence. A process paused (a loaded machine, a long
// GC pause, a stopped VM) for about two thirds of the TTL or longer (20 s
// by default: the lock outlives the last renewal by the TTL, and renewals
// come every third of it) may find, when it resumes, that the lock has
// expired and another replica holds it; its fn may then run briefly,
// alongside the new holder's, until the watchdog or the next renewal
// cancels fn's context (and fn notices).
// LeaderLock provides no fencing token: a job whose side effects must
// never overlap has to guard them itself (an idempotent outbox, a version
// check in the store it writes to).
//
// Redis must not lose the lock key while it is held. A Redis restarted
// without persistence, or a failover to a replica that had not yet
// received the key, lets a second contender take the lock at once, while
// the old holder goes on until its next renewal finds the lock another's:
// up to a third of the TTL (10 s by default) later. Run Redis with AOF and
// appendfsync always, or keep a restarted Redis from serving for a TTL
// (30 s) before clients reach it.
//
// With a nil client there is no lock: Run runs the job at once, as a
// single instance does. A LeaderLock is safe for concurrent use; each Run
// contends on its own.
type LeaderLock struct {
	client  redis.UniversalClient
	owner   string
	key     string
	ttl     time.Duration
	renew   time.Duration
	poll    time.Duration
	timeout time.Duration
	bounded bool // the client bounds its calls by the context's deadline
}

// NewLeaderLock returns the leader lock of the Works relay in client, for
// the replica named owner (a host name, a pod name; "" is "worksclient").
// It does not contact Redis.
//
// Every call to Redis is bounded by the lock timeout (WithLockTimeout) and
// by Run's ctx while contending, whether or not the client has
// ContextTimeoutEnabled: without it (go-redis's default, under which
// socket reads ignore context deadlines) the call runs on its own
// goroutine, which Run stops waiting for when the bound passes; that
// goroutine ends when go-redis returns, by the client's own ReadTimeout at
// the latest.
func NewLeaderLock(client redis.UniversalClient, owner string, opts ...LockOption) *LeaderLock {
	if owner == "" {
		owner = "worksclient"
	}
	l := &LeaderLock{client: client, owner: owner, key: LeaderKey, ttl: LeaderTTL, timeout: DefaultLockTimeout}
	for _, o := range opts {
		o(l)
	}
	if l.renew <= 0 || l.renew >= l.ttl/2 {
		l.renew = l.ttl / 3
	}
	if l.poll <= 0 {
		l.poll = l.ttl / 10
	}
	if isNilClient(l.client) {
		l.client = nil
	}
	l.bounded = redisbound.Bounded(l.client)
	return l
}

// isNilClient reports whether c is nil or a nil pointer to one of
// go-redis's clients.
func isNilClient(c redis.UniversalClient) bool {
	switch c := c.(type) {
	case nil:
		return true
	case *redis.Client:
		return c == nil
	case *redis.ClusterClient:
		return c == nil
	case *redis.Ring:
		return c == nil
	}
	return false
}

// safe is how long after the last successful call the holder gives up:
// two thirds of the TTL.
func (l *LeaderLock) safe() time.Duration { return l.ttl - l.ttl/3 }

// Run waits until it holds the lock, runs fn with a context that is
// cancelled when the lock is lost (or ctx is done), and releases the lock
// when fn returns. It returns fn's error; or an error that is
// ErrLeadershipLost to errors.Is, wrapping the cause (and fn's error,
// unless that is only its context's cancellation), when the lock was lost
// while fn ran; or ctx.Err() (with the last Redis error, if any, in its
// message) when ctx was done before the lock was taken.
//
// The lock stays held and renewed until fn returns, even after ctx is
// done: fn decides how long it needs to stop. Run does not contend again
// after a loss; a relay loops:
//
//	for ctx.Err() == nil {
//		err := lock.Run(ctx, relay)
//		if err != nil && !errors.Is(err, worksredis.ErrLeadershipLost) {
//			return err
//		}
//	}
func (l *LeaderLock) Run(ctx context.Context, fn func(ctx context.Context) error) error {
	if l.client == nil {
		return fn(ctx)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	token := l.owner + "/" + crand.Text()[:16]
	since, err := l.acquire(ctx, token)
	if err != nil {
		return err
	}
	h := &holding{l: l, token: token}
	fctx, cancel := context.WithCancelCause(ctx)
	h.cancel = cancel
	h.watchdog = time.AfterFunc(time.Until(since.Add(l.safe())), func() {
		h.lose(fmt.Errorf("no renewal succeeded within %v", l.safe()))
	})
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.renewLoop(rctx, since)
	}()
	var fnErr error
	func() {
		defer func() {
			stop()
			<-done
			h.watchdog.Stop()
			cancel(nil)
			l.release(ctx, token)
		}()
		fnErr = fn(fctx)
	}()
	if lost := h.lost(); lost != nil {
		if fnErr != nil && !errors.Is(fnErr, context.Canceled) {
			return errors.Join(lost, fnErr)
		}
		return lost
	}
	return fnErr
}

// acquire tries to take the lock every poll interval until it does or ctx
// is done, and returns when the successful call was sent. A success
// answered so late that the lease may be mostly gone is given back and
// tried again. When ctx ends after a call whose outcome is unknown (it
// failed, perhaps after Redis had set the lock), the lock is released if it
// holds token, so that it does not keep the others out for a TTL.
func (l *LeaderLock) acquire(ctx context.Context, token string) (time.Time, error) {
	var lastErr error
	uncertain := false
	for {
		sent := time.Now()
		cctx, cancel := context.WithTimeout(ctx, l.timeout)
		n, err := redisbound.Call(cctx, l.bounded, &inflight, lockCall{l, acquireScript, token}, runLock)
		cancel()
		switch {
		case err == nil && n == 1 && time.Since(sent) < l.safe():
			return sent, nil
		case err == nil && n == 1:
			l.release(ctx, token)
		case err != nil:
			uncertain = true
			if ctx.Err() == nil {
				lastErr = err
			}
		}
		wait := time.Duration(float64(l.poll) * (0.8 + 0.4*rand.Float64()))
		if err := outbound.Sleep(ctx, outbound.SystemClock, wait); err != nil {
			if uncertain {
				l.release(ctx, token)
			}
			if lastErr != nil {
				return time.Time{}, fmt.Errorf("%w (last Redis error while contending for the leader lock: %v)", err, lastErr)
			}
			return time.Time{}, err
		}
	}
}

// release deletes the lock if it still holds token, bounded by the timeout
// but not by ctx, which may be done. A failure is not reported: the lock
// then expires at the end of its TTL.
func (l *LeaderLock) release(ctx context.Context, token string) {
	rel, cancel := context.WithTimeout(context.WithoutCancel(ctx), l.timeout)
	defer cancel()
	_, _ = redisbound.Call(rel, l.bounded, &inflight, lockCall{l, releaseScript, token}, runLock)
}

// lockCall is one run of a script of the lock: acquire, renew (with the
// TTL) or release.
type lockCall struct {
	l      *LeaderLock
	script *redis.Script
	token  string
}

func runLock(ctx context.Context, c lockCall) (int64, error) {
	args := []any{c.token}
	if c.script != releaseScript {
		args = append(args, c.l.ttl.Milliseconds())
	}
	return c.script.Run(ctx, c.l.client, []string{c.l.key}, args...).Int64()
}

// holding is one tenure of the lock.
type holding struct {
	l        *LeaderLock
	token    string
	cancel   context.CancelCauseFunc
	watchdog *time.Timer

	mu      sync.Mutex
	lostErr error
}

// lose records the first cause of a loss and cancels fn's context.
func (h *holding) lose(cause error) {
	h.mu.Lock()
	if h.lostErr == nil {
		h.lostErr = fmt.Errorf("%w: %w", ErrLeadershipLost, cause)
		h.cancel(h.lostErr)
	}
	h.mu.Unlock()
}

func (h *holding) lost() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.lostErr
}

// renewLoop renews the lock every renew interval, counted from when the
// last successful call was sent, until ctx is done (fn returned) or the
// lock is lost.
func (h *holding) renewLoop(ctx context.Context, last time.Time) {
	l := h.l
	for {
		timer := time.NewTimer(time.Until(last.Add(l.renew)))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		if h.lost() != nil {
			return
		}
		sent := time.Now()
		left := last.Add(l.safe()).Sub(sent)
		if left <= 0 {
			h.lose(fmt.Errorf("no renewal succeeded within %v", l.safe()))
			return
		}
		cctx, cancel := context.WithTimeout(ctx, min(l.timeout, left))
		n, err := redisbound.Call(cctx, l.bounded, &inflight, lockCall{l, renewScript, h.token}, runLock)
		cancel()
		switch {
		case ctx.Err() != nil: // fn returned; the outcome no longer matters
			return
		case err != nil && !time.Now().Before(last.Add(l.safe())):
			h.lose(fmt.Errorf("no renewal succeeded within %v: %w", l.safe(), err))
			return
		case err != nil:
			h.lose(fmt.Errorf("renewal failed: %w", err))
			return
		case n != 1:
			h.lose(errLockTaken)
			return
		}
		last = sent
		h.mu.Lock()
		if h.lostErr == nil {
			h.watchdog.Reset(time.Until(last.Add(l.safe())))
		}
		h.mu.Unlock()
	}
}
