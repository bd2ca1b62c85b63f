package redisstore_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/internal/redistest"
)

// outcome is one decision of the load.
type outcome struct {
	user    int // index in outage.users
	at      time.Time
	took    time.Duration
	allowed bool
	err     error
}

// outage drives paced load through a fail-open limiter on a Redis
// Cluster store, over users spread on the cluster's three masters, while
// one master dies and comes back.
type outage struct {
	cluster *redistest.Cluster
	client  *redis.ClusterClient
	store   *redisstore.Store
	lim     *core.Limiter
	logs    *syncBuffer
	users   []string
	node    []int // users[i] lives on cluster.Nodes()[node[i]]

	stop    atomic.Bool
	wg      sync.WaitGroup
	mu      sync.Mutex
	results []outcome
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

const (
	outageLimit     = 1000 // per user per day, GCRA: no refill within a test
	outageUsers     = 10   // per master
	outageRate      = 900  // decisions per second, all users together
	outageWorkers   = 12
	outageMaxPerKey = 600 // paced load stops sending to a user here: 20s of load
)

// startOutage starts the cluster, the store (redisstore's defaults, as a
// service would run it) and the limiter, and picks the users.
func startOutage(t *testing.T, opts ...redistest.ClusterOption) *outage {
	o := &outage{cluster: redistest.StartCluster(t, opts...), logs: new(syncBuffer)}
	// As examples/server and the README configure it.
	o.client = redis.NewClusterClient(&redis.ClusterOptions{Addrs: o.cluster.Addrs(), ContextTimeoutEnabled: true})
	st, err := redisstore.New(o.client)
	if err != nil {
		t.Fatal(err)
	}
	o.store = st
	o.lim = core.NewLimiter(outageConfig(t, fmt.Sprintf("%d/day", outageLimit)), core.WithStore(st),
		core.WithLogger(slog.New(slog.NewTextHandler(o.logs, nil))))
	nodeIndex := map[string]int{}
	for i, a := range o.cluster.Addrs() {
		nodeIndex[a] = i
	}
	per := make([]int, 3)
	ctx := context.Background()
	run := time.Now().UnixNano()
	for j := 0; len(o.users) < 3*outageUsers; j++ {
		u := fmt.Sprintf("user-%d-%d", run, j)
		c, err := o.client.MasterForKey(ctx, "{"+u+"}")
		if err != nil {
			t.Fatal(err)
		}
		n := nodeIndex[c.Options().Addr]
		if per[n] < outageUsers {
			per[n]++
			o.users = append(o.users, u)
			o.node = append(o.node, n)
		}
	}
	o.warm(t)
	return o
}

// warm makes a decision of cost 0 for every user, one by one and then
// from every worker at once, so that the client has loaded its slot map
// and command table and dialed its connections before the load.
func (o *outage) warm(t *testing.T) {
	ctx := context.Background()
	p := o.lim.Config().Rules()[0].Policy
	start := time.Now()
	for _, u := range o.users {
		for {
			_, err := o.store.Take(ctx, u, p, 0)
			if err == nil {
				break
			}
			if time.Since(start) > 10*time.Second {
				t.Fatalf("warming up: %v", err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	var wg sync.WaitGroup
	for w := range outageWorkers {
		wg.Go(func() {
			for i := w; i < len(o.users); i += outageWorkers {
				_, _ = o.store.Take(ctx, o.users[i], p, 0)
			}
		})
	}
	wg.Wait()
}

func outageConfig(t *testing.T, limit string) *core.Config {
	cfg, err := core.NewConfig(core.Spec{
		Enabled:   true,
		Algorithm: "gcra",
		Rules:     []core.RuleSpec{{Name: "api", Paths: []string{"/api"}, Limit: []string{limit}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// load starts the paced load: outageRate decisions per second, round robin
// over the users, each user at most outageMaxPerKey times (so that no
// user reaches its limit, and every decision is a round trip, never the
// deny cache).
func (o *outage) load() {
	var next atomic.Int64
	start := time.Now()
	interval := time.Second / outageRate
	for range outageWorkers {
		o.wg.Go(func() {
			for !o.stop.Load() {
				i := next.Add(1) - 1
				if i >= int64(outageMaxPerKey*len(o.users)) {
					return
				}
				if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
					time.Sleep(d) // pacing, not correctness
				}
				u := int(i % int64(len(o.users)))
				began := time.Now()
				d := o.lim.Decide(context.Background(), "GET", "/api", o.users[u], false)
				r := outcome{user: u, at: began, took: time.Since(began), allowed: d.Allowed, err: d.Err}
				o.mu.Lock()
				o.results = append(o.results, r)
				o.mu.Unlock()
			}
		})
	}
}

// end stops the load and returns its outcomes.
func (o *outage) end() []outcome {
	o.stop.Store(true)
	o.wg.Wait()
	return o.results
}

// stats sums up the outcomes of users on the nodes in on, started in
// [from, to).
type stats struct {
	n, failed, denied int
	clusterDown       int // errors that are CLUSTERDOWN replies
	worst             time.Duration
	firstErr          error
}

func (o *outage) stats(res []outcome, from, to time.Time, on ...int) stats {
	var s stats
	for _, r := range res {
		if r.at.Before(from) || !r.at.Before(to) || !slices.Contains(on, o.node[r.user]) {
			continue
		}
		s.n++
		s.worst = max(s.worst, r.took)
		if r.err != nil {
			s.failed++
			if strings.Contains(r.err.Error(), "CLUSTERDOWN") {
				s.clusterDown++
			}
			if s.firstErr == nil {
				s.firstErr = r.err
			}
		}
		if !r.allowed {
			s.denied++
		}
	}
	return s
}

func (s stats) String() string {
	return fmt.Sprintf("%d decisions, %d store errors (%.2f %%), %d denied, slowest %v, first error %v",
		s.n, s.failed, 100*float64(s.failed)/float64(max(s.n, 1)), s.denied, s.worst.Round(time.Millisecond), s.firstErr)
}

// TestFaultClusterNodeKilled: three masters under paced load, one SIGKILLed.
// From the kill until after the cluster has declared the failure (and the
// client has reloaded its slot map), the users of the two healthy masters
// are counted (≥ 99 % of their decisions, exactly: every one of them later
// gets exactly its limit), while the dead master's users fail open, each
// decision within the timeout and a margin. Counting on the dead master's
// keys resumes within 3s of its restart, exactly.
//
// The cluster runs with cluster-require-full-coverage no, which the README
// tells operators to set: with Redis's default (yes) every master refuses
// every query once the failure is declared (TestFaultClusterFullCoverage).
func TestFaultClusterNodeKilled(t *testing.T) {
	o := startOutage(t, redistest.RequireFullCoverage(false))
	check := leaks(t)
	const dead = 0
	victim := o.cluster.Nodes()[dead]
	healthy := []int{1, 2}
	ctx := context.Background()

	o.load()
	time.Sleep(300 * time.Millisecond) // load: every connection pool warm
	killed := time.Now()
	victim.Kill()
	declared := killed.Add(o.cluster.WaitFailed(t, victim))
	// The client learns the topology the cluster now has (go-redis
	// reloads it in the background): the failed master still owns its
	// slots, so its keys stay its own, not a random node's.
	o.client.ReloadState(ctx)
	o.checkOwner(t, victim)
	time.Sleep(time.Second)
	victim.Restart(t)
	restarted := time.Now()

	// Counting resumes on the dead master's keys (a restarted master
	// refuses writes for about 2s, Redis's CLUSTER_WRITABLE_DELAY, and
	// the breaker then needs its probe).
	var resumed time.Duration
	for {
		res := o.snapshot()
		if at, ok := o.firstCounted(res, restarted, dead); ok {
			resumed = at.Sub(restarted)
			break
		}
		if time.Since(restarted) > 5*time.Second {
			t.Fatalf("the restarted master's keys are not counted 5s after its restart:\n%s", o.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	res := o.end()

	before := o.stats(res, time.Time{}, killed, 0, 1, 2)
	hDown := o.stats(res, killed, declared, healthy...)
	hFailed := o.stats(res, declared, restarted, healthy...)
	hAfter := o.stats(res, restarted, time.Now(), healthy...)
	hAll := o.stats(res, killed, time.Now(), healthy...)
	dDown := o.stats(res, killed, restarted, dead)
	dAfter := o.stats(res, restarted, time.Now(), dead)
	t.Logf("before the kill, every master: %v", before)
	t.Logf("healthy masters, kill → failure declared (%v): %v", declared.Sub(killed).Round(time.Millisecond), hDown)
	t.Logf("healthy masters, declared → restart: %v", hFailed)
	t.Logf("healthy masters, after the restart: %v", hAfter)
	t.Logf("dead master, kill → restart: %v", dDown)
	t.Logf("dead master, after the restart: %v; counted again %v after the restart", dAfter, resumed.Round(time.Millisecond))

	if hAll.n == 0 || float64(hAll.failed) > 0.01*float64(hAll.n) {
		t.Errorf("healthy masters from the kill on: %v; want at least 99 %% counted", hAll)
	}
	if all := o.stats(res, time.Time{}, time.Now(), 0, 1, 2); all.denied != 0 {
		t.Errorf("%v; no user was over its limit", all)
	}
	// Fail-open: the dead master's users pass, each within the timeout
	// and a margin. How far past the timeout a decision ends is up to the
	// scheduler of a loaded machine under -race; the bound rules
	// out waiting on go-redis's own retries and dial timeouts (seconds).
	const margin = 400 * time.Millisecond
	if dDown.failed == 0 || dDown.denied != 0 || dDown.worst > redisstore.DefaultTimeout+margin {
		t.Errorf("dead master, kill → restart: %v; want store errors, none denied, none slower than %v", dDown, redisstore.DefaultTimeout+margin)
	}
	if resumed > 3*time.Second {
		t.Errorf("counting on the restarted master resumed %v after its restart, want within 3s", resumed)
	}
	// Every warning names the dead master, never a healthy one.
	lines := strings.Split(strings.TrimSpace(o.logs.String()), "\n")
	for _, l := range lines {
		if !strings.Contains(l, "node "+victim.Addr()+":") {
			t.Errorf("warning does not name the dead master %s: %s", victim.Addr(), l)
		}
	}
	t.Logf("%d warning lines; the first: %s", len(lines), lines[0])

	// Exact: each healthy user is sent more than its limit in all, and
	// is admitted exactly its limit (a decision the store failed is not
	// admitted by it, but for a timeout Redis may have counted it: each
	// such decision leaves the count one short at most).
	admitted, failed := map[int]int{}, map[int]int{}
	for _, r := range res {
		switch {
		case r.err != nil:
			failed[r.user]++
		case r.allowed:
			admitted[r.user]++
		}
	}
	exactUsers := 0
	for u, user := range o.users {
		if o.node[u] == dead {
			continue
		}
		denied := false
		for range outageLimit - admitted[u] + 3 {
			d := o.lim.Decide(ctx, "GET", "/api", user, false)
			switch {
			case d.Err != nil:
				failed[u]++
			case d.Allowed && denied:
				t.Fatalf("healthy user %s admitted after a denial (GCRA %d/day does not refill within the test)", user, outageLimit)
			case d.Allowed:
				admitted[u]++
			default:
				denied = true
			}
		}
		if admitted[u] > outageLimit || admitted[u] < outageLimit-failed[u] || !denied {
			t.Fatalf("healthy user %s: %d admitted, %d store errors, denied at the end %v; want %d admitted (at least %d-%[3]d), then denials",
				user, admitted[u], failed[u], denied, outageLimit, outageLimit)
		}
		if failed[u] == 0 {
			exactUsers++
		}
	}
	t.Logf("%d of %d healthy users had no store error and were admitted exactly %d", exactUsers, 2*outageUsers, outageLimit)
	// And a fresh user on the restarted master gets exactly its limit.
	exact := core.NewLimiter(outageConfig(t, "7/day"), core.WithStore(o.store), core.WithFailOpen(false))
	fresh := o.freshUser(t, dead)
	for i := range 10 {
		if d := exact.Decide(ctx, "GET", "/api", fresh, false); d.Err != nil || d.Allowed != (i < 7) {
			t.Fatalf("fresh user on the restarted master, request %d: allowed %v, err %v", i+1, d.Allowed, d.Err)
		}
	}

	if err := o.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.client.Close(); err != nil {
		t.Fatal(err)
	}
	check()
}

// checkOwner checks that a surviving master's CLUSTER SLOTS still gives
// the failed master's users' slots to it.
func (o *outage) checkOwner(t *testing.T, failed *redistest.Server) {
	t.Helper()
	var other string
	for _, a := range o.cluster.Addrs() {
		if a != failed.Addr() {
			other = a
		}
	}
	c := redis.NewClient(&redis.Options{Addr: other})
	defer c.Close()
	ctx := context.Background()
	slots, err := c.ClusterSlots(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for u, user := range o.users {
		if o.cluster.Addrs()[o.node[u]] != failed.Addr() {
			continue
		}
		slot, err := c.ClusterKeySlot(ctx, "{"+user+"}").Result()
		if err != nil {
			t.Fatal(err)
		}
		owner := ""
		for _, r := range slots {
			if int64(r.Start) <= slot && slot <= int64(r.End) && len(r.Nodes) > 0 {
				owner = r.Nodes[0].Addr
			}
		}
		if owner != failed.Addr() {
			t.Fatalf("%s's CLUSTER SLOTS gives slot %d (user %s) to %q, want the failed master %s", other, slot, user, owner, failed.Addr())
		}
	}
}

func (o *outage) snapshot() []outcome {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.results)
}

// firstCounted returns when the first decision after from on the users of
// nodes started that the store answered.
func (o *outage) firstCounted(res []outcome, from time.Time, nodes ...int) (time.Time, bool) {
	var first time.Time
	for _, r := range res {
		if slices.Contains(nodes, o.node[r.user]) && !r.at.Before(from) && r.err == nil && (first.IsZero() || r.at.Before(first)) {
			first = r.at
		}
	}
	return first, !first.IsZero()
}

func (o *outage) freshUser(t *testing.T, node int) string {
	for j := 0; ; j++ {
		u := fmt.Sprintf("fresh-%d-%d", time.Now().UnixNano(), j)
		c, err := o.client.MasterForKey(context.Background(), "{"+u+"}")
		if err != nil {
			t.Fatal(err)
		}
		if c.Options().Addr == o.cluster.Addrs()[node] {
			return u
		}
	}
}

// TestFaultClusterFullCoverage shows what Redis's default,
// cluster-require-full-coverage yes, does to the same outage: the healthy
// masters' users are counted until the cluster declares the failure; from
// then on every master refuses every query (CLUSTERDOWN), so every user
// fails open, each decision within the timeout and a margin, until the
// cluster clears the failure: a restarted master is counted again about
// 2s after its restart, the others only once the failure is 2 node
// timeouts old (Redis's CLUSTER_FAIL_UNDO_TIME_MULT), 10s here.
func TestFaultClusterFullCoverage(t *testing.T) {
	o := startOutage(t) // Redis's default: full coverage required
	check := leaks(t)
	const dead = 0
	victim := o.cluster.Nodes()[dead]
	healthy := []int{1, 2}

	o.load()
	time.Sleep(300 * time.Millisecond)
	killed := time.Now()
	victim.Kill()
	declared := killed.Add(o.cluster.WaitFailed(t, victim))
	time.Sleep(time.Second)
	victim.Restart(t)
	restarted := time.Now()
	var healthyBack, deadBack time.Time
	for {
		res := o.snapshot()
		h, hok := o.firstCounted(res, restarted, healthy...)
		d, dok := o.firstCounted(res, restarted, dead)
		if hok && dok {
			healthyBack, deadBack = h, d
			break
		}
		if time.Since(declared) > 20*time.Second {
			t.Fatalf("not every master counts again 20s after the failure was declared (healthy: %v, restarted: %v):\n%s", hok, dok, o.logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(300 * time.Millisecond)
	res := o.end()

	// A master turns CLUSTERDOWN when it updates its cluster state, in
	// its next cron or event-loop pass after it flags the failure, which
	// WaitFailed sees at its next poll: the windows leave 500ms around
	// the moment WaitFailed returned.
	hDown := o.stats(res, killed, declared.Add(-500*time.Millisecond), healthy...)
	hRefused := o.stats(res, declared.Add(500*time.Millisecond), healthyBack, healthy...)
	dDown := o.stats(res, killed, restarted, dead)
	t.Logf("kill → failure declared: %v", declared.Sub(killed).Round(time.Millisecond))
	t.Logf("healthy masters, kill → declared: %v", hDown)
	t.Logf("healthy masters, declared → counted again: %v", hRefused)
	t.Logf("dead master, kill → restart: %v", dDown)
	t.Logf("counted again: the restarted master %v after its restart; the healthy ones %v after the failure was declared",
		deadBack.Sub(restarted).Round(time.Millisecond), healthyBack.Sub(declared).Round(time.Millisecond))

	if hDown.n == 0 || float64(hDown.failed) > 0.01*float64(hDown.n) {
		t.Errorf("healthy masters before the failure is declared: %v; want at least 99 %% counted", hDown)
	}
	const margin = 400 * time.Millisecond
	for _, s := range []stats{hRefused, dDown} {
		if s.n == 0 || float64(s.failed) < 0.99*float64(s.n) || s.denied != 0 || s.worst > redisstore.DefaultTimeout+margin {
			t.Errorf("masters refusing: %v; want (nearly) every decision a store error (fail-open), within %v", s, redisstore.DefaultTimeout+margin)
		}
	}
	if hRefused.clusterDown == 0 {
		t.Errorf("healthy masters: %v; want CLUSTERDOWN replies (then open circuits)", hRefused)
	}
	if err := o.store.Close(); err != nil {
		t.Fatal(err)
	}
	if err := o.client.Close(); err != nil {
		t.Fatal(err)
	}
	check()
}
