package worksredis

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// serverStarts collects the server time (µs) of every start of pacers.
type serverStarts struct {
	mu sync.Mutex
	us []int64
}

func (s *serverStarts) hook(p *Pacer) *Pacer {
	p.onStart = func(us int64) {
		s.mu.Lock()
		s.us = append(s.us, us)
		s.mu.Unlock()
	}
	return p
}

func (s *serverStarts) sorted() []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.us))
}

// TestRedisPacerShared: two pacers on two connections to one Redis, as two
// processes would be, four goroutines each on one key: every start is at
// least an interval after the one before, on the server's clock.
func TestRedisPacerShared(t *testing.T) {
	cs, kind := redisClients(t, 2)
	t.Logf("on %s", kind)
	const interval = 50 * time.Millisecond
	var st serverStarts
	pacers := []*Pacer{st.hook(NewPacer(cs[0], interval)), st.hook(NewPacer(cs[1], interval))}
	const perGoroutine = 3
	var wg sync.WaitGroup
	t0 := time.Now()
	for _, p := range pacers {
		for range 4 {
			wg.Go(func() {
				for range perGoroutine {
					if err := p.Wait(t.Context(), "PATCH /v1.0/users/{id}"); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(t0)
	us := st.sorted()
	if len(us) != 2*4*perGoroutine {
		t.Fatalf("%d starts, want %d", len(us), 2*4*perGoroutine)
	}
	minGap := int64(1 << 62)
	for i := 1; i < len(us); i++ {
		minGap = min(minGap, us[i]-us[i-1])
	}
	t.Logf("%d starts in %v; smallest gap on the server's clock %v", len(us), elapsed, time.Duration(minGap)*time.Microsecond)
	if minGap < interval.Microseconds() {
		t.Errorf("two starts %v apart on the server's clock, want at least %v", time.Duration(minGap)*time.Microsecond, interval)
	}
	if span, want := time.Duration(us[len(us)-1]-us[0])*time.Microsecond, time.Duration(len(us)-1)*interval; span > want+time.Second {
		t.Errorf("starts spread over %v, want about %v", span, want)
	}
}

// TestRedisPacerRoundTrips: a free key costs one round trip, a busy one two
// (reserve, then confirm after the sleep).
func TestRedisPacerRoundTrips(t *testing.T) {
	cs, _ := redisClients(t, 1)
	h := &countHook{}
	cs[0].AddHook(h)
	p := NewPacer(cs[0], 30*time.Millisecond)
	ctx := t.Context()
	if err := p.Wait(ctx, "warm"); err != nil { // loads the script (NOSCRIPT, EVAL)
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want int64
	}{{"GET /v1.0/users", 1}, {"GET /v1.0/users", 2}, {"GET /v1.0/orgunits", 1}} {
		before := h.n.Load()
		if err := p.Wait(ctx, tc.key); err != nil {
			t.Fatal(err)
		}
		if got := h.n.Load() - before; got != tc.want {
			t.Errorf("Wait(%q): %d commands, want %d", tc.key, got, tc.want)
		}
	}
	// The script survives a SCRIPT FLUSH: EVALSHA fails with NOSCRIPT, EVAL runs it.
	if err := cs[0].ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx, "GET /v1.0/groups"); err != nil {
		t.Fatalf("Wait after SCRIPT FLUSH: %v", err)
	}
}

// TestRedisPacerCancel: a waiter whose context ends returns ctx.Err() at
// once and gives its slot back: the next request takes it.
func TestRedisPacerCancel(t *testing.T) {
	cs, _ := redisClients(t, 2)
	const interval = 300 * time.Millisecond
	var st serverStarts
	a, b := st.hook(NewPacer(cs[0], interval)), st.hook(NewPacer(cs[1], interval))
	const key = "POST /v1.0/users"
	if err := a.Wait(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Millisecond)
	defer cancel()
	t0 := time.Now()
	err := b.Wait(ctx, key)
	if !errors.Is(err, context.DeadlineExceeded) || err != ctx.Err() {
		t.Fatalf("Wait = %v, want ctx.Err() (%v)", err, context.DeadlineExceeded)
	}
	if d := time.Since(t0); d > 30*time.Millisecond+interval/2 {
		t.Errorf("cancelled Wait returned after %v", d)
	}
	if err := a.Wait(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	us := st.sorted()
	gap := time.Duration(us[1]-us[0]) * time.Microsecond
	if gap < interval || gap >= 2*interval {
		t.Errorf("next start %v after the first, want the cancelled slot (%v, not %v)", gap, interval, 2*interval)
	}
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	if err := a.Wait(ctx, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a done context = %v, want %v", err, context.Canceled)
	}
}

// TestRedisPacerDelay: a hold on the server's clock moves the next start of
// the key, including one already asleep; another key is not held.
func TestRedisPacerDelay(t *testing.T) {
	cs, _ := redisClients(t, 2)
	const interval = 100 * time.Millisecond
	var st serverStarts
	a, b := st.hook(NewPacer(cs[0], interval)), st.hook(NewPacer(cs[1], interval))
	const key = "PUT /v1.0/users/{id}"
	if err := a.Wait(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	reserved := &firstCommand{done: make(chan struct{})}
	cs[1].AddHook(reserved)
	done := make(chan error, 1)
	go func() { done <- b.Wait(context.Background(), key) }() // reserves +interval
	<-reserved.done
	if err := a.Delay(t.Context(), key, 400*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	if err := a.Wait(t.Context(), "other"); err != nil || time.Since(t0) > 300*time.Millisecond {
		t.Fatalf("other key: %v after %v, want at once", err, time.Since(t0))
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	us := st.sorted()
	if gap := time.Duration(us[len(us)-1]-us[0]) * time.Microsecond; gap < 400*time.Millisecond {
		t.Errorf("held request started %v after the first, want at least 400ms", gap)
	}
	if err := a.Delay(t.Context(), key, 0); err != nil {
		t.Errorf("Delay 0 = %v", err)
	}
}

// TestRedisPacerExpiry: the key's hash lives about an interval past the
// last start, no longer.
func TestRedisPacerExpiry(t *testing.T) {
	cs, _ := redisClients(t, 1)
	p := NewPacer(cs[0], time.Second, WithKeyPrefix("t:"))
	if err := p.Wait(t.Context(), "GET /v1.0/users/{id}"); err != nil {
		t.Fatal(err)
	}
	pttl, err := cs[0].PTTL(t.Context(), "t:GET%20/v1.0/users/%7Bid%7D").Result()
	if err != nil || pttl <= 0 || pttl > time.Second+2*time.Millisecond {
		t.Fatalf("PTTL = %v, %v; want at most the interval", pttl, err)
	}
}

// TestRedisPacerDown: when Redis does not answer, Wait fails, quickly, with
// Redis's error and not a context's.
func TestRedisPacerDown(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	p := NewPacer(c, time.Second, WithTimeout(500*time.Millisecond))
	t0 := time.Now()
	err := p.Wait(t.Context(), "k")
	if err == nil || errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "worksclient: redis pacer:") {
		t.Fatalf("Wait = %v, want Redis's error", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Wait failed after %v, want within the timeout", d)
	}
	if err := NewPacer(nil, 0).Wait(t.Context(), "k"); err == nil {
		t.Error("Wait with a nil client succeeded")
	}
}

func TestRedisKey(t *testing.T) {
	p := NewPacer(nil, 0)
	long := "GET /" + strings.Repeat("a/", 150)
	for key, want := range map[string]string{
		"PATCH /v1.0/users/{id}": "worksclient:pace:PATCH%20/v1.0/users/%7Bid%7D",
		"100%":                   "worksclient:pace:100%25",
		"#x":                     "worksclient:pace:%23x",
		"a\nb\x7f":               "worksclient:pace:a%0Ab%7F",
		"":                       "worksclient:pace:",
	} {
		if got := p.redisKey(key); got != want {
			t.Errorf("redisKey(%q) = %q, want %q", key, got, want)
		}
	}
	if got := p.redisKey(long); !strings.HasPrefix(got, "worksclient:pace:#") || len(got) != len("worksclient:pace:#")+43 {
		t.Errorf("redisKey of a long key = %q, want prefix, '#' and a hash", got)
	}
	if p.redisKey(long) == p.redisKey(long+"a/") {
		t.Error("two long keys share a Redis key")
	}
	if got := NewPacer(nil, 1500*time.Nanosecond).Interval(); got != time.Microsecond {
		t.Errorf("Interval = %v, want whole microseconds", got)
	}
}
