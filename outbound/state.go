package outbound

import (
	"hash/maphash"
	"sync"
	"time"
)

const (
	// numShards is the number of locks the keys are spread over.
	numShards = 64
	// minSweep is the size below which a shard's table is never swept.
	minSweep = 64
	// inflightTTL is how long a key counts a request in flight that was
	// never observed (a caller of Wait that does not call Observe for
	// every request): between one and two inflightTTL after its start it
	// is forgotten, so that such a caller does not shrink the budget for
	// good.
	inflightTTL = int64(30 * time.Second)
	// windowSlack is how much later a budget's reset must be to belong to
	// a newer window: resets given in whole seconds move by up to a second
	// within one window.
	windowSlack = int64(time.Second)
	// probeCap is how long the probe of a key (see keyState.reserve) holds
	// the key's other requests back when its answer never comes: from 1 s
	// after the probe started they start with no budget, as on a key whose
	// upstream never reported a count, until the next Observe under the key.
	probeCap = int64(time.Second)
	// sweepEvery is how often, at most, a shard with more than minSweep
	// keys is swept whatever its size, so that the state of a spike of
	// keys, idle once the budgets and holds the upstream gave have ended,
	// goes within that time of any later request in the shard.
	sweepEvery = int64(time.Minute)
)

// shard holds the state of the keys whose hash falls in it.
type shard struct {
	mu      sync.Mutex
	keys    map[string]*keyState
	sweepAt int
	swept   int64 // when the shard was last swept
}

func (sh *shard) init() {
	sh.keys = make(map[string]*keyState)
	sh.sweepAt = minSweep
}

// shard returns key's shard.
func (l *Limiter) shard(key string) *shard {
	return &l.shards[maphash.String(l.seed, key)%numShards]
}

// keyState is what a Limiter knows of one key. Instants are Unix ns.
type keyState struct {
	hold      int64         // no start before; 0: none
	budget    int64         // starts left before budgetEnd, when budgetEnd != 0
	budgetEnd int64         // when the budget's window resets; 0: no budget
	inflight  [2]int64      // starts not yet observed: this generation, the one before
	genStart  int64         // when this generation of inflight began
	lastStart int64         // the latest start
	probe     int64         // the start of the probe not yet observed; 0: none
	probed    chan struct{} // closed (and dropped) when the probe is observed or undone
	reports   bool          // the upstream has reported a remaining count
	queues    []queue       // one per rule with requests waiting
	// held are the dones of the requests Wait started holding slots of a
	// concurrency limit, oldest first: Observe calls one per answer.
	held []func()
	// freed, when a request waits for a slot, is closed (and dropped)
	// when a request under the key gives one back in this process.
	freed chan struct{}
}

// queue is the line of one rule's requests under a key.
type queue struct {
	rule       string
	busy       bool    // a request is at the head (and in no list)
	head, tail *waiter // the requests behind it, in arrival order
}

// waiter is one request waiting behind the head.
type waiter struct {
	prev, next *waiter
	turn       chan struct{} // closed when the waiter becomes the head
	isHead     bool
}

// state returns key's state, made when missing. sh.mu is held.
func (sh *shard) state(key string, now int64) *keyState {
	if len(sh.keys) >= sh.sweepAt || (len(sh.keys) > minSweep && now-sh.swept >= sweepEvery) {
		sh.sweep(now)
		sh.sweepAt = max(minSweep, 2*len(sh.keys))
		sh.swept = now
	}
	if ks := sh.keys[key]; ks != nil {
		return ks
	}
	ks := new(keyState)
	sh.keys[key] = ks
	return ks
}

// idle reports whether ks is in the state of a key never seen.
func (ks *keyState) idle(now int64) bool {
	return len(ks.queues) == 0 && len(ks.held) == 0 && ks.hold <= now && ks.budgetEnd <= now &&
		(ks.inflight == [2]int64{} || now-ks.lastStart >= 2*inflightTTL)
}

// drop forgets key when its state is idle. sh.mu is held.
func (sh *shard) drop(key string, ks *keyState, now int64) {
	if ks.idle(now) && sh.keys[key] == ks {
		delete(sh.keys, key)
	}
}

// sweep drops the idle keys. sh.mu is held.
func (sh *shard) sweep(now int64) {
	for key, ks := range sh.keys {
		if ks.idle(now) {
			delete(sh.keys, key)
		}
	}
}

// find returns the index of rule's queue in ks, -1 when none.
func (ks *keyState) find(rule string) int {
	for i := range ks.queues {
		if ks.queues[i].rule == rule {
			return i
		}
	}
	return -1
}

// reservation is what reserve answered: how long to wait (and, while the
// wait is for a probe's answer, the channel closed when it comes), else the
// budget's ticket and, for a probe, its start, for unreserve.
type reservation struct {
	wait   time.Duration
	probed <-chan struct{}
	ticket int64
	probe  int64
}

// enqueue puts a request under key and rule in line: it returns the key's
// state, and, when the request is the head at once, a nil waiter and
// reserve's answer (taken under the same lock), else its waiter, whose
// turn is closed when it becomes the head.
func (sh *shard) enqueue(key, rule string, now int64) (*keyState, *waiter, reservation) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	ks := sh.state(key, now)
	i := ks.find(rule)
	if i < 0 {
		ks.queues = append(ks.queues, queue{rule: rule, busy: true})
		return ks, nil, ks.reserve(now)
	}
	q := &ks.queues[i]
	if !q.busy {
		q.busy = true
		return ks, nil, ks.reserve(now)
	}
	w := &waiter{turn: make(chan struct{})}
	if q.tail == nil {
		q.head, q.tail = w, w
	} else {
		w.prev, q.tail.next, q.tail = q.tail, w, w
	}
	return ks, w, reservation{}
}

// leave takes a request out of line: w (nil: the head) leaves, and when it
// was the head the next in line becomes the head at once. An empty queue
// is dropped, and the key's state when idle.
func (sh *shard) leave(key string, ks *keyState, rule string, w *waiter, now int64) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	i := ks.find(rule)
	q := &ks.queues[i]
	if w != nil && !w.isHead {
		if w.prev != nil {
			w.prev.next = w.next
		} else {
			q.head = w.next
		}
		if w.next != nil {
			w.next.prev = w.prev
		} else {
			q.tail = w.prev
		}
		return
	}
	if next := q.head; next != nil {
		q.head = next.next
		if q.head != nil {
			q.head.prev = nil
		} else {
			q.tail = nil
		}
		next.next, next.isHead = nil, true
		close(next.turn)
		return
	}
	last := len(ks.queues) - 1
	ks.queues[i] = ks.queues[last]
	ks.queues[last] = queue{}
	ks.queues = ks.queues[:last] // the array stays for the key's next request
	sh.drop(key, ks, now)
}

// reserve returns how long the head must wait for the key's hold or
// budget; when it need not, it takes a start from the budget and counts the
// request in flight (undone by unreserve with the ticket when the request
// does not start after all).
func (sh *shard) reserve(ks *keyState, now int64) reservation {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return ks.reserve(now)
}

// reserve is shard.reserve with the shard's mutex held.
//
// A key whose upstream has reported a remaining count and which has no
// budget in force (none yet, or its window has ended) starts one request,
// the probe, and holds the others until an answer under the key is
// observed (whose count, or hold, then applies) or the probe is undone,
// or else until probeCap after the probe's start: from then on they start
// freely until the next Observe. Without the probe, every request waiting
// for a window's reset would start at the reset, before any answer could
// say how many the new window allows.
func (ks *keyState) reserve(now int64) reservation {
	if ks.hold > now {
		return reservation{wait: time.Duration(ks.hold - now)}
	}
	if ks.budgetEnd != 0 && ks.budgetEnd <= now {
		ks.budgetEnd, ks.budget = 0, 0
	}
	probe := int64(0)
	switch {
	case ks.budgetEnd != 0 && ks.budget <= 0:
		return reservation{wait: time.Duration(ks.budgetEnd - now)}
	case ks.budgetEnd != 0:
		ks.budget--
	case !ks.reports:
	case ks.probe == 0:
		ks.probe, probe = now, now
	case now < ks.probe+probeCap:
		if ks.probed == nil {
			ks.probed = make(chan struct{})
		}
		return reservation{wait: time.Duration(ks.probe + probeCap - now), probed: ks.probed}
	}
	ks.roll(now)
	ks.inflight[0]++
	ks.lastStart = now
	return reservation{ticket: ks.budgetEnd, probe: probe}
}

// unreserve undoes reserve's accounting of a request that did not start:
// r is its reservation.
func (sh *shard) unreserve(ks *keyState, r reservation) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if r.ticket != 0 && ks.budgetEnd == r.ticket {
		ks.budget++
	}
	if r.probe != 0 && ks.probe == r.probe {
		ks.probeDone()
	}
	ks.landed(false)
}

// probeDone ends the wait for the key's probe: the next request to reserve
// (when no budget is then in force) is the next probe. The shard's mutex
// is held.
func (ks *keyState) probeDone() {
	ks.probe = 0
	if ks.probed != nil {
		close(ks.probed)
		ks.probed = nil
	}
}

// roll starts a new generation of requests in flight every inflightTTL,
// forgetting those of the generation before the last.
func (ks *keyState) roll(now int64) {
	switch age := now - ks.genStart; {
	case age >= 2*inflightTTL:
		ks.inflight = [2]int64{}
	case age >= inflightTTL:
		ks.inflight = [2]int64{0, ks.inflight[0]}
	default:
		return
	}
	ks.genStart = now
}

// landed counts one request in flight less: of the older generation
// first when oldFirst (a response: the oldest requests tend to be answered
// first), else of the latest (a reservation just undone); none when none
// is counted.
func (ks *keyState) landed(oldFirst bool) {
	first, second := &ks.inflight[0], &ks.inflight[1]
	if oldFirst {
		first, second = second, first
	}
	switch {
	case *first > 0:
		*first--
	case *second > 0:
		*second--
	}
}

// flying is the number of requests counted in flight.
func (ks *keyState) flying() int64 { return ks.inflight[0] + ks.inflight[1] }

// limit applies a remaining count r > 0 whose window resets in reset. The
// state's mutex is held.
func (ks *keyState) limit(now, r int64, reset time.Duration) {
	end := now + int64(reset)
	b := max(r-ks.flying(), 0)
	if ks.budgetEnd <= now || end >= ks.budgetEnd+windowSlack {
		ks.budget, ks.budgetEnd = b, end // a newer window
		return
	}
	ks.budget = min(ks.budget, b)
}

// watchFreed returns the channel closed when a request under ks gives
// back a slot in this process.
func (sh *shard) watchFreed(ks *keyState) <-chan struct{} {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if ks.freed == nil {
		ks.freed = make(chan struct{})
	}
	return ks.freed
}

// freed wakes the requests under key waiting for a slot: one was given
// back.
func (sh *shard) freed(key string) {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if ks := sh.keys[key]; ks != nil && ks.freed != nil {
		close(ks.freed)
		ks.freed = nil
	}
}
