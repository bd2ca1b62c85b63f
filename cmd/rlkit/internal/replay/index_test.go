package replay

import (
	"math/rand/v2"
	"testing"
)

// TestHashIndex checks the index against a map through inserts and
// deletes in random order, many of whose hashes share a home slot.
func TestHashIndex(t *testing.T) {
	var x hashIndex
	want := map[uint64]int32{}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 200_000 {
		h := (1 + rng.Uint64N(5000)) << 40 // a few thousand hashes whose low bits, their home, are all 0
		if step%3 == 0 {
			h = 1 + rng.Uint64N(3000) // 0 is stored as 1: not both
		}
		if _, ok := want[h]; ok && rng.IntN(2) == 0 {
			x.del(h)
			delete(want, h)
		} else if !ok {
			x.put(h, int32(step))
			want[h] = int32(step)
		}
		if step%1000 == 0 {
			for k, v := range want {
				if e, ok := x.get(k); !ok || e != v {
					t.Fatalf("step %d: get(%d) = %d, %v; want %d", step, k, e, ok, v)
				}
			}
			if x.n != len(want) {
				t.Fatalf("step %d: %d entries, want %d", step, x.n, len(want))
			}
		}
	}
	for h := uint64(1); h <= 3000; h++ {
		if _, in := want[h]; !in {
			if _, ok := x.get(h); ok {
				t.Fatalf("get(%d) found a deleted hash", h)
			}
		}
	}
}
