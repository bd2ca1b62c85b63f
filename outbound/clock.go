package outbound

import (
	"context"
	"time"

	"github.com/rlkit/rlkit/core/store"
)

// Clock is the time of waits: the current instant and timers. SystemClock
// is the real one (which testing/synctest fakes too); a test may give its
// own, whose timers fire as its time moves.
type Clock interface {
	Now() time.Time
	// NewTimer returns a channel that receives once d has passed, and a
	// function that stops the timer (reporting whether it had not fired).
	NewTimer(d time.Duration) (<-chan time.Time, func() bool)
}

// SystemClock is the real time: time.Now and time.NewTimer.
var SystemClock Clock = systemClock{}

type systemClock struct{}

func (systemClock) Now() time.Time { return time.Now() }

func (systemClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	t := time.NewTimer(d)
	return t.C, t.Stop
}

// CoreClock returns c as a store.Clock (Unix nanoseconds), for a store
// (memstore.WithClock) or a core limiter that must read the same time as a
// Limiter's waits.
func CoreClock(c Clock) store.Clock { return coreClock{c} }

type coreClock struct{ c Clock }

func (c coreClock) Now() int64 { return c.c.Now().UnixNano() }

// Sleep waits d on c's timer, or until ctx is done, and returns ctx.Err()
// then (at once, without a timer, when d ≤ 0).
func Sleep(ctx context.Context, c Clock, d time.Duration) error { return sleepOr(ctx, c, d, nil) }

// sleepOr is Sleep that also ends, with nil, when wake (nil: never) is
// closed.
func sleepOr(ctx context.Context, c Clock, d time.Duration, wake <-chan struct{}) error {
	if d <= 0 {
		return ctx.Err()
	}
	ch, stop := c.NewTimer(d)
	select {
	case <-ch:
		return nil
	case <-wake:
		stop()
		return nil
	case <-ctx.Done():
		stop()
		return ctx.Err()
	}
}
