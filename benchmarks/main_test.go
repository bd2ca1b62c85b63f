package benchmarks

import (
	"os"
	"sync"
	"testing"

	"github.com/rlkit/rlkit/benchmarks/internal/redisserver"
)

// requireRedisEnv, set to "1" (as CI does), turns a missing redis-server
// from a skipped Redis row into a failed one.
const requireRedisEnv = "RLKIT_REQUIRE_REDIS"

// The redis-server this test binary started, if any (see benchRedisAddr).
var ownRedis struct {
	once sync.Once
	srv  *redisserver.Server
	err  error
}

// benchRedisAddr returns the address of the redis-server every Redis row
// shares: $RLKIT_BENCH_REDIS_ADDR when set (cmd/report starts one server
// for all its runs), else one this test binary starts on a free loopback
// port on first use and stops when the binary exits (TestMain). Without
// redis-server in PATH it skips tb, or fails it when RLKIT_REQUIRE_REDIS=1.
func benchRedisAddr(tb testing.TB) string {
	tb.Helper()
	if addr := os.Getenv(redisserver.AddrEnv); addr != "" {
		return addr
	}
	needRedisServer(tb, "or "+redisserver.AddrEnv+" to use a running server")
	ownRedis.once.Do(func() { ownRedis.srv, ownRedis.err = redisserver.Start() })
	if ownRedis.err != nil {
		tb.Fatal(ownRedis.err)
	}
	return ownRedis.srv.Addr()
}

// needRedisServer skips tb when redis-server is not in PATH, or fails it
// when RLKIT_REQUIRE_REDIS=1; alt, when not empty, names another way out
// in the skip message.
func needRedisServer(tb testing.TB, alt string) {
	tb.Helper()
	if redisserver.Available() {
		return
	}
	if os.Getenv(requireRedisEnv) == "1" {
		tb.Fatalf("redis-server is required (%s=1) but not in PATH; install it, e.g. apt-get install redis-server", requireRedisEnv)
	}
	if alt != "" {
		alt = ", " + alt
	}
	tb.Skipf("redis-server not in PATH; skipping (set %s=1 to fail instead%s)", requireRedisEnv, alt)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if ownRedis.srv != nil {
		ownRedis.srv.Stop()
	}
	stopLoadServers()
	stopClusters()
	os.Exit(code)
}
