package redisstore_test

import (
	"context"
	"os"
	"testing"

	"github.com/redis/go-redis/v9"
)

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func TestMain(m *testing.M) {
	// go-redis logs every failed dial; the fault tests cause many.
	redis.SetLogger(quiet{})
	if addr := os.Getenv(leaseHolderEnv); addr != "" {
		holdLeases(addr) // never returns
	}
	os.Exit(m.Run())
}
