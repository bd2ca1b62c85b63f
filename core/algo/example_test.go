package algo_test

import (
	"fmt"
	"time"

	"github.com/rlkit/rlkit/core/algo"
)

// Take is a pure function: the caller keeps the State and passes the
// instant. Here a fixed window of 3 per minute, at fixed instants.
func ExampleTake() {
	l := algo.Limit{Count: 3, Period: time.Minute}
	t0 := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	var s algo.State // the zero State is a fresh counter
	for _, at := range []time.Duration{0, 10 * time.Second, 20 * time.Second, 30 * time.Second, 60 * time.Second} {
		var o algo.Outcome
		s, o = algo.Take(algo.FixedWindow, s, l, t0.Add(at).UnixNano(), 1)
		fmt.Printf("+%v: allowed=%v remaining=%d retry=%v\n", at, o.Allowed, o.Remaining, time.Duration(o.RetryAfter))
	}
	// Output:
	// +0s: allowed=true remaining=2 retry=0s
	// +10s: allowed=true remaining=1 retry=0s
	// +20s: allowed=true remaining=0 retry=0s
	// +30s: allowed=false remaining=0 retry=30s
	// +1m0s: allowed=true remaining=2 retry=0s
}

func ExampleParseLimit() {
	for _, s := range []string{"10/second", "500/hour", "100/5min", "10/fortnight"} {
		l, err := algo.ParseLimit(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(l.Count, l.Period, l)
	}
	// Output:
	// 10 1s 10/second
	// 500 1h0m0s 500/hour
	// 100 5m0s 100/5m
	// limit "10/fortnight": unknown unit "fortnight" (want second, minute, hour or day)
}

func ExampleParsePeriod() {
	d, err := algo.ParsePeriod("15min")
	fmt.Println(d, err)
	// Output:
	// 15m0s <nil>
}

// A calendar limit counts per day (month, year) of a time zone: here 2 a
// day in New York around 2025-03-09, which has 23 hours. The caller finds
// the period holding each instant with Periods (a store keeps it until
// the clock leaves it) and counts in it with ApplyCalendar.
func ExampleApplyCalendar() {
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		fmt.Println(err)
		return
	}
	l, _ := algo.ParseCalendarLimit("2/day")
	var s algo.State
	for _, at := range []string{"2025-03-08 23:00", "2025-03-08 23:30", "2025-03-08 23:45", "2025-03-09 00:00"} {
		t, _ := time.ParseInLocation("2006-01-02 15:04", at, ny)
		now := t.UnixNano()
		ps := l.Calendar.Periods(now, ny)
		var o algo.Outcome
		algo.ApplyCalendar(&s, &l, &ps, now, 1, &o)
		fmt.Printf("%s: allowed=%v remaining=%d retry=%v day=%v\n", at, o.Allowed, o.Remaining, time.Duration(o.RetryAfter), time.Duration(ps.End-ps.Start))
	}
	// Output:
	// 2025-03-08 23:00: allowed=true remaining=1 retry=0s day=24h0m0s
	// 2025-03-08 23:30: allowed=true remaining=0 retry=0s day=24h0m0s
	// 2025-03-08 23:45: allowed=false remaining=0 retry=15m0s day=24h0m0s
	// 2025-03-09 00:00: allowed=true remaining=1 retry=0s day=23h0m0s
}

func ExampleParseCalendarLimit() {
	for _, s := range []string{"1000/day", "20000/month", "1/year", "10/minute"} {
		l, err := algo.ParseCalendarLimit(s)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(l.Count, l.Calendar, l)
	}
	// Output:
	// 1000 day 1000/day
	// 20000 month 20000/month
	// 1 year 1/year
	// limit "10/minute": a calendar window counts per day, month or year, not per "minute"
}
