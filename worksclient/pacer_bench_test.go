package worksclient_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/outbound"
	"github.com/rlkit/rlkit/worksclient"
)

// stepClock is a Clock whose time moves only when a benchmark moves it.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }
func (c *stepClock) NewTimer(time.Duration) (<-chan time.Time, func() bool) {
	panic("a free key needs no timer")
}

// BenchmarkPacerWait measures Wait on a key that is free (its interval
// has passed), the cost pacing adds to a request that does not wait: on
// one key, and on 1,000 keys in turn (a table that does not fit a cache
// line); next to its floor, the outbound.Limiter it configures, alone on
// a memory store. The clock is moved by hand, so no timer runs.
func BenchmarkPacerWait(b *testing.B) {
	for _, n := range []int{1, 1000} {
		b.Run(strconv.Itoa(n)+"keys/limiter", func(b *testing.B) {
			clk := &stepClock{now: time.Unix(1_800_000_000, 0)}
			cfg, err := outbound.Rate(1, time.Millisecond, 0)
			if err != nil {
				b.Fatal(err)
			}
			l, err := outbound.New(cfg, nil, outbound.WithClock(clk))
			if err != nil {
				b.Fatal(err)
			}
			benchWait(b, n, clk, func(ctx context.Context, key string) error { return l.Wait(ctx, "", "/", key) })
		})
		b.Run(strconv.Itoa(n)+"keys/pacer", func(b *testing.B) {
			clk := &stepClock{now: time.Unix(1_800_000_000, 0)}
			p := worksclient.NewPacer(time.Millisecond, worksclient.WithClock(clk))
			benchWait(b, n, clk, p.Wait)
		})
	}
}

// benchWait calls wait on n keys in turn, moving the clock one interval
// each round.
func benchWait(b *testing.B, n int, clk *stepClock, wait func(context.Context, string) error) {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = "GET /v1.0/users/" + strconv.Itoa(i)
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		if i%n == 0 {
			clk.now = clk.now.Add(time.Millisecond)
		}
		if err := wait(ctx, keys[i%n]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}
