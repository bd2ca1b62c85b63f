package redisstore_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
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
			var r core.Result
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
