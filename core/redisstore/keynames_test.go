package redisstore_test

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestKeyNames: after one Take of a key under a policy, the keys the
// server holds are exactly those KeyNames names at the server's time, for
// every algorithm with one limit and several, a calendar policy, a prefix
// of the store's own and a key that must be escaped; SlotsKeyName names
// the sorted set of a concurrency limit's slots.
func TestKeyNames(t *testing.T) {
	t.Parallel()
	rc := client(t, redistest.StartServer(t).Addr())
	ctx := context.Background()
	const prefix = "app:"
	st := newStore(t, rc, redisstore.WithPrefix(prefix))
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	cases := []*store.Policy{
		policy("one", algo.FixedWindow, "5/hour"),
		policy("two", algo.FixedWindow, "2/second", "100/hour"),
		policy("slide", algo.SlidingWindow, "5/minute", "50/hour"),
		policy("bucket", algo.TokenBucket, "5/minute"),
		policy("gcra", algo.GCRA, "5/minute", "100/day"),
		calendarPolicy(t, "llm", berlin, "3/day", "5/month"),
	}
	for _, p := range cases {
		t.Run(p.Name, func(t *testing.T) {
			const user = "sub:alice{1}"
			// A window or period that ends during the test would name
			// another key: wait past a boundary that is near.
			for {
				now, err := rc.Time(ctx).Result()
				if err != nil {
					t.Fatal(err)
				}
				if slices.Equal(redisstore.KeyNames(prefix, user, p, now), redisstore.KeyNames(prefix, user, p, now.Add(500*time.Millisecond))) {
					break
				}
				time.Sleep(600 * time.Millisecond)
			}
			if r, err := st.Take(ctx, user, p, 1); err != nil || !r.Allowed {
				t.Fatalf("Take: %+v, %v", r, err)
			}
			now, err := rc.Time(ctx).Result()
			if err != nil {
				t.Fatal(err)
			}
			want := redisstore.KeyNames(prefix, user, p, now)
			got, err := rc.Keys(ctx, prefix+"{sub%3Aalice%7B1%7D}:"+p.Name+"*").Result()
			if err != nil {
				t.Fatal(err)
			}
			slices.Sort(got)
			sorted := slices.Sorted(slices.Values(want))
			if !slices.Equal(got, sorted) || len(want) != len(p.Limits) {
				t.Errorf("keys after a Take: %q\nKeyNames: %q", got, want)
			}
		})
	}
	c := &store.Concurrency{Name: "upload", Limit: 2, Lease: time.Minute}
	if _, ok, err := st.Acquire(ctx, "bob", c); err != nil || !ok {
		t.Fatalf("Acquire: %v %v", ok, err)
	}
	want := redisstore.SlotsKeyName(prefix, "bob", "upload")
	if want != "app:{bob}:upload:inflight" {
		t.Errorf("SlotsKeyName = %q", want)
	}
	if n, err := rc.Exists(ctx, want).Result(); err != nil || n != 1 {
		t.Errorf("EXISTS %s = %d, %v; want 1", want, n, err)
	}
}

// TestKeyNamesExact pins the names, windows and periods of KeyNames at
// a fixed instant.
func TestKeyNamesExact(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Skip("no time zone database:", err)
	}
	now := time.Date(2026, 1, 1, 12, 0, 30, 0, time.UTC)
	two := policy("search", algo.FixedWindow, "2/second", "100/hour")
	gcra := policy("upload", algo.GCRA, "5/minute")
	cal := calendarPolicy(t, "llm", berlin, "3/day", "5/month")
	for _, c := range []struct {
		got, want []string
	}{
		{redisstore.KeyNames("rl:", "alice", two, now), []string{
			"rl:{alice}:search@" + hex(two.CounterID(0)) + ":1767268830",
			"rl:{alice}:search@" + hex(two.CounterID(1)) + ":490908",
		}},
		{redisstore.KeyNames("rl:", "X-Api-Key:hmac:00ff", gcra, now), []string{
			"rl:{X-Api-Key%3Ahmac%3A00ff}:upload@" + hex(gcra.CounterID(0)),
		}},
		// 2026-01-01 00:00 in Berlin is 2025-12-31 23:00 UTC.
		{redisstore.KeyNames("rl:", "", cal, now), []string{
			"rl:{~}:llm@" + hex(cal.CounterID(0)) + ":1767222000",
			"rl:{~}:llm@" + hex(cal.CounterID(0)) + ".2:1767222000",
		}},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("KeyNames = %q\nwant %q", c.got, c.want)
		}
	}
}

// hex is x in 16 lower-case hex digits.
func hex(x uint64) string {
	const digits = "0123456789abcdef"
	b := make([]byte, 16)
	for i := 15; i >= 0; i-- {
		b[i], x = digits[x&15], x>>4
	}
	return string(b)
}
