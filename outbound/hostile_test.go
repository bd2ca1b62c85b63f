package outbound

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
)

// discardLog keeps nothing: SetConfig logs every swap.
var discardLog = slog.New(slog.DiscardHandler)

// TestHostileHeaders: whatever an upstream puts in its headers, ReadSignal
// does not panic, allocates nothing, returns no negative value and no hold
// over MaxHold; each case's Signal is exact.
func TestHostileHeaders(t *testing.T) {
	now := t0
	far := now.Add(100 * 365 * 24 * time.Hour).Format(http.TimeFormat)
	past := time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC).Format(http.TimeFormat)
	digits := strings.Repeat("9", 5000)
	const allocates = true
	rem := func(n int64, reset time.Duration) Signal {
		return Signal{Remaining: n, HasRemaining: true, Reset: reset}
	}
	for _, tc := range []struct {
		name string
		h    map[string]string
		want Signal
		// allocs is set where ReadSignal allocates: a Retry-After or Date
		// that is neither a number nor an HTTP-date (http.ParseTime's
		// error). Every other case allocates nothing.
		allocs bool
	}{
		{"retry-after past int64", map[string]string{"Retry-After": "99999999999999999999999999"}, Signal{RetryAfter: MaxHold}, false},
		{"retry-after 5000 digits", map[string]string{"Retry-After": digits}, Signal{RetryAfter: MaxHold}, false},
		{"retry-after a year", map[string]string{"Retry-After": strconv.Itoa(365 * 24 * 3600)}, Signal{RetryAfter: MaxHold}, false},
		{"retry-after negative", map[string]string{"Retry-After": "-5"}, Signal{}, allocates},
		{"retry-after junk", map[string]string{"Retry-After": "soon"}, Signal{}, allocates},
		{"retry-after junk date, junk Date", map[string]string{"Retry-After": "Mon, 99 Foo 9999", "Date": "junk"}, Signal{}, allocates},
		{"unix s reset, junk Date", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "4102444800", "Date": "junk"}, rem(0, MaxHold), allocates},
		{"retry-after date, junk Date", map[string]string{"Retry-After": far, "Date": "junk"}, Signal{RetryAfter: MaxHold}, allocates},
		{"retry-after exponent", map[string]string{"Retry-After": "1e9"}, Signal{}, false},
		{"retry-after date a century ahead", map[string]string{"Retry-After": far}, Signal{RetryAfter: MaxHold}, false},
		{"retry-after date ahead, Date in 1970", map[string]string{"Retry-After": far, "Date": past}, Signal{RetryAfter: MaxHold}, false},
		{"retry-after date in 1970", map[string]string{"Retry-After": past}, Signal{}, false},
		{"unix ms reset past int64", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "99999999999999999999"}, rem(0, MaxHold), false},
		{"unix ms reset 5000 digits", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": digits}, rem(0, MaxHold), false},
		{"unix ms reset far ahead", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(now.Add(1000*time.Hour).UnixMilli(), 10)}, rem(0, MaxHold), false},
		{"unix ms reset 30s ahead", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": strconv.FormatInt(now.Add(30*time.Second).UnixMilli(), 10)}, rem(0, 30*time.Second), false},
		{"unix s reset far ahead", map[string]string{"Ratelimit-Remaining": "0", "Ratelimit-Reset": strconv.FormatInt(now.Add(1000*time.Hour).Unix(), 10)}, rem(0, MaxHold), false},
		{"unix s reset 2100, Date in 1970", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "4102444800", "Date": past}, rem(0, MaxHold), false},
		{"unix s reset in the past", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1000000000"}, rem(0, 0), false},
		{"delta just below the Unix cut", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "999999999"}, rem(0, MaxHold), false},
		{"ms delta read as seconds", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "1500"}, rem(0, MaxHold), false},
		{"negative remaining and reset", map[string]string{"X-Ratelimit-Remaining": "-1", "X-Ratelimit-Reset": "-1"}, Signal{}, false},
		{"remaining 5000 digits", map[string]string{"X-Ratelimit-Remaining": digits}, rem(math.MaxInt64, 0), false},
		{"20,000-item RateLimit list", map[string]string{"Ratelimit": strings.Repeat(`"x";r=5;t=1, `, 20000) + `"y";r=0;t=599`}, rem(0, 599*time.Second), false},
		{"draft-07 dictionary, repeated remaining", map[string]string{"Ratelimit": `remaining=0, reset=600, remaining=1000`}, rem(1000, MaxHold), false},
		{"5000 quotes", map[string]string{"Ratelimit": strings.Repeat(`"`, 5000) + `;r=0;t=9`}, rem(0, 9*time.Second), false},
		{"5001 quotes (unbalanced)", map[string]string{"Ratelimit": strings.Repeat(`"`, 5001) + `;r=0;t=9`}, rem(0, 9*time.Second), false},
		{"unclosed quote", map[string]string{"Ratelimit": `"a;r=0;t=9, "b";r=3`}, rem(3, 0), false},
		{"5000 backslashes", map[string]string{"Ratelimit": strings.Repeat(`\`, 5000)}, Signal{}, false},
		{"backslashes in a quoted name", map[string]string{"Ratelimit": `"` + strings.Repeat(`\`, 4999) + `";r=1;t=2`}, Signal{}, false},
		{"5000-digit reset with a 5000-digit fraction", map[string]string{"Ratelimit": `"a";r=0;t=` + digits + "." + digits}, rem(0, MaxHold), false},
		{"5000-digit remaining in RateLimit", map[string]string{"Ratelimit": `"a";r=` + digits + `;t=1`}, rem(math.MaxInt64, time.Second), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lower := map[string]string{}
			for k, v := range tc.h {
				lower[strings.ToLower(k)] = v
			}
			for _, get := range []func(string) string{
				func(k string) string { return tc.h[k] },
				func(k string) string { return lower[k] },
			} {
				got := ReadSignal(get, now)
				if got != tc.want {
					t.Errorf("got %+v, want %+v", got, tc.want)
				}
				if got.RetryAfter < 0 || got.RetryAfter > MaxHold || got.Reset < 0 || got.Reset > MaxHold || got.Remaining < 0 {
					t.Errorf("out of range: %+v", got)
				}
			}
			get := func(k string) string { return tc.h[k] }
			if n := testing.AllocsPerRun(5, func() { ReadSignal(get, now) }); (n != 0) != tc.allocs {
				t.Errorf("%v allocations (allocs %v)", n, tc.allocs)
			}
		})
	}
}

// TestHostileUpstreamCannotRaiseOwnLimit: an upstream saying "1,000
// remaining" after every response never lets more requests start than the
// client's own limit: 5 a second, no burst, is exactly 6 starts in a
// second of fake time (at 0, 200, ..., 1000 ms), the same as with no
// upstream signal at all.
func TestHostileUpstreamCannotRaiseOwnLimit(t *testing.T) {
	for _, observe := range []bool{false, true} {
		t.Run("observe="+strconv.FormatBool(observe), func(t *testing.T) {
			ctx := context.Background()
			clk := newFakeClock()
			l := mustNew(t, mustRate(t, 5, time.Second, 0), clk)
			big := Signal{Remaining: 1000, HasRemaining: true, Reset: time.Minute}
			if observe {
				l.Observe(ctx, "api", big)
			}
			var at []time.Duration
			for step := 0; step <= 100; step++ { // 10 ms steps, 1 s
				for tryWait(t, l, clk, "api") {
					at = append(at, clk.Now().Sub(t0))
					if len(at) > 20 {
						t.Fatalf("starts at %v: more than 20 in a second under 5/s", at)
					}
					if observe {
						l.Observe(ctx, "api", big)
					}
				}
				clk.Advance(10 * time.Millisecond)
			}
			want := []time.Duration{0, 200 * time.Millisecond, 400 * time.Millisecond, 600 * time.Millisecond, 800 * time.Millisecond, time.Second}
			if len(at) != len(want) {
				t.Fatalf("starts at %v, want %v", at, want)
			}
			for i := range want {
				if at[i] != want[i] {
					t.Fatalf("starts at %v, want %v", at, want)
				}
			}
		})
	}
}

// TestHostileCancelStorm: many callers on one key, half of them cancelled
// at random moments while waiting: no caller is stuck behind a cancelled
// one, every Wait either starts (nil) or returns context.Canceled, the
// starts stay within the rate (one at once, then one per 1/rate), and
// nothing is left in the queue.
func TestHostileCancelStorm(t *testing.T) {
	const (
		rate    = 2000 // a second: one every 500 µs, no burst
		callers = 16
		each    = 100
	)
	l, err := New(mustRate(t, rate, time.Second, 0), nil, WithCoreOptions(core.WithLogger(discardLog)))
	if err != nil {
		t.Fatal(err)
	}
	var started, cancelled atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for g := range callers {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(g), 1))
			for range each {
				ctx, cancel := context.WithCancel(context.Background())
				if r.IntN(2) == 0 {
					time.AfterFunc(time.Duration(r.IntN(3000))*time.Microsecond, cancel)
				}
				err := l.Wait(ctx, "GET", "/", "k")
				cancel()
				switch {
				case err == nil:
					started.Add(1)
				case errors.Is(err, context.Canceled):
					cancelled.Add(1)
				default:
					t.Errorf("Wait: %v", err)
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("queue stuck: %d started, %d cancelled", started.Load(), cancelled.Load())
	}
	elapsed := time.Since(begin)
	if got := started.Load() + cancelled.Load(); got != callers*each {
		t.Fatalf("%d Waits returned, want %d", got, callers*each)
	}
	if started.Load() < callers*each/4 {
		t.Errorf("only %d of %d started (%d cancelled)", started.Load(), callers*each, cancelled.Load())
	}
	if bound := int64(elapsed.Seconds()*rate) + 1; started.Load() > bound {
		t.Errorf("%d starts in %v: over the rate (at most %d)", started.Load(), elapsed, bound)
	}
	if n := l.queued("k"); n != 0 {
		t.Errorf("%d left in the queue", n)
	}
}

// TestHostileConcurrentSetConfig: SetConfig flipping between
// configurations with different rules and exempt paths (and nil) while
// callers wait and cancel: no panic, no hang, every Wait returns nil or its
// context's error, and nothing is left queued.
func TestHostileConcurrentSetConfig(t *testing.T) {
	a := mustParse(t, `
rate_limit:
  enabled: true
  algorithm: gcra
  rules:
    - name: a
      paths: ["/x"]
      limit: "200/second"
  default: "200/second"
  exempt_paths: ["/health"]
`)
	b := mustParse(t, `
rate_limit:
  enabled: true
  algorithm: gcra
  rules:
    - name: b
      paths: ["/x"]
      limit: "100/second"
  default: "100/second"
  exempt_paths: ["/y"]
`)
	l, err := New(a, nil, WithCoreOptions(core.WithLogger(discardLog)))
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var flips sync.WaitGroup
	flips.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			cfg := a
			if i%2 == 1 {
				cfg = b
			}
			if i%3 == 0 {
				cfg = nil
			}
			if err := l.SetConfig(cfg); err != nil {
				t.Error(err)
				return
			}
			time.Sleep(50 * time.Microsecond)
		}
	})
	var returned, started, expired atomic.Int64
	// A round whose callers all ran while the flipper was held off the
	// CPU with the limiter off (nil) sees no expiry: up to 5 rounds, until
	// both were seen.
	for round := 0; round < 5 && (started.Load() == 0 || expired.Load() == 0); round++ {
		var wg sync.WaitGroup
		for g := range 16 {
			wg.Go(func() {
				r := rand.New(rand.NewPCG(uint64(g), uint64(round)))
				for range 100 {
					ctx, cancel := context.WithTimeout(context.Background(), time.Duration(r.IntN(20_000))*time.Microsecond)
					err := l.Wait(ctx, "GET", []string{"/x", "/y", "/health"}[r.IntN(3)], "k")
					cancel()
					switch {
					case err == nil:
						started.Add(1)
					case errors.Is(err, context.DeadlineExceeded):
						expired.Add(1)
					default:
						t.Errorf("Wait: %v", err)
					}
					returned.Add(1)
				}
			})
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("stuck: %d of %d Waits returned", returned.Load(), (round+1)*16*100)
		}
	}
	if started.Load() == 0 || expired.Load() == 0 {
		t.Errorf("%d started, %d expired in 5 rounds: the test wants both", started.Load(), expired.Load())
	}
	close(stop)
	flips.Wait()
	if n := l.queued("k"); n != 0 {
		t.Fatalf("%d left queued", n)
	}
}

// TestHostileRedirectKeyPerHost: what remains (README): an upstream that
// redirects makes one key per host it sends the client to (KeyHost), and
// holds each of them: three redirects to fresh hosts, each answer with
// Retry-After: 600, give four keys each held for MaxHold.
func TestHostileRedirectKeyPerHost(t *testing.T) {
	var n atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := n.Add(1)
		w.Header().Set("Retry-After", "600")
		if i <= 3 {
			http.Redirect(w, r, "http://h"+strconv.FormatInt(i, 10)+".invalid/", http.StatusFound)
		}
	}))
	defer srv.Close()
	// Every host resolves to the test server.
	var dialer net.Dialer
	base := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		return dialer.DialContext(ctx, network, srv.Listener.Addr().String())
	}}
	defer base.CloseIdleConnections()
	d := &delayer{}
	c := &http.Client{Transport: NewTransport(base, d)}
	if code := get(t, c, srv.URL); code != http.StatusOK {
		t.Fatalf("status %d", code)
	}
	want := []string{srv.Listener.Addr().String() + " 10m0s", "h1.invalid 10m0s", "h2.invalid 10m0s", "h3.invalid 10m0s"}
	d.mu.Lock()
	defer d.mu.Unlock()
	if strings.Join(d.delays, "|") != strings.Join(want, "|") {
		t.Errorf("holds %q, want %q", d.delays, want)
	}
}

// BenchmarkHostileReadSignal1MB measures ReadSignal on a RateLimit header
// of 1 MiB (net/http's default limit on a response's headers): a list of
// about 80,000 items.
func BenchmarkHostileReadSignal1MB(b *testing.B) {
	h := map[string]string{"Ratelimit": strings.Repeat(`"x";r=5;t=1, `, 1<<20/14)}
	get := func(k string) string { return h[k] }
	b.SetBytes(int64(len(h["Ratelimit"])))
	b.ReportAllocs()
	for b.Loop() {
		_ = ReadSignal(get, t0)
	}
}
