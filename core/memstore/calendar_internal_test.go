package memstore

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// TestCalendarExistingKeyTakesNoShardLock: a Take under a policy of one
// calendar limit on an existing key is decided while another goroutine
// holds the key's shard mutex, as a one-limit policy's is: it reads the
// index of the key's shard without the mutex.
func TestCalendarExistingKeyTakesNoShardLock(t *testing.T) {
	day, err := algo.ParseCalendarLimit("10/day")
	if err != nil {
		t.Fatal(err)
	}
	p := &store.Policy{Name: "cal", Limits: []algo.Limit{day}}
	s := New()
	for i := range 16 { // keys of several shards
		key := "user-" + string(rune('a'+i))
		if r, _ := s.Take(ctx, key, p, 1); !r.Allowed {
			t.Fatalf("%s: first Take denied", key)
		}
		sh := s.shard(s.keyHash(key))
		sh.mu.Lock()
		done := make(chan store.Result)
		go func() {
			r, _ := s.Take(ctx, key, p, 1)
			done <- r
		}()
		select {
		case r := <-done:
			if !r.Allowed || r.Remaining != 8 {
				t.Errorf("%s: second Take %+v, want admitted with 8 left", key, r)
			}
		case <-time.After(5 * time.Second):
			sh.mu.Unlock()
			<-done
			t.Fatalf("%s: a Take on an existing calendar counter waited for the shard's mutex", key)
		}
		sh.mu.Unlock()
	}
}
