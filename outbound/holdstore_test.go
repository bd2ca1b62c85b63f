package outbound

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// memHolds is a HoldStore in memory on a fake clock, shared by Limiters
// as Redis would be.
type memHolds struct {
	mu    sync.Mutex
	clk   Clock
	until map[string]time.Time
	err   error
}

func (h *memHolds) Hold(ctx context.Context, key string, d time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return h.err
	}
	if err := ctx.Err(); err != nil { // as a store in another process fails
		return err
	}
	if at := h.clk.Now().Add(d); at.After(h.until[key]) {
		h.until[key] = at
	}
	return nil
}

func (h *memHolds) Held(_ context.Context, key string) (time.Duration, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil {
		return 0, h.err
	}
	return max(h.until[key].Sub(h.clk.Now()), 0), nil
}

func TestHoldStoreSharesHolds(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	holds := &memHolds{clk: clk, until: map[string]time.Time{}}
	a := mustNew(t, nil, clk, WithHoldStore(holds))
	b := mustNew(t, nil, clk, WithHoldStore(holds))
	// What a's upstream said holds b back.
	a.Observe(ctx, "api", Signal{HasRemaining: true, Remaining: 0, Reset: 4 * time.Second})
	starts := make(chan start, 1)
	goWait(t, ctx, b, clk, "api", 1, 1, starts)
	if d := clk.waitTimers(t, 1); d != 4*time.Second {
		t.Fatalf("the other Limiter waits %v, want the shared 4s hold", d)
	}
	clk.Advance(4 * time.Second)
	if s := <-starts; s.err != nil || !s.at.Equal(t0.Add(4*time.Second)) {
		t.Fatalf("start %+v, want +4s", s)
	}
}

// TestHoldStoreHoldOnEndedContext: what an upstream said is shared even
// when the request's context has ended by the time its answer is observed
// (a caller that cancels once it has the headers, a deadline that ends as
// the 429 arrives).
func TestHoldStoreHoldOnEndedContext(t *testing.T) {
	clk := newFakeClock()
	holds := &memHolds{clk: clk, until: map[string]time.Time{}}
	a := mustNew(t, nil, clk, WithHoldStore(holds))
	b := mustNew(t, nil, clk, WithHoldStore(holds))
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	a.Observe(ended, "api", Signal{RetryAfter: time.Minute})
	starts := make(chan start, 1)
	goWait(t, context.Background(), b, clk, "api", 1, 1, starts)
	if d := clk.waitTimers(t, 1); d != time.Minute {
		t.Fatalf("the other Limiter waits %v, want the shared 1m hold", d)
	}
	clk.Advance(time.Minute)
	if s := <-starts; s.err != nil || !s.at.Equal(t0.Add(time.Minute)) {
		t.Fatalf("start %+v, want +1m", s)
	}
}

func TestHoldStoreErrors(t *testing.T) {
	ctx := context.Background()
	down := errors.New("holds down")
	for _, tc := range []struct {
		failure string
		wantErr bool
	}{{"open", false}, {"closed", true}} {
		clk := newFakeClock()
		holds := &memHolds{clk: clk, until: map[string]time.Time{}, err: down}
		cfg := mustParse(t, "rate_limit:\n  enabled: true\n  failure: "+tc.failure+"\n")
		l := mustNew(t, cfg, clk, WithHoldStore(holds))
		err := l.Wait(ctx, "GET", "/", "api")
		if tc.wantErr != (err != nil) || (err != nil && (!errors.Is(err, down) || !strings.Contains(err.Error(), "hold store"))) {
			t.Fatalf("failure %s: Wait = %v, want error %v", tc.failure, err, tc.wantErr)
		}
		if err := l.Delay(ctx, "api", time.Second); !errors.Is(err, down) {
			t.Fatalf("Delay = %v, want the hold store's error", err)
		}
	}
}

func TestRate(t *testing.T) {
	cfg := mustRate(t, 240, time.Minute, 0)
	def := cfg.Default()
	if want := (algo.Limit{Count: 240, Period: time.Minute, Burst: 1}); def.Policy.Algorithm != algo.GCRA || len(def.Policy.Limits) != 1 || def.Policy.Limits[0] != want {
		t.Fatalf("policy %v %v, want gcra %v", def.Policy.Algorithm, def.Policy.Limits, want)
	}
	if !cfg.Enabled() || cfg.Exempt("/health") || len(cfg.Rules()) != 0 {
		t.Fatal("Rate: want enabled, nothing exempt, no rule")
	}
	if c := mustRate(t, 3, 1500*time.Millisecond, 2); c.Default().Policy.Limits[0] != (algo.Limit{Count: 3, Period: 1500 * time.Millisecond, Burst: 2}) {
		t.Fatalf("Rate(3, 1.5s, 2): %v", c.Default().Policy.Limits)
	}
	for _, bad := range []struct {
		count  int64
		period time.Duration
		burst  int64
		want   string
	}{{0, time.Second, 0, "count 0"}, {1, 0, 0, "period 0s"}, {1, time.Second, -1, "burst -1"}} {
		if _, err := Rate(bad.count, bad.period, bad.burst); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("Rate(%d, %v, %d) = %v, want an error naming %q", bad.count, bad.period, bad.burst, err, bad.want)
		}
	}
}

// TestHoldStoreGetsStoreKeys: the HoldStore and the Limiter's own state
// see a key as the store does: a secret as its keyed hash, a long key as
// a digest.
func TestHoldStoreGetsStoreKeys(t *testing.T) {
	ctx := context.Background()
	clk := newFakeClock()
	holds := &memHolds{clk: clk, until: map[string]time.Time{}}
	l := mustNew(t, nil, clk, WithHoldStore(holds))
	secret := core.SecretIdentity("token", "s3cr3t-token-value")
	long := strings.Repeat("x", 10_000)
	for _, key := range []string{secret, long} {
		if err := l.Delay(ctx, key, time.Second); err != nil {
			t.Fatal(err)
		}
		l.Observe(ctx, key, Signal{RetryAfter: 2 * time.Second})
		l.Observe(ctx, key, Signal{HasRemaining: true, Remaining: 3, Reset: 5 * time.Second})
	}
	for k := range holds.until {
		if strings.Contains(k, "s3cr3t") || len(k) > store.MaxKeyLen {
			t.Fatalf("hold store key %q: a secret or unbounded", k)
		}
	}
	if want := []string{l.Core().Key(secret), l.Core().Key(long)}; len(holds.until) != 2 || holds.until[want[0]].IsZero() || holds.until[want[1]].IsZero() {
		t.Fatalf("hold store keys %v, want %v", holds.until, want)
	}
	for i := range l.shards {
		for k := range l.shards[i].keys {
			if strings.Contains(k, "s3cr3t") || len(k) > store.MaxKeyLen {
				t.Fatalf("local state key %q: a secret or unbounded", k)
			}
		}
	}
	// The secret key is still held back under its store key.
	if tryWait(t, l, clk, secret) {
		t.Fatal("a held secret key started")
	}
}
