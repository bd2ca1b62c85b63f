//go:build race

package adaptertest

// Race reports whether the race detector is on: sync.Pool then drops
// items at random, so allocation counts are not exact.
const Race = true
