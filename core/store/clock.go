package store

import (
	"sync/atomic"
	"time"
	_ "unsafe" // for go:linkname
)

// Clock tells the time as Unix nanoseconds. Every decision reads it once and
// passes the instant down, so a fake clock controls everything.
type Clock interface {
	Now() int64
}

// SystemClock is the wall clock, read through the runtime's monotonic clock:
// about half the cost of time.Now (one vDSO call instead of two). Its
// wall-clock offset is re-read at most once per second, so a stepped system
// clock is followed within a second. It is the clock of every decision
// and every counter, unless a store or limiter is given another.
var SystemClock Clock = &systemClock{}

type systemClock struct{}

//go:linkname nanotime runtime.nanotime
func nanotime() int64

var (
	wallOffset atomic.Int64 // Unix ns − monotonic ns
	lastSync   atomic.Int64 // monotonic ns of the last re-read
)

func init() { syncWall(nanotime()) }

func syncWall(mono int64) {
	wallOffset.Store(time.Now().UnixNano() - nanotime())
	lastSync.Store(mono)
}

func (*systemClock) Now() int64 {
	mono := nanotime()
	if mono-lastSync.Load() >= int64(time.Second) {
		syncWall(mono)
	}
	return mono + wallOffset.Load()
}

// ManualClock is a Clock that only moves when told to: for tests and
// examples. The zero value reads 0; it is safe for concurrent use.
type ManualClock struct{ ns atomic.Int64 }

// NewManualClock returns a ManualClock reading t.
func NewManualClock(t time.Time) *ManualClock {
	c := new(ManualClock)
	c.Set(t)
	return c
}

// Now returns the clock's reading in Unix nanoseconds.
func (c *ManualClock) Now() int64 { return c.ns.Load() }

// Time returns the clock's reading as a time.Time.
func (c *ManualClock) Time() time.Time { return time.Unix(0, c.ns.Load()) }

// Set moves the clock to t.
func (c *ManualClock) Set(t time.Time) { c.ns.Store(t.UnixNano()) }

// Advance moves the clock forward by d (backwards when d < 0).
func (c *ManualClock) Advance(d time.Duration) { c.ns.Add(int64(d)) }
