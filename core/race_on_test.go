//go:build race

package core

// raceOn: the race detector is on (sync.Pool then drops items at random,
// so allocation counts that rely on a pool do not hold).
const raceOn = true
