package store

import (
	"testing"
	"time"
)

var clockSink int64

// BenchmarkClock compares SystemClock with time.Now and the raw runtime
// clock it is built on.
func BenchmarkClock(b *testing.B) {
	b.Run("SystemClock", func(b *testing.B) {
		for b.Loop() {
			clockSink += SystemClock.Now()
		}
	})
	b.Run("time.Now", func(b *testing.B) {
		for b.Loop() {
			clockSink += time.Now().UnixNano()
		}
	})
	b.Run("nanotime", func(b *testing.B) {
		for b.Loop() {
			clockSink += nanotime()
		}
	})
}
