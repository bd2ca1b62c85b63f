package redisstore_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// inspectYAML has rules whose counts stay exact for minutes whenever a
// test runs: a GCRA and a token bucket per hour (their first unit comes
// back after six minutes), and a fixed window per day.
const inspectYAML = `
rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - name: upload
      paths: ["/upload"]
      limit: "10/hour"
      algorithm: gcra
    - name: search
      paths: ["/search"]
      limit: ["5/hour", "20/day"]
      algorithm: token_bucket
    - name: daily
      paths: ["/daily"]
      limit: "7/day"
    - name: login
      paths: ["/login"]
      limit: "3/hour"
      algorithm: gcra
      key: ip
`

// counted is a limiter over s that has counted known requests: upload
// 4 for alice, 10 for bob (at the limit) and 1 for each of u0..u29;
// search 2 for alice and 6 for bob (denied once); daily 3 for alice;
// login 3 from 192.0.2.1.
func counted(t *testing.T, s *redisstore.Store) *core.Limiter {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(inspectYAML), "inspect.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lim := core.NewLimiter(cfg, core.WithStore(s))
	ctx := context.Background()
	awayFromMidnight(t)
	decide := func(path, identity string, n int) {
		for range n {
			if d := lim.Decide(ctx, "GET", core.Path(path), identity, false); d.Err != nil {
				t.Fatal(d.Err)
			}
		}
	}
	decide("/upload", "alice", 4)
	decide("/upload", "bob", 10)
	for i := range 30 {
		decide("/upload", "u"+strings.Repeat("x", i%3)+string(rune('a'+i)), 1)
	}
	decide("/search", "alice", 2)
	decide("/search", "bob", 6)
	decide("/daily", "alice", 3)
	decide("/login", "192.0.2.1", 3)
	return lim
}

// awayFromMidnight waits, when the day (UTC) ends within a minute, until
// it has ended, so that the fixed window per day holds every count of a
// test.
func awayFromMidnight(t *testing.T) {
	now := time.Now().UTC()
	if left := now.Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(now); left < time.Minute {
		t.Logf("waiting %v for the day to end", left)
		<-time.After(left + time.Second)
	}
}

// TestInspect: Inspect reads what a limiter over the store counted, per
// limit, without counting: remaining, reset and, for a key at its limit,
// the wait of the next request; a key never counted has every limit's
// capacity. It writes nothing, on a server and on a Cluster.
func TestInspect(t *testing.T) {
	t.Parallel()
	for _, c := range backends {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rc := c.client(t)
			s := newStore(t, rc)
			lim := counted(t, s)
			cfg := lim.Config()
			ctx := context.Background()
			size := dbsize(t, rc)
			// Servers that never ran the script (restarted, or a node that
			// never served a decision): Inspect loads it.
			if err := rc.ScriptFlush(ctx).Err(); err != nil {
				t.Fatal(err)
			}

			got, err := s.Inspect(ctx, cfg.Rule("upload").Policy, "alice", "bob", "carol")
			if err != nil || len(got) != 3 {
				t.Fatalf("Inspect upload: %v, %v", got, err)
			}
			for i, w := range []struct {
				key       string
				remaining int64
				over      bool
			}{{"alice", 6, false}, {"bob", 0, true}, {"carol", 10, false}} {
				k := got[i]
				l := k.Limits[0]
				if k.Key != w.key || k.Tag != w.key || len(k.Limits) != 1 || l.Remaining != w.remaining || k.Remaining() != w.remaining || k.Over() != w.over {
					t.Errorf("upload %s: %+v; want remaining %d, over %v", w.key, k, w.remaining, w.over)
				}
				// GCRA 10/hour: a unit every 6 minutes.
				if used := 10 - w.remaining; l.ResetAfter <= time.Duration(used)*6*time.Minute-time.Minute || l.ResetAfter > time.Duration(used)*6*time.Minute {
					t.Errorf("upload %s: reset after %v, want about %d × 6m", w.key, l.ResetAfter, used)
				}
				if w.over != (l.RetryAfter > 0) || w.over && (l.RetryAfter <= 5*time.Minute || l.RetryAfter > 6*time.Minute || k.RetryAfter != l.RetryAfter) {
					t.Errorf("upload %s: retry after %v (key %v), want about 6m when over, else 0", w.key, l.RetryAfter, k.RetryAfter)
				}
			}

			got, err = s.Inspect(ctx, cfg.Rule("search").Policy, "alice", "bob")
			if err != nil {
				t.Fatal(err)
			}
			if a := got[0]; a.Limits[0].Remaining != 3 || a.Limits[1].Remaining != 18 || a.Over() || a.Remaining() != 3 {
				t.Errorf("search alice: %+v; want 3 of 5 and 18 of 20 left", a)
			}
			if b := got[1]; b.Limits[0].Remaining != 0 || b.Limits[1].Remaining != 15 || !b.Over() || b.Limits[0].RetryAfter <= 0 || b.Limits[1].RetryAfter != 0 {
				t.Errorf("search bob: %+v; want 0 of 5 (over, with a wait) and 15 of 20 (no wait)", b)
			}

			got, err = s.Inspect(ctx, cfg.Rule("daily").Policy, "alice")
			if d := got[0].Limits[0]; err != nil || d.Remaining != 4 || d.ResetAfter <= 0 || d.ResetAfter > 24*time.Hour || d.RetryAfter != 0 {
				t.Errorf("daily alice: %+v, %v; want 4 left", got, err)
			}

			key, err := lim.RuleKey("192.0.2.1", "login")
			if err != nil {
				t.Fatal(err)
			}
			if got, err = s.Inspect(ctx, cfg.Rule("login").Policy, key); err != nil || got[0].Tag != "ip%3A192.0.2.1" || !got[0].Over() {
				t.Errorf("login %s: %+v, %v; want its tag, over", key, got, err)
			}

			if after := dbsize(t, rc); after != size {
				t.Errorf("DBSIZE %d after Inspect, %d before: Inspect wrote", after, size)
			}
		})
	}
}

// TestInspectDenyCache: Inspect neither reads nor fills the deny cache. A
// key at its limit, which the store has denied (and cached), reset by
// another store, is inspected full at once; one inspected while over its
// limit, then reset elsewhere, is admitted by the store that inspected
// it.
func TestInspectDenyCache(t *testing.T) {
	t.Parallel()
	rc := client(t, redistest.StartServer(t).Addr())
	a, b := newStore(t, rc), newStore(t, rc)
	lim := counted(t, a) // bob at his limit
	p := lim.Config().Rule("upload").Policy
	ctx := context.Background()
	if r, err := a.Take(ctx, "bob", p, 1); err != nil || r.Allowed {
		t.Fatalf("bob's 11th upload: %+v, %v; want denied (and cached)", r, err)
	}
	if _, err := b.Reset(ctx, "bob", p); err != nil {
		t.Fatal(err)
	}
	if got, err := a.Inspect(ctx, p, "bob"); err != nil || got[0].Remaining() != 10 || got[0].Over() {
		t.Errorf("bob reset elsewhere, inspected: %+v, %v; want 10 left", got, err)
	}
	// alice to her limit through b, inspected by a, reset through b.
	for range 6 {
		if r, err := b.Take(ctx, "alice", p, 1); err != nil || !r.Allowed {
			t.Fatalf("alice: %+v, %v", r, err)
		}
	}
	if got, err := a.Inspect(ctx, p, "alice"); err != nil || !got[0].Over() {
		t.Fatalf("alice at her limit: %+v, %v; want over", got, err)
	}
	if _, err := b.Reset(ctx, "alice", p); err != nil {
		t.Fatal(err)
	}
	if r, err := a.Take(ctx, "alice", p, 1); err != nil || !r.Allowed || r.Remaining != 9 {
		t.Errorf("alice after a reset elsewhere: %+v, %v; want admitted, 9 left", r, err)
	}
}

// TestScan: Scan finds, with SCAN, exactly the keys counted under a
// policy, once each, with their states, and reports whether it scanned
// everything; a bound below the keyspace stops it at the bound. The same
// on a server and on a Cluster.
func TestScan(t *testing.T) {
	t.Parallel()
	for _, c := range backends {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rc := c.client(t)
			s := newStore(t, rc)
			lim := counted(t, s)
			cfg := lim.Config()
			ctx := context.Background()
			size := dbsize(t, rc)

			scan := func(rule string, max int64) (map[string]int64, redisstore.ScanResult) {
				t.Helper()
				found := map[string]int64{}
				res, err := s.Scan(ctx, cfg.Rule(rule).Policy, max, func(states []redisstore.KeyState) error {
					for _, k := range states {
						if _, dup := found[k.Key]; dup {
							t.Errorf("%s: %q reported twice", rule, k.Key)
						}
						found[k.Key] = k.Remaining()
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				return found, res
			}
			found, res := scan("upload", 1_000_000)
			want := map[string]int64{"alice": 6, "bob": 0}
			for i := range 30 {
				want["u"+strings.Repeat("x", i%3)+string(rune('a'+i))] = 9
			}
			if !maps.Equal(found, want) || !res.Complete || res.Examined != size || res.Pattern != "rl:{*}:upload@*" {
				t.Errorf("Scan upload: %v, %+v; want %v, complete, %d examined", found, res, want, size)
			}
			found, res = scan("search", 1_000_000)
			if !maps.Equal(found, map[string]int64{"alice": 3, "bob": 0}) || !res.Complete {
				t.Errorf("Scan search (two limits, a key each): %v, %+v", found, res)
			}
			found, _ = scan("login", 1_000_000)
			if !maps.Equal(found, map[string]int64{"ip:192.0.2.1": 0}) {
				t.Errorf("Scan login: %v; want the IP's key decoded", found)
			}
			_, res = scan("upload", 10)
			// A node whose scan ended examined all its keys, which may be
			// more than it asked for: exactly 10 on one server.
			if res.Complete || res.Examined < 10 || res.Examined >= size || c.name == "server" && res.Examined != 10 {
				t.Errorf("Scan bounded at 10 of %d keys: %+v; want 10 examined, not complete", size, res)
			}
			if _, err := s.Scan(ctx, cfg.Rule("upload").Policy, 0, nil); err == nil {
				t.Errorf("Scan bounded at 0: no error")
			}
		})
	}
}

// TestInFlightCount: InFlight counts the slots held of a key, without
// taking one.
func TestInFlightCount(t *testing.T) {
	t.Parallel()
	rc := client(t, redistest.StartServer(t).Addr())
	s := newStore(t, rc)
	ctx := context.Background()
	c := &store.Concurrency{Name: "export", Limit: 3, Lease: time.Minute}
	var leases []uint64
	for range 2 {
		lease, ok, err := s.Acquire(ctx, "alice", c)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		leases = append(leases, lease)
	}
	for _, want := range []int64{2, 2} { // reading twice takes nothing
		if n, err := s.InFlight(ctx, "alice", "export"); err != nil || n != want {
			t.Errorf("InFlight alice = %d, %v; want %d", n, err, want)
		}
	}
	// A lease that ended, of a process that died holding it, is not held.
	if err := rc.ZAdd(ctx, "rl:{alice}:export:inflight", redis.Z{Score: 1, Member: "ended"}).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := s.InFlight(ctx, "alice", "export"); err != nil || n != 2 {
		t.Errorf("InFlight alice with an ended lease = %d, %v; want 2", n, err)
	}
	if err := s.Release(ctx, "alice", c, leases[0]); err != nil {
		t.Fatal(err)
	}
	if n, err := s.InFlight(ctx, "alice", "export"); err != nil || n != 1 {
		t.Errorf("InFlight alice after a release = %d, %v; want 1", n, err)
	}
	if n, err := s.InFlight(ctx, "bob", "export"); err != nil || n != 0 {
		t.Errorf("InFlight bob = %d, %v; want 0", n, err)
	}
}

func dbsize(t *testing.T, rc redis.UniversalClient) int64 {
	t.Helper()
	n, err := rc.DBSize(context.Background()).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestTags: a key longer than 128 bytes once escaped, which Scan finds as
// a digest (no Key), is read, counted in flight and reset again by its
// tag; a tag that is neither an escaped key nor a digest is refused.
func TestTags(t *testing.T) {
	t.Parallel()
	rc := client(t, redistest.StartServer(t).Addr())
	s := newStore(t, rc)
	ctx := context.Background()
	p := &store.Policy{Name: "upload", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 10, Period: time.Hour}}}
	long := strings.Repeat("é", 40)
	for range 3 {
		if r, err := s.Take(ctx, long, p, 1); err != nil || !r.Allowed {
			t.Fatal(r, err)
		}
	}
	c := &store.Concurrency{Name: "upload", Limit: 3, Lease: time.Minute}
	if _, ok, err := s.Acquire(ctx, long, c); err != nil || !ok {
		t.Fatal(ok, err)
	}
	var found []redisstore.KeyState
	if _, err := s.Scan(ctx, p, 1000, func(st []redisstore.KeyState) error { found = append(found, st...); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(found) != 1 || found[0].Key != "" || !strings.HasPrefix(found[0].Tag, "#") || found[0].Remaining() != 7 {
		t.Fatalf("Scan: %+v; want one digest, 7 left", found)
	}
	tag := found[0].Tag
	got, err := s.InspectTags(ctx, p, tag, "alice")
	if err != nil || len(got) != 2 || got[0].Tag != tag || got[0].Key != "" || got[0].Remaining() != 7 || got[1].Key != "alice" || got[1].Remaining() != 10 {
		t.Errorf("InspectTags: %+v, %v; want the digest's 7 left, alice's 10", got, err)
	}
	if n, err := s.InFlightTag(ctx, tag, "upload"); err != nil || n != 1 {
		t.Errorf("InFlightTag: %d, %v; want 1", n, err)
	}
	if cleared, err := s.ResetTag(ctx, tag, p); err != nil || !cleared {
		t.Errorf("ResetTag: %v, %v; want cleared", cleared, err)
	}
	if got, err := s.Inspect(ctx, p, long); err != nil || got[0].Remaining() != 10 {
		t.Errorf("after ResetTag: %+v, %v; want 10 left", got, err)
	}
	for _, bad := range []string{"ip:192.0.2.1", "a}b", "#short"} {
		if _, err := s.InspectTags(ctx, p, bad); err == nil {
			t.Errorf("InspectTags(%q): no error", bad)
		}
		if _, err := s.ResetTag(ctx, bad, p); err == nil {
			t.Errorf("ResetTag(%q): no error", bad)
		}
		if _, err := s.InFlightTag(ctx, bad, "upload"); err == nil {
			t.Errorf("InFlightTag(%q): no error", bad)
		}
	}
}

// TestScanPolicies: one scan finds the keys of several policies (a rule
// and its penalty's ban), each once, with its state under each, on a
// server and on a Cluster; the keys of other policies are left out.
func TestScanPolicies(t *testing.T) {
	t.Parallel()
	for _, c := range backends {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			rc := c.client(t)
			s := newStore(t, rc)
			ctx := context.Background()
			up := &store.Policy{Name: "upload", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 10, Period: time.Hour}}}
			ban := &store.Policy{Name: "upload!ban", Algorithm: algo.GCRA, Limits: []algo.Limit{{Count: 1, Period: time.Hour, Burst: 1}}}
			day := &store.Policy{Name: "uploads", Algorithm: algo.FixedWindow, Limits: []algo.Limit{{Count: 5, Period: 24 * time.Hour}}}
			other := &store.Policy{Name: "upload!denials", Algorithm: algo.SlidingWindow, Limits: []algo.Limit{{Count: 2, Period: time.Hour}}}
			awayFromMidnight(t)
			take := func(p *store.Policy, key string, n int) {
				for range n {
					if _, err := s.Take(ctx, key, p, 1); err != nil {
						t.Fatal(err)
					}
				}
			}
			take(up, "alice", 2)
			take(up, "bob", 1)
			take(ban, "bob", 1)
			take(ban, "carol", 1)
			take(day, "dave", 3)
			take(other, "erin", 1)
			type row struct{ up, ban, day int64 }
			got := map[string]row{}
			res, err := s.ScanPolicies(ctx, []*store.Policy{up, ban, day}, 1_000_000, func(states [][]redisstore.KeyState) error {
				if len(states) != 3 || len(states[1]) != len(states[0]) || len(states[2]) != len(states[0]) {
					t.Fatalf("states of %d policies", len(states))
				}
				for j, k := range states[0] {
					if _, dup := got[k.Key]; dup || states[1][j].Key != k.Key || states[2][j].Tag != k.Tag {
						t.Errorf("%q reported twice, or out of order", k.Key)
					}
					got[k.Key] = row{k.Remaining(), states[1][j].Remaining(), states[2][j].Remaining()}
				}
				return nil
			})
			want := map[string]row{"alice": {8, 1, 5}, "bob": {9, 0, 5}, "carol": {10, 0, 5}, "dave": {10, 1, 2}}
			if err != nil || !maps.Equal(got, want) || !res.Complete || res.Pattern != "rl:{*}:upload*" || res.Examined != dbsize(t, rc) {
				t.Errorf("ScanPolicies: %v, %+v, %v; want %v, complete, pattern rl:{*}:upload*", got, res, err, want)
			}
		})
	}
}
