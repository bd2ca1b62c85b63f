package worksredis

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redistest"
	"github.com/rlkit/rlkit/outbound"
)

// tenure is one run of fn under the lock, timed on this process's
// monotonic clock, which every contender of a test shares.
type tenure struct {
	owner      int
	start, end time.Time
}

// overlaps returns the pairs of tenures that overlap in time.
func overlaps(ts []tenure) int {
	ts = slices.Clone(ts)
	slices.SortFunc(ts, func(a, b tenure) int { return a.start.Compare(b.start) })
	n := 0
	latest := time.Time{}
	for _, t := range ts {
		if t.start.Before(latest) {
			n++
		}
		if t.end.After(latest) {
			latest = t.end
		}
	}
	return n
}

// jitter waits a random duration below max, or until ctx is done.
func jitter(ctx context.Context, max time.Duration) {
	_ = outbound.Sleep(ctx, outbound.SystemClock, rand.N(max))
}

// contend runs n contenders, each with its own client (as n replicas
// would), each running fn for a few milliseconds whenever it holds the
// lock and then pausing a little before contending again, until the lock
// has passed from one owner to another handovers times. It returns the
// tenures, how often two fns ran at once, and how many tenures ended in
// ErrLeadershipLost (which a process stalled for most of a TTL causes, on
// a loaded machine: a safe outcome, not an overlap).
func contend(t *testing.T, n, handovers int) (ts []tenure, concurrent, lost int64) {
	s := redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var (
		mu      sync.Mutex
		last    = -1
		passed  int
		holders atomic.Int64
		overlap atomic.Int64
		losses  atomic.Int64
		wg      sync.WaitGroup
	)
	for i := range n {
		lock := NewLeaderLock(s.Client(t), fmt.Sprintf("replica-%d", i),
			WithTTL(2*time.Second), WithPollInterval(2*time.Millisecond))
		wg.Go(func() {
			for ctx.Err() == nil {
				err := lock.Run(ctx, func(fctx context.Context) error {
					if holders.Add(1) != 1 {
						overlap.Add(1)
					}
					start := time.Now()
					jitter(fctx, 4*time.Millisecond)
					end := time.Now()
					holders.Add(-1)
					mu.Lock()
					ts = append(ts, tenure{i, start, end})
					if last != i {
						if last >= 0 {
							passed++
						}
						last = i
					}
					if passed >= handovers {
						cancel()
					}
					mu.Unlock()
					return nil
				})
				switch {
				case errors.Is(err, ErrLeadershipLost):
					losses.Add(1)
					t.Logf("replica %d: %v", i, err)
				case err != nil && !errors.Is(err, context.Canceled):
					t.Errorf("replica %d: Run = %v", i, err)
					cancel()
					return
				}
				jitter(ctx, 3*time.Millisecond)
			}
		})
	}
	wg.Wait()
	if passed < handovers {
		t.Fatalf("%d hand-overs within a minute, want %d", passed, handovers)
	}
	return ts, overlap.Load(), losses.Load()
}

func TestLeaderLockContenders(t *testing.T) {
	for _, tc := range []struct{ contenders, handovers int }{{2, 30}, {3, 30}, {3, 100}} {
		t.Run(fmt.Sprintf("%d contenders %d hand-overs", tc.contenders, tc.handovers), func(t *testing.T) {
			t0 := time.Now()
			ts, concurrent, lost := contend(t, tc.contenders, tc.handovers)
			n := overlaps(ts)
			t.Logf("%d tenures, %d hand-overs in %v: %d overlapping, %d concurrent holders seen, %d leaderships lost",
				len(ts), tc.handovers, time.Since(t0), n, concurrent, lost)
			if n != 0 || concurrent != 0 {
				t.Errorf("%d tenures overlap, %d times two held at once; want 0", n, concurrent)
			}
		})
	}
}

// TestLeaderLockRenews: a holder keeps the lock for several TTLs by
// renewing it, the others never get in, and Run returns fn's result.
func TestLeaderLockRenews(t *testing.T) {
	s := redistest.StartServer(t)
	// A 3 s TTL: a renewal every second, each with a second of headroom
	// before the holder would give up, even on a loaded machine.
	const ttl = 3 * time.Second
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var holders, overlap atomic.Int64
	var wg sync.WaitGroup
	var others atomic.Int64
	for i := range 2 {
		lock := NewLeaderLock(s.Client(t), fmt.Sprintf("other-%d", i), WithTTL(ttl), WithPollInterval(5*time.Millisecond))
		wg.Go(func() {
			_ = lock.Run(ctx, func(context.Context) error {
				others.Add(1)
				if holders.Add(1) != 1 {
					overlap.Add(1)
				}
				holders.Add(-1)
				return nil
			})
		})
	}
	lock := NewLeaderLock(s.Client(t), "holder", WithTTL(ttl))
	errFn := errors.New("fn's own error")
	c := s.Client(t)
	err := lock.Run(ctx, func(fctx context.Context) error {
		if holders.Add(1) != 1 {
			overlap.Add(1)
		}
		defer holders.Add(-1)
		if err := outbound.Sleep(fctx, outbound.SystemClock, 4*ttl/3); err != nil { // past the TTL: only renewals keep it
			return err
		}
		if pttl := c.PTTL(t.Context(), LeaderKey).Val(); pttl <= 0 || pttl > ttl {
			return fmt.Errorf("PTTL %v, want in (0, %v]", pttl, ttl)
		}
		return errFn
	})
	if !errors.Is(err, errFn) || errors.Is(err, ErrLeadershipLost) {
		t.Fatalf("Run = %v, want fn's error", err)
	}
	wg.Wait() // one of the others gets it once released
	cancel()
	if overlap.Load() != 0 {
		t.Errorf("two holders at once %d times", overlap.Load())
	}
}

// TestLeaderLockKeepsLockUntilFnReturns: when ctx ends, fn is told, and the
// lock stays held, and renewed, until fn has returned, however long that
// takes.
func TestLeaderLockKeepsLockUntilFnReturns(t *testing.T) {
	s := redistest.StartServer(t)
	// fn winds down for longer than the renew interval (1 s), so the lock is
	// renewed meanwhile, and for far less than the TTL: b can only get in
	// if a fails to hold the lock.
	const ttl, windDown = 3 * time.Second, 1200 * time.Millisecond
	a := NewLeaderLock(s.Client(t), "a", WithTTL(ttl))
	b := NewLeaderLock(s.Client(t), "b", WithTTL(ttl), WithPollInterval(5*time.Millisecond))
	ctx, cancel := context.WithCancel(t.Context())
	held := make(chan struct{})
	var aEnd, bStart time.Time
	errc := make(chan error, 1)
	go func() {
		errc <- a.Run(ctx, func(fctx context.Context) error {
			close(held)
			<-fctx.Done()
			_ = outbound.Sleep(t.Context(), outbound.SystemClock, windDown)
			aEnd = time.Now()
			return fctx.Err()
		})
	}()
	<-held
	cancel()
	if err := b.Run(t.Context(), func(context.Context) error { bStart = time.Now(); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("a's Run = %v, want %v", err, context.Canceled)
	}
	if !bStart.After(aEnd) {
		t.Errorf("b took the lock %v before a's fn returned", aEnd.Sub(bStart))
	}
}

// TestLeaderLockRedisGone: when Redis dies or stops, the holder's fn is
// cancelled before the lock's TTL could run out, so before another
// replica could take it; once Redis is back another takes it, after.
func TestLeaderLockRedisGone(t *testing.T) {
	for _, how := range []string{"kill", "stop"} {
		t.Run(how, func(t *testing.T) {
			s := redistest.StartServer(t)
			// Renewals every 300 ms: the holder gives up at most two thirds
			// of the TTL (2 s) after Redis went, 700 ms before the bound
			// below.
			const ttl = 3 * time.Second
			lock := NewLeaderLock(s.Client(t), "a", WithTTL(ttl), WithRenewInterval(300*time.Millisecond))
			started, cancelled := make(chan struct{}), make(chan time.Time, 1)
			errc := make(chan error, 1)
			go func() {
				errc <- lock.Run(t.Context(), func(fctx context.Context) error {
					close(started)
					<-fctx.Done()
					cancelled <- time.Now()
					return fctx.Err()
				})
			}()
			<-started
			down := time.Now()
			if how == "kill" {
				s.Kill()
			} else {
				s.Stop()
			}
			// The last renewal was sent at most one renew interval before
			// Redis went; its TTL runs out a TTL after that.
			limit := ttl - lock.renew
			select {
			case at := <-cancelled:
				t.Logf("fn cancelled %v after Redis went down (limit %v)", at.Sub(down), limit)
				if d := at.Sub(down); d >= limit {
					t.Errorf("fn cancelled %v after Redis went down, want before %v", d, limit)
				}
			case <-time.After(5 * ttl):
				t.Fatal("fn still running long after Redis went down")
			}
			err := <-errc
			if !errors.Is(err, ErrLeadershipLost) {
				t.Fatalf("Run = %v, want %v", err, ErrLeadershipLost)
			}
			t.Logf("Run = %v", err)

			s.Restart(t)
			// a's Run has returned, so b cannot overlap it here; b only
			// shows that the lock can be taken again.
			b := NewLeaderLock(s.Client(t), "b", WithTTL(ttl), WithPollInterval(5*time.Millisecond))
			if err := b.Run(t.Context(), func(context.Context) error { return nil }); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// freezeHook holds every command while frozen, ignoring its context: a
// Redis call that hangs.
type freezeHook struct {
	frozen  atomic.Bool
	release chan struct{}
}

func (h *freezeHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *freezeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if h.frozen.Load() {
			<-h.release
		}
		return next(ctx, cmd)
	}
}

func (h *freezeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestLeaderLockRenewalHangs: a renewal that neither answers nor honours
// its deadline still cannot keep fn running: fn is cancelled two thirds of
// a TTL after the last successful call.
func TestLeaderLockRenewalHangs(t *testing.T) {
	s := redistest.StartServer(t)
	c := s.Client(t)
	h := &freezeHook{release: make(chan struct{})}
	c.AddHook(h)
	const ttl = 3 * time.Second // gives up at 2 s, a second before the TTL
	lock := NewLeaderLock(c, "a", WithTTL(ttl))
	started, cancelled := make(chan time.Time, 1), make(chan time.Time, 1)
	errc := make(chan error, 1)
	go func() {
		errc <- lock.Run(t.Context(), func(fctx context.Context) error {
			h.frozen.Store(true)
			started <- time.Now()
			<-fctx.Done()
			cancelled <- time.Now()
			return fctx.Err()
		})
	}()
	t0 := <-started
	var d time.Duration
	select {
	case at := <-cancelled:
		d = at.Sub(t0)
	case <-time.After(5 * ttl):
		close(h.release)
		t.Fatal("fn still running long after renewals stopped answering")
	}
	close(h.release)
	t.Logf("fn cancelled %v after the lock was taken", d)
	if d >= ttl {
		t.Errorf("fn cancelled %v after the lock was taken, want before its TTL (%v)", d, ttl)
	}
	err := <-errc
	if !errors.Is(err, ErrLeadershipLost) || !strings.Contains(err.Error(), "no renewal succeeded") {
		t.Fatalf("Run = %v, want %v: no renewal succeeded", err, ErrLeadershipLost)
	}
}

// TestLeaderLockTaken: a holder that finds the lock another's stops at its
// next renewal, and does not delete the other's lock.
func TestLeaderLockTaken(t *testing.T) {
	s := redistest.StartServer(t)
	c := s.Client(t)
	const ttl = 3 * time.Second // the next renewal within 1 s; gives up at 2 s
	lock := NewLeaderLock(s.Client(t), "a", WithTTL(ttl))
	var took time.Time
	err := lock.Run(t.Context(), func(fctx context.Context) error {
		if err := c.Set(t.Context(), LeaderKey, "intruder", 0).Err(); err != nil {
			return err
		}
		took = time.Now()
		<-fctx.Done()
		// At the next renewal, a renew interval later; at the latest when
		// the holder gives up on its own.
		d := time.Since(took)
		t.Logf("fn cancelled %v after the lock was taken (renew interval %v)", d, lock.renew)
		if d >= lock.safe() {
			t.Errorf("fn cancelled %v after the lock was taken, want before %v", d, lock.safe())
		}
		return errors.New("stopped") // joined to the loss
	})
	if !errors.Is(err, ErrLeadershipLost) || !errors.Is(err, errLockTaken) || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("Run = %v, want %v: %v, and fn's error", err, ErrLeadershipLost, errLockTaken)
	}
	if v := c.Get(t.Context(), LeaderKey).Val(); v != "intruder" {
		t.Errorf("lock holds %q after Run, want the intruder's", v)
	}
}

// TestLeaderLockNonOwnerCannotRelease: compare-and-delete with another
// token deletes nothing.
func TestLeaderLockNonOwnerCannotRelease(t *testing.T) {
	s := redistest.StartServer(t)
	c := s.Client(t)
	lock := NewLeaderLock(s.Client(t), "owner", WithTTL(time.Second))
	err := lock.Run(t.Context(), func(context.Context) error {
		token := c.Get(t.Context(), LeaderKey).Val()
		if !strings.HasPrefix(token, "owner/") || len(token) != len("owner/")+16 {
			return fmt.Errorf("lock holds %q, want owner/ and 16 characters", token)
		}
		for _, other := range []string{"owner", "intruder/ABCDEFGHIJKLMNOP", token + "x"} {
			n, err := releaseScript.Run(t.Context(), c, []string{LeaderKey}, other).Int64()
			if err != nil || n != 0 {
				return fmt.Errorf("release with %q = %d, %v; want 0", other, n, err)
			}
			n, err = renewScript.Run(t.Context(), c, []string{LeaderKey}, other, 1000).Int64()
			if err != nil || n != 0 {
				return fmt.Errorf("renew with %q = %d, %v; want 0", other, n, err)
			}
		}
		if v := c.Get(t.Context(), LeaderKey).Val(); v != token {
			return fmt.Errorf("lock holds %q, want %q", v, token)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n := c.Exists(t.Context(), LeaderKey).Val(); n != 0 {
		t.Error("the owner's Run did not release the lock")
	}
}

// TestLeaderLockDefaults: the lock is LeaderKey with LeaderTTL, and a
// contender gives up when its context ends.
func TestLeaderLockDefaults(t *testing.T) {
	if LeaderKey != "baron:worksmobile:relay:leader" || LeaderTTL != 30*time.Second {
		t.Fatalf("LeaderKey, LeaderTTL = %q, %v", LeaderKey, LeaderTTL)
	}
	s := redistest.StartServer(t)
	c := s.Client(t)
	lock := NewLeaderLock(s.Client(t), "pod-1")
	if lock.ttl != LeaderTTL || lock.renew != 10*time.Second || lock.poll != 3*time.Second || lock.safe() != 20*time.Second {
		t.Errorf("ttl %v, renew %v, poll %v, safe %v", lock.ttl, lock.renew, lock.poll, lock.safe())
	}
	err := lock.Run(t.Context(), func(context.Context) error {
		if pttl := c.PTTL(t.Context(), LeaderKey).Val(); pttl <= LeaderTTL-time.Second || pttl > LeaderTTL {
			t.Errorf("PTTL %v, want about %v", pttl, LeaderTTL)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		other := NewLeaderLock(s.Client(t), "pod-2", WithPollInterval(10*time.Millisecond))
		if err := other.Run(ctx, func(context.Context) error {
			t.Error("pod-2 ran while pod-1 held the lock")
			return nil
		}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("pod-2's Run = %v, want %v", err, context.DeadlineExceeded)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestLeaderLockNilClient: without Redis, Run runs fn at once with ctx.
func TestLeaderLockNilClient(t *testing.T) {
	errFn := errors.New("fn")
	for _, c := range []redis.UniversalClient{nil, (*redis.Client)(nil), (*redis.ClusterClient)(nil)} {
		ran := false
		err := NewLeaderLock(c, "").Run(t.Context(), func(ctx context.Context) error {
			ran = ctx == t.Context()
			return errFn
		})
		if !ran || err != errFn {
			t.Errorf("client %T: ran with ctx %v, Run = %v; want fn's error", c, ran, err)
		}
	}
}

// TestLeaderLockUnreachable: a contender that cannot reach Redis keeps
// trying until its context ends, and says why.
func TestLeaderLockUnreachable(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	err := NewLeaderLock(c, "a", WithPollInterval(10*time.Millisecond)).Run(ctx, func(context.Context) error {
		t.Error("fn ran without the lock")
		return nil
	})
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "last Redis error") {
		t.Fatalf("Run = %v, want %v with the last Redis error", err, context.DeadlineExceeded)
	}
}

// TestLeaderLockWithKey: locks on different keys lead at the same time;
// locks on one key (not the default) exclude each other; the default key
// is not touched.
func TestLeaderLockWithKey(t *testing.T) {
	s := redistest.StartServer(t)
	c := s.Client(t)
	a := NewLeaderLock(s.Client(t), "a", WithKey("jobs:a:leader"))
	b := NewLeaderLock(s.Client(t), "b", WithKey("jobs:b:leader"))
	a2 := NewLeaderLock(s.Client(t), "a2", WithKey("jobs:a:leader"), WithPollInterval(10*time.Millisecond))
	if NewLeaderLock(nil, "", WithKey("")).key != LeaderKey {
		t.Error("WithKey(\"\") changed the key")
	}
	var bothLed, a2Ran bool
	err := a.Run(t.Context(), func(context.Context) error {
		if v := c.Get(t.Context(), "jobs:a:leader").Val(); !strings.HasPrefix(v, "a/") {
			return fmt.Errorf("jobs:a:leader holds %q, want a's token", v)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		if err := b.Run(ctx, func(context.Context) error {
			bothLed = strings.HasPrefix(c.Get(t.Context(), "jobs:b:leader").Val(), "b/")
			return nil
		}); err != nil {
			return fmt.Errorf("b's Run = %w", err)
		}
		ctx, cancel = context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if err := a2.Run(ctx, func(context.Context) error { a2Ran = true; return nil }); !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("a2's Run = %v, want %v", err, context.DeadlineExceeded)
		}
		if n := c.Exists(t.Context(), LeaderKey).Val(); n != 0 {
			return fmt.Errorf("the default key %s exists", LeaderKey)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bothLed {
		t.Error("b did not lead on its own key while a held its own")
	}
	if a2Ran {
		t.Error("a2 ran while a held the same key")
	}
	// Once a has released its key, a2 takes it.
	if err := a2.Run(t.Context(), func(context.Context) error { a2Ran = true; return nil }); err != nil || !a2Ran {
		t.Errorf("a2 after a: ran %v, Run = %v", a2Ran, err)
	}
}
