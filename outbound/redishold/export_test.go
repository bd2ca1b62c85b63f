package redishold

// WaitCalls waits for the calls s stopped waiting for to end.
func WaitCalls(s *Store) { s.inflight.Wait() }
