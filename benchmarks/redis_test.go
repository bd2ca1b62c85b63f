package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
	"github.com/throttled/throttled/v2"
	throttledredis "github.com/throttled/throttled/v2/store/goredisstore.v9"
	ulule "github.com/ulule/limiter/v3"
	ululeredis "github.com/ulule/limiter/v3/drivers/store/redis"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
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
	// store's own default (100 ms) is for production; on a loaded
	// machine a par64 burst now and then stalls one call (any client's,
	// the floor's too) past 100 ms, which would fail the row.
	redisTimeout = 5 * time.Second
)

var errDenied = errors.New("denied: the benchmark reached the limit and measured denials")

// redisOp is one call of a participant on its own key: one decision, or for
// the floor one script call. It returns an error when the call failed or the
// request was denied, so no row can measure failures or denials.
type redisOp func(ctx context.Context) error

// A redisImpl is one Redis-backed limiter with quota q over client c, its
// script (if any) loaded and its plan compiled by the first call.
type redisImpl struct {
	name string
	// strict: a failed call fails the row (rlkit). A peer's failed calls
	// are counted instead (failed/op), since some fail by design under
	// contention (throttled gives up after 10 compare-and-swap attempts).
	strict bool
	build  func(tb testing.TB, c *redis.Client, q quota) decideFunc
}

// rlkitRedis is rlkit's Redis store with algorithm a, deny cache off (so
// every call is a round trip), a 5 s timeout (see redisTimeout) and opts
// (batching on unless opts turn it off).
func rlkitRedis(a algo.Algorithm, opts ...redisstore.Option) redisImpl {
	return redisImpl{
		name:   "rlkit/" + a.String(),
		strict: true,
		build: func(tb testing.TB, c *redis.Client, q quota) decideFunc {
			s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithDenyCache(false), redisstore.WithTimeout(redisTimeout)}, opts...)...)
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = s.Close() })
			p := rlkitPolicy(a, q)
			return func(ctx context.Context, key string) (bool, error) {
				r, err := s.Take(ctx, key, p, 1)
				return r.Allowed, err
			}
		},
	}
}

var redisImpls = []redisImpl{
	rlkitRedis(algo.FixedWindow),
	rlkitRedis(algo.SlidingWindow),
	rlkitRedis(algo.TokenBucket),
	rlkitRedis(algo.GCRA),
	{
		// Fixed window: INCRBY and PTTL in a script (PEXPIRE on a window's first call).
		name: "ulule/fixed_window",
		build: func(tb testing.TB, c *redis.Client, q quota) decideFunc {
			store, err := ululeredis.NewStore(c) // loads its scripts now
			if err != nil {
				tb.Fatal(err)
			}
			lim := ulule.New(store, ulule.Rate{Period: q.Period, Limit: q.Count})
			return func(ctx context.Context, key string) (bool, error) {
				lc, err := lim.Get(ctx, key)
				return err == nil && !lc.Reached, err
			}
		},
	},
	{
		// GCRA in a script.
		name: "redis_rate/gcra",
		build: func(tb testing.TB, c *redis.Client, q quota) decideFunc {
			lim := redis_rate.NewLimiter(c)
			limit := redis_rate.Limit{Rate: int(q.Count), Burst: int(q.Count), Period: q.Period}
			return func(ctx context.Context, key string) (bool, error) {
				res, err := lim.Allow(ctx, key, limit)
				return err == nil && res.Allowed == 1, err
			}
		},
	},
	{
		// GCRA in Go over goredisstore.v9: TIME and GET in one pipeline,
		// then SETNX or a compare-and-swap script, retried up to 10 times.
		name: "throttled/gcra",
		build: func(tb testing.TB, c *redis.Client, q quota) decideFunc {
			st, err := throttledredis.NewCtx(c, "throttled:")
			if err != nil {
				tb.Fatal(err)
			}
			rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
				MaxRate:  throttled.PerDuration(int(q.Count), q.Period),
				MaxBurst: int(q.Count) - 1,
			})
			if err != nil {
				tb.Fatal(err)
			}
			return func(ctx context.Context, key string) (bool, error) {
				limited, _, err := rl.RateLimitCtx(ctx, key, 1)
				return err == nil && !limited, err
			}
		},
	},
}

// redisQuota is the quota of the Redis speed rows (see redisLimitCount).
var redisQuota = quota{redisLimitCount, redisLimitPeriod}

// BenchmarkRedis measures one call against a real redis-server on loopback,
// side by side for rlkit's Redis store, three peer libraries and the floors
// that any Redis limiter pays. Every participant:
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
//   - floor/raw-incr: client.Incr of one key. One round trip of the
//     cheapest counting command: what a limiter that counts in one command
//     pays at least.
//   - floor/raw-evalsha: client.EvalSha of `return 1` with one key and one
//     argument. One round trip, a script that does nothing: what every
//     script-based limiter pays at least with this client and this server.
//   - rlkit/<algorithm> (fixed_window, sliding_window, token_bucket, gcra):
//     redisstore.Store.Take(ctx, key, policy, 1), deny cache off (so every
//     call is a round trip), timeout 5 s (see redisTimeout), other store
//     options at their defaults (batching on: under par64 the decisions
//     that wait together go to Redis as one script call).
//   - ulule/fixed_window: github.com/ulule/limiter/v3 Limiter.Get over its
//     drivers/store/redis store (INCRBY and PTTL in a script, PEXPIRE on a
//     window's first call).
//   - redis_rate/gcra: github.com/go-redis/redis_rate/v10 Limiter.Allow
//     (GCRA in a script), Rate and Burst redisLimitCount per
//     redisLimitPeriod.
//   - throttled/gcra: github.com/throttled/throttled/v2 GCRARateLimiterCtx
//     over store/goredisstore.v9: two round trips per call (TIME+GET, then
//     a compare-and-swap script), retried on a lost race; the calls that
//     give up are counted in failed/op, not fatal.
//
// A participant's overhead is its row over the floor row of the same mode.
//
// All rows share one redis-server: the one cmd/report started
// ($RLKIT_BENCH_REDIS_ADDR), else one this test binary starts on first use
// and stops at exit (see benchRedisAddr). Without redis-server in PATH the
// rows are skipped, or fail when RLKIT_REQUIRE_REDIS=1.
func BenchmarkRedis(b *testing.B) {
	addr := benchRedisAddr(b)

	b.Run("floor", func(b *testing.B) {
		runRedis(b, addr, "raw-incr", true, func(b *testing.B, c *redis.Client) redisOp {
			const key = "bench-floor-incr"
			return func(ctx context.Context) error {
				return c.Incr(ctx, key).Err()
			}
		})
		runRedis(b, addr, "raw-evalsha", true, func(b *testing.B, c *redis.Client) redisOp {
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

	// Rows are grouped by library: rlkit/<algorithm>, ulule/..., so that
	// each library's rows sit together under one name.
	var groups []string
	for _, im := range redisImpls {
		if g, _, _ := strings.Cut(im.name, "/"); !slices.Contains(groups, g) {
			groups = append(groups, g)
		}
	}
	for _, g := range groups {
		b.Run(g, func(b *testing.B) {
			for _, im := range redisImpls {
				group, name, _ := strings.Cut(im.name, "/")
				if group != g {
					continue
				}
				runRedis(b, addr, name, im.strict, func(b *testing.B, c *redis.Client) redisOp {
					decide := im.build(b, c, redisQuota)
					key := "bench-" + strings.ReplaceAll(im.name, "/", "-")
					return func(ctx context.Context) error {
						ok, err := decide(ctx, key)
						if err != nil {
							return err
						}
						if !ok {
							return errDenied
						}
						return nil
					}
				})
			}
		})
	}
}

// runRedis adds one participant's rows under b: name/seq and name/par64.
// setup runs once for both rows (and every -count repetition of them) with
// the participant's own client; it returns the call to measure.
// A strict row fails on the first failed call; another counts the failed
// calls (a denial always fails the row) and reports them as failed/op.
func runRedis(b *testing.B, addr, name string, strict bool, setup func(b *testing.B, c *redis.Client) redisOp) {
	b.Run(name, func(b *testing.B) {
		c := newRedisClient(b, addr)
		op := setup(b, c)
		// The first call loads the participant's script into Redis if setup
		// did not, and checks that the participant admits.
		if err := op(context.Background()); err != nil {
			b.Fatal(err)
		}
		b.Run("seq", func(b *testing.B) { redisSeq(b, c, op, strict) })
		b.Run("par64", func(b *testing.B) { redisPar64(b, c, op, strict) })
	})
}

// tolerate reports whether err, from a call of a row that is not strict,
// is a failed call to count rather than the end of the row.
func tolerate(strict bool, err error) bool {
	return !strict && !errors.Is(err, errDenied)
}

// redisSeq measures op from one goroutine: the latency of one call.
func redisSeq(b *testing.B, c *redis.Client, op redisOp, strict bool) {
	ctx := context.Background()
	if err := op(ctx); err != nil {
		b.Fatal(err)
	}
	settle()
	resetRedisStats(b, c)
	b.ReportAllocs()
	failed := 0
	for b.Loop() {
		if err := op(ctx); err != nil {
			if !tolerate(strict, err) {
				b.Fatal(err)
			}
			failed++
		}
	}
	reportRedisTime(b, c)
	b.ReportMetric(float64(failed)/float64(b.N), "failed/op")
}

// redisPar64 measures op from 64 goroutines: SetParallelism(⌈64/GOMAXPROCS⌉)
// goroutines per P, so exactly 64 when GOMAXPROCS divides 64. ns/op is wall
// time over all calls, the inverse of throughput.
func redisPar64(b *testing.B, c *redis.Client, op redisOp, strict bool) {
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
	var (
		stopped atomic.Bool
		failed  atomic.Int64
	)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := op(ctx); err != nil {
				if tolerate(strict, err) {
					failed.Add(1)
					continue
				}
				// Report the first failure only; the other goroutines finish
				// the remaining iterations.
				if !stopped.Swap(true) {
					b.Error(err)
				}
				return
			}
		}
	})
	b.StopTimer()
	reportRedisTime(b, c)
	b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
}

// resetRedisStats zeroes the server's per-command statistics (CONFIG
// RESETSTAT), so that reportRedisTime sees only the calls of this row.
func resetRedisStats(b *testing.B, c *redis.Client) {
	if err := c.ConfigResetStat(context.Background()).Err(); err != nil {
		b.Fatal(err)
	}
}

// reportRedisTime reports redis-ns/op: the time the server spent running
// the row's commands (every command INFO commandstats counts since
// resetRedisStats, but CONFIG and INFO themselves) per op. It is the
// server's CPU time per decision, without the network, the client or
// waiting for the server: the share of a row that only cheaper commands can
// lower, and what bounds throughput when the server is the bottleneck
// (par64).
func reportRedisTime(b *testing.B, c *redis.Client) {
	info, err := c.Info(context.Background(), "commandstats").Result()
	if err != nil {
		b.Fatal(err)
	}
	var usec int64
	for line := range strings.Lines(info) {
		// "cmdstat_evalsha:calls=N,usec=M,..."
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
		if !ok {
			continue
		}
		cmd, fields, _ := strings.Cut(rest, ":")
		if cmd == "config" || cmd == "info" {
			continue
		}
		for f := range strings.SplitSeq(fields, ",") {
			if k, v, _ := strings.Cut(f, "="); k == "usec" {
				n, _ := strconv.ParseInt(v, 10, 64)
				usec += n
			}
		}
	}
	b.ReportMetric(float64(usec)*1000/float64(b.N), "redis-ns/op")
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
