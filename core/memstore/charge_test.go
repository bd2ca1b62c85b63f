package memstore_test

import (
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func TestChargeZeroAllocsOnExistingKey(t *testing.T) {
	s := memstore.New()
	for _, a := range []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA} {
		for _, p := range []*store.Policy{pol("one", a, "1000000/hour"), pol("two", a, "1000000/minute", "2000000/hour")} {
			_, _ = s.Charge(ctx, "user-1", p, 1)
			if n := testing.AllocsPerRun(1000, func() { _, _ = s.Charge(ctx, "user-1", p, 1) }); n != 0 {
				t.Errorf("%v, %d limits: %v allocs per charge, want 0", a, len(p.Limits), n)
			}
		}
	}
}

// TestChargeThenTakeUsesOneCounter: a charge lands in the counter Take
// and the lock-free path of a one-limit policy read, so the request after
// it sees the debt.
func TestChargeThenTakeUsesOneCounter(t *testing.T) {
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	s := memstore.New(memstore.WithClock(clock))
	p := pol("tb", algo.TokenBucket, "100/minute")
	if r, _ := s.Take(ctx, "u", p, 99); !r.Allowed || r.Remaining != 1 {
		t.Fatalf("Take 99: %+v", r)
	}
	if r, _ := s.Charge(ctx, "u", p, 30); r.Allowed || r.RetryAfter != 18*time.Second {
		t.Fatalf("Charge 30: allowed=%v retry=%v, want refused for 18s", r.Allowed, r.RetryAfter)
	}
	if r, _ := s.Take(ctx, "u", p, 1); r.Allowed || r.RetryAfter != 18*time.Second {
		t.Fatalf("Take after the charge: allowed=%v retry=%v, want refused for 18s", r.Allowed, r.RetryAfter)
	}
	clock.Advance(18 * time.Second)
	if r, _ := s.Take(ctx, "u", p, 1); !r.Allowed || r.Remaining != 0 {
		t.Fatalf("Take 18s later: %+v, want admitted with 0 left", r)
	}
	if _, err := s.Charge(ctx, "u", &store.Policy{Name: "none"}, 1); err == nil {
		t.Fatal("Charge under a policy with no limits: no error")
	}
}
