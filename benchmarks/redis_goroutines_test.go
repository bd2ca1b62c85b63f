package benchmarks

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
)

// sweepGoroutines are the points of BenchmarkRedisGoroutines.
var sweepGoroutines = []int{1, 2, 4, 8, 16, 32, 64, 128, 256}

// sweepDecisions is how many decisions one point makes: 2,048, and 32 per
// goroutine past 64 goroutines, so that each goroutine makes several.
func sweepDecisions(g int) int { return max(2048, 32*g) }

// sweepImpls are the participants of BenchmarkRedisGoroutines, by the name
// of their metrics: rlkit's store batched (its default) and unbatched
// (WithBatch(0)), and the two peers whose algorithm it shares.
var sweepImpls = []struct {
	name string
	impl redisImpl
}{
	{"rlkit-batched-fixed_window", rlkitRedis(algo.FixedWindow)},
	{"rlkit-batched-gcra", rlkitRedis(algo.GCRA)},
	{"rlkit-unbatched-fixed_window", rlkitRedis(algo.FixedWindow, redisstore.WithBatch(0))},
	{"ulule-fixed_window", redisPeer("ulule/fixed_window")},
	{"redis_rate-gcra", redisPeer("redis_rate/gcra")},
}

// redisPeer returns the participant of BenchmarkRedis named name.
func redisPeer(name string) redisImpl {
	for _, im := range redisImpls {
		if im.name == name {
			return im
		}
	}
	panic("no Redis participant " + name)
}

// BenchmarkRedisGoroutines measures decisions per second against the number
// of goroutines calling at once (1 to 256), for rlkit's Redis store batched
// and unbatched (fixed window; batched GCRA too), ulule/limiter (fixed
// window) and go-redis/redis_rate (GCRA), against the same redis-server as
// BenchmarkRedis, each participant with its own client (newRedisClient:
// pool 64, so past 64 goroutines callers also wait for a connection) and
// its own key, every call admitted.
//
// One op is the whole sweep: at each point, for each participant in turn
// (so that noise spreads over all of them; each point starts with the
// next participant), g goroutines released together
// make sweepDecisions(g) decisions between them; the metric
// "<participant>:g<g>:dec/s" is those decisions over the wall time from
// release to the last answer. The sweep keeps its time short (a few
// seconds) whatever -benchtime says, as b.N is 1 once one sweep outlasts
// it.
func BenchmarkRedisGoroutines(b *testing.B) {
	addr := benchRedisAddr(b)
	ops := make([]redisOp, len(sweepImpls))
	for i, sw := range sweepImpls {
		c := newRedisClient(b, addr)
		decide := sw.impl.build(b, c, redisQuota)
		key := "sweep-" + sw.name
		ops[i] = func(ctx context.Context) error {
			ok, err := decide(ctx, key)
			if err != nil {
				return err
			}
			if !ok {
				return errDenied
			}
			return nil
		}
		if err := ops[i](context.Background()); err != nil {
			b.Fatal(err)
		}
	}
	rates := map[string]float64{}
	for b.Loop() {
		for j, g := range sweepGoroutines {
			// Each point starts with another participant, so that none
			// is always the first after a change of load.
			for k := range sweepImpls {
				i := (j + k) % len(sweepImpls)
				sw := sweepImpls[i]
				settle()
				d, err := sweepPoint(ops[i], g, sweepDecisions(g))
				if err != nil {
					b.Fatalf("%s at %d goroutines: %v", sw.name, g, err)
				}
				rates[fmt.Sprintf("%s:g%d:dec/s", sw.name, g)] += float64(sweepDecisions(g)) / d.Seconds()
			}
		}
	}
	for unit, sum := range rates {
		b.ReportMetric(sum/float64(b.N), unit)
	}
}

// sweepPoint runs n calls of op from g goroutines released together and
// returns the wall time from release to the last answer, or the first
// error.
func sweepPoint(op redisOp, g, n int) (time.Duration, error) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		once  sync.Once
		first error
	)
	ctx := context.Background()
	for i := range g {
		calls := n / g
		if i < n%g {
			calls++
		}
		wg.Go(func() {
			<-start
			for range calls {
				if err := op(ctx); err != nil {
					once.Do(func() { first = err })
					return
				}
			}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return time.Since(t0), first
}
