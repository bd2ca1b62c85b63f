package adaptertest

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/internal/redistest"
)

// The identity convention every wiring implements.
const (
	// UserHeader carries the caller's identity; the wiring's key function
	// is the adapter's built-in HeaderKey(UserHeader).
	UserHeader = "X-User"
	// BadUser as UserHeader's value makes the key function return
	// ErrBadUser, so the adapter's default error handler answers.
	BadUser = "bad"
	// RoleHeader set to SuperAdmin makes the bypass predicate true.
	RoleHeader = "X-Role"
	SuperAdmin = "super-admin"
)

// ErrBadUser is what the wiring's key function returns for BadUser.
var ErrBadUser = errors.New("adaptertest: bad user")

// OKBody is what the handler behind the adapter answers on every path,
// with status 200 (or the one StatusHeader asks for) and Content-Type
// application/json.
const OKBody = `{"ok":true}`

// StatusHeader, when a request has it, holds the status the handler
// behind the adapter answers with (see Status), so that the cases can
// tell failures from successes (rules counted by outcome). Without it the
// handler writes no status of its own: 200.
const StatusHeader = "X-Status"

// Status is the status a StatusHeader value asks for: an integer from 200
// to 599, else 200.
func Status(v string) int {
	if n, err := strconv.Atoi(v); err == nil && n >= 200 && n <= 599 {
		return n
	}
	return http.StatusOK
}

// Setup is what an adapter must be built with. The suite fills every
// field but FailOpen, Headers, Routes, Denied, DecisionContext and Report;
// those the wiring passes on only when set.
type Setup struct {
	// Served must be called by the handler behind the adapter each time
	// it runs, so that the suite knows whether a request reached it, with
	// what the adapter's Identity function gives for the request and the
	// options the adapter was built with.
	Served func(identity string, err error)
	// Config is the configuration (nil in one case: nil passes everything).
	Config *core.Config
	// Store goes to core.WithStore.
	Store store.Store
	// FailOpen, when not nil, goes to core.WithFailOpen.
	FailOpen *bool
	// Headers, when not nil, goes to core.WithHeaders.
	Headers *core.HeaderStyle
	// ClientIP goes to core.WithClientIP.
	ClientIP clientip.Config
	// Observer goes to core.WithObserver.
	Observer core.Observer
	// Logger goes to core.WithLogger.
	Logger *slog.Logger
	// LimiterOptions are the limiter's other options (the suite's clock).
	LimiterOptions []core.Option
	// Limiter, when not nil, is the limiter the adapter's New is given
	// (NewLimiter returns it), and Config is nil: the case built it with
	// the suite's store, observer, logger, clock, ClientIP and
	// DecisionContext.
	Limiter *core.Limiter
	// Routes, when set, are route templates in ":param" form
	// ("/api/kb/:id/reindex"), maybe ending in a router's catch-all
	// "*name" ("/files/*path", which the wiring writes in its router's
	// form: "{path...}" for http.ServeMux, "*" for Echo and Fiber), that
	// the wiring registers on the framework's router, each answering like
	// the catch-all, so that the adapter sees a route template for those
	// requests. Every other path still reaches the catch-all handler.
	Routes []string
	// Denied, when not nil, goes to WithDeniedHandler as a handler that
	// answers the status, Content-Type and body Denied returns for the
	// Decision the handler gets, and writes no other header.
	Denied func(d *core.Decision) (status int, contentType, body string)
	// DecisionContext goes to core.WithDecisionContext.
	DecisionContext bool
	// Report, when not nil, makes the handler behind the adapter answer
	// 200 with Report's answer as its body (Content-Type application/json)
	// instead of OKBody. It gets the Decision the handler found in the
	// request's context (core.FromContext of the *http.Request's context;
	// Fiber's c.UserContext()) and in the framework's (the adapter's
	// DecisionOf), each nil when not found.
	Report func(inRequest, inFramework *core.Decision) string
	// PlanHeader, when set, names the request header that carries the
	// caller's plan: the wiring passes WithPlan a function returning
	// Plan of its value.
	PlanHeader string
	// PlanLookup, when not nil, is what Plan asks (the suite counts the
	// plan lookups through it).
	PlanLookup func(value string) string
}

// Plan is the plan the wiring's plan function returns for PlanHeader's
// value: PlanLookup's answer, or the value itself.
func (s Setup) Plan(value string) string {
	if s.PlanLookup != nil {
		return s.PlanLookup(value)
	}
	return value
}

// NewLimiter returns the limiter the adapter decides with: Limiter, when
// set, else a core.Limiter over Config with the options s gives it (the
// wiring passes it to the adapter's New, and to its Identity).
func (s Setup) NewLimiter() *core.Limiter {
	if s.Limiter != nil {
		return s.Limiter
	}
	opts := append([]core.Option{
		core.WithStore(s.Store), core.WithObserver(s.Observer), core.WithLogger(s.Logger),
		core.WithClientIP(s.ClientIP), core.WithDecisionContext(s.DecisionContext),
	}, s.LimiterOptions...)
	if s.Headers != nil {
		opts = append(opts, core.WithHeaders(*s.Headers))
	}
	if s.FailOpen != nil {
		opts = append(opts, core.WithFailOpen(*s.FailOpen))
	}
	return core.NewLimiter(s.Config, opts...)
}

// Start builds the adapter as s says, around a handler that calls
// s.Served and answers every path with OKBody and 200, or the status a
// StatusHeader asks for (through the framework's ordinary way of writing
// it, never an error the handler returns), serves it on a free
// loopback port with the framework's real server, and returns
// "http://127.0.0.1:port". The server must be shut down at t.Cleanup.
type Start func(t *testing.T, s Setup) (baseURL string)

// Adapter names a Start function, for Same.
type Adapter struct {
	Name  string
	Start Start
}

// ExampleConfig is the example configuration
// (examples/internal/demo/ratelimit.yaml), which most cases and the
// adapters' own tests use.
const ExampleConfig = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
    - name: upload
      paths: ["/api/kb/*/docs/upload", "/api/kb/*/docs/upload/batch"]
      limit: "30/minute"
      weights:
        "/api/kb/*/docs/upload/batch": 10
    - name: reindex
      paths: ["/api/kb/*/reindex", "/api/kb/*/docs/*/reindex"]
      limit: "2/minute"
    - name: mcp
      paths: ["/mcp"]
      limit: "300/minute"
  default: "120/minute"
  exempt_paths: ["/health", "/ready", "/docs", "/redoc", "/openapi.json"]
`

// Config parses yaml as a configuration, failing tb when it does not parse.
func Config(tb testing.TB, yaml string) *core.Config {
	tb.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "test.yaml")
	if err != nil {
		tb.Fatal(err)
	}
	return cfg
}

// BenchConfig is ExampleConfig with a search limit no benchmark reaches
// (2,000,000,000 per hour), so every request is admitted and writes its
// rate-limit headers.
func BenchConfig(tb testing.TB) *core.Config {
	return Config(tb, strings.Replace(ExampleConfig, `limit: "10/second"`, `limit: "2000000000/hour"`, 1))
}

// Serve sends h one request from 192.0.2.1 with the given header lines
// (name, value, name, value...), in process, and returns the recording.
func Serve(h http.Handler, method, path string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, nil)
	r.RemoteAddr = "192.0.2.1:1"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// Listen returns a listener on a free loopback port, closed at t.Cleanup.
func Listen(t testing.TB) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	return ln
}

// ServeHTTP serves h with an http.Server on a free loopback port until
// t.Cleanup, and returns its base URL. It suits net/http, Gin and Echo.
func ServeHTTP(t testing.TB, h http.Handler) string {
	t.Helper()
	ln := Listen(t)
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			t.Errorf("http.Server.Shutdown: %v", err)
		}
		if err := <-done; !errors.Is(err, http.ErrServerClosed) {
			t.Errorf("http.Server.Serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// Header names as net/http canonicalises them.
const (
	hPolicy    = "Ratelimit-Policy"
	hRateLimit = "Ratelimit"
	hRetry     = "Retry-After"
	hLimit     = "X-Ratelimit-Limit"
	hRemaining = "X-Ratelimit-Remaining"
	hReset     = "X-Ratelimit-Reset"
	hType      = "Content-Type"
	hLength    = "Content-Length"
)

// checked are the headers every response is checked for: a header not in
// the expectation must be absent.
var checked = []string{hPolicy, hRateLimit, hRetry, hLimit, hRemaining, hReset, hType, hLength}

// t0 is the start of a minute, so fixed windows of a second or a minute
// start with the test.
var t0 = time.Unix(1_700_000_040, 0)

// req is one request: method, path (sent as written, escapes and all) and
// header name/value pairs.
type req struct {
	method string
	path   string
	header []string
}

func (r req) String() string {
	s := r.method + " " + r.path
	for i := 0; i+1 < len(r.header); i += 2 {
		s += fmt.Sprintf(" [%s: %q]", r.header[i], r.header[i+1])
	}
	return s
}

// want is the expected response: status, every checked header that must
// be present (all others must be absent), and the body.
type want struct {
	status int
	header map[string]string
	body   string
}

// step is a request and what it must get, or (req.method == "") a move of
// the clock by adv, or (swap != "") a configuration swapped in.
type step struct {
	adv  time.Duration
	swap string // YAML, for the application's limiter (testCase.limiter)
	req  req
	want want
	// take is the store calls the request makes, "key rule cost", or ""
	// for none (exempt, bypass, disabled, key error): one, or with a rule
	// in shadow mode beside the enforced one, two joined by "; " (the
	// enforced rule's first). A request counted under stacked rules
	// (core.RuleSpec.Stack) makes one TakeAll, "takeall key rule cost"
	// for each of its takes (the rule that applies first, then the
	// stacked ones in file order), before the calls of its rules in
	// shadow mode.
	take string
	// shadowDenied: the last call's rule, in shadow mode, would deny.
	shadowDenied bool
	// refusedBy are the rules of a refused TakeAll that refused the
	// request (each reports its denial, the others that they admitted it
	// and were not counted); nil: the rule the 429 body names.
	refusedBy []string
	// counted, when set, checks the store calls and observer events
	// instead of take (which is then ""): "" when they are right, else
	// what is wrong.
	counted func(takes []string, events []core.Event) string
	// eventPlan is the plan the observer's events name when the request
	// counted under custom limits (policy "<rule>@custom"): the caller's
	// plan, "" for none.
	eventPlan string
	// after, when set, checks more once the step is done: "" when all is
	// right, else what is wrong.
	after func() string
}

// testCase is one row of the table.
type testCase struct {
	name   string
	config string       // YAML; "" means a nil *core.Config
	setup  func(*Setup) // adjusts the Setup, when not nil
	// failing makes every Take fail.
	failing bool
	steps   []step
	// warnings is the number of store-failure warnings logged.
	warnings int
	// run replaces steps, for cases that are not a sequence (concurrency).
	run func(e *env)
	// logs are the lines logged, in order, but the store warnings.
	logs []string
	// limiter makes the case build the limiter itself, from config, and
	// give it to the adapter's New instead of the configuration: an
	// adapter that ignored it would count nothing.
	limiter bool
	// redis runs the case a second time, named "<name>Redis", counting in
	// the Redis store (its scripts in miniredis, on the suite's clock)
	// instead of the memory store: the same answers and store calls.
	redis bool
	// onRedis is that second run (see onRedis).
	onRedis bool
	// keyed: the configuration has rules that count per another key than
	// the caller's (core.RuleSpec.Key), so the key counted is not always
	// the one the adapter's Identity gives.
	keyed bool
}

// onRedis returns table with, after each case marked redis, its run
// over the Redis store.
func onRedis(table []testCase) []testCase {
	out := slices.Clone(table)
	for _, c := range table {
		if c.redis {
			c.name, c.onRedis = c.name+"Redis", true
			out = append(out, c)
		}
	}
	return out
}

// Response is one response as a client saw it.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
}

// env is one case's running adapter and what it observed.
type env struct {
	t       *testing.T
	base    string
	client  *http.Client
	clock   *store.ManualClock
	rec     *recorder
	logs    *logRecorder
	failing bool
	// served counts the handler's runs.
	served *atomic.Int64
	// limiter is the case's own limiter (testCase.limiter), or nil.
	limiter *core.Limiter
	// identified is what the handler's last run got from Identity.
	identified *atomic.Pointer[identity]
	// timers tells of the limiter's timers (a rule's wait): "timer" when
	// one is made, "stop" when one is stopped before it fires.
	timers chan string
	// keyed is the case's (testCase.keyed).
	keyed bool
}

// identity is what the adapter's Identity function returned.
type identity struct {
	id  string
	err error
}

// errStoreDown is the error of the failing store.
var errStoreDown = errors.New("adaptertest: store down")

func newEnv(t *testing.T, c *testCase, start Start) *env {
	t.Helper()
	var cfg *core.Config
	if c.config != "" {
		var err error
		if cfg, err = core.ParseConfig([]byte(c.config), c.name+".yaml"); err != nil {
			t.Fatal(err)
		}
	}
	clock := store.NewManualClock(t0)
	timers := make(chan string, 256)
	rec := &recorder{failing: c.failing, observed: make(chan struct{}, 1024), released: make(chan string, 64)}
	if c.onRedis {
		m := redistest.StartMini(t)
		rc := redis.NewClient(&redis.Options{Addr: m.Addr(), ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = rc.Close() })
		rs, err := redisstore.New(rc, redisstore.WithClock(clock), redisstore.WithTimeout(redistest.StoreTimeout))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rs.Close() })
		rec.store, rec.sync = rs, func() { m.SetTime(clock.Time()) }
	} else {
		mem := memstore.New(memstore.WithClock(clock))
		t.Cleanup(func() { _ = mem.Close() })
		rec.store = mem
	}
	logs := &logRecorder{}
	served := new(atomic.Int64)
	identified := new(atomic.Pointer[identity])
	s := Setup{
		Served: func(id string, err error) {
			served.Add(1)
			identified.Store(&identity{id, err})
		},
		Config:         cfg,
		Store:          rec,
		Observer:       rec.observe,
		Logger:         slog.New(logs),
		LimiterOptions: []core.Option{core.WithClock(&signalClock{clock, timers}), core.WithIdentityKey([]byte(identityKey))},
	}
	if c.setup != nil {
		c.setup(&s)
	}
	var lim *core.Limiter
	if c.limiter {
		lim = s.NewLimiter()
		s.Config, s.Limiter = nil, lim
	}
	base := start(t, s)
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("start returned %q, want http://127.0.0.1:<port>", base)
	}
	tr := &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}
	// Registered after start's cleanups, so it runs before them: the
	// server shuts down with no idle connection left open.
	t.Cleanup(tr.CloseIdleConnections)
	return &env{
		t:          t,
		base:       base,
		client:     &http.Client{Transport: tr, Timeout: 10 * time.Second},
		clock:      clock,
		timers:     timers,
		rec:        rec,
		logs:       logs,
		failing:    c.failing,
		served:     served,
		identified: identified,
		limiter:    lim,
		keyed:      c.keyed,
	}
}

// signalClock is the suite's clock as the limiters read it: the
// store.ManualClock, whose timers (those of a rule's wait) tell the case
// when they are made and stopped, so that it moves the clock once a
// request is held, and knows when one has left.
type signalClock struct {
	*store.ManualClock
	timers chan<- string
}

func (c *signalClock) NewTimer(d time.Duration) (<-chan time.Time, func() bool) {
	ch, stop := c.ManualClock.NewTimer(d)
	c.timers <- "timer"
	return ch, func() bool {
		stopped := stop()
		if stopped {
			c.timers <- "stop"
		}
		return stopped
	}
}

// send sends r and reads the whole response.
func (e *env) send(r req) (*Response, error) { return e.sendContext(context.Background(), r) }

// sendContext is send under ctx: when ctx ends, the client gives up the
// request and closes its connection.
func (e *env) sendContext(ctx context.Context, r req) (*Response, error) {
	hr, err := http.NewRequestWithContext(ctx, r.method, e.base+r.path, nil)
	if err != nil {
		return nil, err
	}
	for i := 0; i+1 < len(r.header); i += 2 {
		hr.Header.Add(r.header[i], r.header[i+1])
	}
	resp, err := e.client.Do(hr)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &Response{Status: resp.StatusCode, Header: resp.Header, Body: body}, nil
}

// step runs step i and checks everything it must do.
func (e *env) step(i int, s step) {
	t := e.t
	t.Helper()
	if s.swap != "" {
		cfg, err := core.ParseConfig([]byte(s.swap), "swap.yaml")
		if err != nil {
			t.Fatal(err)
		}
		e.limiter.SetConfig(cfg)
		return
	}
	if s.req.method == "" {
		e.clock.Advance(s.adv)
		return
	}
	where := fmt.Sprintf("step %d (%s)", i, s.req)
	resp, err := e.send(s.req)
	if err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	checkResponse(t, where, resp, s.want)
	// Every 200 is the handler's, and so is every OKBody; no other
	// answer may run it.
	wantServed := int64(0)
	if s.want.status == http.StatusOK || s.want.body == OKBody {
		wantServed = 1
	}
	if n := e.served.Swap(0); n != wantServed {
		t.Fatalf("%s: the handler ran %d times, want %d", where, n, wantServed)
	}
	takes, events := e.rec.drain()
	if s.counted != nil {
		if msg := s.counted(takes, events); msg != "" {
			t.Fatalf("%s: %s", where, msg)
		}
	} else {
		e.checkCounted(where, s, takes, events)
	}
	if s.after != nil {
		if msg := s.after(); msg != "" {
			t.Fatalf("%s: %s", where, msg)
		}
	}
	// The handler's Identity names the key the request counted under
	// (under a rule keyed by user).
	if got := e.identified.Swap(nil); wantServed == 1 && s.take != "" && !e.failing && !e.keyed {
		key := strings.Fields(strings.TrimPrefix(strings.TrimPrefix(s.take, "peek "), "takeall "))[0] // every call's key is the same
		switch {
		case got == nil:
			t.Fatalf("%s: the handler did not report its Identity", where)
		case got.err != nil || e.rec.clear(keyer.Key(got.id)) != key:
			t.Fatalf("%s: Identity = %q, %v; its key is %q, want the key counted, %q", where, got.id, got.err, e.rec.clear(keyer.Key(got.id)), key)
		}
	}
}

// checkCounted checks the store calls and observer events of one step.
func (e *env) checkCounted(where string, s step, takes []string, events []core.Event) {
	t := e.t
	t.Helper()
	var wantTakes []string
	if s.take != "" {
		wantTakes = strings.Split(s.take, "; ")
	}
	if !slices.Equal(takes, wantTakes) {
		t.Fatalf("%s: store calls: got %q, want %q", where, takes, wantTakes)
	}
	if strings.HasPrefix(s.take, "peek ") {
		e.checkDeferred(where, s, wantTakes, events) // a rule counted by outcome
		return
	}
	if s.take == "" {
		// Nothing counted: no event (limiting off, a key function's
		// error) or one that says why (exempt, bypassed).
		switch {
		case len(events) == 0:
		case len(events) > 1:
			t.Fatalf("%s: observer: got %d events, want at most one", where, len(events))
		case events[0].Outcome != core.OutcomeExempt && events[0].Outcome != core.OutcomeBypassed,
			!events[0].Allowed, events[0].Cost != 0, events[0].Key != "", events[0].Err != nil,
			events[0].Outcome == core.OutcomeExempt && events[0].Rule != "":
			t.Fatalf("%s: observer: got %+v for a request not counted, want an exempt or bypassed event", where, events[0])
		}
		return
	}
	if len(events) != len(wantTakes) {
		t.Fatalf("%s: observer: got %d events, want %d", where, len(events), len(wantTakes))
	}
	for i, take := range wantTakes {
		together := strings.HasPrefix(take, "takeall ") // one take of a TakeAll
		f := strings.Fields(strings.TrimPrefix(take, "takeall "))
		key, rule, cost := f[0], f[len(f)-2], f[len(f)-1]
		rule, plan, _ := strings.Cut(rule, "@") // a plan's policy: "<rule>@<plan>"
		if plan == core.CustomPlan {
			plan = s.eventPlan // custom limits: the event names the caller's plan
		}
		// A shadow rule's call is the second (or after a TakeAll's), or
		// the only one of a request it alone counts (marked
		// shadowDenied).
		shadow := !together && (i > 0 || len(wantTakes) == 1 && s.shadowDenied)
		allowed := shadow || s.want.status == http.StatusOK || s.want.body == OKBody
		outcome := core.OutcomeAllowed
		switch {
		case e.failing:
			outcome = core.OutcomeStoreError
		case shadow && s.shadowDenied:
			outcome = core.OutcomeShadowDenied
		case together && !allowed && !slices.Contains(s.refusers(), rule):
			cost = "0" // it would have admitted the request another rule refused: nothing counted
		case !allowed:
			outcome = core.OutcomeDenied
		}
		ev := events[i]
		if ev.Rule != rule || ev.Plan != plan || strconv.FormatInt(ev.Cost, 10) != cost || ev.Allowed != allowed || ev.Outcome != outcome ||
			e.rec.clear(ev.Key) != key || (ev.Err != nil) != e.failing || ev.Latency != 0 {
			t.Fatalf("%s: observer: event %d: got %+v, want rule %s, plan %q, key %s, cost %s, allowed %v, outcome %v, error %v, latency 0",
				where, i, ev, rule, plan, key, cost, allowed, outcome, e.failing)
		}
	}
}

// refusers are the rules of a refused TakeAll that refused the request:
// refusedBy, else the rule the 429 body names.
func (s step) refusers() []string {
	if s.refusedBy != nil {
		return s.refusedBy
	}
	_, rest, _ := strings.Cut(s.want.body, "for '")
	rule, _, _ := strings.Cut(rest, "'")
	return []string{rule}
}

// checkResponse checks status, the checked headers (each present once with
// the wanted value, or absent), that there is no other header but Date,
// and the body.
func checkResponse(t *testing.T, where string, got *Response, w want) {
	t.Helper()
	var errs []string
	if got.Status != w.status {
		errs = append(errs, fmt.Sprintf("status: got %d, want %d", got.Status, w.status))
	}
	for _, name := range checked {
		v, ok := w.header[name]
		switch vals := got.Header[name]; {
		case !ok && len(vals) > 0:
			errs = append(errs, fmt.Sprintf("header %s: got %q, want none", name, vals))
		case ok && (len(vals) != 1 || vals[0] != v):
			errs = append(errs, fmt.Sprintf("header %s: got %q, want [%q]", name, vals, v))
		}
	}
	for _, name := range slices.Sorted(maps.Keys(got.Header)) {
		if name != "Date" && !slices.Contains(checked, name) {
			errs = append(errs, fmt.Sprintf("header %s: got %q, want none", name, got.Header[name]))
		}
	}
	if string(got.Body) != w.body {
		errs = append(errs, fmt.Sprintf("body: got %q, want %q", got.Body, w.body))
	}
	for name := range w.header {
		if !slices.Contains(checked, name) {
			t.Fatalf("%s: bad test: header %s is not checked", where, name)
		}
	}
	if len(errs) > 0 {
		t.Fatalf("%s:\n\t%s", where, strings.Join(errs, "\n\t"))
	}
}

// recorder is the store the adapter gets: it records every Take ("key rule
// cost"), Peek ("peek key rule cost"), Reset ("reset key rule"), each take
// of a TakeAll ("takeall key rule cost") and observer event, then asks the memory store (or the Redis store, its
// server's clock set to the suite's first), or fails.
type recorder struct {
	store   store.Store
	failing bool
	sync    func() // sets the Redis server's clock; nil for the memory store

	mu     sync.Mutex
	takes  []string
	events []core.Event
	// observed receives once for each event (up to its buffer), for the
	// cases that wait for one.
	observed chan struct{}
	// slots records the calls about requests in flight, "acquire key
	// rule" (with " refused" when every slot was held) and "release key
	// rule", apart from takes; released gets the key and rule of each
	// Release, when a case waits for one.
	slots    []string
	released chan string
}

// identityKey keys the hash of secret identities in every limiter of the
// suite (core.WithIdentityKey), so that the suite works the hashes out
// itself.
const identityKey = "adaptertest identity key"

// keyer gives store keys as every limiter of the suite does.
var keyer = core.NewLimiter(nil, core.WithIdentityKey([]byte(identityKey)))

// hashed maps the store key of "X-User:<name>" (HeaderKey's identity: a
// keyed hash, see core.SecretIdentity) back to "X-User:<name>", for the
// names the cases use, so that the table reads as the identities; and so
// for the X-Api-Key values of the cases of rules keyed by that header.
var hashed = func() map[string]string {
	m := map[string]string{}
	for _, id := range []string{"X-User:alice", "X-User:Alice", "X-User:bob", "X-User:böb", "X-Api-Key:key1", "X-Api-Key:key2"} {
		label, name, _ := strings.Cut(id, ":")
		// Worked out here, not by core: a limiter that stored the
		// identity in clear must fail.
		h := hmac.New(sha256.New, []byte(identityKey))
		h.Write([]byte(name))
		m[label+":hmac:"+hex.EncodeToString(h.Sum(nil)[:16])] = id
	}
	return m
}()

// clear is key with each hashed identity in it (the whole key, or a part
// of a rule's key: see core.RuleSpec.Key) shown as "X-User:<name>" or
// "X-Api-Key:<value>"; a key holding one in clear is marked so, to fail
// the cases.
func (r *recorder) clear(key string) string {
	if c, ok := hashed[key]; ok {
		return c
	}
	for _, label := range []string{"X-User:", "X-Api-Key:"} {
		for rest := key; ; {
			i := strings.Index(rest, label)
			if i < 0 {
				break
			}
			if rest = rest[i+len(label):]; !strings.HasPrefix(rest, "hmac:") {
				return "in-clear!" + key
			}
		}
	}
	for h, id := range hashed {
		key = strings.ReplaceAll(key, h, id)
	}
	return key
}

var _ store.Charger = (*recorder)(nil)

func (r *recorder) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	r.mu.Lock()
	r.takes = append(r.takes, r.clear(key)+" "+p.Name+" "+strconv.FormatInt(cost, 10))
	r.mu.Unlock()
	if r.failing {
		return store.Result{}, errStoreDown
	}
	r.setTime()
	return r.store.Take(ctx, key, p, cost)
}

// Peek records "peek key rule cost", then peeks in the memory store, or
// fails.
func (r *recorder) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	r.mu.Lock()
	r.takes = append(r.takes, "peek "+r.clear(key)+" "+p.Name+" "+strconv.FormatInt(cost, 10))
	r.mu.Unlock()
	if r.failing {
		return store.Result{}, errStoreDown
	}
	r.setTime()
	return r.store.Peek(ctx, key, p, cost)
}

// Charge records "charge key rule cost", then charges in the store (a
// store.Charger), or fails.
func (r *recorder) Charge(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	r.mu.Lock()
	r.takes = append(r.takes, "charge "+r.clear(key)+" "+p.Name+" "+strconv.FormatInt(cost, 10))
	r.mu.Unlock()
	if r.failing {
		return store.Result{}, errStoreDown
	}
	c, ok := r.store.(store.Charger)
	if !ok {
		return store.Result{}, fmt.Errorf("adaptertest: the store %T is not a store.Charger", r.store)
	}
	r.setTime()
	return c.Charge(ctx, key, p, cost)
}

// Reset records "reset key rule", then resets in the store, or fails.
func (r *recorder) Reset(ctx context.Context, key string, p *store.Policy) (bool, error) {
	r.mu.Lock()
	r.takes = append(r.takes, "reset "+r.clear(key)+" "+p.Name)
	r.mu.Unlock()
	if r.failing {
		return false, errStoreDown
	}
	r.setTime()
	return r.store.Reset(ctx, key, p)
}

// setTime sets the Redis server's clock to the suite's.
func (r *recorder) setTime() {
	if r.sync != nil {
		r.sync()
	}
}

var _ store.MultiTaker = (*recorder)(nil)

// TakeAll records "takeall key rule cost" for each take, in order, then
// takes them all at once in the store (a store.MultiTaker: the memory
// store; a store without TakeAll fails the call), or fails.
func (r *recorder) TakeAll(ctx context.Context, takes []store.Take, results []store.Result) (bool, error) {
	r.mu.Lock()
	for _, t := range takes {
		r.takes = append(r.takes, "takeall "+r.clear(t.Key)+" "+t.Policy.Name+" "+strconv.FormatInt(t.Cost, 10))
	}
	r.mu.Unlock()
	if r.failing {
		return false, errStoreDown
	}
	m, ok := r.store.(store.MultiTaker)
	if !ok {
		return false, fmt.Errorf("adaptertest: the store %T is not a store.MultiTaker", r.store)
	}
	r.setTime()
	return m.TakeAll(ctx, takes, results)
}

var _ store.ConcurrencyStore = (*recorder)(nil)

// Acquire records "acquire key rule" (" refused" added when every slot
// was held), then takes a slot in the memory store, or fails.
func (r *recorder) Acquire(ctx context.Context, key string, c *store.Concurrency) (uint64, bool, error) {
	if r.failing {
		r.slotCall("acquire " + r.clear(key) + " " + c.Name + " failed")
		return 0, false, errStoreDown
	}
	lease, ok, err := r.store.(store.ConcurrencyStore).Acquire(ctx, key, c)
	call := "acquire " + r.clear(key) + " " + c.Name
	if !ok {
		call += " refused"
	}
	r.slotCall(call)
	return lease, ok, err
}

// Release records "release key rule" and gives the slot back in the
// memory store.
func (r *recorder) Release(ctx context.Context, key string, c *store.Concurrency, lease uint64) error {
	call := r.clear(key) + " " + c.Name
	err := r.store.(store.ConcurrencyStore).Release(ctx, key, c, lease)
	r.slotCall("release " + call)
	if r.released != nil {
		select {
		case r.released <- call:
		default:
		}
	}
	return err
}

func (r *recorder) slotCall(call string) {
	r.mu.Lock()
	r.slots = append(r.slots, call)
	r.mu.Unlock()
}

// drainSlots returns and forgets the calls about requests in flight.
func (r *recorder) drainSlots() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := r.slots
	r.slots = nil
	return s
}

func (r *recorder) observe(e core.Event) {
	r.mu.Lock()
	r.events = append(r.events, e)
	r.mu.Unlock()
	select {
	case r.observed <- struct{}{}:
	default: // no case is waiting for this many
	}
}

// drain returns and forgets what was recorded.
func (r *recorder) drain() ([]string, []core.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	takes, events := r.takes, r.events
	r.takes, r.events = nil, nil
	return takes, events
}

// logRecorder is a slog.Handler keeping the messages logged.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (h *logRecorder) Enabled(context.Context, slog.Level) bool { return true }

func (h *logRecorder) Handle(_ context.Context, r slog.Record) error {
	h.mu.Lock()
	h.msgs = append(h.msgs, r.Level.String()+" "+r.Message)
	h.mu.Unlock()
	return nil
}

func (h *logRecorder) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logRecorder) WithGroup(string) slog.Handler      { return h }

func (h *logRecorder) messages() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.msgs)
}

// Run runs every case of the table against the adapter start builds.
func Run(t *testing.T, start Start) { run(t, start, allCases()) }

// run runs every case of table against the adapter start builds.
func run(t *testing.T, start Start, table []testCase) {
	for _, c := range table {
		t.Run(c.name, func(t *testing.T) {
			e := newEnv(t, &c, start)
			if c.run != nil {
				c.run(e)
			} else {
				for i, s := range c.steps {
					e.step(i, s)
				}
			}
			want := slices.Clone(c.logs)
			for range c.warnings {
				want = append(want, "WARN rlkit: rate-limit store failed")
			}
			if got := e.logs.messages(); !slices.Equal(got, want) {
				t.Fatalf("logged %q, want %q", got, want)
			}
		})
	}
}

// Same runs every sequence of the table through ref and each of others,
// and fails unless each of others answers every request as ref does: the
// same status, the same headers (all of them but Date, values and order
// of values), the same body, the same store calls (so identities are
// spelled the same) and as many runs of the handler. It checks no
// expectation of the table: Run does.
func Same(t *testing.T, ref Adapter, others ...Adapter) { same(t, allCases(), ref, others...) }

// same is Same for the sequences of table.
func same(t *testing.T, table []testCase, ref Adapter, others ...Adapter) {
	for _, c := range table {
		if c.run != nil {
			continue
		}
		t.Run(c.name, func(t *testing.T) {
			want := transcript(t, &c, ref.Start)
			for _, a := range others {
				got := transcript(t, &c, a.Start)
				for i := range want {
					if d := diff(want[i], got[i]); d != "" {
						t.Errorf("%s differs from %s at step %d (%s):\n%s", a.Name, ref.Name, i, c.steps[i].req, d)
						break
					}
				}
			}
		})
	}
}

// exchange is what one step produced.
type exchange struct {
	resp   *Response
	takes  []string
	served int64 // the handler's runs
}

// transcript runs c's steps and records what each produced.
func transcript(t *testing.T, c *testCase, start Start) []exchange {
	t.Helper()
	e := newEnv(t, c, start)
	out := make([]exchange, len(c.steps))
	for i, s := range c.steps {
		if s.req.method == "" {
			e.clock.Advance(s.adv)
			continue
		}
		resp, err := e.send(s.req)
		if err != nil {
			t.Fatalf("step %d (%s): %v", i, s.req, err)
		}
		resp.Header.Del("Date")
		takes, _ := e.rec.drain()
		out[i] = exchange{resp, takes, e.served.Swap(0)}
	}
	return out
}

// diff describes how got differs from want, or returns "".
func diff(want, got exchange) string {
	if want.resp == nil {
		return ""
	}
	var d []string
	if got.resp.Status != want.resp.Status {
		d = append(d, fmt.Sprintf("\tstatus: got %d, want %d", got.resp.Status, want.resp.Status))
	}
	names := map[string]bool{}
	for k := range want.resp.Header {
		names[k] = true
	}
	for k := range got.resp.Header {
		names[k] = true
	}
	for _, k := range slices.Sorted(maps.Keys(names)) {
		if g, w := got.resp.Header[k], want.resp.Header[k]; !slices.Equal(g, w) {
			d = append(d, fmt.Sprintf("\theader %s: got %q, want %q", k, g, w))
		}
	}
	if string(got.resp.Body) != string(want.resp.Body) {
		d = append(d, fmt.Sprintf("\tbody: got %q, want %q", got.resp.Body, want.resp.Body))
	}
	if !slices.Equal(got.takes, want.takes) {
		d = append(d, fmt.Sprintf("\tstore calls: got %q, want %q", got.takes, want.takes))
	}
	if got.served != want.served {
		d = append(d, fmt.Sprintf("\thandler runs: got %d, want %d", got.served, want.served))
	}
	return strings.Join(d, "\n")
}
