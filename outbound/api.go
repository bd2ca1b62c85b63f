package outbound

import (
	"context"
	"time"
)

// Waiter decides when a request may start. method is the HTTP method
// (gRPC: "POST"), path the escaped path (gRPC: the full method
// "/pkg.Service/Method"), key the rate-limit key. Wait returns nil when
// the request may start at once; when ctx is done first it returns
// ctx.Err() at once and the request takes no slot. An implementation may
// also fail for its own reasons (a store that fails closed, a request that
// can never be admitted); the request must not be sent then.
type Waiter interface {
	Wait(ctx context.Context, method, path, key string) error
}

// Starter is a Waiter whose requests may hold something while in flight:
// a slot of a rule's concurrency limit (core.RuleSpec.Concurrent), under
// which at most that many requests of a key are in flight at once
// (Limiter is one). Start waits as Wait does and returns done, which the
// caller calls once the request is over: its response body closed, or no
// response. done is never nil when err is nil, and calls after the first
// do nothing. A Transport calls Start, not Wait, on a Waiter that is a
// Starter.
type Starter interface {
	Waiter
	Start(ctx context.Context, method, path, key string) (done func(), err error)
}

// Delayer holds a key back: no request under key starts until d from now
// has passed. A shorter or earlier hold than one already in place changes
// nothing.
type Delayer interface {
	Delay(ctx context.Context, key string, d time.Duration) error
}

// Observer is implemented by a Waiter that adapts to what upstreams say
// (Limiter does). Observe is told, once per request that Wait let start
// under key, what its response said (ReadSignal); a request that got no
// response is reported with a zero Signal, so that the Observer knows it
// is no longer in flight.
type Observer interface {
	Observe(ctx context.Context, key string, s Signal)
}

// HoldStore shares holds (and so the slow-downs an upstream asks for)
// between processes: a Limiter given one (WithHoldStore) writes every hold
// there and asks it before each start. The key it gets is the store key
// (core.Limiter.Key): bounded in length, and a core.SecretIdentity as its
// keyed hash, never the secret. Package outbound/redishold holds them in
// Redis.
type HoldStore interface {
	// Hold holds key back for d from now, keeping the later of this
	// hold and one already in place.
	Hold(ctx context.Context, key string, d time.Duration) error
	// Held returns the time left on key's hold, 0 if none.
	Held(ctx context.Context, key string) (time.Duration, error)
}
