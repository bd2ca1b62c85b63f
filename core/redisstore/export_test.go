package redisstore

// eachQueue calls fn with the queue of each of s's nodes, locked.
func eachQueue(s *Store, fn func(q *queue)) {
	visit := func(nd *node) {
		nd.q.mu.Lock()
		fn(&nd.q)
		nd.q.mu.Unlock()
	}
	if s.nodes.single != nil {
		visit(s.nodes.single)
	}
	for _, nd := range *s.nodes.m.Load() {
		visit(nd)
	}
}

// Queued returns how many decisions wait in the queues of s's nodes.
func Queued(s *Store) int {
	n := 0
	eachQueue(s, func(q *queue) { n += len(q.waiting) })
	return n
}

// Idle reports whether no call of decisions is in flight to any node of
// s (every lane has ended).
func Idle(s *Store) bool {
	idle := true
	eachQueue(s, func(q *queue) { idle = idle && q.inflight == 0 })
	return idle
}

// Batching reports whether s still batches (the server did not refuse the
// batch script).
func Batching(s *Store) bool { return s.batch > 1 && !s.noBatch.Load() }

// BatchSHA is the SHA-1 of the batch script.
var BatchSHA = batchScript.sha.(string)

// Lanes is how many calls of decisions go to one node at once.
func Lanes() int { return batchLanes }

// StackSHAs are the SHA-1s of the stack scripts: the one of one hash
// slot, and the one of several.
var StackSHAs = [2]string{stackScripts[0].sha.(string), stackScripts[1].sha.(string)}

// ScriptSources returns the source of every decision script, of the
// batch script and of the stack scripts, for tests that load them
// beforehand.
func ScriptSources() []string {
	out := []string{batchScript.src, stackScripts[0].src, stackScripts[1].src}
	for _, sc := range decision {
		out = append(out, sc.src)
	}
	return out
}

// SetLanes sets how many calls of decisions go to one node at once, for
// benchmarks; it returns the previous value.
func SetLanes(n int) int {
	old := batchLanes
	batchLanes = n
	return old
}
