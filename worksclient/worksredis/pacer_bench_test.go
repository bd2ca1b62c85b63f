package worksredis

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/internal/redistest"
)

// BenchmarkPacerWait measures Wait on keys that are free (a new key
// each time, so that none waits) against a local redis-server, next to
// the floor: one EVALSHA of a trivial script through the same client. A
// free key costs two round trips (the hold's PTTL, the decision).
func BenchmarkPacerWait(b *testing.B) {
	s := redistest.StartServer(b)
	c := redis.NewClient(&redis.Options{Addr: s.Addr(), ContextTimeoutEnabled: true})
	b.Cleanup(func() { _ = c.Close() })
	ctx := context.Background()
	trivial := redis.NewScript("return 1")
	if err := trivial.Load(ctx, c).Err(); err != nil {
		b.Fatal(err)
	}
	b.Run("floor", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := trivial.EvalSha(ctx, c, []string{"floor"}, 1).Err(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("pacer", func(b *testing.B) {
		p := NewPacer(c, time.Hour)
		b.Cleanup(func() { _ = p.Close() })
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			if err := p.Wait(ctx, "GET /v1.0/users/"+strconv.Itoa(i)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
