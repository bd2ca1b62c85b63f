package replay

import (
	"math/rand/v2"
	"testing"
)

// TestKeyIndex checks a key table's index against a map through inserts
// and deletes in random order, many of whose hashes share a home slot
// (the first or the last, whose runs wrap around) or a tag.
func TestKeyIndex(t *testing.T) {
	tb := newKeyTable([]window{{period: 1}}, 1<<30)
	want := map[uint64]int32{}
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 200_000 {
		h := (1 + rng.Uint64N(5000)) << 40 // a few thousand hashes whose low bits, their home, are all 0
		switch step % 4 {
		case 2:
			h |= 1<<20 - 1 // homes at the index's last slot: runs wrap around

		case 0:
			h = 1 + rng.Uint64N(3000) // tag 0, homes apart
		case 1:
			h = 7<<32 | rng.Uint64N(3000)<<12 // one tag, homes 4,096 apart
		}
		h = fix(h)
		if e, ok := want[h]; ok && rng.IntN(2) == 0 {
			tb.drop(e, false)
			delete(want, h)
		} else if !ok {
			e, slot := tb.find(h)
			if e >= 0 {
				t.Fatalf("step %d: find(%#x) = %d before insert", step, h, e)
			}
			want[h] = tb.insert(h, slot, 0)
		}
		if step%4000 == 0 {
			for k, v := range want {
				if e, _ := tb.find(k); e != v {
					t.Fatalf("step %d: find(%#x) = %d; want %d", step, k, e, v)
				}
			}
			if tb.n != len(want) {
				t.Fatalf("step %d: %d keys, want %d", step, tb.n, len(want))
			}
		}
	}
	for h := uint64(1); h <= 3000; h++ {
		if _, in := want[h]; !in {
			if e, _ := tb.find(h); e >= 0 {
				t.Fatalf("find(%#x) found a deleted hash", h)
			}
		}
	}
}
