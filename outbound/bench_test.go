package outbound

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
)

// BenchmarkWait measures Limiter.Wait on the memory store, uncontended, on
// a key whose limit always admits (so nothing sleeps): the queue, the hold
// check and one store decision. The baseline is core.Limiter.Decide alone
// on the same configuration and store: the difference is what outbound
// adds.
func BenchmarkWait(b *testing.B) {
	cfg, err := Rate(1_000_000_000, time.Second, 1_000_000_000)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	b.Run("decide-baseline", func(b *testing.B) {
		l, _ := New(cfg, nil)
		c := l.Core()
		b.ReportAllocs()
		for b.Loop() {
			if d := c.Decide(ctx, "GET", "/v1/items", "api.example.com", false); !d.Allowed {
				b.Fatal("denied")
			}
		}
	})
	b.Run("wait", func(b *testing.B) {
		l, _ := New(cfg, nil)
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Wait(ctx, "GET", "/v1/items", "api.example.com"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wait+observe", func(b *testing.B) {
		l, _ := New(cfg, nil)
		s := Signal{HasRemaining: true, Remaining: 1 << 40, Reset: time.Minute}
		b.ReportAllocs()
		for b.Loop() {
			if err := l.Wait(ctx, "GET", "/v1/items", "api.example.com"); err != nil {
				b.Fatal(err)
			}
			l.Observe(ctx, "api.example.com", s)
		}
	})
	b.Run("wait-parallel-keys", func(b *testing.B) {
		l, _ := New(cfg, nil)
		keys := make([]string, 1024)
		for i := range keys {
			keys[i] = "host-" + strconv.Itoa(i)
		}
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				i++
				if err := l.Wait(ctx, "GET", "/v1/items", keys[i&1023]); err != nil {
					b.Error(err)
					return
				}
			}
		})
	})
}

// BenchmarkReadSignal measures ReadSignal on a response carrying rlkit's
// draft headers.
func BenchmarkReadSignal(b *testing.B) {
	h := map[string]string{"Ratelimit": `"default";r=4;t=1`, "Ratelimit-Policy": `"default";q=5;w=1`}
	get := func(k string) string { return h[k] }
	now := time.Now()
	b.ReportAllocs()
	for b.Loop() {
		_ = ReadSignal(get, now)
	}
}

var _ = algo.GCRA
