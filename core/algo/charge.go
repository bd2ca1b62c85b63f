package algo

// Charge consumes cost from state s at instant now whether or not the
// limit has room for it, and returns the next state and the units it
// consumed. It is for costs known only once a request has been served
// (the tokens an answer took, the bytes it sent): the request was
// admitted before, and its cost is due whatever it is.
//
// The consumption may go past the limit: the counter is then in debt, and
// Take refuses every request until time has paid the debt back and freed
// the request's cost. The debt is bounded: past the limit, a counter
// takes at most Count more units (one period's worth), and the rest of a
// larger cost is not consumed, so that a caller in debt waits at most
// about one period for a request of cost 1 (a token bucket or GCRA: the
// time Count units take to refill; a sliding window: until the weighted
// count has slid back under the limit), and no arithmetic overflows
// whatever cost is asked. A cost ≤ 0 consumes nothing.
//
// The debt stays in the state each algorithm already keeps: a token
// bucket owes more than its capacity, a GCRA's theoretical arrival time
// passes now plus its burst, a sliding window's current count passes
// Count and weighs on the next window as its previous count. A fixed
// window's count starts again at zero with each window: its debt lasts
// until the window's end only.
//
// The returned State is one Take reads back; ExpireAt is the instant from
// which it equals the zero State, as Outcome.ExpireAt is.
func Charge(a Algorithm, s State, l Limit, now, cost int64) (next State, charged, expireAt int64) {
	w := DebtLimit(a, l)
	var o Outcome
	room := s
	Apply(a, &room, &w, now, 0, &o) // Remaining: the units left before the debt's bound
	charged = min(max(cost, 0), o.Remaining)
	if charged == 0 {
		return s, 0, o.ExpireAt
	}
	Apply(a, &s, &w, now, charged, &o)
	return s, charged, o.ExpireAt
}

// DebtLimit is l with its capacity widened by Count, the most a counter
// may owe past l (see Charge): under it, a Take of cost 0 reports as
// Remaining the most a Charge may consume. The state words mean the same
// under both: only the comparison with the capacity changes. (Ports of
// Charge to other languages, such as the Redis store's Lua, use it.)
func DebtLimit(a Algorithm, l Limit) Limit {
	switch a {
	case TokenBucket, GCRA:
		l.Burst = l.Capacity(a) + l.Count
	default:
		l.Count *= 2
	}
	return l
}
