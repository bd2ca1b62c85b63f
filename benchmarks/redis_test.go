package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/internal/redistest"
)

const (
	// Every participant admits redisLimitCount requests per redisLimitPeriod
	// (1,000,000 per second), far more than one redis-server on loopback can
	// serve, so every call admits and writes back. At 10^7 per 10 s
	// rlkit's Redis store counts every algorithm in microseconds (larger
	// limits make it count in coarser units; see redisstore's doc). The
	// peers get the same numbers.
	redisLimitCount  = 10_000_000
	redisLimitPeriod = 10 * time.Second

	// redisGoroutines is how many goroutines the par64 rows run.
	redisGoroutines = 64
	// redisPoolSize gives every client one connection per par64 goroutine,
	// so the parallel rows measure round trips, not waits for a connection.
	redisPoolSize = redisGoroutines

	// redisTimeout bounds each rlkit call as go-redis's default read and
	// write timeouts (5 s) bound the floor's and the peers' calls. The
	// store's own default (100 ms) is for production; on a loaded 2-core
	// machine a par64 burst now and then stalls one call (any client's,
	// the floor's too) past 100 ms, which would fail the row.
	redisTimeout = 5 * time.Second
)

var errDenied = errors.New("denied: the benchmark reached the limit and measured denials")

// redisOp is one call of a participant on its own key: one decision, or for
// the floor one script call. It returns an error when the call failed or the
// request was denied, so no row can measure failures or denials.
type redisOp func(ctx context.Context) error

// BenchmarkRedis measures one call against a real redis-server on loopback,
// side by side for rlkit's Redis store, two peer libraries and the floor
// that any script-based limiter pays. Every participant:
//
//   - has its own go-redis v9 client, built by newRedisClient with the same
//     options (PoolSize 64, ContextTimeoutEnabled, other options at their
//     defaults), its 64 connections open before any row starts;
//   - works on one key of its own ("bench-<participant>"), which every
//     call admits (see redisLimitCount). The keys hold only bytes that
//     rlkit's store writes into Redis keys as they are, like user IDs and
//     IPv4 addresses; a byte outside [0-9A-Za-z-._@+=/,!] (':' for one) is
//     escaped, which costs rlkit one more allocation;
//   - is warmed up (script loaded, rlkit's plan compiled) before the timer
//     starts.
//
// Rows, each as <participant>/seq (one goroutine, one call at a time) and
// <participant>/par64 (64 goroutines through b.RunParallel, calls
// overlapping on the 64 connections):
//
//   - floor/raw-evalsha: client.EvalSha of `return 1` with one key and one
//     argument. One round trip, a script that does nothing: what every
//     script-based limiter pays at least with this client and this server.
//   - rlkit/<algorithm> (fixed_window, sliding_window, token_bucket, gcra):
//     redisstore.Store.Take(ctx, key, policy, 1), deny cache off (so every
//     call is a round trip), timeout 5 s (see redisTimeout), other store
//     options at their defaults.
//   - ulule/fixed_window: github.com/ulule/limiter/v3 Limiter.Get over its
//     drivers/store/redis store (INCRBY and PEXPIRE in a script).
//   - redis_rate/gcra: github.com/go-redis/redis_rate/v10 Limiter.Allow
//     (GCRA in a script), Rate and Burst redisLimitCount per
//     redisLimitPeriod.
//
// A participant's overhead is its row over the floor row of the same mode.
//
// All rows share one redis-server, started when BenchmarkRedis starts and
// killed when it ends (go test calls BenchmarkRedis once, whatever -count:
// -count repeats the rows inside it). Without redis-server in PATH the rows
// are skipped, or fail when RLKIT_REQUIRE_REDIS=1.
func BenchmarkRedis(b *testing.B) {
	srv := redistest.StartServer(b)
	addr := srv.Addr()

	b.Run("floor", func(b *testing.B) {
		runRedis(b, addr, "raw-evalsha", func(b *testing.B, c *redis.Client) redisOp {
			sha, err := c.ScriptLoad(context.Background(), "return 1").Result()
			if err != nil {
				b.Fatal(err)
			}
			keys := []string{"bench-floor"}
			return func(ctx context.Context) error {
				v, err := c.EvalSha(ctx, sha, keys, 1).Result()
				if err != nil {
					return err
				}
				if v != int64(1) {
					return fmt.Errorf("EVALSHA returned %v, want 1", v)
				}
				return nil
			}
		})
	})

	b.Run("rlkit", func(b *testing.B) {
		for _, alg := range []core.Algorithm{core.FixedWindow, core.SlidingWindow, core.TokenBucket, core.GCRA} {
			runRedis(b, addr, alg.String(), func(b *testing.B, c *redis.Client) redisOp {
				s, err := redisstore.New(c,
					redisstore.WithDenyCache(false),
					redisstore.WithTimeout(redisTimeout))
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				p := &core.Policy{
					Name:      "bench-" + alg.String(),
					Algorithm: alg,
					Limits:    []core.Limit{{Count: redisLimitCount, Period: redisLimitPeriod}},
				}
				key := "bench-rlkit-" + alg.String()
				return func(ctx context.Context) error {
					r, err := s.Take(ctx, key, p, 1)
					if err != nil {
						return err
					}
					if !r.Allowed {
						return errDenied
					}
					return nil
				}
			})
		}
	})

	b.Run("ulule", func(b *testing.B) {
		runRedis(b, addr, "fixed_window", func(b *testing.B, c *redis.Client) redisOp {
			// NewStore loads its scripts (SCRIPT LOAD) now.
			store, err := ululeredis.NewStore(c)
			if err != nil {
				b.Fatal(err)
			}
			lim := ulule.New(store, ulule.Rate{Period: redisLimitPeriod, Limit: redisLimitCount})
			const key = "bench-ulule"
			return func(ctx context.Context) error {
				lc, err := lim.Get(ctx, key)
				if err != nil {
					return err
				}
				if lc.Reached {
					return errDenied
				}
				return nil
			}
		})
	})

	b.Run("redis_rate", func(b *testing.B) {
		runRedis(b, addr, "gcra", func(b *testing.B, c *redis.Client) redisOp {
			lim := redis_rate.NewLimiter(c)
			limit := redis_rate.Limit{Rate: redisLimitCount, Burst: redisLimitCount, Period: redisLimitPeriod}
			const key = "bench-redis_rate"
			return func(ctx context.Context) error {
				res, err := lim.Allow(ctx, key, limit)
				if err != nil {
					return err
				}
				if res.Allowed != 1 {
					return errDenied
				}
				return nil
			}
		})
	})
}

// runRedis adds one participant's rows under b: name/seq and name/par64.
// setup runs once for both rows (and every -count repetition of them) with
// the participant's own client; it returns the call to measure.
func runRedis(b *testing.B, addr, name string, setup func(b *testing.B, c *redis.Client) redisOp) {
	b.Run(name, func(b *testing.B) {
		c := newRedisClient(b, addr)
		op := setup(b, c)
		// The first call loads the participant's script into Redis if setup
		// did not, and checks that the participant admits.
		if err := op(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Run("seq", func(b *testing.B) { redisSeq(b, c, op) })
		b.Run("par64", func(b *testing.B) { redisPar64(b, c, op) })
	})
}

// redisSeq measures op from one goroutine: the latency of one call.
func redisSeq(b *testing.B, c *redis.Client, op redisOp) {
	ctx := context.Background()
	if err := op(ctx); err != nil {
		b.Fatal(err)
	}
	settle()
	resetRedisStats(b, c)
	b.ReportAllocs()
	for b.Loop() {
		if err := op(ctx); err != nil {
			b.Fatal(err)
		}
	}
	reportRedisTime(b, c)
}

// redisPar64 measures op from 64 goroutines: SetParallelism(⌈64/GOMAXPROCS⌉)
// goroutines per P, so exactly 64 when GOMAXPROCS divides 64. ns/op is wall
// time over all calls, the inverse of throughput.
func redisPar64(b *testing.B, c *redis.Client, op redisOp) {
	ctx := context.Background()
	if err := op(ctx); err != nil {
		b.Fatal(err)
	}
	procs := runtime.GOMAXPROCS(0)
	b.SetParallelism((redisGoroutines + procs - 1) / procs)
	settle()
	resetRedisStats(b, c)
	b.ReportAllocs()
	b.ResetTimer()
	var failed atomic.Bool
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx); err != nil {
				// Report the first failure only; the other goroutines finish
				// the remaining iterations.
				if !failed.Swap(true) {
					b.Error(err)
				}
				return
			}
		}
	})
	b.StopTimer()
	reportRedisTime(b, c)
}

// resetRedisStats zeroes the server's per-command statistics (CONFIG
// RESETSTAT), so that reportRedisTime sees only the calls of this row.
func resetRedisStats(b *testing.B, c *redis.Client) {
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// reportRedisTime reports redis-ns/op: the time the server spent running
// the row's scripts (EVALSHA and EVAL, as INFO commandstats counts it) per
// call since resetRedisStats. It is the server's CPU time per call, without
// the network, the client or waiting for the server: the share of a row
// that only a cheaper script can lower, and what bounds throughput when
// the server is the bottleneck (par64).
func reportRedisTime(b *testing.B, c *redis.Client) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var calls, usec int64
	for line := range strings.Lines(info) {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_eval")
		if !ok {
			continue
		}
		// rest is "sha:calls=N,usec=M,..." or ":calls=N,usec=M,...".
		_, fields, _ := strings.Cut(rest, ":")
		for f := range strings.SplitSeq(fields, ",") {
			k, v, _ := strings.Cut(f, "=")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "calls":
				calls += n
			case "usec":
				usec += n
			}
		}
	}
	if calls == 0 {
		b.Fatal("INFO commandstats counts no EVALSHA or EVAL call")
	}
	b.ReportMetric(float64(usec)*1000/float64(calls), "redis-ns/op")
}

// newRedisClient returns the client every participant uses, with the same
// options for all, closed when b ends. Its redisPoolSize connections are
// open before it is returned, so no row pays for dialing.
func newRedisClient(b *testing.B, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:                  addr,
		PoolSize:              redisPoolSize,
		ContextTimeoutEnabled: true,
	})
	b.Cleanup(func() { _ = c.Close() })
	// Hold redisPoolSize connections at once, so each is a new one, then
	// return them all to the pool.
	ctx := context.Background()
	conns := make([]*redis.Conn, 0, redisPoolSize)
	for range redisPoolSize {
		cn := c.Conn()
		conns = append(conns, cn)
		if err := cn.Ping(ctx).Err(); err != nil {
			b.Fatal(err)
		}
	}
	for _, cn := range conns {
		if err := cn.Close(); err != nil {
			b.Fatal(err)
		}
	}
	if st := c.PoolStats(); st.TotalConns != redisPoolSize {
		b.Fatalf("pool holds %d connections after warm-up, want %d", st.TotalConns, redisPoolSize)
	}
	return c
}
