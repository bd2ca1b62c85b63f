package benchmarks

import (
	"math/rand/v2"
	"testing"
	"time"
)

// interleaveBlock is the number of calls of one row timed together.
const interleaveBlock = 256

// interleave runs b.N ops, one op being a call of each of serve's rows:
// blocks of interleaveBlock calls of one row, every row once per round in
// an order shuffled every round (so that no row always follows the same
// one, whose traces in the caches it would pay for), each block timed on
// its own. It returns the time each row took and the calls each row got
// (b.N rounded up to whole blocks). What one row adds to another is the
// difference of their times over the calls, measured microseconds apart,
// so that the changing load of a shared machine weighs on both alike.
func interleave(b *testing.B, serve []func()) (spent []time.Duration, calls int) {
	spent = make([]time.Duration, len(serve))
	order := make([]int, len(serve))
	rng := rand.New(rand.NewPCG(1, 2))
	settle()
	b.ReportAllocs()
	b.ResetTimer()
	for ; calls < b.N; calls += interleaveBlock {
		for i := range order {
			order[i] = i
		}
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, i := range order {
			f := serve[i]
			start := time.Now()
			for range interleaveBlock {
				f()
			}
			spent[i] += time.Since(start)
		}
	}
	b.StopTimer()
	return spent, calls
}
