package benchmarks

import (
	"math/rand/v2"
	"runtime"
	"sync"
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
		shuffle(rng, order)
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

// shuffle sets order to the rows 0 … len(order)-1 in an order of rng's.
func shuffle(rng *rand.Rand, order []int) {
	for i := range order {
		order[i] = i
	}
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
}

// parallelWarm and parallelBlock are the numbers of untimed and timed
// calls each goroutine makes of one row before all of them move on to the
// next (see interleaveParallel): the untimed ones, nearly as many as the
// 10,000 keys of the parallel scenarios, bring a row's memory back into
// the caches after the other rows, as it is when the row runs on its own;
// the timed ones are enough that starting and stopping the goroutines
// (about 0.1 ms) adds under 2 ns to a call.
const (
	parallelWarm  = 8192
	parallelBlock = 32768
)

// interleaveParallel is interleave from GOMAXPROCS goroutines: each makes
// its own calls of every row (rows[i]() gives a goroutine row i's call,
// with state of its own), and in every round, in an order shuffled every
// round, all of them run calls of one row together: after a collection
// of the garbage the rows before left (which would otherwise be collected
// during this row's calls), parallelWarm untimed calls each, then, started
// together once all have made those,
// parallelBlock calls each, timed from that start until the last has
// finished. It returns the time each row took and the calls each row got
// over all goroutines (b.N rounded up to whole rounds): wall time over
// all goroutines, as b.RunParallel's, and two rows' measured milliseconds
// apart.
func interleaveParallel(b *testing.B, rows []func() func()) (spent []time.Duration, calls int) {
	workers := runtime.GOMAXPROCS(0)
	spent = make([]time.Duration, len(rows))
	warm, run := make([]chan int, workers), make([]chan struct{}, workers)
	var warmed, done sync.WaitGroup
	for w := range warm {
		warm[w], run[w] = make(chan int), make(chan struct{})
		calls := make([]func(), len(rows))
		for i, row := range rows {
			calls[i] = row()
		}
		go func() {
			for i := range warm[w] {
				f := calls[i]
				for range parallelWarm {
					f()
				}
				warmed.Done()
				<-run[w]
				for range parallelBlock {
					f()
				}
				done.Done()
			}
		}()
	}
	defer func() {
		for _, c := range warm {
			close(c)
		}
	}()
	order := make([]int, len(rows))
	rng := rand.New(rand.NewPCG(1, 2))
	settle()
	b.ReportAllocs()
	b.ResetTimer()
	for ; calls < b.N; calls += parallelBlock * workers {
		shuffle(rng, order)
		for _, i := range order {
			runtime.GC() // the garbage of the rows before, collected outside the timer
			warmed.Add(workers)
			for _, c := range warm {
				c <- i
			}
			warmed.Wait()
			done.Add(workers)
			t := time.Now()
			for _, c := range run {
				c <- struct{}{}
			}
			done.Wait()
			spent[i] += time.Since(t)
		}
	}
	b.StopTimer()
	return spent, calls
}
