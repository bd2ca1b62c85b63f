package redisstore_test

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/core/storetest"
	"github.com/rlkit/rlkit/internal/redistest"
)

var algorithms = []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA}

// client returns a client for addr as a service would configure it: context
// deadlines honoured, so the store's timeout bounds every socket operation.
func client(t testing.TB, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{Addr: addr, ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// backends are the two Redis deployments tests run on: a server and a
// 3-master Cluster, each started for the test, with a client of it.
var backends = []struct {
	name   string
	client func(t *testing.T) redis.UniversalClient
}{
	{"server", func(t *testing.T) redis.UniversalClient { return client(t, redistest.StartServer(t).Addr()) }},
	{"cluster", func(t *testing.T) redis.UniversalClient { return clusterClient(t, redistest.StartCluster(t)) }},
}

func clusterClient(t testing.TB, c *redistest.Cluster) *redis.ClusterClient {
	cc := redis.NewClusterClient(&redis.ClusterOptions{Addrs: c.Addrs(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = cc.Close() })
	return cc
}

// newStore returns a store on c that is closed at the end of the test. Its
// timeout is redistest.StoreTimeout unless opts set one: the tests that use it
// are about counting and round trips, not time-outs.
func newStore(t testing.TB, c redis.UniversalClient, opts ...redisstore.Option) *redisstore.Store {
	t.Helper()
	s, err := redisstore.New(c, append([]redisstore.Option{redisstore.WithTimeout(redistest.StoreTimeout)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestConformanceRedisServer(t *testing.T) {
	t.Parallel()
	c := client(t, redistest.StartServer(t).Addr())
	storetest.Run(t, func() store.Store { return newStore(t, c) })
}

func TestConformanceCluster(t *testing.T) {
	t.Parallel()
	c := clusterClient(t, redistest.StartCluster(t))
	storetest.Run(t, func() store.Store { return newStore(t, c) })
}

// TestConformanceIncrExpire runs the suite with the INCR+EXPIRE layout.
func TestConformanceIncrExpire(t *testing.T) {
	t.Parallel()
	c := client(t, redistest.StartServer(t).Addr())
	storetest.Run(t, func() store.Store { return newStore(t, c, redisstore.WithIncrExpireKeys(true)) })
}

// TestConformanceMiniredis runs the suite against miniredis, the fallback
// of machines without redis-server.
func TestConformanceMiniredis(t *testing.T) {
	t.Parallel()
	c := client(t, redistest.StartMini(t).Addr())
	storetest.Run(t, func() store.Store { return newStore(t, c) })
}

func policy(name string, a algo.Algorithm, limits ...string) *store.Policy {
	p := &store.Policy{Name: name, Algorithm: a}
	for _, s := range limits {
		l, err := algo.ParseLimit(s)
		if err != nil {
			panic(err)
		}
		p.Limits = append(p.Limits, l)
	}
	return p
}

// commands counts the commands a client sends, by name.
type commands struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *commands) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commands) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.mu.Lock()
		c.n[cmd.Name()]++
		c.mu.Unlock()
		return next(ctx, cmd)
	}
}
func (c *commands) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.mu.Lock()
		for _, cmd := range cmds {
			c.n[cmd.Name()]++
		}
		c.mu.Unlock()
		return next(ctx, cmds)
	}
}

// take returns the commands sent since the last call.
func (c *commands) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.n
	c.n = map[string]int{}
	return n
}

func countCommands(c *redis.Client) *commands {
	cc := &commands{n: map[string]int{}}
	c.AddHook(cc)
	return cc
}

// TestOneRoundTrip asserts that every decision is exactly one command,
// EVALSHA, for one limit and for several, allowed and denied (with the deny
// cache off); that a server that lost its scripts costs one EVAL more, once;
// and that a locally cached denial costs none.
func TestOneRoundTrip(t *testing.T) {
	t.Parallel()
	c, _ := redistest.Standalone(t)
	for _, bounded := range []bool{true, false} {
		// With ContextTimeoutEnabled the store calls the client directly;
		// without, on a goroutine it can stop waiting for.
		t.Run(map[bool]string{true: "ContextTimeoutEnabled", false: "goroutine"}[bounded], func(t *testing.T) {
			rc := redis.NewClient(&redis.Options{Addr: c.(*redis.Client).Options().Addr, ContextTimeoutEnabled: bounded})
			t.Cleanup(func() { _ = rc.Close() })
			oneRoundTrip(t, rc)
		})
	}
}

func oneRoundTrip(t *testing.T, rc *redis.Client) {
	cmds := countCommands(rc)
	ctx := context.Background()
	for _, a := range algorithms {
		for _, limits := range [][]string{{"3/hour"}, {"3/minute", "10/hour", "20/day"}} {
			t.Run(fmt.Sprintf("%v/%d", a, len(limits)), func(t *testing.T) {
				s := newStore(t, rc, redisstore.WithDenyCache(false))
				p := policy("rt-"+t.Name(), a, limits...)
				if _, err := s.Take(ctx, "warm", p, 1); err != nil { // loads the script once
					t.Fatal(err)
				}
				cmds.take()
				for i := range 6 {
					r, err := s.Take(ctx, "u", p, 1)
					if err != nil || r.Allowed != (i < 3) {
						t.Fatalf("take %d: allowed %v, err %v", i, r.Allowed, err)
					}
					if got := cmds.take(); len(got) != 1 || got["evalsha"] != 1 {
						t.Fatalf("take %d sent %v, want exactly one evalsha", i, got)
					}
				}
			})
		}
	}
	// A Peek is one script call too, and shares the deny cache with Take:
	// a key over its limit is peeked at without a round trip, and a
	// denial a Peek got is cached for the Takes that follow.
	t.Run("Peek", func(t *testing.T) {
		for _, a := range algorithms {
			s := newStore(t, rc)
			p := policy("rt-peek-"+t.Name()+a.String(), a, "2/hour", "5/day")
			if _, err := s.Take(ctx, "warm", p, 1); err != nil { // loads the script once
				t.Fatal(err)
			}
			cmds.take()
			for i := range 3 {
				if r, err := s.Peek(ctx, "u", p, 1); err != nil || !r.Allowed || r.Remaining != 1 {
					t.Fatalf("%v: peek %d: %+v, %v; want allowed, 1 left", a, i, r, err)
				}
				if got := cmds.take(); len(got) != 1 || got["evalsha"] != 1 {
					t.Fatalf("%v: peek %d sent %v, want exactly one evalsha", a, i, got)
				}
			}
			for range 2 {
				if _, err := s.Take(ctx, "u", p, 1); err != nil {
					t.Fatal(err)
				}
			}
			if r, err := s.Peek(ctx, "u", p, 1); err != nil || r.Allowed || r.RetryAfter <= 0 {
				t.Fatalf("%v: peek at the limit: %+v, %v; want denied", a, r, err)
			}
			cmds.take()
			for range 100 {
				if r, err := s.Peek(ctx, "u", p, 1); err != nil || r.Allowed {
					t.Fatalf("%v: cached peek: %+v, %v", a, r, err)
				}
				if r, err := s.Take(ctx, "u", p, 1); err != nil || r.Allowed {
					t.Fatalf("%v: cached take: %+v, %v", a, r, err)
				}
			}
			if got := cmds.take(); len(got) != 0 {
				t.Fatalf("%v: 200 denied calls of a key a Peek found over its limit sent %v, want nothing", a, got)
			}
		}
	})
	t.Run("NOSCRIPT", func(t *testing.T) {
		s := newStore(t, rc)
		p := policy("rt-noscript-"+t.Name(), algo.GCRA, "5/hour")
		if _, err := s.Take(ctx, "u", p, 1); err != nil {
			t.Fatal(err)
		}
		if err := rc.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		cmds.take()
		if r, err := s.Take(ctx, "u", p, 1); err != nil || !r.Allowed || r.Remaining != 3 {
			t.Fatalf("after SCRIPT FLUSH: %+v, %v", r, err)
		}
		if got := cmds.take(); len(got) != 2 || got["evalsha"] != 1 || got["eval"] != 1 {
			t.Fatalf("after SCRIPT FLUSH sent %v, want one evalsha and one eval", got)
		}
		if _, err := s.Take(ctx, "u", p, 1); err != nil {
			t.Fatal(err)
		}
		if got := cmds.take(); len(got) != 1 || got["evalsha"] != 1 {
			t.Fatalf("then sent %v, want one evalsha", got)
		}
	})
	// Decisions that wait together share a round trip: N concurrent
	// decisions take at most N commands, and those that queue while the
	// node's calls are in flight go out as one.
	t.Run("Concurrent", func(t *testing.T) {
		loadScripts(t, rc)
		s := newStore(t, rc, redisstore.WithDenyCache(false))
		p := policy("rt-concurrent-"+t.Name(), algo.TokenBucket, "3/minute", "10/hour")
		const n = 64
		var wg sync.WaitGroup
		start := make(chan struct{})
		cmds.take()
		for i := range n {
			wg.Go(func() {
				<-start
				if r, err := s.Take(ctx, fmt.Sprint("c", i), p, 1); err != nil || !r.Allowed {
					t.Errorf("take %d: %+v, %v", i, r, err)
				}
			})
		}
		close(start)
		wg.Wait()
		// (New connections' HELLO and CLIENT are not script calls.)
		if got := cmds.take(); got["eval"] != 0 || got["evalsha"] < 1 || got["evalsha"] > n {
			t.Fatalf("%d concurrent decisions sent %v, want at most %d evalsha", n, got, n)
		}
		// Held in flight, the node's lanes let the others queue: they
		// then go out together, one command.
		rec := newRecorder(redisstore.Lanes())
		rc.AddHook(rec.hook("gate"))
		for i := range n {
			wg.Go(func() {
				if r, err := s.Take(ctx, fmt.Sprint("w", i), p, 1); err != nil || !r.Allowed {
					t.Errorf("take %d: %+v, %v", i, r, err)
				}
			})
		}
		waitQueued(t, s, n-redisstore.Lanes())
		close(rec.open)
		wg.Wait()
		if got := cmds.take(); got["eval"] != 0 || got["evalsha"] != redisstore.Lanes()+1 {
			t.Fatalf("%d decisions waiting together sent %v, want %d evalsha: %d in flight, then one batch", n, got, redisstore.Lanes()+1, redisstore.Lanes())
		}
	})
	t.Run("DenyCache", func(t *testing.T) {
		for _, a := range algorithms {
			s := newStore(t, rc)
			p := policy("rt-deny-"+t.Name()+a.String(), a, "2/hour", "5/day")
			for range 3 {
				if _, err := s.Take(ctx, "hot", p, 1); err != nil {
					t.Fatal(err)
				}
			}
			cmds.take()
			for range 1000 {
				r, err := s.Take(ctx, "hot", p, 1)
				if err != nil || r.Allowed || r.RetryAfter <= 0 || r.Limit != p.Limits[0] {
					t.Fatalf("%v: cached denial %+v, %v", a, r, err)
				}
			}
			if got := cmds.take(); len(got) != 0 {
				t.Fatalf("%v: 1000 denials of a cached key sent %v, want nothing", a, got)
			}
			// Another key, and a Reset, go to Redis.
			if r, err := s.Take(ctx, "cold", p, 1); err != nil || !r.Allowed {
				t.Fatalf("%v: another key: %+v, %v", a, r, err)
			}
			if cleared, err := s.Reset(ctx, "hot", p); !cleared || err != nil {
				t.Fatalf("%v: Reset of a key over its limit: %v, %v; want true", a, cleared, err)
			}
			if r, err := s.Take(ctx, "hot", p, 1); err != nil || !r.Allowed || r.Remaining != 1 {
				t.Fatalf("%v: after Reset: %+v, %v", a, r, err)
			}
			if got := cmds.take(); got["evalsha"] != 3 {
				t.Fatalf("%v: sent %v, want 3 evalsha (take, reset, take)", a, got)
			}
		}
	})
}

// TestKeys checks the key schema and the TTLs on a real server.
func TestKeys(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	rc := client(t, srv.Addr())
	ctx := context.Background()
	// A limit's key holds its counter's identity: the rule's name and
	// algorithm and the limit's period.
	id := func(p *store.Policy, i int) string { return fmt.Sprintf("%016x", p.CounterID(i)) }
	serverNow := func() time.Time {
		now, err := rc.Time(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		return now
	}
	check := func(s *redisstore.Store, user string, p *store.Policy, want ...string) {
		t.Helper()
		if err := rc.FlushDB(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		before := serverNow()
		if r, err := s.Take(ctx, user, p, 1); err != nil || !r.Allowed {
			t.Fatalf("Take: %+v, %v", r, err)
		}
		after := serverNow()
		got, err := rc.Keys(ctx, "*").Result()
		if err != nil {
			t.Fatal(err)
		}
		for i, w := range want {
			if strings.Contains(w, "<idx>") { // fixed window: floor(server time / period)
				period := p.Limits[i].Period
				idx := before.UnixMicro() / period.Microseconds()
				if idx2 := after.UnixMicro() / period.Microseconds(); idx2 != idx && slicesContains(got, strings.Replace(w, "<idx>", strconv.FormatInt(idx2, 10), 1)) {
					idx = idx2
				}
				want[i] = strings.Replace(w, "<idx>", strconv.FormatInt(idx, 10), 1)
			}
		}
		if strings.Join(sorted(got), " ") != strings.Join(sorted(want), " ") {
			t.Fatalf("keys %q, want %q", got, want)
		}
		for i, k := range want {
			ttl, err := rc.PTTL(ctx, k).Result()
			// The state's own lifetime (a period; two for a sliding window's
			// current count), plus, but for the fixed window, a period of
			// headroom that later writes keep (SET KEEPTTL).
			limit := p.Limits[i].Period
			switch p.Algorithm {
			case algo.SlidingWindow:
				limit *= 3
			case algo.TokenBucket, algo.GCRA:
				limit *= 2
			}
			if err != nil || ttl <= 0 || ttl > limit+time.Millisecond { // TTLs round up to the ms
				t.Fatalf("PTTL %s = %v, %v; want in (0, %v]", k, ttl, err, limit+time.Millisecond)
			}
		}
	}
	s := newStore(t, rc)
	api := policy("api", algo.FixedWindow, "5/minute")
	check(s, "alice", api, "rl:{alice}:api@"+id(api, 0)+":<idx>")
	two := policy("api", algo.FixedWindow, "5/minute", "100/hour")
	check(s, "alice", two, "rl:{alice}:api@"+id(two, 0)+":<idx>", "rl:{alice}:api@"+id(two, 1)+":<idx>")
	if id(api, 0) != id(two, 0) || id(two, 0) == id(two, 1) {
		t.Fatalf("counter identities %s, %s, %s: want the minute's shared, the hour's its own", id(api, 0), id(two, 0), id(two, 1))
	}
	for _, a := range algorithms[1:] {
		p := policy("api", a, "5/minute", "100/hour")
		check(s, "alice", p, "rl:{alice}:api@"+id(p, 0), "rl:{alice}:api@"+id(p, 1))
	}
	g := policy("a:b}{c", algo.GCRA, "1/second")
	check(s, "bob}:{x", g, "rl:{bob%7D%3A%7Bx}:a%3Ab%7D%7Bc@"+id(g, 0))
	check(s, "", g, "rl:{~}:a%3Ab%7D%7Bc@"+id(g, 0))
	long := strings.Repeat("x", 10_000)
	sum := sha256.Sum256([]byte(long))
	check(s, long, g, "rl:{#"+base64.RawURLEncoding.EncodeToString(sum[:])+"}:a%3Ab%7D%7Bc@"+id(g, 0))
	check(newStore(t, rc, redisstore.WithPrefix("svc:rate:")), "alice", g, "svc:rate:{alice}:a%3Ab%7D%7Bc@"+id(g, 0))
}

func sorted(s []string) []string {
	s = append([]string(nil), s...)
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

func slicesContains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// TestSharedLimiters runs four Limiters, each with its own client and
// store, against one Redis (and one Cluster): 256 goroutines on one key
// admit exactly the limit, for every algorithm.
func TestSharedLimiters(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	cl := redistest.StartCluster(t)
	targets := map[string]func() redis.UniversalClient{
		"redis-server": func() redis.UniversalClient { return client(t, srv.Addr()) },
		"cluster":      func() redis.UniversalClient { return clusterClient(t, cl) },
	}
	for name, newClient := range targets {
		for _, a := range algorithms {
			for _, limits := range [][]string{{"100/hour"}, {"100/hour", "1000/day"}} {
				t.Run(fmt.Sprintf("%s/%v/%d", name, a, len(limits)), func(t *testing.T) {
					const limit = 100
					cfg, err := core.NewConfig(core.Spec{
						Enabled:   true,
						Algorithm: a.String(),
						Rules:     []core.RuleSpec{{Name: "hot", Paths: []string{"/hot"}, Limit: limits}},
					})
					if err != nil {
						t.Fatal(err)
					}
					var limiters [4]*core.Limiter
					for i := range limiters {
						// newStore's timeout is generous: this test is about exact counts,
						// and 256 goroutines on new connections under -race are slow.
						limiters[i] = core.NewLimiter(cfg, core.WithStore(newStore(t, newClient())), core.WithFailOpen(false))
					}
					user := fmt.Sprintf("shared-%d", time.Now().UnixNano())
					var admitted, denied, failed atomic.Int64
					var wg sync.WaitGroup
					start := make(chan struct{})
					for g := range 256 {
						wg.Go(func() {
							<-start
							l := limiters[g%4]
							for range 2 {
								d := l.Decide(context.Background(), "GET", "/hot", user, false)
								switch {
								case d.Err != nil:
									failed.Add(1)
								case d.Allowed:
									admitted.Add(1)
								default:
									denied.Add(1)
								}
							}
						})
					}
					close(start)
					wg.Wait()
					if admitted.Load() != limit || denied.Load() != 512-limit || failed.Load() != 0 {
						t.Fatalf("admitted %d, denied %d, failed %d; want exactly %d admitted of 512", admitted.Load(), denied.Load(), failed.Load(), limit)
					}
				})
			}
		}
	}
}

// TestTTLKept: every write leaves its key with a TTL that covers the state,
// whether it sets a new one or keeps the last (KEEPTTL), and a key left
// alone expires.
func TestTTLKept(t *testing.T) {
	t.Parallel()
	c, _ := redistest.Standalone(t)
	ctx := context.Background()
	s := newStore(t, c, redisstore.WithDenyCache(false))
	for _, a := range algorithms {
		p := policy("ttl-"+a.String(), a, "20/second")
		for i := range 25 {
			start := time.Now()
			r, err := s.Take(ctx, "u", p, 1)
			if err != nil {
				t.Fatal(err)
			}
			// gone reports whether the state may have expired by now: a
			// fixed window's key ends with its window, which a loaded
			// machine may reach before the test looks.
			gone := func() bool { return time.Since(start) >= r.ResetAfter }
			keys, err := c.Keys(ctx, "rl:{u}:ttl-"+a.String()+"@*").Result()
			if err == nil && len(keys) == 0 && gone() {
				continue
			}
			if err != nil || len(keys) == 0 {
				t.Fatalf("%v: keys %v, %v", a, keys, err)
			}
			// The state is the key with the longest TTL: just after a fixed
			// window ends, the ended window's key may live a millisecond
			// more (its expiry is rounded up to whole milliseconds).
			ttl := -2 * time.Nanosecond
			for _, key := range keys {
				kt, err := c.PTTL(ctx, key).Result()
				if err != nil {
					t.Fatalf("%v: PTTL %s: %v", a, key, err)
				}
				ttl = max(ttl, kt)
			}
			if ttl == -2*time.Nanosecond && gone() { // expired after KEYS
				continue
			}
			// The TTL counts down from the decision, made on the server
			// during the Take call: the test reads it later by at most the
			// time since the call began (counting from after the call, as
			// before, failed on a loaded machine: PTTL 140 ms against a
			// reset in 149.5 ms).
			slack := time.Since(start) + 5*time.Millisecond
			if ttl <= 0 || ttl < r.ResetAfter-slack || ttl > 3*time.Second {
				t.Fatalf("%v, take %d: PTTL %v (keys %q) with the state resetting in %v; want a TTL that covers it, at most 3 periods", a, i, ttl, keys, r.ResetAfter)
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
}
