package redisstore

import (
	"cmp"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/store"
)

var _ store.MultiTaker = (*Store)(nil)

// stackTake is one take of TakeAll, prepared: its plan, its first
// limit's key in Redis, its script arguments after the cost, and its cost.
type stackTake struct {
	pl   *plan
	key  string
	tail []any
	cost int64
}

// stackGroup is the takes of TakeAll that one call carries: those of one
// node (of one hash slot, when split) and what the call answered.
type stackGroup struct {
	n     *node
	takes [store.MaxTakes]uint8 // indexes into the takes
	count int
	// cross: the keys lie in several hash slots (a Cluster).
	cross bool
	// The take's answer: the server's time (µs), whether all admitted,
	// and per take its reply, the cost it answers and its marks (the
	// values its keys held after it, which its give-back needs); or err.
	at      int64
	allowed bool
	replies []any
	err     error
	// The give-back's answer, for a group that admitted when another did
	// not.
	back    []any
	backErr error
}

// TakeAll implements store.MultiTaker. The takes of one node go in one
// script call, atomic: on a Client (standalone, Sentinel), every take; on
// a ClusterClient, the takes whose keys one master serves, in several
// hash slots of it too (the stack script declares allow-cross-slot-keys,
// Redis 7.0; an older server is sent one call per hash slot). Takes on
// several masters (or Ring shards) go in one call per node, one node after
// another, until one denies (or fails): the nodes before it give back what
// they took, each with a second call, and the nodes after it are read at
// cost 0 (see the package documentation for the bound that leaves). A take that the deny cache denies refuses
// the request without taking anything: the other takes are then read at
// cost 0 (one call per node, which consumes nothing) for their state as it
// stands, and none at all when every take was denied there; the denials
// a call learns are cached as Take's are. When a node denies and a read
// at cost 0 fails, the denial is the answer (with no error), and the
// takes left unread answer Allowed, with each limit's count as
// remaining. Its errors are Take's, and
// store.ErrBadPolicy for no takes, more than store.MaxTakes, fewer
// results than takes, or a take without a policy.
func (s *Store) TakeAll(ctx context.Context, takes []store.Take, results []store.Result) (bool, error) {
	if s.closed.Load() {
		return false, ErrClosed
	}
	n := len(takes)
	if n == 0 || n > store.MaxTakes || len(results) < n {
		return false, fmt.Errorf("redisstore: %d takes for %d results (1 to %d takes, a result each): %w", n, len(results), store.MaxTakes, store.ErrBadPolicy)
	}
	var st [store.MaxTakes]stackTake
	now := s.clock.Now()
	cached := false
	for i, tk := range takes {
		if tk.Policy == nil {
			return false, fmt.Errorf("redisstore: take %d has no policy: %w", i, store.ErrBadPolicy)
		}
		pl, err := s.plan(tk.Policy)
		if err != nil {
			return false, err
		}
		t := &st[i]
		t.pl, t.cost = pl, max(tk.Cost, 0)
		t.key = redisKey(s.prefix, tk.Key, pl.rule)
		t.tail = pl.tailAt(tk.Policy, now)
		if s.deny != nil && t.cost > 0 && s.deny.get(takeDenyKey(tk), tk.Policy.Fingerprint(), t.cost, now, &results[i]) {
			st[i].pl = nil // answered
			cached = true
		}
	}
	if cached {
		s.standing(ctx, takes, st[:n], results)
		return false, nil
	}
	resets := s.resets.Load()
	allowed, err := s.takeAll(ctx, takes, st[:n], results)
	if err != nil || allowed || s.deny == nil || s.resets.Load() != resets {
		return allowed, err
	}
	for i, tk := range takes {
		if r := &results[i]; !r.Allowed && st[i].cost > 0 && !sharesCounter(takes[:i], tk) {
			s.deny.put(takeDenyKey(tk), tk.Policy.Fingerprint(), st[i].cost, now, r, s.takeAllKeep())
		}
	}
	return false, nil
}

// standing answers the takes that the deny cache did not deny (those
// whose plan st holds) with their state as it stands: the same takes at
// cost 0, which consume nothing, in one call per node. When that fails,
// they answer as unread.
func (s *Store) standing(ctx context.Context, takes []store.Take, st []stackTake, results []store.Result) {
	var sub [store.MaxTakes]store.Take
	var subSt [store.MaxTakes]stackTake
	var subRes [store.MaxTakes]store.Result
	var from [store.MaxTakes]int
	n := 0
	for i := range st {
		if st[i].pl != nil {
			sub[n], subSt[n], from[n] = takes[i], st[i], i
			sub[n].Cost, subSt[n].cost = 0, 0
			n++
		}
	}
	if n == 0 {
		return
	}
	if _, err := s.takeAll(ctx, sub[:n], subSt[:n], subRes[:n]); err != nil {
		for j := range n {
			subRes[j] = unread(sub[j].Policy)
		}
	}
	for j := range n {
		results[from[j]] = subRes[j]
	}
}

// standingOf answers the takes of the groups gs, which a refused request
// did not ask (an earlier node refused it), with their state as it stands
// (standing).
func (s *Store) standingOf(ctx context.Context, takes []store.Take, st []stackTake, gs []stackGroup, results []store.Result) {
	var rest [store.MaxTakes]stackTake // st's takes of gs; the others without a plan
	for gi := range gs {
		for _, i := range gs[gi].takes[:gs[gi].count] {
			rest[i] = st[i]
		}
	}
	s.standing(ctx, takes, rest[:len(st)], results)
}

// takeDenyKey is the deny cache's key of a take.
func takeDenyKey(tk store.Take) denyKey {
	return denyKey{rule: tk.Policy.CounterID(0), key: tk.Key}
}

// sharesCounter reports whether a take before tk counts tk's key under
// tk's first counter: tk was then decided after that take, which a
// request of tk alone is not, and its denial is not cached.
func sharesCounter(before []store.Take, tk store.Take) bool {
	k := takeDenyKey(tk)
	for _, b := range before {
		if takeDenyKey(b) == k {
			return true
		}
	}
	return false
}

// unread is the answer of a take whose state TakeAll could not read (its
// node failed while another denied): Allowed, with each limit's count as
// remaining.
func unread(p *store.Policy) store.Result {
	r := store.Result{Allowed: true, Remaining: -1}
	for i, l := range p.Limits[:min(len(p.Limits), store.MaxLimits)] {
		r.Limits[i].Remaining = l.Count
		if r.Remaining < 0 || l.Count < r.Remaining {
			r.Limit, r.Remaining = l, l.Count
		}
	}
	return r
}

// takeAll runs the takes in Redis, one call per group, and gives back
// what the groups that admitted took when another did not admit. A group
// whose keys lie in several hash slots that the server cannot run as one
// call (a server that refuses the shebang, slots that move) consumed
// nothing: the takes are then given back and sent again, one call per
// hash slot.
func (s *Store) takeAll(ctx context.Context, takes []store.Take, st []stackTake, results []store.Result) (bool, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var buf [store.MaxTakes]stackGroup
	split := s.noBatch.Load()
	for {
		gs := s.group(ctx, takes, st, split, &buf)
		if err := s.anyOpen(gs); err != nil {
			return false, err
		}
		// One node after another, in the order of the takes (the rule that
		// applies, often the tightest, first), until one refuses or
		// fails: a request refused by one node takes nothing on the
		// nodes after it, so that its takes held on the others, which
		// may refuse requests of theirs until given back, are only those
		// of the nodes before.
		called := 0
		for called < len(gs) {
			g := &gs[called]
			s.stackCall(ctx, g, st, false, len(gs) > 1)
			called++
			if g.err != nil || !g.allowed {
				break
			}
		}
		denied, again := false, false
		var failed error
		for i := range gs[:called] {
			switch g := &gs[i]; {
			case g.err != nil:
				again = again || !split && g.cross && s.splits(g.err)
				failed = cmp.Or(failed, g.err)
			case !g.allowed:
				denied = true
			}
		}
		if !denied && failed == nil {
			return true, s.answers(takes, st, gs, results)
		}
		// Give back what the groups that admitted took, on a context
		// that the caller's end does not cancel.
		bctx := context.WithoutCancel(ctx)
		s.eachGroup(gs[:called], func(g *stackGroup) {
			if g.err == nil && g.allowed {
				s.stackCall(bctx, g, st, true, false)
			}
		})
		if called > 1 {
			s.gaveBack(takes, gs[:called])
		}
		switch {
		case again:
			split = true
		case denied:
			err := s.answers(takes, st, gs[:called], results)
			if called < len(gs) {
				s.standingOf(ctx, takes, st, gs[called:], results)
			}
			return false, err
		default:
			return false, failed
		}
	}
}

// splits reports whether err, the failure of a group's call whose keys
// lie in several hash slots, says that the server could not run it as
// one call and applied nothing: sent one call per hash slot, it may run.
func (s *Store) splits(err error) bool {
	ne, ok := err.(*NodeError)
	if !ok {
		return false
	}
	if e, ok := ne.Err.(scriptError); ok {
		return redirected(e)
	}
	return s.unbatchable(ne.Err)
}

// scriptError is the error a take met inside the stack script (its
// reply's text): an error reply of Redis, for errors.As and ErrorKind.
type scriptError string

func (e scriptError) Error() string { return string(e) }
func (scriptError) RedisError()     {}

var _ redis.Error = scriptError("")

// group puts each take into the group of its node (and of its hash slot,
// when split: takes of one caller's key share a slot) in buf, and returns
// the groups.
func (s *Store) group(ctx context.Context, takes []store.Take, st []stackTake, split bool, buf *[store.MaxTakes]stackGroup) []stackGroup {
	gs := buf[:0]
	now := s.clock.Now()
	for i := range st {
		n, _ := s.nodes.locate(ctx, st[i].key, now, s.timeout) // a failure is the call's
		j := 0
		for ; j < len(gs); j++ {
			if gs[j].n == n && (!split || takes[gs[j].takes[0]].Key == takes[i].Key) {
				break
			}
		}
		if j == len(gs) {
			gs = append(gs, stackGroup{n: n})
		}
		g := &gs[j]
		if g.count > 0 && takes[g.takes[0]].Key != takes[i].Key && s.nodes.cluster != nil {
			g.cross = true
		}
		g.takes[g.count] = uint8(i)
		g.count++
	}
	return gs
}

// anyOpen returns the error of the first group whose node's circuit is
// open: the request fails at once, as a take of that node alone does,
// without taking from the others only to give it back.
func (s *Store) anyOpen(gs []stackGroup) error {
	if len(gs) < 2 {
		return nil // the call fails fast on its own
	}
	now := s.clock.Now()
	for i := range gs {
		if gs[i].n.br.open(now) {
			return gs[i].n.openErr
		}
	}
	return nil
}

// eachGroup runs fn on every group, all at once.
func (s *Store) eachGroup(gs []stackGroup, fn func(g *stackGroup)) {
	var wg sync.WaitGroup
	for i := 1; i < len(gs); i++ {
		wg.Go(func() { fn(&gs[i]) })
	}
	if len(gs) > 0 {
		fn(&gs[0])
	}
	wg.Wait()
}

// stackCall sends g's takes to their node as one call of the stack
// script: the takes (asking for their marks, for a give-back, when
// marks is set), or (back) their give-back, and keeps its answer in g.
// The caller holds s.mu.
func (s *Store) stackCall(ctx context.Context, g *stackGroup, st []stackTake, back, marks bool) {
	sc := stackScripts[0]
	if g.cross {
		sc = stackScripts[1]
	}
	first := st[g.takes[0]].key
	mode, arg := int64(0), int64(0)
	switch {
	case back:
		mode, arg = 1, g.at
	case marks:
		arg = 1
	}
	args := make([]any, 0, 6+g.count*16)
	args = append(args, evalshaCmd, sc.sha, oneKey, first, mode, arg)
	for j, i := range g.takes[:g.count] {
		t := &st[i]
		args = append(args, int64(t.pl.algorithm)+1, int64(1+len(t.tail)), t.key, t.cost)
		args = append(args, t.tail...)
		var mk []any
		if back {
			mk, _ = g.replies[3*j+2].([]any)
		}
		args = append(args, int64(len(mk)))
		args = append(args, mk...)
	}
	v, err := s.stackReply(ctx, g, sc, first, args)
	switch {
	case back && err != nil:
		g.backErr = err
	case back:
		g.back = v
	case err != nil:
		g.err = err
	default:
		g.replies = v
	}
}

// stackReply runs one call of the stack script on the node of key first
// and checks its reply: {now, allowed, then per take its reply and cost}.
func (s *Store) stackReply(ctx context.Context, g *stackGroup, sc *script, first string, args []any) ([]any, error) {
	a, err := s.admit(ctx, first)
	if err != nil {
		return nil, err
	}
	v, err := s.callNode(ctx, a, sc, args)
	if err != nil {
		return nil, err
	}
	reply, ok := v.([]any)
	if len(reply) == 3 && ok {
		if msg, isText := reply[2].(string); isText && reply[1] == int64(-1) {
			return nil, &NodeError{Node: a.n.addr, Err: scriptError(msg)}
		}
	}
	if !ok || len(reply) != 2+3*g.count {
		return nil, &NodeError{Node: a.n.addr, Err: &kindError{fmt.Sprintf("redisstore: unexpected reply %T to %d stacked takes", v, g.count), "other"}}
	}
	at, ok1 := reply[0].(int64)
	all, ok2 := reply[1].(int64)
	if !ok1 || !ok2 {
		return nil, &NodeError{Node: a.n.addr, Err: &kindError{"redisstore: unexpected reply to stacked takes", "other"}}
	}
	g.at, g.allowed = at, all == 1
	return reply[2:], nil
}

// answers fills results from the groups' replies: a denying group's, a
// give-back's (the state as it stands), or, when its give-back failed, an
// admitting group's own (admitted, as taken); a failed group's takes
// answer as unread.
func (s *Store) answers(takes []store.Take, st []stackTake, gs []stackGroup, results []store.Result) error {
	for gi := range gs {
		g := &gs[gi]
		v := g.replies
		if g.err == nil && g.allowed && g.back != nil {
			v = g.back
		}
		for j, i := range g.takes[:g.count] {
			p := takes[i].Policy
			if g.err != nil {
				results[i] = unread(p)
				continue
			}
			cost, ok := v[3*j+1].(int64)
			if !ok {
				return fmt.Errorf("redisstore: unexpected reply element %T to a stacked take", v[3*j+1])
			}
			if err := parse(p, st[i].pl, v[3*j], cost, &results[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// heldKeep is the longest a store that has held takes of a refused
// request on one master while another refused it (see denyKeep) keeps a
// denial in its deny cache.
const heldKeep = 250 * time.Millisecond

// gaveBack records that the groups gs of a refused request, on several
// nodes, gave back what they took: a denial read meanwhile, here or in
// another process, may be one those takes caused and no longer holds.
// The given-back keys' denials are dropped here; and from now on the
// store keeps every denial, a Take's too, at most heldKeep (denyKeep),
// since other processes' give-backs are not seen here. (A denial a call
// reads meanwhile may still be cached, for heldKeep at most.)
func (s *Store) gaveBack(takes []store.Take, gs []stackGroup) {
	s.held.Store(true)
	if s.deny == nil {
		return
	}
	for gi := range gs {
		if g := &gs[gi]; g.err == nil && g.allowed {
			for _, i := range g.takes[:g.count] {
				s.deny.drop(takeDenyKey(takes[i]))
			}
		}
	}
}

// denyKeep is how long the deny cache may keep a denial less than its
// Retry-After: 0 (all of it) until the store has given back the takes of
// a stacked request across masters (gaveBack); heldKeep after.
func (s *Store) denyKeep() time.Duration {
	if s.held.Load() {
		return heldKeep
	}
	return 0
}

// takeAllKeep is denyKeep for the denials TakeAll learns: on a client of
// several nodes (a Cluster, a Ring), heldKeep from the start, since the
// takes another process holds on a master, for a request another master
// refused, may have caused them before this store ever gave back.
func (s *Store) takeAllKeep() time.Duration {
	if s.nodes.cluster != nil || s.nodes.ring != nil {
		return heldKeep
	}
	return s.denyKeep()
}
