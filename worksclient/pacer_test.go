package worksclient_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/worksclient"
)

const iv = 250 * time.Millisecond

// starts records when each Wait returned, per label, on the bubble's clock.
type starts struct {
	mu sync.Mutex
	at map[string][]time.Time
}

func newStarts() *starts { return &starts{at: make(map[string][]time.Time)} }

func (s *starts) add(label string) {
	s.mu.Lock()
	s.at[label] = append(s.at[label], time.Now())
	s.mu.Unlock()
}

func (s *starts) get(label string) []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.at[label]...)
}

func TestPacerSequentialSpacing(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := worksclient.NewPacer(iv)
		t0 := time.Now()
		for i := range 20 {
			if err := p.Wait(t.Context(), "GET /v1.0/users"); err != nil {
				t.Fatal(err)
			}
			if got, want := time.Since(t0), time.Duration(i)*iv; got != want {
				t.Fatalf("start %d at %v, want %v", i, got, want)
			}
		}
	})
}

// TestPacerConcurrentFIFO: requests waiting together start one interval
// apart, in the order they came, never two at once.
func TestPacerConcurrentFIFO(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := worksclient.NewPacer(iv)
		t0 := time.Now()
		var (
			mu    sync.Mutex
			order []int
			at    []time.Duration
			wg    sync.WaitGroup
		)
		for i := range 10 {
			wg.Go(func() {
				if err := p.Wait(t.Context(), "k"); err != nil {
					t.Error(err)
					return
				}
				mu.Lock()
				order, at = append(order, i), append(at, time.Since(t0))
				mu.Unlock()
			})
			synctest.Wait() // i is queued before i+1 comes
		}
		wg.Wait()
		for i := range order {
			if order[i] != i || at[i] != time.Duration(i)*iv {
				t.Fatalf("start %d: request %d at %v, want request %d at %v", i, order[i], at[i], i, time.Duration(i)*iv)
			}
		}
	})
}

// TestPacerKeysIndependent: a key's queue does not hold another key back.
func TestPacerKeysIndependent(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := worksclient.NewPacer(iv)
		t0 := time.Now()
		var wg sync.WaitGroup
		for range 5 { // a queue on "busy": the last waits 1s
			wg.Go(func() { _ = p.Wait(t.Context(), "busy") })
		}
		synctest.Wait()
		s := newStarts()
		for i := range 20 {
			key := fmt.Sprintf("key-%d", i)
			wg.Go(func() {
				if err := p.Wait(t.Context(), key); err != nil {
					t.Error(err)
				}
				s.add(key)
			})
		}
		wg.Wait()
		for i := range 20 {
			key := fmt.Sprintf("key-%d", i)
			if got := s.get(key); len(got) != 1 || !got[0].Equal(t0) {
				t.Errorf("%s started at %v, want at once", key, got)
			}
		}
		if got := time.Since(t0); got != 4*iv {
			t.Errorf("the queue of busy took %v, want %v", got, 4*iv)
		}
	})
}

// TestPacerCancelFreesSlot: a waiter whose context ends leaves at once
// with ctx.Err(), and the one behind it starts at the cancelled one's
// slot; this holds for the head of the queue and for a waiter inside it.
func TestPacerCancelFreesSlot(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cancel int // which of the three waiters behind the first is cancelled
	}{{"head", 0}, {"middle", 1}, {"tail", 2}} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				p := worksclient.NewPacer(iv)
				t0 := time.Now()
				if err := p.Wait(t.Context(), "k"); err != nil { // starts at t0
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				type result struct {
					err error
					at  time.Duration
				}
				results := make([]chan result, 3)
				for i := range results {
					results[i] = make(chan result, 1)
					c := t.Context()
					if i == tc.cancel {
						c = ctx
					}
					go func() {
						err := p.Wait(c, "k")
						results[i] <- result{err, time.Since(t0)}
					}()
					synctest.Wait()
				}
				time.Sleep(iv / 2)
				cancel()
				r := <-results[tc.cancel]
				if !errors.Is(r.err, context.Canceled) || r.at != iv/2 {
					t.Fatalf("cancelled Wait returned %v at %v, want %v at once (%v)", r.err, r.at, context.Canceled, iv/2)
				}
				slot := iv
				for i := range results {
					if i == tc.cancel {
						continue
					}
					r := <-results[i]
					if r.err != nil || r.at != slot {
						t.Errorf("waiter %d: %v at %v, want nil at %v", i, r.err, r.at, slot)
					}
					slot += iv
				}
				// The next request goes one interval after the last start.
				if err := p.Wait(t.Context(), "k"); err != nil || time.Since(t0) != slot {
					t.Errorf("next Wait: %v at %v, want nil at %v", err, time.Since(t0), slot)
				}
			})
		})
	}
}

// TestPacerDoneContext: a context done before Wait fails at once and takes
// no slot, even on a free key.
func TestPacerDoneContext(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := worksclient.NewPacer(iv)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		if err := p.Wait(ctx, "k"); !errors.Is(err, context.Canceled) {
			t.Fatalf("Wait = %v, want %v", err, context.Canceled)
		}
		t0 := time.Now()
		if err := p.Wait(t.Context(), "k"); err != nil || time.Since(t0) != 0 {
			t.Fatalf("Wait after a cancelled one: %v after %v, want nil at once", err, time.Since(t0))
		}
	})
}

// TestPacerDeadline: a waiter whose deadline comes before its slot fails
// with context.DeadlineExceeded at the deadline.
func TestPacerDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := worksclient.NewPacer(iv)
		_ = p.Wait(t.Context(), "k")
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
		defer cancel()
		if err := p.Wait(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) || time.Since(t0) != 100*time.Millisecond {
			t.Fatalf("Wait = %v after %v, want %v after 100ms", err, time.Since(t0), context.DeadlineExceeded)
		}
		if err := p.Wait(t.Context(), "k"); err != nil || time.Since(t0) != iv {
			t.Fatalf("next Wait: %v after %v, want nil at %v", err, time.Since(t0), iv)
		}
	})
}

// TestPacerDelay: a hold moves the key's next start, including the start of
// a request already asleep; a shorter hold changes nothing; other keys are
// not held.
func TestPacerDelay(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := worksclient.NewPacer(iv)
		t0 := time.Now()
		_ = p.Wait(t.Context(), "k") // t0
		done := make(chan time.Duration, 1)
		go func() {
			_ = p.Wait(t.Context(), "k") // asleep until t0+iv
			done <- time.Since(t0)
		}()
		synctest.Wait()
		_ = p.Delay(t.Context(), "k", 2*time.Second)
		_ = p.Delay(t.Context(), "k", time.Second) // shorter: no change
		_ = p.Delay(t.Context(), "k", -time.Second)
		if err := p.Wait(t.Context(), "other"); err != nil || time.Since(t0) != 0 {
			t.Fatalf("other key: %v after %v, want at once", err, time.Since(t0))
		}
		if got := <-done; got != 2*time.Second {
			t.Fatalf("held request started after %v, want 2s", got)
		}
		_ = p.Wait(t.Context(), "k")
		if got := time.Since(t0); got != 2*time.Second+iv {
			t.Fatalf("next start after %v, want %v", got, 2*time.Second+iv)
		}
	})
}

func TestPacerDefaultInterval(t *testing.T) {
	for _, d := range []time.Duration{0, -time.Second} {
		if got := worksclient.NewPacer(d).Interval(); got != 250*time.Millisecond {
			t.Errorf("NewPacer(%v).Interval() = %v, want 250ms", d, got)
		}
	}
	if got := worksclient.DefaultInterval; got != time.Minute/240 {
		t.Errorf("DefaultInterval = %v, want a minute / 240", got)
	}
}

// fakeClock is a Clock that moves only on Advance, firing the timers due.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	timers []*fakeTimer
}

type fakeTimer struct {
	at   time.Time
	ch   chan time.Time
	done bool
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	ft := &fakeTimer{at: c.now.Add(d), ch: make(chan time.Time, 1)}
	c.timers = append(c.timers, ft)
	return ft.ch, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		was := !ft.done
		ft.done = true
		return was
	}
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	for _, ft := range c.timers {
		if !ft.done && !ft.at.After(c.now) {
			ft.done = true
			ft.ch <- c.now
		}
	}
}

// TestPacerWithClock runs the pacer on a clock of its own, stepped by hand
// (synctest only tells when every goroutine is blocked).
func TestPacerWithClock(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := &fakeClock{now: time.Unix(1_800_000_000, 0)}
		p := worksclient.NewPacer(iv, worksclient.WithClock(clk))
		started := make(chan int, 3)
		for i := range 3 {
			go func() {
				if err := p.Wait(t.Context(), "k"); err != nil {
					t.Error(err)
				}
				started <- i
			}()
			synctest.Wait()
		}
		steps := []struct {
			advance time.Duration
			want    []int // who has started by then
		}{
			{0, []int{0}},
			{iv - 1, nil},
			{1, []int{1}},
			{iv / 2, nil},
			{iv / 2, []int{2}},
		}
		for i, st := range steps {
			clk.Advance(st.advance)
			synctest.Wait()
			var got []int
			for len(started) > 0 {
				got = append(got, <-started)
			}
			if fmt.Sprint(got) != fmt.Sprint(st.want) {
				t.Fatalf("step %d (+%v): started %v, want %v", i, st.advance, got, st.want)
			}
		}
	})
}

// TestPacerFreeKeyAllocs: a request on a free key costs no allocation.
func TestPacerFreeKeyAllocs(t *testing.T) {
	clk := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	p := worksclient.NewPacer(iv, worksclient.WithClock(clk))
	ctx := context.Background()
	_ = p.Wait(ctx, "GET /v1.0/users")
	allocs := testing.AllocsPerRun(100, func() {
		clk.Advance(iv)
		if err := p.Wait(ctx, "GET /v1.0/users"); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("Wait on a free key: %v allocations, want 0", allocs)
	}
}

// TestPacerLongInterval: any interval makes a Pacer (one past 2^60 ns is
// that), whose first start is free and whose second waits.
func TestPacerLongInterval(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		p := worksclient.NewPacer(1<<63 - 1)
		if got := p.Interval(); got != 1<<60 {
			t.Errorf("Interval() = %v, want 2^60ns", got)
		}
		if err := p.Wait(t.Context(), "k"); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Hour)
		defer cancel()
		if err := p.Wait(ctx, "k"); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second Wait = %v, want %v", err, context.DeadlineExceeded)
		}
	})
}
