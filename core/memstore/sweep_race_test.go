package memstore_test

import (
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// TestExactUnderSweepResetPeek: hot keys under a one-limit rule
// (lock-free path) and a two-limit rule (mutex path) are hammered from two
// goroutines while, at the same time, a third floods short-lived
// identities and resets some of them, a fourth sweeps again and again
// (moving the clock 1.1 s each time, so the flood expires: drop, index
// shrink, compaction; at most 200 times, less than one refill of the hot
// rules, 300/day),
// and a fifth peeks at the hot keys. Every algorithm; run under -race.
// Exactly the limit is admitted per hot key, and peeks consume nothing.
func TestExactUnderSweepResetPeek(t *testing.T) {
	const (
		hot   = 16
		limit = 300
		each  = 2 * limit // per taker and key: two takers, 4× the limit in all
	)
	for _, a := range algorithms {
		t.Run(a.String(), func(t *testing.T) {
			start := time.Unix(1_700_000_000, 0).Truncate(24 * time.Hour).Add(time.Second)
			clock := store.NewManualClock(start)
			s := memstore.New(memstore.WithMaxKeys(100_000), memstore.WithShards(4), memstore.WithClock(clock))
			one := pol("one", a, "300/day")
			two := pol("two", a, "300/day", "100000/7d")
			short := pol("short", a, "1/second")
			var (
				adm       [2][hot]atomic.Int64
				takers    sync.WaitGroup
				bg        sync.WaitGroup
				stop      atomic.Bool
				sweeps    atomic.Int64
				peekWrong atomic.Int64
			)
			key := func(k int) string { return "hot-" + strconv.Itoa(k) }
			// A burst first, so that the hot counters are created in high
			// cells and the first compaction moves them under the takers.
			for i := range 3000 {
				_, _ = s.Take(ctx, "b"+strconv.Itoa(i), short, 1)
			}
			for g := range 2 {
				takers.Go(func() {
					for i := range each {
						for k := range hot {
							kk := (k + g*5) % hot
							for j, p := range []*store.Policy{one, two} {
								if r, _ := s.Take(ctx, key(kk), p, 1); r.Allowed {
									adm[j][kk].Add(1)
								}
							}
						}
						if i%8 == 0 {
							runtime.Gosched()
						}
					}
				})
			}
			bg.Go(func() { // flood and reset
				for i := 0; !stop.Load(); i++ {
					k := "f" + strconv.Itoa(i)
					_, _ = s.Take(ctx, k, short, 1)
					if i%3 == 0 {
						_, _ = s.Reset(ctx, "f"+strconv.Itoa(i/2), short)
					}
				}
			})
			bg.Go(func() { // sweep, the flood expiring in between
				for !stop.Load() && sweeps.Load() < 200 {
					time.Sleep(2 * time.Millisecond)
					clock.Advance(1100 * time.Millisecond)
					s.Sweep()
					sweeps.Add(1)
				}
			})
			bg.Go(func() { // peeks consume nothing
				for i := 0; !stop.Load(); i++ {
					k := key(i % hot)
					for j, p := range []*store.Policy{one, two} {
						before := adm[j][i%hot].Load()
						r, _ := s.Peek(ctx, k, p, 1)
						// Remaining can only be at most what was left before
						// the admissions counted so far.
						if r.Remaining > limit-before {
							peekWrong.Add(1)
						}
					}
				}
			})
			takers.Wait()
			stop.Store(true)
			bg.Wait()
			if d := clock.Now() - start.UnixNano(); d > int64(4*time.Minute) {
				t.Fatalf("the clock moved %v: the hot windows may have ended", time.Duration(d))
			}
			for j := range 2 {
				for k := range hot {
					if got := adm[j][k].Load(); got != limit {
						t.Errorf("policy %d, hot key %d: %d admitted, want %d", j, k, got, limit)
					}
				}
			}
			for k := range hot {
				for _, p := range []*store.Policy{one, two} {
					if r, _ := s.Peek(ctx, key(k), p, 1); r.Allowed {
						t.Errorf("%s %s: a peek after the limit allows", p.Name, key(k))
					}
				}
			}
			if peekWrong.Load() != 0 {
				t.Errorf("peeks went wrong %d times", peekWrong.Load())
			}
			st := s.Stats()
			t.Logf("%d sweeps, Stats %+v", sweeps.Load(), st)
			if st.Evictions != 0 {
				t.Errorf("%d counters evicted: the exact counts above assume none (the store holds far more than the test's keys)", st.Evictions)
			}
		})
	}
}
