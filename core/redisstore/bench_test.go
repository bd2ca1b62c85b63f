package redisstore_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// BenchmarkTake measures one decision against a local redis-server next to
// the floor: one EVALSHA of a trivial script with one key and one argument
// through the same client. The limit always admits and the deny cache is
// off, so every decision is a round trip. The side-by-side comparison with
// peers is in benchmarks/.
func BenchmarkTake(b *testing.B) {
	srv := redistest.StartServer(b)
	c := client(b, srv.Addr())
	ctx := context.Background()
	trivial := redis.NewScript("return 1")
	if err := trivial.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	b.Run("floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := trivial.EvalSha(ctx, c, []string{"rl:{bench}:floor"}, 1).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, a := range algorithms {
		s := newStore(b, c, redisstoreNoDeny()...)
		p := policy("bench", a, "100000000/hour")
		if _, err := s.Take(ctx, "bench", p, 1); err != nil {
			b.Fatal(err)
		}
		b.Run(a.String(), func(b *testing.B) {
			b.ReportAllocs()
			var r store.Result
			var err error
			for b.Loop() {
				if r, err = s.Take(ctx, "bench", p, 1); err != nil || !r.Allowed {
					b.Fatal(r, err)
				}
			}
		})
	}
}

func redisstoreNoDeny() []redisstore.Option {
	return []redisstore.Option{redisstore.WithDenyCache(false)}
}

// BenchmarkTakeParallel measures decisions from 64 goroutines at once on
// one key of a local redis-server (ns/op is wall time per decision, the
// inverse of throughput): unbatched (WithBatch(0)) against batched with 1,
// 2 and 4 calls in flight per node (lanes) and batches of 64 and 128.
func BenchmarkTakeParallel(b *testing.B) {
	srv := redistest.StartServer(b)
	ctx := context.Background()
	variants := []struct {
		name         string
		lanes, batch int
	}{
		{"unbatched", 2, 0},
		{"lanes1-batch128", 1, 128},
		{"lanes2-batch128", 2, 128},
		{"lanes4-batch128", 4, 128},
		{"lanes2-batch64", 2, 64},
	}
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.GCRA} {
		for _, v := range variants {
			b.Run(a.String()+"/"+v.name, func(b *testing.B) {
				c := redis.NewClient(&redis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true, PoolSize: 64})
				b.Cleanup(func() { _ = c.Close() })
				s := newStore(b, c, redisstore.WithDenyCache(false), redisstore.WithBatch(v.batch))
				p := policy("bench", a, "100000000/hour")
				if _, err := s.Take(ctx, "bench", p, 1); err != nil {
					b.Fatal(err)
				}
				defer redisstore.SetLanes(redisstore.SetLanes(v.lanes))
				b.SetParallelism((64 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
				b.ReportAllocs()
				b.ResetTimer()
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if r, err := s.Take(ctx, "bench", p, 1); err != nil || !r.Allowed {
							b.Error(r, err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkTakeAll measures a request counted under two policies of one
// key against a local redis-server: TakeAll, one script call for both
// (one round trip), next to two Takes (two round trips). Every request
// is admitted and the deny cache is off.
func BenchmarkTakeAll(b *testing.B) {
	srv := redistest.StartServer(b)
	c := client(b, srv.Addr())
	ctx := context.Background()
	s := newStore(b, c, redisstoreNoDeny()...)
	global, route := policy("global", algo.GCRA, "100000000/hour"), policy("route", algo.GCRA, "100000000/hour")
	takes := []store.Take{{Key: "bench", Policy: global, Cost: 1}, {Key: "bench", Policy: route, Cost: 1}}
	res := make([]store.Result, 2)
	if ok, err := s.TakeAll(ctx, takes, res); err != nil || !ok {
		b.Fatal(ok, err)
	}
	b.Run("TakeAll", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := s.TakeAll(ctx, takes, res); err != nil || !ok {
				b.Fatal(ok, err)
			}
		}
	})
	b.Run("two-Takes", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			for _, tk := range takes {
				if r, err := s.Take(ctx, tk.Key, tk.Policy, tk.Cost); err != nil || !r.Allowed {
					b.Fatal(r, err)
				}
			}
		}
	})
}
