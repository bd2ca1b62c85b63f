package benchmarks

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	guber "github.com/gubernator-io/gubernator/v2"
	"github.com/sirupsen/logrus"
	"go.opentelemetry.io/contrib/instrumentation/google.golang.org/grpc/otelgrpc"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
)

const (
	// fleetNodes is how many nodes each system runs: gubernator instances
	// of one cluster, or rlkit limiters sharing one redis-server.
	fleetNodes = 3

	// fleetKeys keys, of which the first fleetHot are hot: half of all
	// decisions go to the hot keys (one of them at random), half to the
	// others (one at random).
	fleetKeys = 1000
	fleetHot  = 8

	// fleetPeriod is the period of every limit: windows of one second, so
	// that several end during a sub-benchmark.
	fleetPeriod = time.Second
	// fleetHotLimit is a hot key's limit per fleetPeriod, far under what
	// one hot key is asked: 1/16 of all decisions, some 50 per second at
	// the least (gubernator, one goroutine) and thousands at the most.
	fleetHotLimit = 10
	// fleetColdLimit is the limit of every other key, which none comes near
	// (each gets 1/1,984 of all decisions).
	fleetColdLimit = 10_000
)

// fleetGoroutines are the sub-benchmarks' numbers of goroutines.
var fleetGoroutines = []int{1, 16, 64, 256}

// fleetRules is the rule file of the rlkit nodes, with %s the consistency
// line: a rule for the hot keys' path and one for the others', each
// counting per caller in fixed windows.
const fleetRules = `rate_limit:
  enabled: true
  algorithm: fixed_window
  headers: none
%s  rules:
    - name: hot
      paths: ["/hot"]
      limit: "%d/second"
    - name: cold
      paths: ["/cold"]
      limit: "%d/second"
`

// A fleetAnswer is one decision of a fleet system: whether it admitted the
// request and the end of the window the system counted it in, as an
// instant (resetAt, Unix nanoseconds) or as the time left after the answer
// came (resetIn).
type fleetAnswer struct {
	admitted bool
	resetAt  int64
	resetIn  time.Duration
}

// fleetDecide decides one request of key at node (0 to fleetNodes-1); hot
// selects the hot keys' limit.
type fleetDecide func(ctx context.Context, node int, hot bool, key string) (fleetAnswer, error)

// A fleetSystem is one participant of BenchmarkFleet.
type fleetSystem struct {
	name string
	// bound is the over-admission the system states for a fixed window
	// (reported as over-bound), or -1 when it states none.
	bound int
	// setup builds the system's nodes, kept for all its sub-benchmarks.
	setup func(b *testing.B) (fleetDecide, error)
}

// BenchmarkFleet puts rlkit next to gubernator (github.com/gubernator-io/
// gubernator/v2, the distributed rate-limit service) as a fleet of three
// nodes would use them, all in this process, on loopback:
//
//   - gubernator-batching, gubernator-global: one cluster of three
//     gubernator daemons (SpawnDaemon, each with its gRPC and HTTP
//     listeners on 127.0.0.1 and the other two as peers; default
//     behaviours: batches to the owner every 500 µs, global hits synced
//     every 100 ms), each called through gubernator's own gRPC client
//     (V1Client over a connection made as DialV1Server makes it, one per
//     node), as an application calls its local instance. One request per call, algorithm TOKEN_BUCKET,
//     which in gubernator is a fixed window starting at a key's first hit
//     after the previous one ended. Behavior BATCHING: the node that owns
//     the key (by consistent hash) decides, the others forward to it in
//     batches. Behavior GLOBAL: every node decides from its own copy and
//     sends the hits to the owner, which sends its count back to all.
//   - rlkit-exact, rlkit-lease: three core.Limiter instances, each with its
//     own go-redis client (newRedisClient: pool 64) and its own
//     redisstore.Store (defaults, deny cache and batching on, but a 5 s
//     timeout as in BenchmarkRedis) on the redis-server the Redis rows
//     share, from a rule file of fixed windows with `consistency: exact`
//     (every decision a round trip, or batched with others) resp.
//     `consistency: lease` (each process takes blocks of quota and decides
//     from them locally). Decided with Limiter.Decide("GET", "/hot" or
//     "/cold", key).
//
// Load: sub-benchmarks <system>/g<goroutines>, with 1, 16, 64 and 256
// goroutines; b.N decisions in all, shared evenly among the goroutines,
// decision j of goroutine i going to node (i+j) mod 3, so even one
// goroutine spreads over the three nodes. Each decision picks, from a
// random stream of its goroutine, a hot key (one of 8, limit 10 per
// second) or another one (one of 992, limit 10,000 per second, never
// reached) with equal chance. Every call of the benchmark function uses
// fresh keys, so no window carries over from the previous call.
//
// Metrics: dec/s/node, the decisions per second per node (b.N, less the
// failed calls, over the wall time from release to the last answer, over
// 3); p50-ns and p99-ns,
// the latency of one decision (the call, as the goroutine sees it);
// failed/op, the calls that returned an error (counted as not admitted;
// rlkit's rows fail on any); and over-adm, the over-admission on the hot
// keys: for each hot key and each of its windows, the requests admitted
// in it minus the limit, the largest over all (0 when no window admitted
// more than the limit); windows is how many key windows that covered.
// over-bound is the over-admission rlkit states for fixed windows (0, in
// both modes); gubernator states none.
//
// A decision's window is the one the system itself reports it counted in,
// by the end it gives: gubernator's ResetTime (its windows start at a
// key's first hit, so they are not aligned to the period, and under
// GLOBAL a node that finds its copy ended starts one of its own until the
// owner's count reaches it: a few milliseconds to one sync apart), rlkit's
// Result.ResetAfter after the answer came (its windows are aligned to the
// period on Redis's clock; the answer comes a round trip later). Ends
// less than half a period apart name the same window: those that differ
// by a node's view or a round trip, never two windows (their ends are a
// period apart). The count of a sliding span of one period would not do:
// even an exact fixed window admits up to twice its limit across a
// window boundary. The first and last windows of a call are partly
// outside it and counted all the same: a partial window that admits more
// than the limit has over-admitted too.
func BenchmarkFleet(b *testing.B) {
	cluster := &gubernatorCluster{}
	b.Cleanup(cluster.stop)
	systems := []fleetSystem{
		{name: "gubernator-batching", bound: -1, setup: func(b *testing.B) (fleetDecide, error) {
			return cluster.fleet(guber.Behavior_BATCHING)
		}},
		{name: "gubernator-global", bound: -1, setup: func(b *testing.B) (fleetDecide, error) {
			return cluster.fleet(guber.Behavior_GLOBAL)
		}},
		{name: "rlkit-exact", bound: 0, setup: func(b *testing.B) (fleetDecide, error) { return rlkitFleet(b, "exact") }},
		{name: "rlkit-lease", bound: 0, setup: func(b *testing.B) (fleetDecide, error) { return rlkitFleet(b, "lease") }},
	}
	for _, sys := range systems {
		b.Run(sys.name, func(b *testing.B) {
			decide, err := sys.setup(b)
			if err != nil {
				b.Fatal(err)
			}
			for _, g := range fleetGoroutines {
				b.Run("g"+strconv.Itoa(g), func(b *testing.B) { runFleet(b, g, sys.bound, decide) })
			}
		})
	}
}

// fleetRun numbers the calls of the benchmark function, for fresh keys.
var fleetRun atomic.Int64

// runFleet makes b.N decisions with decide from g goroutines and reports
// the fleet metrics (see BenchmarkFleet); bound is the system's stated
// over-admission, -1 for none.
func runFleet(b *testing.B, g, bound int, decide fleetDecide) {
	run := fleetRun.Add(1)
	keys := make([]string, fleetKeys)
	for i := range keys {
		keys[i] = "f" + strconv.FormatInt(run, 36) + "-" + strconv.Itoa(i)
	}
	type admission struct {
		key int
		end int64 // the end of the window it counted in, Unix nanoseconds
	}
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		lats   = make([][]int64, g)
		admits = make([][]admission, g)
		failed atomic.Int64
		first  atomic.Pointer[error]
		odd    atomic.Int64 // answers with no usable window end
	)
	ctx := context.Background()
	for i := range g {
		calls := b.N / g
		if i < b.N%g {
			calls++
		}
		lats[i] = make([]int64, 0, calls)
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(run), uint64(i)))
			<-start
			for j := range calls {
				node := (i + j) % fleetNodes
				var k int
				if rng.IntN(2) == 0 {
					k = rng.IntN(fleetHot)
				} else {
					k = fleetHot + rng.IntN(fleetKeys-fleetHot)
				}
				hot := k < fleetHot
				t0 := time.Now()
				ans, err := decide(ctx, node, hot, keys[k])
				t1 := time.Now()
				lats[i] = append(lats[i], int64(t1.Sub(t0)))
				if err != nil {
					failed.Add(1)
					first.CompareAndSwap(nil, &err)
					continue
				}
				if !hot || !ans.admitted {
					continue
				}
				end := ans.resetAt
				if end == 0 {
					if ans.resetIn <= 0 || ans.resetIn > fleetPeriod {
						// No end in the next period: the window of the
						// call's start on the wall clock.
						odd.Add(1)
						ans.resetIn = t0.Truncate(fleetPeriod).Add(fleetPeriod).Sub(t1)
					}
					end = t1.UnixNano() + int64(ans.resetIn)
				}
				admits[i] = append(admits[i], admission{k, end})
			}
		})
	}
	settle()
	b.ResetTimer()
	t0 := time.Now()
	close(start)
	wg.Wait()
	elapsed := time.Since(t0)
	b.StopTimer()

	if p := first.Load(); p != nil {
		if bound >= 0 {
			b.Fatalf("%d of %d decisions failed; the first: %v", failed.Load(), b.N, *p)
		}
		b.Logf("%d of %d decisions failed (counted in failed/op); the first: %v", failed.Load(), b.N, *p)
	}
	if n := odd.Load(); n > 0 {
		b.Logf("%d admitted answers gave no window end within a period; counted in the wall-clock window of their call", n)
	}
	all := slices.Concat(lats...)
	slices.Sort(all)
	ends := make([][]int64, fleetHot)
	for _, as := range admits {
		for _, a := range as {
			ends[a.key] = append(ends[a.key], a.end)
		}
	}
	over, windows := overAdmitted(ends, fleetHotLimit, int64(fleetPeriod))
	// Failed calls (reported in failed/op) are not decisions.
	b.ReportMetric(float64(int64(b.N)-failed.Load())/elapsed.Seconds()/fleetNodes, "dec/s/node")
	b.ReportMetric(float64(quantile(all, 0.50)), "p50-ns")
	b.ReportMetric(float64(quantile(all, 0.99)), "p99-ns")
	b.ReportMetric(float64(over), "over-adm")
	b.ReportMetric(float64(windows), "windows")
	b.ReportMetric(float64(failed.Load())/float64(b.N), "failed/op")
	if bound >= 0 {
		b.ReportMetric(float64(bound), "over-bound")
	}
}

// overAdmitted returns, over the keys whose admissions ended their windows
// at ends[k] (Unix nanoseconds), the most one window admitted beyond limit
// (0 when none did), and how many key windows there were. Ends less than
// half a period apart are one window (see BenchmarkFleet).
func overAdmitted(ends [][]int64, limit, period int64) (over, windows int) {
	for _, es := range ends {
		slices.Sort(es)
		for i := 0; i < len(es); {
			j := i
			for j < len(es) && es[j]-es[i] < period/2 {
				j++
			}
			windows++
			over = max(over, j-i-int(limit))
			i = j
		}
	}
	return over, windows
}

// rlkitFleet returns fleetNodes rlkit limiters over their own clients and
// stores on the shared redis-server, from fleetRules with consistency
// mode.
func rlkitFleet(b *testing.B, mode string) (fleetDecide, error) {
	addr := benchRedisAddr(b)
	cfg, err := core.ParseConfig(fmt.Appendf(nil, fleetRules, "  consistency: "+mode+"\n", fleetHotLimit, fleetColdLimit), "fleet-"+mode+".yaml")
	if err != nil {
		return nil, err
	}
	var lims [fleetNodes]*core.Limiter
	for i := range lims {
		st, err := redisstore.New(newRedisClient(b, addr), redisstore.WithTimeout(redisTimeout))
		if err != nil {
			return nil, err
		}
		b.Cleanup(func() { _ = st.Close() })
		lims[i] = core.NewLimiter(cfg, core.WithStore(st))
	}
	return func(ctx context.Context, node int, hot bool, key string) (fleetAnswer, error) {
		path := core.Path("/cold")
		if hot {
			path = "/hot"
		}
		d := lims[node].Decide(ctx, "GET", path, key, false)
		if d.Err != nil {
			return fleetAnswer{}, d.Err
		}
		return fleetAnswer{admitted: d.Allowed, resetIn: d.Result.ResetAfter}, nil
	}, nil
}

// gubernatorCluster is the three gubernator daemons both gubernator
// systems share (their keys are apart: one name per system and limit).
type gubernatorCluster struct {
	once    sync.Once
	err     error
	daemons []*guber.Daemon
	conns   []*grpc.ClientConn
	clients []guber.V1Client
}

// fleet returns the decisions of the cluster's nodes under behavior,
// starting the cluster on first use: one GetRateLimits call of one
// TOKEN_BUCKET request per decision, through node's client, with a name
// of its own per behavior and limit ("<behavior>-hot", "<behavior>-cold")
// and the key as UniqueKey. A response with Error set is a failed call.
func (c *gubernatorCluster) fleet(behavior guber.Behavior) (fleetDecide, error) {
	c.once.Do(func() { c.err = c.start() })
	if c.err != nil {
		return nil, c.err
	}
	prefix := strings.ToLower(behavior.String())
	hotName, coldName := prefix+"-hot", prefix+"-cold"
	return func(ctx context.Context, node int, hot bool, key string) (fleetAnswer, error) {
		req := &guber.RateLimitReq{
			Name:      coldName,
			UniqueKey: key,
			Hits:      1,
			Limit:     fleetColdLimit,
			Duration:  fleetPeriod.Milliseconds(),
			Algorithm: guber.Algorithm_TOKEN_BUCKET,
			Behavior:  behavior,
		}
		if hot {
			req.Name, req.Limit = hotName, fleetHotLimit
		}
		resp, err := c.clients[node].GetRateLimits(ctx, &guber.GetRateLimitsReq{Requests: []*guber.RateLimitReq{req}})
		if err != nil {
			return fleetAnswer{}, err
		}
		if len(resp.Responses) != 1 {
			return fleetAnswer{}, fmt.Errorf("gubernator answered %d responses to one request", len(resp.Responses))
		}
		r := resp.Responses[0]
		if r.Error != "" {
			return fleetAnswer{}, errors.New(r.Error)
		}
		return fleetAnswer{admitted: r.Status == guber.Status_UNDER_LIMIT, resetAt: r.ResetTime * int64(time.Millisecond)}, nil
	}, nil
}

// start spawns the cluster: each daemon on two free loopback ports,
// advertising its gRPC address, then told of all three (itself marked
// as such by that address).
func (c *gubernatorCluster) start() error {
	log := logrus.New()
	log.SetOutput(io.Discard)
	var peers []guber.PeerInfo
	for range fleetNodes {
		grpcAddr, err := freeAddr()
		if err != nil {
			return err
		}
		httpAddr, err := freeAddr()
		if err != nil {
			return err
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		d, err := guber.SpawnDaemon(ctx, guber.DaemonConfig{
			Logger:            log.WithField("instance", grpcAddr),
			InstanceID:        grpcAddr,
			GRPCListenAddress: grpcAddr,
			HTTPListenAddress: httpAddr,
			AdvertiseAddress:  grpcAddr,
		})
		cancel()
		if err != nil {
			return fmt.Errorf("gubernator daemon on %s: %w", grpcAddr, err)
		}
		c.daemons = append(c.daemons, d)
		peers = append(peers, guber.PeerInfo{GRPCAddress: grpcAddr, HTTPAddress: httpAddr})
	}
	for _, d := range c.daemons {
		d.SetPeers(peers)
	}
	for _, p := range peers {
		// What DialV1Server(addr, nil) does, keeping the connection to
		// close it.
		conn, err := grpc.NewClient(p.GRPCAddress,
			grpc.WithStatsHandler(otelgrpc.NewClientHandler()),
			grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			return err
		}
		c.conns = append(c.conns, conn)
		c.clients = append(c.clients, guber.NewV1Client(conn))
	}
	return nil
}

// stop closes the clients' connections and the daemons.
func (c *gubernatorCluster) stop() {
	for _, conn := range c.conns {
		_ = conn.Close()
	}
	for _, d := range c.daemons {
		d.Close()
	}
}

// freeAddr returns a loopback address with a port free now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// TestFleetOverAdmitted pins how BenchmarkFleet counts over-admission:
// window ends less than half a period apart are one window, the excess
// over the limit of the fullest window is reported, never below 0.
func TestFleetOverAdmitted(t *testing.T) {
	const s = int64(time.Second)
	ms := func(v int64) int64 { return v * int64(time.Millisecond) }
	var key0, key1 []int64
	for i := range int64(12) { // one window seen a few ms apart: 12 admitted
		key0 = append(key0, s+ms(i%4))
	}
	for range 10 { // the next window: 10
		key0 = append(key0, 2*s)
	}
	for range 10 {
		key1 = append(key1, s)
	}
	key1 = append(key1, s+ms(600)) // past half a period: a window of its own
	over, windows := overAdmitted([][]int64{key0, key1, nil}, 10, s)
	if over != 2 || windows != 4 {
		t.Errorf("overAdmitted = %d over in %d windows, want 2 in 4", over, windows)
	}
	if over, windows := overAdmitted([][]int64{{s, s, s}}, 10, s); over != 0 || windows != 1 {
		t.Errorf("under the limit: %d over in %d windows, want 0 in 1", over, windows)
	}

	sorted := make([]int64, 100)
	for i := range sorted {
		sorted[i] = int64(i + 1)
	}
	if p50, p99 := quantile(sorted, 0.50), quantile(sorted, 0.99); p50 != 50 || p99 != 99 {
		t.Errorf("percentiles of 1..100: p50 %d, p99 %d; want 50, 99", p50, p99)
	}
	if p := quantile([]int64{7}, 0.99); p != 7 {
		t.Errorf("p99 of one value = %d, want 7", p)
	}
	if p := quantile[int64](nil, 0.50); p != 0 {
		t.Errorf("p50 of nothing = %d, want 0", p)
	}
}
