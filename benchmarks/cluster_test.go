package benchmarks

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/benchmarks/internal/redisserver"
	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
)

const (
	// clusterGoroutines is how many goroutines BenchmarkClusterScale
	// runs at once.
	clusterGoroutines = 256
	// clusterKeys is how many identities its decisions spread over: their
	// keys fall in hash slots all over the cluster.
	clusterKeys = 100_000
	// clusterPoolSize is the ClusterClient's pool per master: a connection
	// for every goroutine, so that none waits for one (with batching the
	// store keeps only a few calls in flight per master).
	clusterPoolSize = clusterGoroutines
)

// clusterMasters are the sizes of BenchmarkClusterScale's clusters.
var clusterMasters = []int{1, 3}

// BenchmarkClusterScale measures how rlkit's decisions on Redis scale out
// with the masters of a Redis Cluster: core.Limiter.Decide (rule search,
// 2,000,000,000 per hour, a limit no run reaches: every decision admits
// and writes) over redisstore.Store (deny cache off, timeout 5 s, other
// options at their defaults: exact counting, batches of up to 128
// decisions per master) over a go-redis ClusterClient (ContextTimeoutEnabled,
// a pool of 256 per master), on a cluster this test binary starts:
//
//   - masters-1: one redis-server in cluster mode holding all 16,384 slots;
//   - masters-3: three, the slots split evenly in ranges.
//
// Each node is a redis-server process on a free loopback port (no
// persistence, no replicas), started on first use and stopped when the
// binary exits; before the first measurement every one of 100,000
// identities ("user-0" … "user-99999", their keys spread over all slots)
// gets one decision, so every decision measured finds its key. One op is
// one decision: b.N decisions from 256 goroutines released together, the
// i-th decision of goroutine g on identity (base + g + 256·i) mod 100,000,
// base moving on by b.N each time, so that no two goroutines work on one
// key at once. Metrics:
//
//   - dec/s: decisions over the wall time from release to the last answer;
//   - p50-ns, p99-ns: the latency of one Decide;
//   - server-cpu-ns: the CPU time (user and system, /proc/<pid>/stat, in
//     ticks of 10 ms) of all the cluster's redis-servers per decision;
//     client-cpu-ns: this process's (getrusage) per decision;
//   - busiest-server-cpus: the CPU time of the busiest redis-server over
//     the wall time (1 is a core, all that a single-threaded server can
//     use); cpus: client's and servers' CPU time over the wall time;
//     machine-cpus: the machine's busy CPU time (/proc/stat) over the wall
//     time, this benchmark's and any other process's;
//   - dec/call: decisions per script call the masters ran (INFO
//     commandstats, reset before the measurement): how many decisions a
//     batch carries on average.
//
// What bounds it on a small machine: the client and the servers share the
// machine's CPUs. machine-cpus near the machine's CPU count says the
// machine is full, and then dec/s follows the inverse of the CPU time per
// decision, whatever the number of masters; busiest-server-cpus near 1
// with the machine not full says one server is the limit, which more
// masters lift; the CPU per decision of client and servers says which side
// a full machine spends its time on.
//
// Without redis-server in PATH the rows are skipped, or fail when
// RLKIT_REQUIRE_REDIS=1.
func BenchmarkClusterScale(b *testing.B) {
	needRedisServer(b, "")
	for _, m := range clusterMasters {
		b.Run(fmt.Sprintf("masters-%d", m), func(b *testing.B) {
			r := clusterRigFor(b, m)
			lat := make([]time.Duration, b.N)
			base := r.next
			r.next = (r.next + b.N) % clusterKeys
			if err := r.resetStats(); err != nil {
				b.Fatal(err)
			}
			settle()
			srv0, ok0 := r.serverCPU()
			self0, ok1 := selfCPU()
			mach0, ok4 := machineCPU()
			b.ReportAllocs()
			b.ResetTimer()
			wall, err := r.decide(b.N, base, lat)
			b.StopTimer()
			srv1, ok2 := r.serverCPU()
			self1, ok3 := selfCPU()
			mach1, ok5 := machineCPU()
			if err != nil {
				b.Fatal(err)
			}
			calls, err := r.calls()
			if err != nil {
				b.Fatal(err)
			}
			slices.Sort(lat)
			n := float64(b.N)
			b.ReportMetric(n/wall.Seconds(), "dec/s")
			b.ReportMetric(float64(quantile(lat, 0.50)), "p50-ns")
			b.ReportMetric(float64(quantile(lat, 0.99)), "p99-ns")
			if ok0 && ok1 && ok2 && ok3 {
				var total, busiest time.Duration
				for i := range srv1 {
					d := srv1[i] - srv0[i]
					total += d
					busiest = max(busiest, d)
				}
				client := self1 - self0
				b.ReportMetric(float64(total)/n, "server-cpu-ns")
				b.ReportMetric(float64(client)/n, "client-cpu-ns")
				b.ReportMetric(busiest.Seconds()/wall.Seconds(), "busiest-server-cpus")
				b.ReportMetric((total+client).Seconds()/wall.Seconds(), "cpus")
			}
			if ok4 && ok5 {
				b.ReportMetric((mach1-mach0).Seconds()/wall.Seconds(), "machine-cpus")
			}
			if calls > 0 {
				b.ReportMetric(n/float64(calls), "dec/call")
			}
		})
	}
}

// A clusterRig is a cluster of BenchmarkClusterScale with the limiter
// that decides on it, kept for the whole test binary.
type clusterRig struct {
	cluster *redisserver.Cluster
	client  *redis.ClusterClient
	store   *redisstore.Store
	lim     *core.Limiter
	ids     []string
	next    int // the first identity of the next measurement
}

// The rigs this test binary started, by number of masters (see
// clusterRigFor); stopClusters stops them.
var clusterRigs struct {
	mu   sync.Mutex
	rigs map[int]*clusterRig
	errs map[int]error
}

// clusterRigFor returns the rig of a cluster of masters masters, starting
// it on first use (the cluster, a client and a limiter, and one decision
// on every identity); it fails tb when it cannot.
func clusterRigFor(tb testing.TB, masters int) *clusterRig {
	tb.Helper()
	clusterRigs.mu.Lock()
	defer clusterRigs.mu.Unlock()
	if r, ok := clusterRigs.rigs[masters]; ok {
		return r
	}
	if err, ok := clusterRigs.errs[masters]; ok {
		tb.Fatal(err)
	}
	r, err := newClusterRig(masters)
	if err != nil {
		if clusterRigs.errs == nil {
			clusterRigs.errs = map[int]error{}
		}
		clusterRigs.errs[masters] = err
		tb.Fatal(err)
	}
	if clusterRigs.rigs == nil {
		clusterRigs.rigs = map[int]*clusterRig{}
	}
	clusterRigs.rigs[masters] = r
	return r
}

func newClusterRig(masters int) (_ *clusterRig, err error) {
	c, err := redisserver.StartCluster(masters)
	if err != nil {
		return nil, err
	}
	r := &clusterRig{cluster: c}
	defer func() {
		if err != nil {
			r.close()
		}
	}()
	r.client = redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:                 c.Addrs(),
		PoolSize:              clusterPoolSize,
		ContextTimeoutEnabled: true,
	})
	if err := r.client.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		return m.Ping(ctx).Err()
	}); err != nil {
		return nil, fmt.Errorf("cluster of %d masters: %w", masters, err)
	}
	r.store, err = redisstore.New(r.client, redisstore.WithDenyCache(false), redisstore.WithTimeout(redisTimeout))
	if err != nil {
		return nil, err
	}
	cfg, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{
		{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}},
	}})
	if err != nil {
		return nil, err
	}
	r.lim = core.NewLimiter(cfg, core.WithStore(r.store))
	r.ids = make([]string, clusterKeys)
	for i := range r.ids {
		r.ids[i] = "user-" + strconv.Itoa(i)
	}
	// One decision on every identity: the keys exist before any
	// measurement, the scripts are loaded and the connections open.
	if _, err := r.decide(clusterKeys, 0, make([]time.Duration, clusterKeys)); err != nil {
		return nil, fmt.Errorf("cluster of %d masters, first decisions: %w", masters, err)
	}
	return r, nil
}

// decide makes n decisions from clusterGoroutines goroutines released
// together, the i-th of goroutine g on identity (base + g + 256·i) mod
// clusterKeys, its latency in lat[g + 256·i]; it returns the wall time
// from release to the last answer, or the first error (a store error or a
// denial).
func (r *clusterRig) decide(n, base int, lat []time.Duration) (time.Duration, error) {
	var (
		wg    sync.WaitGroup
		start = make(chan struct{})
		once  sync.Once
		first error
	)
	ctx := context.Background()
	for g := range clusterGoroutines {
		wg.Go(func() {
			// Two readings of the monotonic clock per decision (time.Since
			// from one time.Now): cheaper than a time.Now each.
			t := time.Now()
			<-start
			for j := g; j < n; j += clusterGoroutines {
				t0 := time.Since(t)
				d := r.lim.Decide(ctx, "GET", "/api/search", r.ids[(base+j)%clusterKeys], false)
				lat[j] = time.Since(t) - t0
				if d.Err != nil || !d.Allowed {
					once.Do(func() {
						first = d.Err
						if first == nil {
							first = errDenied
						}
					})
					return
				}
			}
		})
	}
	t0 := time.Now()
	close(start)
	wg.Wait()
	return time.Since(t0), first
}

// resetStats zeroes every master's command statistics (CONFIG
// RESETSTAT), for calls.
func (r *clusterRig) resetStats() error {
	return r.client.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		return m.ConfigResetStat(ctx).Err()
	})
}

// calls returns the script calls (EVALSHA and EVAL) all masters have run
// since resetStats.
func (r *clusterRig) calls() (int64, error) {
	var calls atomic.Int64
	err := r.client.ForEachMaster(context.Background(), func(ctx context.Context, m *redis.Client) error {
		info, err := m.Info(ctx, "commandstats").Result()
		if err != nil {
			return err
		}
		for line := range strings.Lines(info) {
			// "cmdstat_evalsha:calls=N,usec=M,..."
			rest, ok := strings.CutPrefix(strings.TrimSpace(line), "cmdstat_")
			if !ok {
				continue
			}
			cmd, fields, _ := strings.Cut(rest, ":")
			if cmd != "evalsha" && cmd != "eval" {
				continue
			}
			for f := range strings.SplitSeq(fields, ",") {
				if k, v, _ := strings.Cut(f, "="); k == "calls" {
					n, _ := strconv.ParseInt(v, 10, 64)
					calls.Add(n)
				}
			}
		}
		return nil
	})
	return calls.Load(), err
}

// serverCPU returns the CPU time each of the cluster's redis-servers has
// used so far, and false when one cannot be read.
func (r *clusterRig) serverCPU() ([]time.Duration, bool) {
	pids := r.cluster.Pids()
	cpu := make([]time.Duration, len(pids))
	for i, pid := range pids {
		var ok bool
		if cpu[i], ok = processCPU(pid); !ok {
			return nil, false
		}
	}
	return cpu, true
}

func (r *clusterRig) close() {
	if r.store != nil {
		_ = r.store.Close()
	}
	if r.client != nil {
		_ = r.client.Close()
	}
	r.cluster.Stop()
}

// stopClusters stops the clusters this test binary started.
func stopClusters() {
	clusterRigs.mu.Lock()
	defer clusterRigs.mu.Unlock()
	for _, r := range clusterRigs.rigs {
		r.close()
	}
	clusterRigs.rigs = nil
}
