package redisstore

import (
	"context"
	"time"
)

// callCtx bounds one call to Redis. Its deadline is the store's timeout
// (or the caller's deadline, when sooner), which go-redis applies to its
// sockets and its dialer; its Done channel closes at the deadline, which
// ends go-redis's waits for a pooled connection and its retry back-offs.
//
// To stay off the per-call allocation budget it does not propagate the
// caller's cancellation into those waits (that would need a goroutine or a
// timer per call): a cancelled caller gets its answer by the timeout, and
// Store.call checks the caller's context before calling.
type callCtx struct {
	context.Context
	deadline time.Time
	done     <-chan struct{}
}

func (c *callCtx) Deadline() (time.Time, bool) { return c.deadline, true }
func (c *callCtx) Done() <-chan struct{}       { return c.done }
func (c *callCtx) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return c.Context.Err()
	}
}

// tick is a deadline shared by the calls that start within one grain of
// each other, with a channel closed when it passes: one timer per grain
// instead of one per call.
type tick struct {
	deadline time.Time
	done     chan struct{}
	timer    *time.Timer
}

func (t *tick) stop() {
	if t.timer.Stop() {
		close(t.done)
	}
}

// callContext returns the context of a call starting now: a deadline
// between timeout and timeout plus one grain from now.
func (s *Store) callContext(parent context.Context) *callCtx {
	c := &callCtx{Context: parent}
	c.deadline, c.done = s.deadline(parent)
	return c
}

// deadline returns the deadline of a call starting now (see callContext)
// and a channel closed when the store's timeout has passed: at the
// deadline, or up to one grain after it when parent's is sooner.
func (s *Store) deadline(parent context.Context) (time.Time, <-chan struct{}) {
	now := time.Now()
	soonest := now.Add(s.timeout)
	t := s.tick.Load()
	if t == nil || t.deadline.Before(soonest) {
		nt := &tick{deadline: soonest.Add(s.grain), done: make(chan struct{})}
		nt.timer = time.AfterFunc(s.timeout+s.grain, func() { close(nt.done) })
		if s.tick.CompareAndSwap(t, nt) {
			t = nt
		} else if cur := s.tick.Load(); cur != nil && !cur.deadline.Before(soonest) {
			nt.stop()
			t = cur
		} else {
			t = nt // lost a race to a tick that is no better: use ours, unshared
		}
	}
	deadline := t.deadline
	if d, ok := parent.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	return deadline, t.done
}
