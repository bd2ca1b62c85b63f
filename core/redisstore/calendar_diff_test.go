package redisstore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
	_ "time/tzdata" // America/New_York, on machines without a zone database

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// TestDifferentialCalendar runs the calendar script (in miniredis, whose
// clock the test sets) and store.Evaluate side by side on random traffic
// over five weeks of New York time, across both of its daylight-saving
// changes in 2025 (a day of 23 hours, one of 25), month ends and a year
// end, with the store's own clock up to 20 hours ahead of the server's or
// behind it; every decision, count and duration must be the same.
func TestDifferentialCalendar(t *testing.T) {
	t.Parallel()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		t.Fatal(err)
	}
	m := miniredis.RunT(t)
	client := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = client.Close() })
	clock := store.NewManualClock(time.Unix(0, 0))
	st, err := New(client, WithDenyCache(false), WithTimeout(time.Second), WithClock(clock))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	rng := rand.New(rand.NewPCG(5, 6))
	for _, start := range []time.Time{
		time.Date(2025, 2, 20, 0, 0, 0, 0, ny),  // March 9th: 23 hours
		time.Date(2025, 10, 20, 0, 0, 0, 0, ny), // November 2nd: 25 hours
		time.Date(2024, 12, 10, 0, 0, 0, 0, ny), // a year end
	} {
		for _, limits := range [][]string{{"4/day"}, {"3/day", "20/month"}, {"6/day", "40/month", "200/year"}} {
			t.Run(fmt.Sprintf("%s/%v", start.Format(time.DateOnly), limits), func(t *testing.T) {
				p := &store.Policy{Name: t.Name(), Location: ny}
				for _, s := range limits {
					l, err := algo.ParseCalendarLimit(s)
					if err != nil {
						t.Fatal(err)
					}
					p.Limits = append(p.Limits, l)
				}
				var states [store.MaxLimits]algo.State
				var exp [store.MaxLimits]int64
				now := start
				for step := range 400 {
					now = now.Add(time.Duration(rng.Int64N(int64(5 * time.Hour)))).Truncate(time.Microsecond)
					m.SetTime(now)
					clock.Set(now.Add(time.Duration(rng.Int64N(int64(40*time.Hour))) - 20*time.Hour))
					cost := rng.Int64N(4) // 0 (a peek) to 3
					if rng.IntN(20) == 0 {
						cost = 7 // above the day's count: never admitted
					}
					got, err := st.Take(context.Background(), "u", p, cost)
					if err != nil {
						t.Fatal(err)
					}
					want := store.Evaluate(p, &states, &exp, now.UnixNano(), cost)
					if got != want {
						t.Fatalf("step %d at %v (the store's clock %v), cost %d:\ngot  %+v\nwant %+v", step, now.In(ny), clock.Time().In(ny), cost, got, want)
					}
				}
			})
		}
	}
}
