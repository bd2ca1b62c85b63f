//go:build race

package outbound

const raceEnabled = true
