package main

import "strings"

// A participant labels a row: who it is, and the module whose version the
// report prints beside it ("" for rlkit, the standard library and the
// baselines).
type participant struct {
	label  string
	module string
}

// participants label the rows by the sub-benchmark names the benchmarks use.
// A row whose name is not here is printed under its name.
var participants = map[string]participant{
	// In-memory stores.
	"rlkit-memstore-TakeAt":              {label: "rlkit memstore, `TakeAt` (instant passed in, no clock read)"},
	"rlkit-memstore-Take":                {label: "**rlkit** memstore, `Take` (fixed window)"},
	"rlkit-memstore-Take-sliding_window": {label: "rlkit memstore, `Take`, sliding window"},
	"rlkit-memstore-Take-token_bucket":   {label: "rlkit memstore, `Take`, token bucket"},
	"rlkit-memstore-Take-gcra":           {label: "rlkit memstore, `Take`, GCRA"},
	"rlkit-memstore":                     {label: "**rlkit** memstore"},
	"sethvargo-memorystore":              {label: "sethvargo/go-limiter memorystore", module: "github.com/sethvargo/go-limiter"},
	"ulule-memory":                       {label: "ulule/limiter, memory store", module: "github.com/ulule/limiter/v3"},
	"throttled-memstore":                 {label: "throttled, GCRA on memstore (LRU)", module: "github.com/throttled/throttled/v2"},
	"tollbooth":                          {label: "didip/tollbooth", module: "github.com/didip/tollbooth/v7"},
	"echo-memorystore":                   {label: "Echo's RateLimiterMemoryStore (x/time/rate per key)", module: "github.com/labstack/echo/v4"},
	"xtime-rate":                         {label: "golang.org/x/time/rate, one `Limiter` for every key", module: "golang.org/x/time"},
	"baseline-map-atomic":                {label: "baseline: `map[string]*atomic.Int64`, Add and compare"},
	"baseline-map-int64":                 {label: "baseline: `map[string]int64`"},
	// net/http middleware.
	"bare":                {label: "bare handler, no limiter"},
	"rlkit-nethttp":       {label: "**rlkit** `nethttp`"},
	"sethvargo-httplimit": {label: "sethvargo/go-limiter `httplimit`", module: "github.com/sethvargo/go-limiter"},
	"ulule-stdlib":        {label: "ulule/limiter stdlib middleware", module: "github.com/ulule/limiter/v3"},
	"throttled-http":      {label: "throttled `HTTPRateLimiterCtx`", module: "github.com/throttled/throttled/v2"},
	// Frameworks ("bare" above).
	"builtin":         {label: "the framework's built-in limiter"},
	"rlkit":           {label: "**rlkit** adapter"},
	"rlkit-noheaders": {label: "rlkit adapter, `headers: none` (no rate-limit headers)"},
	"floor-headers":   {label: "floor: no limiter, a middleware writing only `RateLimit-Policy` and `RateLimit`, constant values"},
	// Redis.
	"floor/raw-incr":       {label: "floor: one `INCR`"},
	"floor/raw-evalsha":    {label: "floor: `EVALSHA` of `return 1`"},
	"rlkit/fixed_window":   {label: "**rlkit** redisstore, fixed window"},
	"rlkit/sliding_window": {label: "rlkit redisstore, sliding window"},
	"rlkit/token_bucket":   {label: "rlkit redisstore, token bucket"},
	"rlkit/gcra":           {label: "rlkit redisstore, GCRA"},
	"ulule/fixed_window":   {label: "ulule/limiter, Redis store (fixed window)", module: "github.com/ulule/limiter/v3"},
	"redis_rate/gcra":      {label: "go-redis/redis_rate (GCRA)", module: "github.com/go-redis/redis_rate/v10"},
	"throttled/gcra":       {label: "throttled, goredisstore.v9 (GCRA)", module: "github.com/throttled/throttled/v2"},
	// Load run.
	"rlkit-memory":         {label: "**rlkit** on, memory store"},
	"rlkit-memory-denying": {label: "rlkit on, limit reached (nearly every answer a 429)"},
	"rlkit-redis":          {label: "rlkit on, Redis store"},
	"rlkit-redis-lease":    {label: "rlkit on, Redis store, consistency: lease"},
}

// frameworkModules name the module of a framework table's built-in row.
var frameworkModules = map[string]string{
	"Echo":  "github.com/labstack/echo/v4",
	"Fiber": "github.com/gofiber/fiber/v2",
	"Gin":   "github.com/gin-gonic/gin",
}

// A column is one metric shown in a table.
type column struct {
	unit   string // as the benchmark reports it
	header string
	format func(float64) string
	// worst shows the largest sample instead of the median: for failures,
	// which a median of runs could hide.
	worst bool
}

// A scenario is one table of RESULTS.md: the rows whose names start with
// prefix (and end with suffix), one per participant.
type scenario struct {
	title  string
	about  string
	prefix string
	suffix string
	// base is the row the ratios divide by: the baseline measured in the
	// same run.
	base string
	// rlkit is the row that stands for rlkit in the summary; rlkitFor, when
	// set, picks it per peer row instead (Redis: the same algorithm).
	rlkit     string
	rlkitFor  func(peer string) string
	primary   column // the metric of the median, the range and the ratios
	higher    bool   // for primary, higher is better (req/s)
	secondary []column
	framework string // for the framework tables: Echo, Fiber, Gin
	// labels override participants' labels in this table.
	labels map[string]string
}

var (
	colTime   = column{unit: "ns/op", header: "time/op", format: fmtNs}
	colBytes  = column{unit: "B/op", header: "B/op", format: fmtCount}
	colAllocs = column{unit: "allocs/op", header: "allocs/op", format: fmtCount}
	colRedis  = column{unit: "redis-ns/op", header: "server time/op", format: fmtNs}
	colFailed = column{unit: "failed/op", header: "failed calls (worst run)", format: fmtPercent, worst: true}
)

// redisRlkitFor compares a Redis peer with rlkit on the same algorithm.
func redisRlkitFor(peer string) string {
	_, alg, _ := strings.Cut(peer, "/")
	return "rlkit/" + alg
}

var scenarios = []scenario{
	{
		title:  "Decision on one key",
		about:  "One decision on one existing key (`user-42`), one goroutine, a quota no run reaches (2,000,000,000 per hour), so every decision admits and writes back. Every row goes through the same `decideFunc` indirect call.",
		prefix: "BenchmarkOneKey/", base: "baseline-map-atomic", rlkit: "rlkit-memstore-Take",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		title:  "1,000,000 distinct keys, cycled",
		about:  "One decision per op over 1,000,000 existing keys (`user-0` … `user-999999`, inserted before the timer) in a fixed random order, cycling: nearly every decision misses the CPU caches, as under traffic from many users. rlkit's store and throttled's LRU are sized for 2,000,000 keys, so nothing is evicted.",
		prefix: "BenchmarkMillionKeys/", base: "baseline-map-atomic", rlkit: "rlkit-memstore-Take",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		title:  "Parallel over 10,000 keys",
		about:  "`b.RunParallel` (GOMAXPROCS goroutines) over 10,000 existing keys, each goroutine starting at a random place in the same shuffled list: contention on each limiter's locks and shared memory. ns/op is wall time per decision over all goroutines.",
		prefix: "BenchmarkParallel10kKeys/", base: "baseline-map-atomic", rlkit: "rlkit-memstore-Take",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		title:  "Parallel over 10,000 keys, visited in another order than created",
		about:  "As above, except that the keys are created in one random order and visited in another. Above, each goroutine walks the keys in the order they were created, so a limiter that keeps each key's state in memory allocated in creation order (go-limiter: an object per key; rlkit: cells handed out in creation order) reads that memory in sequence, which real traffic does not do. Here every lookup lands at random.",
		prefix: "BenchmarkParallel10kKeysUnordered/", base: "baseline-map-atomic", rlkit: "rlkit-memstore-Take",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		title:  "A denied key",
		about:  "One decision on a key over its quota (1 per hour, used up before the timer), one goroutine: what saying no costs, paid for every request of a client being held back. The baseline's counter is at its count: one Add, one compare, one Add back.",
		prefix: "BenchmarkDeniedKey/", base: "baseline-map-atomic", rlkit: "rlkit-memstore-Take",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		title:  "Memory per key at 1,000,000 keys",
		about:  "Each op fills a new store with 1,000,000 keys (`user-<i>`). B/key is the growth of the live heap (after `runtime.GC`) per key, the store kept alive; ns/key the time per insert. rlkit keeps a 64-bit hash, never the key, so its keys cost nothing; every peer keeps the key string as a map key, so its B/key includes a real copy of each key (16 B of `user-NNNNNN`), as in production. B/op and allocs/op are per fill of 1,000,000 keys.",
		prefix: "BenchmarkMemoryPerKey/", base: "baseline-map-int64", rlkit: "rlkit-memstore",
		primary:   column{unit: "B/key", header: "B/key", format: fmtBytes},
		secondary: []column{{unit: "ns/key", header: "ns/key", format: fmtNs}, colBytes, colAllocs},
	},
	{
		title:  "net/http middleware over a bare handler",
		about:  "`GET /api/search` in process through an `httptest.ResponseRecorder`, one client IP, a quota no run reaches, every middleware keyed by `RemoteAddr` and writing its rate-limit headers. A middleware's cost is its row minus `bare`.",
		prefix: "BenchmarkNetHTTP/", base: "bare", rlkit: "rlkit-nethttp",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		labels: map[string]string{"bare": "bare Gin, no limiter"}, title: "Gin: rlkit adapter over bare Gin", framework: "Gin",
		about:  "`GET /api/search` in process, one client IP, an allowed request, a handler writing a small JSON body, responses to a writer that keeps nothing. Gin has no built-in limiter. The `headers: none` row is rlkit without its rate-limit headers: what the headers cost is the difference. The floor row has no limiter, only a middleware that writes the same two headers with constant values and allocates nothing itself: what writing them costs in this framework at the least (a limiter must also format its `RateLimit` value anew for each response, as its remaining count changes; in Echo the floor row also pays the handler Echo builds for a plain middleware on every request, which echorl avoids).",
		prefix: "BenchmarkGin/", base: "bare", rlkit: "rlkit",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		labels: map[string]string{"bare": "bare Echo, no limiter"}, title: "Echo: rlkit adapter against the built-in `middleware.RateLimiter`", framework: "Echo",
		about:  "As for Gin. Echo's built-in is `middleware.RateLimiter` on its memory store (x/time/rate per client IP) and writes no rate-limit headers; rlkit writes `RateLimit-Policy` and `RateLimit`, and the `headers: none` row writes none, as the built-in.",
		prefix: "BenchmarkEcho/", base: "bare", rlkit: "rlkit",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		labels: map[string]string{"bare": "bare Fiber, no limiter"}, title: "Fiber: rlkit adapter against the built-in `middleware/limiter`", framework: "Fiber",
		about:  "As for Gin, through the app's fasthttp handler. Fiber's built-in `middleware/limiter` (fixed window, its memory storage, keyed by `c.IP()`) writes `X-RateLimit-*`; rlkit writes `RateLimit-Policy` and `RateLimit` (none in the `headers: none` row).",
		prefix: "BenchmarkFiber/", base: "bare", rlkit: "rlkit",
		primary: colTime, secondary: []column{colBytes, colAllocs},
	},
	{
		title:  "Redis, sequential",
		about:  "One call at a time from one goroutine against the local redis-server: the latency of one decision. Every participant has its own go-redis v9 client (pool 64), its own key, a quota every call admits (10,000,000 per 10 s); rlkit's deny cache is off, so every call is a round trip. Server time/op is what the server spent per decision (INFO commandstats).",
		prefix: "BenchmarkRedis/", suffix: "/seq", base: "floor/raw-evalsha", rlkit: "rlkit/fixed_window", rlkitFor: redisRlkitFor,
		primary: colTime, secondary: []column{colRedis, colBytes, colAllocs, colFailed},
	},
	{
		title:  "Redis, 64 goroutines",
		about:  "As above from 64 goroutines at once (`b.RunParallel`): ns/op is wall time per decision over all of them, the inverse of throughput; the single-threaded server is the bottleneck. rlkit's store batches (its default): the decisions that wait while its calls are in flight go to Redis as one script call, each evaluated as alone (server time/op is per decision). A peer's failed calls are counted, not fatal (throttled gives up after 10 lost compare-and-swap rounds).",
		prefix: "BenchmarkRedis/", suffix: "/par64", base: "floor/raw-evalsha", rlkit: "rlkit/fixed_window", rlkitFor: redisRlkitFor,
		primary: colTime, secondary: []column{colRedis, colBytes, colAllocs, colFailed},
	},
}
