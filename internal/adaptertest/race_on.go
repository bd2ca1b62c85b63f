//go:build race

package adaptertest

// Race reports that the race detector is on: sync.Pool then drops items
// at random, so allocation counts of code that pools (Gin's, Echo's and
// Fiber's contexts) do not hold, and tests pinning them skip.
const Race = true
