package redisstore

// Queued returns how many decisions wait in the queues of s's nodes.
func Queued(s *Store) int {
	n := 0
	count := func(nd *node) {
		nd.q.mu.Lock()
		n += len(nd.q.waiting)
		nd.q.mu.Unlock()
	}
	if s.nodes.single != nil {
		count(s.nodes.single)
	}
	for _, nd := range *s.nodes.m.Load() {
		count(nd)
	}
	return n
}

// Batching reports whether s still batches (the server did not refuse the
// batch script).
func Batching(s *Store) bool { return s.batch > 1 && !s.noBatch.Load() }

// BatchSHA is the SHA-1 of the batch script.
var BatchSHA = batchScript.sha.(string)

// Lanes is how many calls of decisions go to one node at once.
func Lanes() int { return batchLanes }

// ScriptSources returns the source of every decision script and of the
// batch script, for tests that load them beforehand.
func ScriptSources() []string {
	out := []string{batchScript.src}
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
