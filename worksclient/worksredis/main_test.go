package worksredis

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// TestMain checks that no test leaves a goroutine behind: no renewal loop,
// no waiter, no connection.
func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the fault tests cause many.
	redis.SetLogger(quiet{})
	goleak.VerifyTestMain(m)
}
