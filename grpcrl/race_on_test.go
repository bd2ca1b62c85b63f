//go:build race

package grpcrl_test

// raceEnabled: the race detector changes allocation counts.
const raceEnabled = true
