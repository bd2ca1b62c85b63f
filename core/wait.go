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
	// slotPollMin and slotPollMax bound how often the head of a queue
	// waiting for a slot of a rule's concurrency limit asks a store
	// shared by processes again (see slotPoll).
	slotPollMin = 5 * time.Millisecond
	slotPollMax = 50 * time.Millisecond
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
	// freed receives (buffered, one at most) when a request of this
	// limiter gives back a slot of the queue's rule and key: the head,
	// when it waits for a slot, asks again. Made by the first head that
	// waits for one.
	freed chan struct{}
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

// freed returns the channel of the queue k, which holds the caller, on
// which a slot given back under its rule and key is signalled (see wake).
func (r *waitRoom) freed(k waitKey) <-chan struct{} {
	s := r.shard(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.queues[k]
	if q.freed == nil {
		q.freed = make(chan struct{}, 1)
	}
	return q.freed
}

// wake tells the head of the queue k, if a request waits there for a
// slot, that one was given back. With no request held anywhere in the
// limiter, it costs an atomic load.
func (r *waitRoom) wake(k waitKey) {
	if r.held.Load() == 0 {
		return
	}
	s := r.shard(k)
	s.mu.Lock()
	if q := s.queues[k]; q != nil && q.freed != nil {
		select {
		case q.freed <- struct{}{}:
		default: // already told
		}
	}
	s.mu.Unlock()
}

// queueKey names the queue of the requests of key waiting under r: by
// its policy's name, or, when it bounds requests in flight, by the name
// of its slots, which its plans' variants share (so that a request under
// one plan that gives a slot back wakes a request under another that
// waits for it, on a key they share).
func (r *Rule) queueKey(key string) waitKey {
	if r.conc != nil {
		return waitKey{policy: r.conc.Name, key: key}
	}
	return waitKey{policy: r.Policy.Name, key: key}
}

// seat is a request's place in its rule's queue while it waits there.
type seat struct {
	k        waitKey
	w        *waiter // nil: not in the queue
	start    int64   // when it began to wait (clock reading)
	deadline int64   // start + the rule's wait: past it, it is refused
}

// sit puts the request of a, whose rule has a wait, at the end of the
// queue k (see waitRoom.join; ahead is the cost of the waiters ahead of
// it), starting its wait now; joined is false, and s stays empty, when
// the queue or the limiter was full.
func (l *Limiter) sit(a ask, k waitKey, s *seat) (ahead int64, joined bool) {
	w := &waiter{cost: a.cost, turn: make(chan struct{})}
	if ahead, joined = l.waits.join(k, w, a.rule.waitQueue); joined {
		s.k, s.w = k, w
		s.start = l.clock.Now()
		s.deadline = s.start + int64(a.rule.wait)
	}
	return ahead, joined
}

// unseat takes the request out of its queue, if it is in one, and
// records in d how long it was held.
func (l *Limiter) unseat(s *seat, d *Decision) {
	if s.w == nil {
		return
	}
	l.waits.leave(s.k, s.w)
	s.w = nil
	d.Waited = time.Duration(l.clock.Now() - s.start)
}

// turn waits until s is the head of its queue (each waiter ahead leaves
// by its own deadline, no later than this one's, or a store call after
// it), and reports false when ctx ends first.
func (s *seat) turn(ctx context.Context) bool {
	select {
	case <-s.w.turn:
		return true
	case <-ctx.Done():
		return false
	}
}

// awaitSlot holds the request of a, under a rule with a concurrency
// limit and a wait, until it takes a slot of a.key (OutcomeAllowed, its
// lease in *lease) or is refused (OutcomeConcurrencyDenied), or the
// store fails (OutcomeStoreError, *err): it queues in the rule's queue of
// a.key (s, where it stays when it took a slot or the store failed: the
// caller asks the limits at the head, and takes it out), is refused at
// once when the queue holds the rule's wait_queue requests or the
// limiter maxHeld, and waits its turn. At the head it asks the store for
// a slot, and again each time a request of this limiter gives one back
// (hold.release wakes it) and, when the store is shared by processes,
// every slotPoll, until its deadline, the rule's wait after it queued;
// when its context ends (the client went away) it leaves, refused, having
// taken nothing.
func (l *Limiter) awaitSlot(ctx context.Context, a ask, s *seat, lease *uint64, err *error) Outcome {
	k := a.rule.queueKey(a.key)
	if _, joined := l.sit(a, k, s); !joined || !s.turn(ctx) {
		return OutcomeConcurrencyDenied
	}
	// Registered before it asks: a slot given back after the store's
	// answer is signalled, not missed.
	freed := l.waits.freed(k)
	poll := l.slotPoll(a.rule.wait)
	for {
		if ctx.Err() != nil {
			return OutcomeConcurrencyDenied // gone: nothing taken
		}
		if o, _ := l.acquire(ctx, a, lease, err); o != OutcomeConcurrencyDenied {
			return o
		}
		left := time.Duration(s.deadline - l.clock.Now())
		if left <= 0 {
			return OutcomeConcurrencyDenied
		}
		if poll > 0 {
			left = min(left, poll)
		}
		ch, stop := l.timer(left)
		select {
		case <-freed:
			stop()
		case <-ch:
		case <-ctx.Done():
			stop()
			return OutcomeConcurrencyDenied
		}
	}
}

// slotPoll is how often the head of a queue waiting for a slot under a
// rule's wait asks the store again when no release in this limiter
// wakes it: never for a store in this process (store.LocalStore), whose
// slots only this limiter gives back; for a store shared by processes,
// whose slots others give back unseen, an eighth of the wait, between
// slotPollMin and slotPollMax. A slot freed by another process is so
// taken within slotPollMax and a round trip.
func (l *Limiter) slotPoll(wait time.Duration) time.Duration {
	if l.local {
		return 0
	}
	return min(max(wait/8, slotPollMin), slotPollMax)
}

// takeOrWait is take for the count a of a request under a rule with a
// wait (RuleSpec.Wait), into d.Result and d.Err. When no request of a's
// key waits under the rule, it asks the store, and a denial whose
// Retry-After is within the wait holds the request (hold); when some
// wait, the request queues behind them without asking first, so that it
// cannot take the room they wait for. With no request held anywhere in
// the limiter, it costs one atomic load more than take. A request that
// waited in the queue for a slot (s, filled by awaitSlot) asks at the
// head, at once, within what is left of the same wait. sc is take's: with
// stacked rules, the request waits until every rule would admit it.
func (l *Limiter) takeOrWait(ctx context.Context, a ask, sc *stackCall, d *Decision, s *seat) (Outcome, time.Duration) {
	if s.w != nil {
		defer l.unseat(s, d)
		return l.headTake(ctx, a, sc, d, s, 0), 0
	}
	k := a.rule.queueKey(a.key)
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
// later, have left. d.Waited is how long it was held. A request whose
// rule bounds requests in flight comes here holding its slot, taken while
// no request of its key waited (else it queued for the slot: awaitSlot),
// and keeps it while it waits.
func (l *Limiter) queue(ctx context.Context, a ask, sc *stackCall, k waitKey, d *Decision, took bool) Outcome {
	var s seat
	ahead, joined := l.sit(a, k, &s)
	retry := time.Duration(-1) // the head's wait before it asks the store; < 0: none
	switch {
	case took && ahead == 0 && joined:
		retry = d.Result.RetryAfter // first in the queue, with the store's answer
	case took && ahead == 0:
		return OutcomeDenied // the limiter holds maxHeld: d.Result is the store's denial
	default:
		est, o := l.estimate(ctx, a, ahead, d)
		if o == OutcomeStoreError || !joined || est > a.rule.wait {
			if joined {
				l.waits.leave(k, s.w)
			}
			return o
		}
		if ahead == 0 {
			retry = est // first in the queue: the store's answer is its own
		}
	}
	defer l.unseat(&s, d)
	if !s.turn(ctx) {
		return OutcomeDenied // gone: nothing taken
	}
	return l.headTake(ctx, a, sc, d, &s, retry)
}

// headTake counts a, the request at the head of its queue (s), once
// retry is over (< 0: at once), until the store admits it (OutcomeWaited)
// or its Retry-After would keep it past its deadline (other servers took
// the room) or its context ends (OutcomeDenied: nothing taken), or the
// store fails; it waits out each Retry-After between.
func (l *Limiter) headTake(ctx context.Context, a ask, sc *stackCall, d *Decision, s *seat, retry time.Duration) Outcome {
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
		if l.clock.Now()+int64(retry) > s.deadline {
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
// the store says it would be admitted within that time, or, under its
// concurrency limit, while no slot is free (RuleSpec.Wait); 0 when it
// refuses at once.
func (r *Rule) Wait() time.Duration { return r.wait }
