package core

import (
	"context"
	"hash/maphash"
	"math"
	"math/bits"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// Bounds of a rule's wait (RuleSpec.Wait, RuleSpec.WaitQueue) and of the
// requests one limiter holds.
const (
	// maxWait is the longest wait a rule may give: a request is held at
	// most this long (servers' write timeouts are often not much longer).
	maxWait = time.Minute
	// defaultWaitQueue is how many requests of one key wait under a rule
	// when its wait_queue is not given, and maxWaitQueue the most it may
	// say.
	defaultWaitQueue = 100
	maxWaitQueue     = 1000
	// maxHeld is the most requests one limiter holds at once, across every
	// rule and key: past it, a request that would wait is refused at once,
	// as under a rule without wait. It bounds what a flood of identities
	// can make the limiter keep.
	maxHeld = 10000
	// waitShards is the number of locks the queues are spread over.
	waitShards = 32
)

// compileWait compiles the wait and wait_queue of the rule at key (whose
// mode and count mode are compiled) into r.
func (cc *compiler) compileWait(key, label string, rs RuleSpec, r *Rule) {
	_, queueGiven := cc.ln[key+".wait_queue"] // in a file, wait_queue: 0 is given
	queueGiven = queueGiven || rs.WaitQueue != 0
	queue := strconv.FormatInt(rs.WaitQueue, 10)
	if rs.Wait == "" {
		if queueGiven {
			cc.fail(key+".wait_queue", label, "wait_queue", queue, "wait_queue needs wait: it bounds the requests held by the rule's wait")
		}
		return
	}
	d, err := time.ParseDuration(rs.Wait)
	if err != nil {
		if d, err = algo.ParsePeriod(rs.Wait); err != nil {
			cc.fail(key+".wait", label, "wait", rs.Wait, "want a duration such as 500ms, 2s or 1m")
			return
		}
	}
	switch {
	case d <= 0:
		cc.fail(key+".wait", label, "wait", rs.Wait, "want a positive duration such as 500ms, 2s or 1m")
		return
	case d > maxWait:
		cc.fail(key+".wait", label, "wait", rs.Wait, "at most %v: a request is held no longer", maxWait)
		return
	case r.shadow:
		cc.fail(key+".wait", label, "wait", rs.Wait, "a rule in shadow mode refuses nothing, so no request would wait")
		return
	case r.count == countResponse:
		cc.fail(key+".wait", label, "wait", rs.Wait, "a rule charged by response (cost: response) admits while its caller has a unit left and charges after the handler; wait applies to rules that count before it")
		return
	case r.byOutcome():
		cc.fail(key+".wait", label, "wait", rs.Wait, "a rule that counts %s decides after the handler; wait applies to rules that count all requests", r.Count())
		return
	}
	r.wait, r.waitQueue = d, defaultWaitQueue
	if queueGiven {
		if rs.WaitQueue < 1 || rs.WaitQueue > maxWaitQueue {
			cc.fail(key+".wait_queue", label, "wait_queue", queue, "want 1 to %d requests", maxWaitQueue)
			return
		}
		r.waitQueue = int(rs.WaitQueue)
	}
}

// waitRoom holds the requests a limiter keeps waiting under rules with a
// wait: for each rule (its policy's name) and key that has requests
// waiting, a FIFO queue, made by its first waiter and dropped with its
// last, so that the room holds only keys with waiters, and at most
// maxHeld waiters in all. The zero value is ready.
type waitRoom struct {
	held   atomic.Int64 // waiters in every queue
	shards [waitShards]waitShard
}

// waitShard is the queues of the keys that hash to it.
type waitShard struct {
	mu     sync.Mutex
	queues map[waitKey]*waitQueue
}

// waitKey names a queue: a rule's policy and a store key.
type waitKey struct{ policy, key string }

// waitQueue is the requests waiting under one rule for one key, first
// come first.
type waitQueue struct {
	head, tail *waiter
	n          int   // waiters
	cost       int64 // their costs, summed
}

// waiter is one request in a queue.
type waiter struct {
	prev, next *waiter
	cost       int64
	turn       chan struct{} // closed when it becomes the head
	in         bool          // in its queue: not yet left
}

var waitSeed = maphash.MakeSeed()

func (r *waitRoom) shard(k waitKey) *waitShard {
	return &r.shards[maphash.String(waitSeed, k.key)%waitShards]
}

// queued reports whether requests wait in the queue k.
func (r *waitRoom) queued(k waitKey) bool {
	s := r.shard(k)
	s.mu.Lock()
	_, ok := s.queues[k]
	s.mu.Unlock()
	return ok
}

// join puts w at the end of the queue k, unless it holds limit waiters
// already or the room holds maxHeld, and returns the cost of the waiters
// ahead of w (of the whole queue when w did not join).
func (r *waitRoom) join(k waitKey, w *waiter, limit int) (ahead int64, joined bool) {
	s := r.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[k]
	if q != nil {
		if ahead = q.cost; q.n >= limit {
			return ahead, false
		}
	}
	if r.held.Add(1) > maxHeld {
		r.held.Add(-1)
		return ahead, false
	}
	if q == nil {
		if s.queues == nil {
			s.queues = make(map[waitKey]*waitQueue)
		}
		q = &waitQueue{}
		s.queues[k] = q
	}
	w.prev, w.in = q.tail, true
	if q.tail == nil {
		q.head = w
		close(w.turn)
	} else {
		q.tail.next = w
	}
	q.tail = w
	q.n++
	q.cost += w.cost
	return ahead, true
}

// leave takes w out of the queue k, if it is still in it: the next
// waiter becomes the head when w was, and the queue is dropped when w was
// its last.
func (r *waitRoom) leave(k waitKey, w *waiter) {
	s := r.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !w.in {
		return
	}
	w.in = false
	q := s.queues[k]
	if w.prev == nil {
		q.head = w.next
		if q.head != nil {
			close(q.head.turn)
		}
	} else {
		w.prev.next = w.next
	}
	if w.next == nil {
		q.tail = w.prev
	} else {
		w.next.prev = w.prev
	}
	w.prev, w.next = nil, nil
	q.n--
	q.cost -= w.cost
	r.held.Add(-1)
	if q.n == 0 {
		delete(s.queues, k)
	}
}

// takeOrWait is take for the count a of a request under a rule with a
// wait (RuleSpec.Wait), into d.Result and d.Err. When no request of a's
// key waits under the rule, it asks the store, and a denial whose
// Retry-After is within the wait holds the request (hold); when some
// wait, the request queues behind them without asking first, so that it
// cannot take the room they wait for. With no request held anywhere in
// the limiter, it costs one atomic load more than take. sc is take's:
// with stacked rules, the request waits until every rule would admit it.
func (l *Limiter) takeOrWait(ctx context.Context, a ask, sc *stackCall, d *Decision) (Outcome, time.Duration) {
	k := waitKey{policy: a.rule.Policy.Name, key: a.key}
	if l.waits.held.Load() == 0 || !l.waits.queued(k) {
		o, lat := l.take(ctx, a, sc, false, &d.Result, &d.Err)
		if o != OutcomeDenied || d.Result.RetryAfter > a.rule.wait {
			return o, lat // admitted, failed, or refused at once
		}
		return l.queue(ctx, a, sc, k, d, true), lat
	}
	return l.queue(ctx, a, sc, k, d, false), 0
}

// queue queues the request of count a in the queue k and keeps it until
// the store admits it (OutcomeWaited) or it is refused (OutcomeDenied),
// filling d. took says that the store was asked (and denied it, d.Result
// its answer). It is refused at once, without waiting, when the queue
// holds the rule's wait_queue requests, when the limiter holds maxHeld,
// and when the wait, as the queue ahead makes it (estimate), would pass
// the rule's wait; later, when its context ends (the client went away),
// and when, at the head of the queue, the store's Retry-After would take
// it past its deadline (other servers took the room); it then consumed
// nothing. It is held at most the rule's wait and a store call: it asks
// the store only at the head, where the waiters ahead, which came no
// later, have left. d.Waited is how long it was held. sc is take's.
func (l *Limiter) queue(ctx context.Context, a ask, sc *stackCall, k waitKey, d *Decision, took bool) Outcome {
	start := l.clock.Now()
	deadline := start + int64(a.rule.wait)
	w := &waiter{cost: a.cost, turn: make(chan struct{})}
	ahead, joined := l.waits.join(k, w, a.rule.waitQueue)
	retry := time.Duration(-1) // the head's wait before it asks the store; < 0: none
	switch {
	case took && ahead == 0 && joined:
		retry = d.Result.RetryAfter // first in the queue, with the store's answer
	case took && ahead == 0:
		return OutcomeDenied // the limiter holds maxHeld: d.Result is the store's denial
	default:
		est, o := l.estimate(ctx, a, ahead, d)
		if o == OutcomeStoreError || !joined || est > a.rule.wait {
			l.waits.leave(k, w)
			return o
		}
		if ahead == 0 {
			retry = est // first in the queue: the store's answer is its own
		}
	}
	defer func() {
		l.waits.leave(k, w)
		d.Waited = time.Duration(l.clock.Now() - start)
	}()
	// Wait for the turn: each waiter ahead leaves by its own deadline,
	// no later than this one's (the rule's wait is the same for all), or
	// a store call after it.
	select {
	case <-w.turn:
	case <-ctx.Done():
		return OutcomeDenied // gone: nothing taken
	}
	// The head: wait out the store's Retry-After, then ask, until it
	// admits the request or would keep it past the deadline.
	for {
		if retry > 0 {
			ch, stop := l.timer(retry)
			select {
			case <-ch:
			case <-ctx.Done():
				stop()
				return OutcomeDenied
			}
		}
		if ctx.Err() != nil {
			return OutcomeDenied // gone: nothing taken
		}
		switch o, _ := l.take(ctx, a, sc, false, &d.Result, &d.Err); o {
		case OutcomeAllowed:
			return OutcomeWaited
		case OutcomeStoreError:
			return o
		}
		retry = max(d.Result.RetryAfter, 1)
		if l.clock.Now()+int64(retry) > deadline {
			return OutcomeDenied
		}
	}
}

// estimate works out how long the request of count a would wait behind
// waiters of cost ahead, from what the store answers for all of their
// costs and its own (a Peek: nothing is consumed): when they fit in the
// rule's capacity, that answer's Retry-After (0 when they fit now); past
// it, the Retry-After of a full capacity and then the time the limits
// take to give back the rest at their steady rate (refill). It fills
// d.Result with the refusal of the request, Retry-After that wait, and
// returns the wait with OutcomeDenied; or OutcomeStoreError, with d.Err,
// when the store failed.
func (l *Limiter) estimate(ctx context.Context, a ask, ahead int64, d *Decision) (time.Duration, Outcome) {
	p := a.rule.Policy
	total, capacity := ahead+a.cost, p.Capacity()
	probe := a
	probe.cost = min(total, capacity)
	if o, _ := l.take(ctx, probe, nil, true, &d.Result, &d.Err); o == OutcomeStoreError {
		return 0, o
	}
	var est time.Duration
	if res := &d.Result; !res.Allowed {
		est = res.RetryAfter
	} else {
		// Room for all of them now, but the waiters ahead take it: the
		// request is refused with nothing remaining.
		res.Allowed, res.Remaining = false, 0
		for i := range res.Limits {
			res.Limits[i].Remaining = 0
		}
	}
	if total > capacity {
		est = addSat(est, refill(p, total-capacity))
	}
	d.Result.RetryAfter = est
	return est, OutcomeDenied
}

// refill is how long p's limits take to give back units at their steady
// rate, the slowest of them: a window algorithm's count each period, in
// whole windows; a bucket's count per period, continuously.
func refill(p *store.Policy, units int64) time.Duration {
	var most time.Duration
	for _, l := range p.Limits {
		var t time.Duration
		switch p.Algorithm {
		case algo.FixedWindow, algo.SlidingWindow:
			t = mulDivCeil(units/l.Count+min(units%l.Count, 1), int64(l.Period), 1)
		default:
			t = mulDivCeil(units, int64(l.Period), l.Count)
		}
		most = max(most, t)
	}
	return most
}

// mulDivCeil is ⌈a×b/c⌉ (a, b ≥ 0, c > 0), at most math.MaxInt64.
func mulDivCeil(a, b, c int64) time.Duration {
	hi, lo := bits.Mul64(uint64(a), uint64(b))
	if hi >= uint64(c) {
		return math.MaxInt64
	}
	q, r := bits.Div64(hi, lo, uint64(c))
	if r != 0 {
		q++
	}
	return time.Duration(min(q, math.MaxInt64))
}

// addSat is a+b (both ≥ 0), at most math.MaxInt64.
func addSat(a, b time.Duration) time.Duration {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// timerClock is a clock that makes timers on its own time, as
// store.ManualClock does.
type timerClock interface {
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

// timer returns a channel that receives once d has passed, and a function
// that stops it: on the limiter's clock when it makes timers (see
// WithClock), else on the runtime's.
func (l *Limiter) timer(d time.Duration) (<-chan time.Time, func() bool) {
	if c, ok := l.clock.(timerClock); ok {
		return c.NewTimer(d)
	}
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// reportHeld is report for the count a of a request that its rule's wait
// held (d.Waited > 0).
func (l *Limiter) reportHeld(a ask, o Outcome, d *Decision, latency time.Duration) {
	if l.observer != nil {
		l.observer(Event{Rule: a.rule.Name, Plan: a.plan, Key: a.key, Outcome: o, Allowed: d.Allowed, Cost: a.cost, Err: d.Err, Latency: latency, Waited: d.Waited})
	}
}

// Wait returns how long the rule holds a request it would refuse while
// the store says it would be admitted within that time (RuleSpec.Wait);
// 0 when it refuses at once.
func (r *Rule) Wait() time.Duration { return r.wait }
