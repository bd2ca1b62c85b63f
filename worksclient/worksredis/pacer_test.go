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

	"github.com/rlkit/rlkit/worksclient"
)

// starts collects when Wait returned (local monotonic time), for every
// pacer of a test: the pacers of one test run in one process, so they
// share this clock. A start is admitted on the server's clock, where its
// spacing is exact; here it is seen half a round trip later, by a varying
// amount.
type starts struct {
	mu sync.Mutex
	at []time.Time
}

func (s *starts) wait(ctx context.Context, p *Pacer, key string) error {
	err := p.Wait(ctx, key)
	if err == nil {
		now := time.Now()
		s.mu.Lock()
		s.at = append(s.at, now)
		s.mu.Unlock()
	}
	return err
}

func (s *starts) sorted() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.SortedFunc(slices.Values(s.at), time.Time.Compare)
}

// seenJitter is how much later than its admission on the server a start may be
// seen here, on a loaded machine, compared with the one before it.
const seenJitter = 20 * time.Millisecond

// newPacer returns a Pacer closed at the end of the test.
func newPacer(t *testing.T, c redis.UniversalClient, interval time.Duration, opts ...PacerOption) *Pacer {
	p := NewPacer(c, interval, opts...)
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// TestPacerShared: two pacers on two connections to one Redis, as two
// processes would be, four goroutines each on one key: every start is an
// interval after the one before (less the seenJitter of seeing it here), and
// the starts take (n-1) intervals.
func TestPacerShared(t *testing.T) {
	cs, kind := redisClients(t, 2)
	t.Logf("on %s", kind)
	const interval = 50 * time.Millisecond
	var st starts
	pacers := []*Pacer{newPacer(t, cs[0], interval), newPacer(t, cs[1], interval)}
	const perGoroutine = 3
	var wg sync.WaitGroup
	for _, p := range pacers {
		for range 4 {
			wg.Go(func() {
				for range perGoroutine {
					if err := st.wait(t.Context(), p, "PATCH /v1.0/users/{id}"); err != nil {
						t.Error(err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	at := st.sorted()
	if len(at) != 2*4*perGoroutine {
		t.Fatalf("%d starts, want %d", len(at), 2*4*perGoroutine)
	}
	minGap := time.Duration(1 << 62)
	for i := 1; i < len(at); i++ {
		minGap = min(minGap, at[i].Sub(at[i-1]))
	}
	span, want := at[len(at)-1].Sub(at[0]), time.Duration(len(at)-1)*interval
	t.Logf("%d starts over %v (%v of intervals); smallest gap seen here %v", len(at), span, want, minGap)
	if minGap < interval-seenJitter {
		t.Errorf("two starts %v apart, want %v (less %v of seenJitter)", minGap, interval, seenJitter)
	}
	if span < want-seenJitter || span > 2*want+2*time.Second { // a loaded machine stretches it
		t.Errorf("starts spread over %v, want about %v", span, want)
	}
}

// TestPacerRoundTrips: a free key costs two commands (is it held,
// may it start); a request that waits once, four.
func TestPacerRoundTrips(t *testing.T) {
	cs, _ := redisClients(t, 1)
	h := &countHook{}
	cs[0].AddHook(h)
	p := newPacer(t, cs[0], 30*time.Millisecond)
	ctx := t.Context()
	if err := p.Wait(ctx, "warm"); err != nil { // loads the scripts (NOSCRIPT, EVAL)
		t.Fatal(err)
	}
	for _, tc := range []struct {
		key  string
		want int64
	}{{"GET /v1.0/users", 2}, {"GET /v1.0/users", 4}, {"GET /v1.0/orgunits", 2}} {
		before := h.n.Load()
		if err := p.Wait(ctx, tc.key); err != nil {
			t.Fatal(err)
		}
		if got := h.n.Load() - before; got != tc.want {
			t.Errorf("Wait(%q): %d commands, want %d", tc.key, got, tc.want)
		}
	}
	// The scripts survive a SCRIPT FLUSH: EVALSHA fails with NOSCRIPT, EVAL runs them.
	if err := cs[0].ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := p.Wait(ctx, "GET /v1.0/groups"); err != nil {
		t.Fatalf("Wait after SCRIPT FLUSH: %v", err)
	}
	if err := p.Delay(ctx, "GET /v1.0/groups", time.Millisecond); err != nil {
		t.Fatalf("Delay after SCRIPT FLUSH: %v", err)
	}
}

// TestPacerCancel: a waiter whose context ends returns ctx.Err() at
// once and takes no slot: the next request starts an interval after the
// first, not two.
func TestPacerCancel(t *testing.T) {
	cs, _ := redisClients(t, 2)
	const interval = 300 * time.Millisecond
	var st starts
	a, b := newPacer(t, cs[0], interval), newPacer(t, cs[1], interval)
	const key = "POST /v1.0/users"
	if err := st.wait(t.Context(), a, key); err != nil {
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
	if err := st.wait(t.Context(), a, key); err != nil {
		t.Fatal(err)
	}
	at := st.sorted()
	if gap := at[1].Sub(at[0]); gap < interval-seenJitter || gap >= 2*interval-seenJitter {
		t.Errorf("next start %v after the first, want the cancelled slot (%v, not %v)", gap, interval, 2*interval)
	}
	ctx, cancel = context.WithCancel(t.Context())
	cancel()
	if err := a.Wait(ctx, key); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with a done context = %v, want %v", err, context.Canceled)
	}
}

// TestPacerDelay: a hold on the server's clock moves the next start of
// the key, including that of a request already waiting in another
// process; another key is not held.
func TestPacerDelay(t *testing.T) {
	cs, _ := redisClients(t, 2)
	const interval = 100 * time.Millisecond
	var st starts
	a, b := newPacer(t, cs[0], interval), newPacer(t, cs[1], interval)
	const key = "PUT /v1.0/users/{id}"
	if err := st.wait(t.Context(), a, key); err != nil {
		t.Fatal(err)
	}
	asked := &firstCommand{done: make(chan struct{})}
	cs[1].AddHook(asked)
	done := make(chan error, 1)
	go func() { done <- st.wait(context.Background(), b, key) }() // must wait an interval
	<-asked.done
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
	at := st.sorted()
	if gap := at[len(at)-1].Sub(at[0]); gap < 400*time.Millisecond {
		t.Errorf("held request started %v after the first, want at least 400ms", gap)
	}
	if err := a.Delay(t.Context(), key, 0); err != nil {
		t.Errorf("Delay 0 = %v", err)
	}
}

// TestPacerKeys: what a pacer leaves in Redis lives at most two
// intervals past the last start (core/redisstore sets a TTL one period
// past the need, so that most writes keep it) and a hold until it ends, no
// longer; every key has the prefix, and a held key is written only as its
// hash.
func TestPacerKeys(t *testing.T) {
	cs, _ := redisClients(t, 1)
	c := cs[0]
	// Braces in the prefix (once recommended, for one Cluster slot) are
	// dropped: "{t}:" writes the keys of "t:".
	for _, prefix := range []string{"t:", "{t}:"} {
		if err := c.FlushAll(t.Context()).Err(); err != nil {
			t.Fatal(err)
		}
		testPacerKeys(t, c, newPacer(t, c, time.Second, WithKeyPrefix(prefix)))
	}
}

func testPacerKeys(t *testing.T, c *redis.Client, p *Pacer) {
	t.Helper()
	const key = "GET /v1.0/users/{id}"
	if err := p.Wait(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if err := p.Delay(t.Context(), key, 3*time.Second); err != nil {
		t.Fatal(err)
	}
	keys, err := c.Keys(t.Context(), "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 2 {
		t.Fatalf("Redis keys %q, want a counter and a hold", keys)
	}
	for _, k := range keys {
		pttl, err := c.PTTL(t.Context(), k).Result()
		switch {
		case err != nil:
			t.Fatal(err)
		case !strings.HasPrefix(k, "t:"):
			t.Errorf("key %q without the prefix", k)
		case strings.HasPrefix(k, "t:hold:"):
			if strings.Contains(k, "users") || pttl <= 2*time.Second || pttl > 3*time.Second {
				t.Errorf("hold %q with PTTL %v, want the key hashed and 3s", k, pttl)
			}
		case pttl <= 0 || pttl > 2*time.Second+2*time.Millisecond:
			t.Errorf("counter %q with PTTL %v, want at most two intervals", k, pttl)
		}
	}
}

// TestPacerDown: when Redis does not answer, Wait fails, quickly, with
// Redis's error and not a context's; a nil client fails every call.
func TestPacerDown(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", MaxRetries: -1, DialerRetries: 1})
	defer c.Close()
	p := newPacer(t, c, time.Second, WithTimeout(500*time.Millisecond))
	t0 := time.Now()
	err := p.Wait(t.Context(), "k")
	if err == nil || errors.Is(err, context.Canceled) || !strings.HasPrefix(err.Error(), "worksclient: redis pacer:") {
		t.Fatalf("Wait = %v, want Redis's error", err)
	}
	if d := time.Since(t0); d > time.Second {
		t.Errorf("Wait failed after %v, want within the timeout", d)
	}
	for name, p := range map[string]*Pacer{"nil client": NewPacer(nil, 0)} {
		if err := p.Wait(t.Context(), "k"); err == nil || !strings.HasPrefix(err.Error(), "worksclient: redis pacer:") {
			t.Errorf("%s: Wait = %v, want an error", name, err)
		}
		if err := p.Delay(t.Context(), "k", time.Second); err == nil {
			t.Errorf("%s: Delay succeeded", name)
		}
		if err := p.Close(); err != nil {
			t.Errorf("%s: Close = %v", name, err)
		}
	}
}

func TestPacerInterval(t *testing.T) {
	for _, tc := range []struct{ in, want time.Duration }{
		{0, worksclient.DefaultInterval}, {-time.Second, worksclient.DefaultInterval},
		{1500 * time.Nanosecond, time.Microsecond}, {time.Nanosecond, time.Microsecond}, {time.Second, time.Second},
		{1<<63 - 1, time.Duration(1 << 60).Truncate(time.Microsecond)},
	} {
		if got := NewPacer(nil, tc.in).Interval(); got != tc.want {
			t.Errorf("NewPacer(%v).Interval() = %v, want %v", tc.in, got, tc.want)
		}
	}
}
