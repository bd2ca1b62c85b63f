package worksclient

import (
	"context"
	"time"

	"github.com/rlkit/rlkit/outbound"
)

// DefaultInterval is the spacing of request starts per key when none is
// given: 250 ms, that is 240 requests a minute, the Works API's limit per
// API.
const DefaultInterval = 250 * time.Millisecond

// RateLimiter paces the starts of requests per key. Tests and special
// callers inject their own; Pacer (one process) and worksredis.Pacer
// (several processes, through Redis) are the two of this module.
type RateLimiter interface {
	// Wait blocks until a request under key may start, and returns nil
	// then: the caller starts it at once. When ctx is done first, Wait
	// returns ctx.Err() at once and the request takes no slot. An
	// implementation may also fail for its own reasons (worksredis.Pacer
	// when Redis does); the request must not be sent then.
	Wait(ctx context.Context, key string) error
}

// Delayer is implemented by a RateLimiter that can hold a key back, as a
// Transport asks it to when a response carries Retry-After: no request
// under key starts until d from now has passed. A shorter or earlier hold
// than one already in place changes nothing. It is outbound's Delayer.
type Delayer = outbound.Delayer

// Clock is the time of a Pacer: the current instant and timers. SystemClock
// is the real one (which testing/synctest fakes too); a test may give its
// own, whose timers fire as its time moves. It is outbound's Clock.
type Clock = outbound.Clock

// SystemClock is the real time: time.Now and time.NewTimer.
var SystemClock = outbound.SystemClock
