package worksredis

import (
	"context"
	"os"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redistest"
)

// redisClients returns n clients (n connection pools, as n processes would
// have) of one fresh Redis: a real redis-server when one is installed,
// else miniredis, unless RLKIT_REQUIRE_REDIS=1 makes that a failure.
func redisClients(t *testing.T, n int) ([]*redis.Client, string) {
	t.Helper()
	cs := make([]*redis.Client, n)
	if redistest.Available() {
		s := redistest.StartServer(t)
		for i := range cs {
			cs[i] = s.Client(t)
		}
		return cs, "redis-server"
	}
	if os.Getenv("RLKIT_REQUIRE_REDIS") == "1" {
		redistest.Require(t)
	}
	m := redistest.StartMini(t)
	for i := range cs {
		cs[i] = redis.NewClient(&redis.Options{Addr: m.Addr()})
		t.Cleanup(func() { _ = cs[i].Close() })
	}
	return cs, "miniredis"
}

// countHook counts the commands a client sends.
type countHook struct{ n atomic.Int64 }

func (h *countHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.n.Add(1)
		return next(ctx, cmd)
	}
}

func (h *countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.n.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

// firstCommand closes done when the client's first command has returned.
type firstCommand struct {
	once sync.Once
	done chan struct{}
}

func (h *firstCommand) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *firstCommand) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		if err == nil || !redis.HasErrorPrefix(err, "NOSCRIPT") {
			h.once.Do(func() { close(h.done) })
		}
		return err
	}
}

func (h *firstCommand) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}
