package redisstore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
)

// DefaultBatch is the most decisions one batched call carries (WithBatch).
const DefaultBatch = 128

// batchLanes is how many calls of decisions the store keeps in flight to
// one node at once (each alone or a batch): a decision that finds fewer in
// flight goes out at once, alone; one that finds them all in flight waits
// in the node's queue for the next batch. Two lanes keep the server busy
// while a batch's reply travels and is parsed.
var batchLanes = 2

// maxQueueBatches bounds a node's queue at that many full batches: past it,
// a decision does not wait and goes out alone, as with batching off.
const maxQueueBatches = 16

// WithBatch sets the most decisions one call to Redis carries (group
// commit). Decisions for a node go out at once, each alone, while fewer
// than two calls of decisions are in flight to it; the decisions that
// arrive while two are in flight wait in the node's queue, and each call
// that returns takes up to max of them and sends them as one script call.
// An idle store therefore adds no delay (no timer, no linger), and under
// load one round trip and one script run carry many decisions. Each
// decision in a batch is evaluated as it is alone: all of its limits or
// none, on the server's clock (TIME, read once per batch), with the same
// keys and the same replies. For a Cluster, a batch holds the decisions of
// one master (their keys may lie in different hash slots: the batch script
// declares allow-cross-slot-keys, which needs Redis 7.0; on an older
// server the store stops batching at the first batch the server refuses).
// A batch that the cluster redirects (MOVED, ASK, TRYAGAIN, CROSSSLOT,
// while slots move) is sent again decision by decision, and so is each
// decision of a batch whose key the node does not serve (the others are
// answered), and a batch the server refuses before it runs because it may
// write (OOM, READONLY, MISCONF, NOREPLICAS: a decision alone is refused
// only at its first write, so a peek or a denial is still answered).
//
// A node's queue holds at most 16 batches (16 × max decisions); a decision
// that finds it full goes out alone, as with batching off. A decision
// waits in the queue at most until its caller's context ends or the
// store's timeout passes, whichever is sooner, and then returns the
// context's error or a timeout (a *NodeError); a decision that ends
// while queued is never sent, while one whose batch was sent may have been
// applied, as a call that timed out may have been. Batches are formed per
// node: a slow node delays only its own decisions. A batch runs with the
// context values of none of its callers (go-redis hooks see a background
// context).
//
// max ≤ 1 turns batching off: every decision is its own call. Take, Peek
// batch; Reset and TakeAll never do. Default: DefaultBatch (128).
func WithBatch(max int) Option { return func(s *Store) { s.batch = max } }

// A waiter is one decision queued for a batch.
type waiter struct {
	key  string
	alg  algo.Algorithm
	arg  int64 // the cost; -cost - 1 for a dry run
	tail []any
	// deadline is the decision's (see Store.deadline), and expired is
	// closed once the store's timeout has passed.
	deadline time.Time
	expired  <-chan struct{}
	// ctx is the caller's: a batch whose callers' contexts have all ended
	// says nothing against the node when it fails.
	ctx context.Context
	// state is queued until a batch takes the decision or its caller gives
	// up; under the queue's lock.
	state waitState
	done  chan struct{} // receives once reply and err are set
	reply any
	err   error
	// alone: the batch could not carry the decision; its caller sends it
	// alone.
	alone bool
}

type waitState uint8

const (
	queued waitState = iota
	taken
	abandoned
)

// queue holds the decisions waiting for a batch to one node.
type queue struct {
	mu       sync.Mutex
	inflight int // calls of decisions in flight to the node, at most batchLanes
	waiting  []*waiter
}

// take moves up to max queued decisions into batch (its old contents
// dropped) and returns it; when it took none, the caller's lane ends
// (inflight drops).
func (q *queue) take(batch []*waiter, max int) []*waiter {
	batch = batch[:0]
	q.mu.Lock()
	i := 0
	for ; i < len(q.waiting) && len(batch) < max; i++ {
		w := q.waiting[i]
		q.waiting[i] = nil
		if w.state == queued {
			w.state = taken
			batch = append(batch, w)
		}
	}
	n := copy(q.waiting, q.waiting[i:])
	clear(q.waiting[n:])
	q.waiting = q.waiting[:n]
	if len(batch) == 0 {
		q.inflight--
	}
	q.mu.Unlock()
	return batch
}

// decideCall sends one decision to Redis, in a batch when others wait for
// the same node, and returns the decision script's reply; tail is its
// ARGV after the cost (plan.tailAt). It fails as call does.
func (s *Store) decideCall(ctx context.Context, key string, pl *plan, tail []any, arg int64) (any, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	a, err := s.admit(ctx, key)
	if err != nil {
		return nil, err
	}
	n, now := a.n, a.now
	sc := decision[pl.algorithm]
	if a.located != nil || a.probe || s.batch <= 1 || s.noBatch.Load() || n == s.nodes.unmapped {
		return s.callNode(ctx, a, sc, singleArgs(key, pl, tail, arg))
	}
	q := &n.q
	q.mu.Lock()
	if q.inflight < batchLanes || len(q.waiting) >= maxQueueBatches*s.batch {
		lane := q.inflight < batchLanes
		if lane {
			q.inflight++
		}
		q.mu.Unlock()
		v, err := s.callNode(ctx, a, sc, singleArgs(key, pl, tail, arg))
		if lane {
			s.next(n)
		}
		return v, err
	}
	w := waiters.Get().(*waiter)
	w.key, w.alg, w.arg, w.tail, w.state = key, pl.algorithm, arg, tail, queued
	w.deadline, w.expired = s.deadline(ctx)
	w.ctx = ctx
	q.waiting = append(q.waiting, w)
	q.mu.Unlock()
	var end error
	select {
	case <-w.done:
	case <-ctx.Done():
		end = ctx.Err()
	case <-w.expired:
		end = context.DeadlineExceeded
	}
	if end != nil {
		q.mu.Lock()
		st := w.state
		if st == queued {
			w.state = abandoned
		}
		q.mu.Unlock()
		select {
		case <-w.done: // answered meanwhile
		default:
			// Not put back in the pool: a batch may still answer it.
			ne := &NodeError{Node: n.addr, Err: end}
			if st == queued && end == context.DeadlineExceeded {
				ne.LastDial = s.nodes.lastDial(n, now-int64(s.timeout))
			}
			return nil, ne
		}
	}
	reply, err, alone := w.reply, w.err, w.alone
	*w = waiter{done: w.done}
	waiters.Put(w)
	if alone {
		return s.callNode(ctx, admission{n: n, now: s.clock.Now()}, sc, singleArgs(key, pl, tail, arg))
	}
	return reply, err
}

// waiters recycles the waiters whose answer their caller took.
var waiters = sync.Pool{New: func() any { return &waiter{done: make(chan struct{}, 1)} }}

// singleArgs returns the command of one decision alone.
func singleArgs(key string, pl *plan, tail []any, arg int64) []any {
	args := make([]any, 0, 5+len(tail))
	args = append(args, evalshaCmd, decision[pl.algorithm].sha, oneKey, key, arg)
	return append(args, tail...)
}

// next hands n's queue on when a call of a decision alone returns: the
// decisions that queued meanwhile go out as a batch, sent by a goroutine
// of their own (so the caller returns now), which goes on sending batches
// while decisions queue; else the lane ends.
func (s *Store) next(n *node) {
	batch := n.q.take(nil, s.batch)
	if len(batch) == 0 {
		return
	}
	s.inflight.Add(1) // the caller holds s.mu: Close is not waiting yet
	go s.send(n, batch)
}

// send sends batch to n, then the batches that queue meanwhile, until the
// queue is empty.
func (s *Store) send(n *node, batch []*waiter) {
	defer s.inflight.Done()
	var args []any
	for len(batch) > 0 {
		args = s.sendBatch(n, batch, args[:0])
		batch = n.q.take(batch, s.batch)
	}
}

// sendBatch sends batch to n as one call (a decision alone as its own
// script), gives each decision its reply or error, and returns args for
// reuse.
func (s *Store) sendBatch(n *node, batch []*waiter, args []any) []any {
	// The call lasts until the latest deadline of its decisions.
	cctx := &callCtx{Context: context.Background(), deadline: batch[0].deadline, done: batch[0].expired}
	for _, w := range batch[1:] {
		if w.deadline.After(cctx.deadline) {
			cctx.deadline, cctx.done = w.deadline, w.expired
		}
	}
	now := s.clock.Now()
	ok, probe := n.br.allow(now)
	if !ok {
		for _, w := range batch {
			w.err = n.openErr
			w.done <- struct{}{}
		}
		return args
	}
	sc := batchScript
	if len(batch) == 1 {
		w := batch[0]
		sc = decision[w.alg]
		args = append(args, evalshaCmd, sc.sha, oneKey, w.key, w.arg)
		args = append(args, w.tail...)
	} else {
		// One key declared, the first decision's, routes the call (a
		// Cluster refuses declared keys of several slots); each
		// decision's key is among its arguments.
		args = append(args, evalshaCmd, sc.sha, oneKey, batch[0].key)
		for _, w := range batch {
			args = append(args, int64(w.alg)+1, int64(1+len(w.tail)), w.key, w.arg)
			args = append(args, w.tail...)
		}
	}
	answered := n.answered.Load()
	v, err := s.do(cctx, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		args[0], args[1] = evalCmd, sc.eval
		v, err = s.do(cctx, args)
	}
	replies, isArray := v.([]any)
	switch {
	case len(batch) == 1 && err == nil:
		replies = []any{v}
	case err == nil && (!isArray || len(replies) != len(batch)):
		err = &kindError{"redisstore: unexpected reply to a batch of decisions", "other"}
	}
	if errors.Is(err, errTimeout) {
		// The call goes on in the background (a client that ignores
		// deadlines) and its command holds args: leave them to it.
		args = nil
	} else {
		clear(args) // drop the references to keys and replies
	}
	if err != nil && len(batch) > 1 && s.unbatchable(err) {
		for _, w := range batch {
			w.alone = true
			w.done <- struct{}{}
		}
		return args
	}
	if err != nil {
		// Nothing counts once every caller's own context has ended (as
		// for a call alone).
		if waitedFor(batch) && counts(err, n.answered.Load() != answered) {
			n.br.failure(s.clock.Now(), probe)
		} else if probe {
			n.br.probing.Store(false)
		}
		for _, w := range batch {
			w.err = s.nodeError(n, err, now)
			w.done <- struct{}{}
		}
		return args
	}
	n.answered.Add(1)
	n.br.success(probe)
	for i, w := range batch {
		switch e, failed := replies[i].(redis.Error); {
		case !failed:
			w.reply = replies[i]
		case len(batch) > 1 && redirected(e):
			w.alone = true
		default:
			w.err = s.nodeError(n, e, now)
		}
		w.done <- struct{}{}
	}
	return args
}

// waitedFor reports whether a caller of batch still waits: its context
// has not ended.
func waitedFor(batch []*waiter) bool {
	for _, w := range batch {
		if w.ctx.Err() == nil {
			return true
		}
	}
	return false
}

// redirected reports whether err, met by one decision of a batch, says
// that the node does not serve its key (its slot moved, or is moving):
// the decision is then sent alone, to the node the cluster names. It met
// the error at its first access to a key (the keys of one decision share
// a slot), so nothing of it was applied, unless the slot was moving and
// only some of its keys had moved, when a limit's count may be taken
// twice: the decision may be denied, never admitted beyond its limits.
func redirected(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, m := range []string{"non local key", "moved ", "ask ", "tryagain", "crossslot"} {
		if strings.Contains(msg, m) {
			return true
		}
	}
	return false
}

// unbatchable reports whether err, the error of a batch, says that the
// server cannot run it as one call, though each decision alone may run:
// the cluster redirects it (MOVED, ASK, TRYAGAIN, CROSSSLOT: slots are
// moving, or the client's map is stale); the server refuses, before it
// runs, a script with flags that may write (OOM, READONLY, MISCONF,
// NOREPLICAS), while a decision alone, a script without flags, is refused
// only at its first write, and one that writes nothing (a peek, a denial)
// is answered; or the server refuses the batch script itself (a server
// older than Redis 7.0, or a Redis-compatible one, that does not know the
// shebang or its flag), after which the store stops batching.
func (s *Store) unbatchable(err error) bool {
	for _, p := range []string{"MOVED", "ASK", "TRYAGAIN", "CROSSSLOT", "OOM", "READONLY", "MISCONF", "NOREPLICAS"} {
		if redis.HasErrorPrefix(err, p) {
			return true
		}
	}
	if _, ok := errors.AsType[redis.Error](err); !ok {
		return false
	}
	msg := strings.ToLower(err.Error())
	for _, m := range []string{"shebang", "compiling script"} {
		if strings.Contains(msg, m) {
			s.noBatch.Store(true)
			return true
		}
	}
	return false
}

// nodeError wraps err, the failure of a call to n that began at start.
func (s *Store) nodeError(n *node, err error, start int64) *NodeError {
	ne := &NodeError{Node: n.addr, Err: err}
	if waited(err) {
		// go-redis dials in the background and its caller sees only
		// the deadline: name what the dials met, if they failed
		// since shortly before the call.
		ne.LastDial = s.nodes.lastDial(n, start-int64(s.timeout))
	}
	return ne
}
