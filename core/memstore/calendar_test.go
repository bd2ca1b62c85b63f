package memstore_test

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // America/New_York, on machines without a zone database

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func calendarPolicy(t testing.TB, name string, loc *time.Location, limits ...string) *store.Policy {
	p := &store.Policy{Name: name, Location: loc}
	for _, s := range limits {
		l, err := algo.ParseCalendarLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Limits = append(p.Limits, l)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCalendarDayOfTwentyFiveHours counts a policy of one calendar limit
// across 2025-11-02 in New York,
// which has 25 hours: Take, Peek and the counter's expiry follow its
// midnights, and Retry-After ends at the next one.
func TestCalendarDayOfTwentyFiveHours(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Date(2025, 11, 2, 0, 0, 0, 0, ny))
	s := memstore.New(memstore.WithClock(clock))
	p := calendarPolicy(t, "day", ny, "2/day")
	h := time.Hour
	step := func(what string, cost int64, allowed bool, remaining int64, retry, reset time.Duration) {
		t.Helper()
		r, err := s.Take(ctx, "u", p, cost)
		if err != nil || r.Allowed != allowed || r.Remaining != remaining || r.RetryAfter != retry || r.ResetAfter != reset {
			t.Fatalf("%s (%v): %+v, %v; want allowed=%v remaining=%d retry=%v reset=%v", what, clock.Time().In(ny), r, err, allowed, remaining, retry, reset)
		}
	}
	step("midnight", 1, true, 1, 0, 25*h)
	clock.Advance(2 * h) // 01:00 EST, the second one
	if r, _ := s.Peek(ctx, "u", p, 1); !r.Allowed || r.Remaining != 0 || r.ResetAfter != 23*h {
		t.Fatalf("Peek: %+v", r)
	}
	step("01:00 EST", 1, true, 0, 0, 23*h)
	step("over", 1, false, 0, 23*h, 23*h)
	if s.Len() != 1 {
		t.Fatalf("Len %d, want 1", s.Len())
	}
	clock.Advance(23*h - 1)
	step("the day's last nanosecond", 1, false, 0, 1, 1)
	s.Sweep()
	if s.Len() != 1 {
		t.Fatalf("Sweep dropped the counter before the day ended")
	}
	clock.Advance(1)
	s.Sweep()
	if s.Len() != 0 {
		t.Fatalf("Len %d after a Sweep at the next midnight, want 0 (the counter expired)", s.Len())
	}
	step("the next day", 2, true, 0, 0, 24*h)
}

func TestCalendarZeroAllocs(t *testing.T) {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Date(2025, 3, 9, 12, 0, 0, 0, ny))
	s := memstore.New(memstore.WithClock(clock))
	for _, p := range []*store.Policy{calendarPolicy(t, "one", ny, "1000000/day"), calendarPolicy(t, "two", ny, "1000000/day", "2000000/month")} {
		_, _ = s.Take(ctx, "u", p, 1)
		if n := testing.AllocsPerRun(1000, func() { _, _ = s.Take(ctx, "u", p, 1) }); n != 0 {
			t.Errorf("%s: %v allocs per decision, want 0", p.Name, n)
		}
		if n := testing.AllocsPerRun(1000, func() { _, _ = s.Peek(ctx, "u", p, 1) }); n != 0 {
			t.Errorf("%s: %v allocs per peek, want 0", p.Name, n)
		}
	}
}

// TestCalendarConcurrency sends 800 requests at one key of 100 a day from
// 16 goroutines, a new key each round (its counter created under the
// shard's mutex while others decide without it): exactly 100 admitted.
func TestCalendarConcurrency(t *testing.T) {
	s := memstore.New()
	p := calendarPolicy(t, "conc", time.UTC, "100/day")
	for round := range 20 {
		key := "k" + string(rune('a'+round))
		var admitted atomic.Int64
		var wg sync.WaitGroup
		for range 16 {
			wg.Go(func() {
				for range 50 {
					if r, _ := s.Take(ctx, key, p, 1); r.Allowed {
						admitted.Add(1)
					}
				}
			})
		}
		wg.Wait()
		if admitted.Load() != 100 {
			t.Fatalf("round %d: %d admitted, want 100", round, admitted.Load())
		}
	}
}
