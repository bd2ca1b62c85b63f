package redisstore_test

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	_ "time/tzdata" // Europe/Berlin, on machines without a zone database

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

func calendarPolicy(t testing.TB, name string, loc *time.Location, limits ...string) *store.Policy {
	t.Helper()
	p := &store.Policy{Name: name, Location: loc}
	for _, s := range limits {
		l, err := algo.ParseCalendarLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		p.Limits = append(p.Limits, l)
	}
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCalendarRedis counts calendar limits (3 a day, 5 a month in
// Europe/Berlin) on a Redis server and on a Cluster, on the server's
// clock, which a test cannot move: within the day it is, it checks the
// counts, each counter's key (named by its period's start, in Unix
// seconds) and its TTL (the period's end), and that a process whose clock
// is a day ahead or behind the server's counts in the server's period,
// while one years off is refused with an error.
func TestCalendarRedis(t *testing.T) {
	t.Parallel()
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"server", "cluster"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			var c redis.UniversalClient
			if kind == "server" {
				c = client(t, redistest.StartServer(t).Addr())
			} else {
				c = clusterClient(t, redistest.StartCluster(t))
			}
			calendarRedis(t, c, berlin)
		})
	}
}

func calendarRedis(t *testing.T, c redis.UniversalClient, loc *time.Location) {
	ctx := context.Background()
	if left := time.Until(time.Unix(0, algo.CalendarDay.Periods(time.Now().UnixNano(), loc).End)); left < 10*time.Second {
		time.Sleep(left + 20*time.Millisecond) // all in one day
	}
	s := newStore(t, c, redisstore.WithDenyCache(false))
	p := calendarPolicy(t, "llm", loc, "3/day", "5/month")
	now := time.Now()
	day, month := p.Periods(0, now.UnixNano()), p.Periods(1, now.UnixNano())
	r, err := s.Take(ctx, "alice", p, 2)
	if err != nil || !r.Allowed || r.Limits[0].Remaining != 1 || r.Limits[1].Remaining != 3 {
		t.Fatalf("Take: %+v, %v; want admitted, 1 and 3 left", r, err)
	}
	rule := "rl:{alice}:llm@" + fmt.Sprintf("%016x", p.CounterID(0))
	for i, ps := range []algo.Periods{day, month} {
		key := rule
		if i > 0 {
			key += ".2"
		}
		key += ":" + strconv.FormatInt(ps.Start/int64(time.Second), 10)
		ttl, err := c.PTTL(ctx, key).Result()
		// TTLs are whole milliseconds, rounded up, from the server's
		// millisecond: up to 2ms past the period's end, and PTTL rounds
		// the time left down.
		want := time.Until(time.Unix(0, ps.End))
		if err != nil || ttl > want+3*time.Millisecond || ttl < want-5*time.Second {
			t.Fatalf("PTTL %s = %v, %v; want about %v (the period's end)", key, ttl, err, want)
		}
		if v, err := c.Get(ctx, key).Result(); err != nil || v != "2" {
			t.Fatalf("GET %s = %q, %v; want 2", key, v, err)
		}
	}

	// A process whose clock is a day ahead, or a day behind, still counts
	// in the server's period: it sends the periods around its own time,
	// and the script takes the one that holds the server's.
	ahead := store.NewManualClock(now.AddDate(0, 0, 1))
	behind := store.NewManualClock(now.AddDate(0, 0, -1))
	sAhead := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithClock(ahead))
	sBehind := newStore(t, c, redisstore.WithDenyCache(false), redisstore.WithClock(behind))
	if r, err := sAhead.Take(ctx, "alice", p, 1); err != nil || !r.Allowed || r.Limits[0].Remaining != 0 || r.Limits[1].Remaining != 2 {
		t.Fatalf("Take from a clock a day ahead: %+v, %v; want admitted in the server's day, 0 and 2 left", r, err)
	}
	before := time.Now()
	r, err = sBehind.Take(ctx, "alice", p, 1)
	if err != nil || r.Allowed || r.Limit != p.Limits[0] {
		t.Fatalf("Take from a clock a day behind: %+v, %v; want denied by the server's day", r, err)
	}
	if want := time.Unix(0, day.End).Sub(before); r.RetryAfter > want+time.Millisecond || r.RetryAfter < want-5*time.Second {
		t.Fatalf("RetryAfter %v, want about %v (to the server's midnight)", r.RetryAfter, want)
	}
	if r, err := s.Peek(ctx, "alice", p, 1); err != nil || r.Allowed || r.Limits[1].Remaining != 2 {
		t.Fatalf("Peek: %+v, %v", r, err)
	}

	// Years off: no period sent holds the server's time.
	far := newStore(t, c, redisstore.WithClock(store.NewManualClock(time.Date(2001, 6, 1, 12, 0, 0, 0, loc))))
	if _, err := far.Take(ctx, "alice", p, 1); err == nil || !strings.Contains(err.Error(), `redisstore: policy "llm": the Redis server's clock (`) ||
		!strings.Contains(err.Error(), ") is more than a calendar period away from this process's clock: calendar limits need them within a period of each other") {
		t.Fatalf("Take from a clock in 2001: %v; want the clocks' disagreement", err)
	}

	// Reset forgets both counters, whatever day the caller's clock says.
	if cleared, err := sAhead.Reset(ctx, "alice", p); err != nil || !cleared {
		t.Fatalf("Reset = %v, %v; want true", cleared, err)
	}
	if r, err := s.Take(ctx, "alice", p, 3); err != nil || !r.Allowed || r.Limits[1].Remaining != 2 {
		t.Fatalf("Take after Reset: %+v, %v", r, err)
	}

	// Many goroutines at once, in batches: exactly the day's count.
	big := calendarPolicy(t, "burst", loc, "100/day")
	var admitted, failed atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for range 5 {
				r, err := s.Take(ctx, "bob", big, 1)
				switch {
				case err != nil:
					failed.Add(1)
				case r.Allowed:
					admitted.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if admitted.Load() != 100 || failed.Load() != 0 {
		t.Fatalf("320 takes of 100 a day: %d admitted, %d failed; want 100, 0", admitted.Load(), failed.Load())
	}
	if !redisstore.Batching(s) {
		t.Fatalf("the server refused the batch script")
	}
}
