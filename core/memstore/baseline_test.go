package memstore_test

import (
	"sync/atomic"
	"testing"
)

// BenchmarkBaselineMapAtomic is the floor stores are measured against:
// a Go map[string] lookup plus an atomic add, one key.
func BenchmarkBaselineMapAtomic(b *testing.B) {
	m := map[string]*atomic.Int64{"user-42": new(atomic.Int64)}
	for b.Loop() {
		m["user-42"].Add(1)
	}
}

// BenchmarkBaselineMapAtomicMillionKeys is the same over 1,000,000 keys in
// random order.
func BenchmarkBaselineMapAtomicMillionKeys(b *testing.B) {
	ks := keys(1_000_000)
	m := make(map[string]*atomic.Int64, len(ks))
	for _, k := range ks {
		m[k] = new(atomic.Int64)
	}
	i := 0
	for b.Loop() {
		m[ks[i]].Add(1)
		if i++; i == len(ks) {
			i = 0
		}
	}
}
