package memstore_test

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// TestConcurrentEvictionKeepsCountsExact: decisions on existing keys race
// with inserts that evict, with Reset and with Stats, from several
// goroutines at once (run it under -race), and no count is lost or doubled
// beyond what eviction promises. The clock stands still, so nothing
// refills. 50 users at their 5/hour limit are polled from two goroutines
// (not one is admitted again: at their limit they go last, and the flood's
// counters are below theirs); a hot key with 50,000 of its 100,000/hour
// left takes 40,000 requests from four goroutines, yielding often so that
// they interleave: every one is admitted and the key has exactly 10,000
// left (a lost update would leave more; half consumed, it ranks above the
// flood's counters and is never evicted); two goroutines flood
// a 2,000-key store with 20,000 identities each (every first request
// admitted), and one resets some of them and reads Stats. Every algorithm.
func TestConcurrentEvictionKeepsCountsExact(t *testing.T) {
	const (
		users     = 50
		userLimit = 5
		hotLimit  = 100_000
		hotLeft   = 50_000
		hotTakers = 4
		hotEach   = 10_000
		flooders  = 2
		floodEach = 20_000
		polls     = 200
	)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			clock := store.NewManualClock(t0)
			s := memstore.New(memstore.WithMaxKeys(2000), memstore.WithShards(4), memstore.WithClock(clock))
			p := pol("hourly", a, "5/hour")
			hotP := pol("hot", a, "100000/hour")
			for u := range users {
				for i := range userLimit + 1 {
					if r, _ := s.Take(ctx, "user-"+strconv.Itoa(u), p, 1); r.Allowed != (i < userLimit) {
						t.Fatalf("user %d, request %d: allowed %v", u, i, r.Allowed)
					}
				}
			}
			if r, _ := s.Take(ctx, "hot", hotP, hotLimit-hotLeft); !r.Allowed || r.Remaining != hotLeft {
				t.Fatalf("hot key's first take: %+v", r)
			}

			var (
				wg                 sync.WaitGroup
				userAdmits, hotAdm atomic.Int64
				floodDenied        atomic.Int64
				start, stop        = make(chan struct{}), make(chan struct{})
			)
			for range 2 {
				wg.Go(func() {
					<-start
					for range polls {
						for u := range users {
							if r, _ := s.Take(ctx, "user-"+strconv.Itoa(u), p, 1); r.Allowed {
								userAdmits.Add(1)
							}
						}
					}
				})
			}
			for range hotTakers {
				wg.Go(func() {
					<-start
					for i := range hotEach {
						if r, _ := s.Take(ctx, "hot", hotP, 1); r.Allowed {
							hotAdm.Add(1)
						}
						if i%8 == 0 {
							runtime.Gosched()
						}
					}
				})
			}
			var flood sync.WaitGroup
			for g := range flooders {
				flood.Go(func() {
					<-start
					for i := range floodEach {
						if r, _ := s.Take(ctx, "flood-"+strconv.Itoa(g)+"-"+strconv.Itoa(i), p, 1); !r.Allowed {
							floodDenied.Add(1)
						}
					}
				})
			}
			wg.Go(func() {
				<-start
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_, _ = s.Reset(ctx, "flood-0-"+strconv.Itoa(i), p)
					if st := s.Stats(); st.Keys > st.MaxKeys {
						t.Errorf("Stats: %d keys held, bound %d", st.Keys, st.MaxKeys)
					}
				}
			})
			close(start)
			flood.Wait()
			close(stop)
			wg.Wait()

			if n := userAdmits.Load(); n != 0 {
				t.Errorf("users at their limit admitted %d more times, want 0", n)
			}
			if n := hotAdm.Load(); n != hotTakers*hotEach {
				t.Errorf("hot key admitted %d times, want %d", n, hotTakers*hotEach)
			}
			if r, _ := s.Peek(ctx, "hot", hotP, 0); r.Remaining != hotLeft-hotTakers*hotEach {
				t.Errorf("hot key has %d left, want %d", r.Remaining, hotLeft-hotTakers*hotEach)
			}
			if n := floodDenied.Load(); n != 0 {
				t.Errorf("%d first requests of flood identities denied, want 0", n)
			}
			if st := s.Stats(); st.Evictions == 0 || st.Keys > st.MaxKeys {
				t.Errorf("Stats after the flood: %+v; want evictions, at most MaxKeys keys", st)
			}
			for u := range users {
				if r, _ := s.Take(ctx, "user-"+strconv.Itoa(u), p, 1); r.Allowed {
					t.Errorf("user %d admitted after the flood", u)
				}
			}
		})
	}
}
