package store_test

import (
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// TestCounterID: a limit's counter identity is the policy's name and
// algorithm and the limit's period, whatever its count, burst, place and
// the other limits; the fingerprint changes with every term.
func TestCounterID(t *testing.T) {
	hour := algo.Limit{Count: 10, Period: time.Hour}
	day := algo.Limit{Count: 100, Period: 24 * time.Hour}
	base := &store.Policy{Name: "api", Algorithm: algo.GCRA, Limits: []algo.Limit{hour}}
	id := base.CounterID(0)
	same := []*store.Policy{
		{Name: "api", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 20, Period: time.Hour}}},
		{Name: "api", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 10, Period: time.Hour, Burst: 30}}},
		{Name: "api", Algorithm: algo.GCRA, Limits: []algo.Limit{hour, day}},
	}
	for _, p := range same {
		if p.CounterID(0) != id || p.Fingerprint() == base.Fingerprint() {
			t.Errorf("%v: counter %x, fingerprint %x; want the counter %x, another fingerprint", p.Limits, p.CounterID(0), p.Fingerprint(), id)
		}
	}
	swapped := &store.Policy{Name: "api", Algorithm: algo.GCRA, Limits: []algo.Limit{day, hour}}
	if swapped.CounterID(1) != id || swapped.CounterID(0) != same[2].CounterID(1) || swapped.CounterID(0) == id {
		t.Errorf("swapped limits: counters %x, %x; want the hour's %x second", swapped.CounterID(0), swapped.CounterID(1), id)
	}
	other := []*store.Policy{
		{Name: "api2", Algorithm: algo.GCRA, Limits: []algo.Limit{hour}},
		{Name: "api", Algorithm: algo.TokenBucket, Limits: []algo.Limit{hour}},
		{Name: "api", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 10, Period: 2 * time.Hour}}},
		{Name: "ap", Algorithm: algo.GCRA, Limits: []algo.Limit{hour}},
	}
	for _, p := range other {
		if p.CounterID(0) == id || p.CounterID(0) == 0 {
			t.Errorf("%s %v %v: counter %x, want another than %x", p.Name, p.Algorithm, p.Limits, p.CounterID(0), id)
		}
	}
}

// TestCounterIDConcurrent: goroutines that ask a new policy for its
// counter identities at once all get the same (run with -race).
func TestCounterIDConcurrent(t *testing.T) {
	p := &store.Policy{Name: "api", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 1, Period: time.Second}, {Count: 9, Period: time.Minute}}}
	want := (&store.Policy{Name: p.Name, Algorithm: p.Algorithm, Limits: p.Limits}).CounterID(1)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if got := p.CounterID(1); got != want {
				t.Errorf("CounterID(1) = %x, want %x", got, want)
			}
		})
	}
	wg.Wait()
}
