// Package addrhash places a value in a small table by the address of its
// memory: the tables of core that recognise a string by where its bytes
// are (the recent routes of a limiter, the peers of package clientip),
// because the later requests of one route or one connection hand over
// the same bytes.
//
// Slot is Fibonacci hashing of the address, without the alignment bits
// every such address shares, to 2^bits slots.
package addrhash
