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
