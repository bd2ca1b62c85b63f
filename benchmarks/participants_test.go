package benchmarks

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/didip/tollbooth/v7"
	tollboothlimiter "github.com/didip/tollbooth/v7/limiter"
	echomw "github.com/labstack/echo/v4/middleware"
	"github.com/sethvargo/go-limiter/memorystore"
	"github.com/throttled/throttled/v2"
	throttledmem "github.com/throttled/throttled/v2/store/memstore"
	ulule "github.com/ulule/limiter/v3"
	ululemem "github.com/ulule/limiter/v3/drivers/store/memory"
	"golang.org/x/time/rate"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// A quota is the limit every participant of a scenario gets, as each
// library spells it: Count requests per Period, with a burst of Count where
// a library has one (token buckets and GCRA), so that every participant
// admits Count requests at once on a fresh key.
type quota struct {
	Count  int64
	Period time.Duration
}

var (
	// unreached is the quota of the speed scenarios: no run reaches it, so
	// every decision admits and writes back.
	unreached = quota{2_000_000_000, time.Hour}
	// oneAnHour is the quota of BenchmarkDeniedKey: the first request
	// admits, every later one is denied.
	oneAnHour = quota{1, time.Hour}
	// hundredAnHour is the quota of BenchmarkOverAdmission: exactly 100 of
	// any number of requests may pass within a trial, which lasts far less
	// than the 36 s in which a bucket refills one request (see
	// overAdmission for the fixed windows' hour boundaries).
	hundredAnHour = quota{100, time.Hour}
)

// perSecond is q as a rate per second, for the libraries built on
// golang.org/x/time/rate.
func (q quota) perSecond() float64 { return float64(q.Count) / q.Period.Seconds() }

// decideFunc makes one decision on key: whether the request was admitted,
// or an error when the store failed.
type decideFunc func(ctx context.Context, key string) (bool, error)

// A storeImpl is one participant of the in-memory scenarios. build returns
// a fresh limiter with quota q, closed at tb's cleanup. keys are the keys the
// scenario will use; only the map baseline needs them (it cannot insert
// under concurrency), every limiter creates its keys on first use.
type storeImpl struct {
	name string
	// keyless: one limiter for every key (x/time/rate); only in the
	// one-key, denied-key and over-admission scenarios.
	keyless bool
	// baseline: not a limiter (no windows, no expiry); the floor for any
	// keyed counter. Not in the over-admission check, which needs new keys.
	baseline bool
	// keepsKey: the store keeps the key string, so BenchmarkMemoryPerKey
	// hands it a real copy of every key.
	keepsKey bool
	// variant: another algorithm of rlkit's store, whose cost per key is
	// the same as the fixed window's (same slot, same lookup); only in the
	// one-key, denied-key and over-admission scenarios.
	variant bool
	build   func(tb testing.TB, q quota, keys []string) decideFunc
}

// Sub-benchmark names of the memory-store participants, one per
// implementation, shared by every scenario that has them.
const (
	implTakeAt    = "rlkit-memstore-TakeAt"
	implTake      = "rlkit-memstore-Take"
	implSeth      = "sethvargo-memorystore"
	implUlule     = "ulule-memory"
	implThrottled = "throttled-memstore"
	implTollbooth = "tollbooth"
	implEcho      = "echo-memorystore"
	implXRate     = "xtime-rate"
	implMap       = "baseline-map-atomic"
	implMapInt64  = "baseline-map-int64"
	implRlkit     = "rlkit-memstore"
)

// maxKeys bounds rlkit's store (and throttled's LRU) well above every key
// set used here, so no benchmark measures eviction.
const maxKeys = 2_000_000

// rlkitPolicy is a one-limit policy of algorithm a with quota q.
func rlkitPolicy(a algo.Algorithm, q quota) *store.Policy {
	return &store.Policy{Name: "bench-" + a.String(), Algorithm: a, Limits: []algo.Limit{{Count: q.Count, Period: q.Period}}}
}

func newRlkitStore(tb testing.TB) *memstore.Store {
	s := memstore.New(memstore.WithMaxKeys(maxKeys))
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Error(err)
		}
	})
	return s
}

// rlkitTake is rlkit's memory store as a request sees it: Take, which reads
// the clock, with algorithm a.
func rlkitTake(a algo.Algorithm) func(tb testing.TB, q quota, _ []string) decideFunc {
	return func(tb testing.TB, q quota, _ []string) decideFunc {
		s, p := newRlkitStore(tb), rlkitPolicy(a, q)
		return func(ctx context.Context, key string) (bool, error) {
			r, err := s.Take(ctx, key, p, 1)
			return r.Allowed, err
		}
	}
}

// storeImpls are the participants of the in-memory scenarios, in the order
// the tables list them. Every one gets the scenario's quota; the algorithm
// is each library's own (rlkit's rows use its default, the fixed window,
// unless the name says otherwise).
var storeImpls = []storeImpl{
	{
		// The instant is passed in: no clock read. It shows what is left of
		// rlkit's cost without the clock; compare the Take row with peers.
		name: implTakeAt,
		build: func(tb testing.TB, q quota, _ []string) decideFunc {
			s, p := newRlkitStore(tb), rlkitPolicy(algo.FixedWindow, q)
			now := time.Now().UnixNano()
			return func(_ context.Context, key string) (bool, error) {
				var r store.Result
				s.TakeAt(&r, key, p, 1, now)
				return r.Allowed, nil
			}
		},
	},
	{name: implTake, build: rlkitTake(algo.FixedWindow)},
	{name: implTake + "-sliding_window", variant: true, build: rlkitTake(algo.SlidingWindow)},
	{name: implTake + "-token_bucket", variant: true, build: rlkitTake(algo.TokenBucket)},
	{name: implTake + "-gcra", variant: true, build: rlkitTake(algo.GCRA)},
	{
		// Token bucket refilled per interval; reads its own clock. Its
		// purge runs every 6 h by default, never during a run.
		name: implSeth, keepsKey: true,
		build: func(tb testing.TB, q quota, _ []string) decideFunc {
			s, err := memorystore.New(&memorystore.Config{Tokens: uint64(q.Count), Interval: q.Period})
			if err != nil {
				tb.Fatal(err)
			}
			tb.Cleanup(func() { _ = s.Close(context.Background()) })
			return func(ctx context.Context, key string) (bool, error) {
				_, _, _, ok, err := s.Take(ctx, key)
				return ok, err
			}
		},
	},
	{
		// Fixed window from each key's first request, in a sync.Map; counts
		// denied requests too.
		name: implUlule, keepsKey: true,
		build: func(tb testing.TB, q quota, _ []string) decideFunc {
			lim := ulule.New(ululemem.NewStore(), ulule.Rate{Period: q.Period, Limit: q.Count})
			return func(ctx context.Context, key string) (bool, error) {
				c, err := lim.Get(ctx, key)
				return err == nil && !c.Reached, err
			}
		},
	},
	{
		// GCRA over its memstore, an LRU of maxKeys entries (so nothing is
		// evicted here), compare-and-swap on each key.
		name: implThrottled, keepsKey: true,
		build: func(tb testing.TB, q quota, _ []string) decideFunc {
			st, err := throttledmem.NewCtx(maxKeys)
			if err != nil {
				tb.Fatal(err)
			}
			rl, err := throttled.NewGCRARateLimiterCtx(st, throttled.RateQuota{
				MaxRate:  throttled.PerDuration(int(q.Count), q.Period),
				MaxBurst: int(q.Count) - 1, // requests beyond the first
			})
			if err != nil {
				tb.Fatal(err)
			}
			return func(ctx context.Context, key string) (bool, error) {
				limited, _, err := rl.RateLimitCtx(ctx, key, 1)
				return err == nil && !limited, err
			}
		},
	},
	{
		// x/time/rate per key in an expirable cache, one mutex.
		name: implTollbooth, keepsKey: true,
		build: func(tb testing.TB, q quota, _ []string) decideFunc {
			lmt := tollbooth.NewLimiter(q.perSecond(), &tollboothlimiter.ExpirableOptions{DefaultExpirationTTL: time.Hour})
			lmt.SetBurst(int(q.Count))
			return func(_ context.Context, key string) (bool, error) {
				return !lmt.LimitReached(key), nil
			}
		},
	},
	{
		// Echo's RateLimiterMemoryStore: x/time/rate per key in a map, one
		// mutex. The same store serves Echo's built-in middleware.
		name: implEcho, keepsKey: true,
		build: func(tb testing.TB, q quota, _ []string) decideFunc {
			s := echomw.NewRateLimiterMemoryStoreWithConfig(echomw.RateLimiterMemoryStoreConfig{
				Rate: rate.Limit(q.perSecond()), Burst: int(q.Count), ExpiresIn: time.Hour,
			})
			return func(_ context.Context, key string) (bool, error) { return s.Allow(key) }
		},
	},
	{
		// One golang.org/x/time/rate Limiter for every key: no lookup at
		// all, the cost of the algorithm and its mutex alone.
		name: implXRate, keyless: true,
		build: func(tb testing.TB, q quota, _ []string) decideFunc {
			l := rate.NewLimiter(rate.Limit(q.perSecond()), int(q.Count))
			return func(context.Context, string) (bool, error) { return l.Allow(), nil }
		},
	},
	{
		// A map[string]*atomic.Int64 built before the timer, Add and compare
		// to the count: the floor for any keyed counter.
		name: implMap, baseline: true,
		build: func(tb testing.TB, q quota, keys []string) decideFunc {
			m := make(map[string]*atomic.Int64, len(keys))
			for _, k := range keys {
				m[k] = new(atomic.Int64)
			}
			return func(_ context.Context, key string) (bool, error) {
				c := m[key]
				if c == nil {
					return false, fmt.Errorf("baseline: key %q was not prepared", key)
				}
				if c.Add(1) > q.Count {
					c.Add(-1)
					return false, nil
				}
				return true, nil
			}
		},
	},
}

// implSet selects participants for a scenario.
type implSet struct {
	keyless, baselines, variants bool
}

// impls returns the participants that set admits, in table order.
func impls(set implSet) []storeImpl {
	var out []storeImpl
	for _, im := range storeImpls {
		if im.keyless && !set.keyless || im.baseline && !set.baselines || im.variant && !set.variants {
			continue
		}
		out = append(out, im)
	}
	return out
}

// mustAllow fails b when a decision that must admit did not.
func mustAllow(b *testing.B, allowed bool, err error) {
	b.Helper()
	if err != nil {
		b.Fatal(err)
	}
	if !allowed {
		b.Fatal("denied: the benchmark reached the limit and measured denials")
	}
}
