package outbound

import (
	"context"
	"testing"
	"testing/synctest"
	"time"
)

// TestWaitSynctest: on SystemClock, whose time testing/synctest fakes
// (and which New hands to the store it makes), sequential Waits under one
// key start exactly 250 ms apart, and another key at once.
func TestWaitSynctest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		l, err := New(mustRate(t, 240, time.Minute, 0), nil)
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		begin := time.Now()
		for i := range 5 {
			if err := l.Wait(ctx, "POST", "/v1.0/users", "POST /v1.0/users"); err != nil {
				t.Fatal(err)
			}
			if got, want := time.Since(begin), time.Duration(i)*250*time.Millisecond; got != want {
				t.Fatalf("start %d at +%v, want +%v", i, got, want)
			}
		}
		at := time.Now()
		if err := l.Wait(ctx, "GET", "/v1.0/orgunits", "GET /v1.0/orgunits"); err != nil || time.Since(at) != 0 {
			t.Fatalf("another key waited %v (err %v)", time.Since(at), err)
		}
	})
}
