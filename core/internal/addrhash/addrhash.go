package addrhash

import "unsafe"

// Slot is the slot, among 2^bits (1 ≤ bits ≤ 64), of the memory at p:
// Fibonacci hashing of its address, without the three alignment bits
// every such address shares.
func Slot(p unsafe.Pointer, bits uint) uint64 {
	return uint64(uintptr(p)) >> 3 * 0x9E3779B97F4A7C15 >> (64 - bits)
}
