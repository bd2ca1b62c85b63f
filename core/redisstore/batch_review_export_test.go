package redisstore

// Idle reports whether no call of decisions is in flight to any node of
// s (every lane has ended).
func Idle(s *Store) bool {
	idle := true
	check := func(nd *node) {
		nd.q.mu.Lock()
		idle = idle && nd.q.inflight == 0
		nd.q.mu.Unlock()
	}
	if s.nodes.single != nil {
		check(s.nodes.single)
	}
	for _, nd := range *s.nodes.m.Load() {
		check(nd)
	}
	return idle
}
