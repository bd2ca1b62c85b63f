package grpcrl_test

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/grpcrl"
)

const testConfig = `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say"]
      limit: "3/minute"
    - name: watch
      paths: ["/test.Echo/Watch"]
      limit: "2/minute"
  default: "100/minute"
`

// allowedMD is the metadata of an allowed call under a one-limit rule.
func allowedMD(rule string, q, w, r, reset int) map[string]string {
	return map[string]string{
		"ratelimit-policy": `"` + rule + `";q=` + strconv.Itoa(q) + ";w=" + strconv.Itoa(w),
		"ratelimit":        `"` + rule + `";r=` + strconv.Itoa(r) + ";t=" + strconv.Itoa(reset),
	}
}

// deniedMD is the metadata of a refused call under a one-limit rule.
func deniedMD(rule string, q, w, reset, retry int) map[string]string {
	m := allowedMD(rule, q, w, 0, reset)
	m["retry-after"] = strconv.Itoa(retry)
	return m
}

// checkOK fails t unless r is an allowed call with exactly the metadata want.
func checkOK(t *testing.T, what string, r result, want map[string]string) {
	t.Helper()
	if r.code != codes.OK {
		t.Fatalf("%s: %v %q, want OK", what, r.code, r.msg)
	}
	if got := limitMD(r.header); !maps.Equal(got, want) {
		t.Errorf("%s: header metadata %v, want %v", what, got, want)
	}
}

// checkExhausted fails t unless r is ResourceExhausted for rule with the
// RetryInfo retry and exactly the metadata want, as header metadata.
func checkExhausted(t *testing.T, what string, r result, rule string, retry time.Duration, want map[string]string) {
	t.Helper()
	if r.code != codes.ResourceExhausted || r.msg != "Rate limit exceeded for '"+rule+"' requests" {
		t.Fatalf("%s: %v %q, want ResourceExhausted for %s", what, r.code, r.msg, rule)
	}
	if r.retry != retry {
		t.Errorf("%s: RetryInfo %v, want %v", what, r.retry, retry)
	}
	if got := limitMD(r.header); !maps.Equal(got, want) {
		t.Errorf("%s: header metadata %v, want %v", what, got, want)
	}
}

// TestCountsPerIdentity: each identity (two API keys, a bearer subject,
// the peer's IP) gets exactly the rule's 3 calls a minute, with the
// rate-limit metadata of each call exactly; the fourth and fifth end with
// ResourceExhausted, RetryInfo and retry-after; a minute later each has 3
// again. The handler ran for the allowed calls only, under the identity
// Identity gives.
func TestCountsPerIdentity(t *testing.T) {
	clock := store.NewManualClock(start)
	conn, e := serve(t, config(t, testConfig), core.WithStore(memAt(t, clock)), keys)
	callers := []struct {
		name string
		md   []string
		id   string
	}{
		{"alice", apiKey("alice"), core.SecretIdentity("X-Api-Key", "alice")},
		{"bob", apiKey("bob"), core.SecretIdentity("X-Api-Key", "bob")},
		{"carol", bearer("good-carol"), "sub:carol"},
		{"carol's token beats her API key", append(bearer("good-carol"), apiKey("alice")...), "sub:carol"},
		{"peer", nil, "127.0.0.1"},
	}
	for round := range 2 {
		for i, c := range callers {
			for n := range 5 {
				r := say(t, conn, "hi", c.md...)
				what := c.name + " call " + strconv.Itoa(n+1)
				used := n
				if i == 3 { // carol again: her first pass used 3 already
					used = n + 3
				}
				if used < 3 {
					checkOK(t, what, r, allowedMD("say", 3, 60, 2-used, 60))
				} else {
					checkExhausted(t, what, r, "say", time.Minute, deniedMD("say", 3, 60, 60, 60))
				}
			}
		}
		if got, want := e.served.Load(), int64(12*(round+1)); got != want {
			t.Fatalf("round %d: handler ran %d times, want %d", round, got, want)
		}
		clock.Advance(time.Minute)
	}
	ids := e.identities()
	var want []string
	for range 2 {
		for _, c := range []int{0, 1, 2, 4} {
			for range 3 {
				want = append(want, callers[c].id)
			}
		}
	}
	if !slices.Equal(ids, want) {
		t.Errorf("identities served: %q, want %q", ids, want)
	}
}

// TestForgedToken: a bearer token that fails verification ends the call
// with Unauthenticated before anything is counted, whatever API key comes
// with it: a client cannot pick an identity with a token it made up, nor
// fall back to another. A verified token counts under its subject only.
func TestForgedToken(t *testing.T) {
	spy := &spyStore{Store: memAt(t, store.NewManualClock(start))}
	conn, e := serve(t, config(t, testConfig), core.WithStore(spy), keys)
	for _, md := range [][]string{
		bearer("forged"),
		append(bearer("sub:alice"), apiKey("alice")...),
		bearer("good-"), // verifies to an empty subject: the peer's IP, below
	} {
		r := say(t, conn, "hi", md...)
		if md[1] == "Bearer good-" {
			checkOK(t, "empty subject", r, allowedMD("say", 3, 60, 2, 60))
			continue
		}
		if r.code != codes.Unauthenticated || r.msg != "Unauthorized" || len(limitMD(r.header)) != 0 {
			t.Errorf("%q: %v %q %v, want Unauthenticated without metadata", md, r.code, r.msg, r.header)
		}
	}
	if got := spy.calls.Load(); got != 1 {
		t.Errorf("store calls: %d, want 1 (the empty subject's)", got)
	}
	if got := e.identities(); !slices.Equal(got, []string{"127.0.0.1"}) {
		t.Errorf("served %q, want the empty subject's call under the peer's IP", got)
	}
}

// TestErrorHandler: the application's answer to a failed key function.
func TestErrorHandler(t *testing.T) {
	var gotErr error
	conn, _ := serve(t, config(t, testConfig), keys, grpcrl.WithErrorHandler(func(_ context.Context, m string, err error) error {
		gotErr = err
		return status.Error(codes.PermissionDenied, "no "+m)
	}))
	r := say(t, conn, "hi", bearer("forged")...)
	if r.code != codes.PermissionDenied || r.msg != "no "+sayMethod || gotErr == nil || gotErr.Error() != "bad signature" {
		t.Errorf("got %v %q (handler saw %v), want the handler's PermissionDenied after the verify error", r.code, r.msg, gotErr)
	}
}

// TestErrorHandlerNil: WithErrorHandler(nil) is the default: a failed key
// function ends the call with Unauthenticated, never a nil call.
func TestErrorHandlerNil(t *testing.T) {
	conn, _ := serve(t, config(t, testConfig), keys, grpcrl.WithErrorHandler(nil))
	if r := say(t, conn, "hi", bearer("forged")...); r.code != codes.Unauthenticated || r.msg != "Unauthorized" {
		t.Errorf("got %v %q, want Unauthenticated \"Unauthorized\"", r.code, r.msg)
	}
}

// TestForwardedMetadata: forwarding metadata from a peer that is not a
// trusted proxy changes nothing (every call counts under the peer's IP);
// from a trusted one, the client it names counts.
func TestForwardedMetadata(t *testing.T) {
	for _, trusted := range []bool{false, true} {
		opts := []any{core.WithStore(memAt(t, store.NewManualClock(start)))}
		if trusted {
			proxies, err := clientip.ParseTrustedProxies("127.0.0.1/32")
			if err != nil {
				t.Fatal(err)
			}
			opts = append(opts, core.WithClientIP(clientip.Config{TrustedProxies: proxies}))
		}
		conn, e := serve(t, config(t, testConfig), opts...)
		allowed := 0
		for i := range 6 {
			r := say(t, conn, "hi", "x-forwarded-for", "203.0.113."+strconv.Itoa(i%2+1), "x-real-ip", "198.51.100.7")
			if r.code == codes.OK {
				allowed++
			}
		}
		want, ids := 3, []string{"127.0.0.1", "127.0.0.1", "127.0.0.1"}
		if trusted {
			want, ids = 6, []string{"203.0.113.1", "203.0.113.2", "203.0.113.1", "203.0.113.2", "203.0.113.1", "203.0.113.2"}
		}
		if allowed != want {
			t.Errorf("trusted %v: %d of 6 calls allowed, want %d", trusted, allowed, want)
		}
		// Identity, with the options the interceptors have, agrees.
		if got := e.identities(); !slices.Equal(got, ids) {
			t.Errorf("trusted %v: identities %q, want %q", trusted, got, ids)
		}
	}
}

// TestStreamCountedOnce: a stream counts once, when it opens, however many
// messages it carries; the third stream in a minute is refused before the
// handler runs, with the status and metadata of a refused unary call.
func TestStreamCountedOnce(t *testing.T) {
	spy := &spyStore{Store: memAt(t, store.NewManualClock(start))}
	conn, e := serve(t, config(t, testConfig), core.WithStore(spy), keys)
	msgs := []string{"a", "b", "c", "d", "e"}
	checkOK(t, "stream 1", watch(t, conn, msgs, apiKey("alice")...), allowedMD("watch", 2, 60, 1, 60))
	checkOK(t, "stream 2", watch(t, conn, msgs, apiKey("alice")...), allowedMD("watch", 2, 60, 0, 60))
	checkExhausted(t, "stream 3", watch(t, conn, msgs, apiKey("alice")...), "watch", time.Minute, deniedMD("watch", 2, 60, 60, 60))
	checkOK(t, "bob's stream", watch(t, conn, msgs, apiKey("bob")...), allowedMD("watch", 2, 60, 1, 60))
	if got := e.served.Load(); got != 3 {
		t.Errorf("handler ran %d times, want 3", got)
	}
	if got := spy.calls.Load(); got != 4 {
		t.Errorf("store calls: %d, want 4 (one per stream)", got)
	}
	// Unary calls count apart, under their own rule.
	checkOK(t, "alice's call", say(t, conn, "hi", apiKey("alice")...), allowedMD("say", 3, 60, 2, 60))
}

// TestBypassAndExempt: a bypassed caller and an exempt method are never
// limited, carry no rate-limit metadata and touch no counter, even for a
// caller over the limit.
func TestBypassAndExempt(t *testing.T) {
	spy := &spyStore{Store: memAt(t, store.NewManualClock(start))}
	cfg := config(t, `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say"]
      limit: "3/minute"
  default: "1/minute"
  exempt_paths: ["/test.Echo/Watch"]
`)
	conn, e := serve(t, cfg, core.WithStore(spy), keys, grpcrl.WithBypass(func(ctx context.Context, m string) bool {
		id, _ := grpcrl.FirstKey(grpcrl.JWTSubject(verify))(ctx, m)
		return id == "sub:root"
	}))
	for range 3 {
		say(t, conn, "hi", apiKey("alice")...)
	}
	calls := spy.calls.Load()
	for i := range 5 {
		checkOK(t, "root "+strconv.Itoa(i), say(t, conn, "hi", bearer("good-root")...), nil)
		checkOK(t, "exempt stream "+strconv.Itoa(i), watch(t, conn, []string{"x"}, apiKey("alice")...), nil)
	}
	if got := spy.calls.Load(); got != calls {
		t.Errorf("store calls: %d after the bypassed and exempt calls, want %d", got, calls)
	}
	if got := e.served.Load(); got != 13 {
		t.Errorf("handler ran %d times, want 13", got)
	}
}

// TestStoreFailure: with a failing store, fail-open lets every call
// through without rate-limit metadata; fail-closed ends each with
// Unavailable, a RetryInfo of one second and retry-after 1.
func TestStoreFailure(t *testing.T) {
	for _, open := range []bool{true, false} {
		spy := &spyStore{Store: memAt(t, store.NewManualClock(start))}
		spy.fail.Store(true)
		conn, e := serve(t, config(t, testConfig), core.WithStore(spy), core.WithFailOpen(open), core.WithLogger(discard))
		for i := range 5 {
			r := say(t, conn, "hi")
			s := watch(t, conn, []string{"x"})
			if open {
				checkOK(t, "fail-open call", r, map[string]string{})
				checkOK(t, "fail-open stream", s, map[string]string{})
				continue
			}
			for _, r := range []result{r, s} {
				if r.code != codes.Unavailable || r.msg != "Rate limiter unavailable" || r.retry != time.Second {
					t.Errorf("fail-closed %d: %v %q retry %v, want Unavailable with RetryInfo 1s", i, r.code, r.msg, r.retry)
				}
				if got := limitMD(r.header); !maps.Equal(got, map[string]string{"retry-after": "1"}) {
					t.Errorf("fail-closed %d: metadata %v, want retry-after 1 only", i, got)
				}
			}
		}
		want := int64(0)
		if open {
			want = 10
		}
		if got := e.served.Load(); got != want {
			t.Errorf("open %v: handler ran %d times, want %d", open, got, want)
		}
	}
}

// TestBanned: a call from a banned network ends with PermissionDenied,
// without RetryInfo nor metadata, before anything is counted.
func TestBanned(t *testing.T) {
	spy := &spyStore{Store: memAt(t, store.NewManualClock(start))}
	cfg := config(t, testConfig+"  ban:\n    networks: [\"127.0.0.0/8\"]\n")
	conn, e := serve(t, cfg, core.WithStore(spy), keys)
	for _, r := range []result{say(t, conn, "hi", apiKey("alice")...), watch(t, conn, []string{"x"})} {
		if r.code != codes.PermissionDenied || r.msg != "Forbidden" || r.retry != -1 || len(limitMD(r.header)) != 0 {
			t.Errorf("got %v %q retry %v metadata %v, want PermissionDenied alone", r.code, r.msg, r.retry, r.header)
		}
	}
	if spy.calls.Load() != 0 || e.served.Load() != 0 {
		t.Errorf("store calls %d, served %d, want none", spy.calls.Load(), e.served.Load())
	}
}

// TestLegacyMetadata: core.WithHeaders(core.HeadersLegacy) sends x-ratelimit-*.
func TestLegacyMetadata(t *testing.T) {
	conn, _ := serve(t, config(t, testConfig), core.WithStore(memAt(t, store.NewManualClock(start))), core.WithHeaders(core.HeadersLegacy))
	for i := range 3 {
		checkOK(t, "legacy", say(t, conn, "hi"), map[string]string{
			"x-ratelimit-limit": "3", "x-ratelimit-remaining": strconv.Itoa(2 - i), "x-ratelimit-reset": "60",
		})
	}
	checkExhausted(t, "legacy", say(t, conn, "hi"), "say", time.Minute, map[string]string{
		"x-ratelimit-limit": "3", "x-ratelimit-remaining": "0", "x-ratelimit-reset": "60", "retry-after": "60",
	})
}

// TestDeniedHandler: the application's error ends a refused call, which
// already carries the metadata; the handler gets the Decision.
func TestDeniedHandler(t *testing.T) {
	var got *core.Decision
	conn, e := serve(t, config(t, testConfig), core.WithStore(memAt(t, store.NewManualClock(start))),
		grpcrl.WithDeniedHandler(func(_ context.Context, m string, d *core.Decision) error {
			got = d
			return status.Error(codes.Unavailable, "busy: "+m)
		}))
	for range 3 {
		say(t, conn, "hi")
	}
	r := say(t, conn, "hi")
	if r.code != codes.Unavailable || r.msg != "busy: "+sayMethod || r.retry != -1 {
		t.Errorf("got %v %q retry %v, want the handler's status", r.code, r.msg, r.retry)
	}
	if w := deniedMD("say", 3, 60, 60, 60); !maps.Equal(limitMD(r.header), w) {
		t.Errorf("metadata %v, want %v", limitMD(r.header), w)
	}
	if got == nil || got.Status() != 429 || got.Rule.Name != "say" || got.Result.RetryAfter != time.Minute {
		t.Errorf("handler got %+v, want say's denial", got)
	}
	if e.served.Load() != 3 {
		t.Errorf("served %d, want 3", e.served.Load())
	}
}

// TestDecisionContext: the handler finds its call's Decision only
// core.WithDecisionContext(true), for unary calls and streams.
func TestDecisionContext(t *testing.T) {
	for _, on := range []bool{false, true} {
		conn, e := serve(t, config(t, testConfig), core.WithStore(memAt(t, store.NewManualClock(start))), core.WithDecisionContext(on))
		say(t, conn, "hi")
		watch(t, conn, []string{"x"})
		e.mu.Lock()
		seen := e.seen
		e.mu.Unlock()
		if len(seen) != 2 {
			t.Fatalf("served %d calls, want 2", len(seen))
		}
		for i, rule := range []string{"say", "watch"} {
			d, remaining := seen[i], int64(2-i) // say: 3 a minute, watch: 2
			switch {
			case !on && d != nil:
				t.Errorf("off: %s found a Decision", rule)
			case on && (d == nil || d.Rule == nil || d.Rule.Name != rule || d.Result.Remaining != remaining):
				t.Errorf("on: %s found %+v, want its rule's with %d remaining", rule, d, remaining)
			}
		}
	}
}

// TestCountByOutcome: a rule counting failures counts a call by the HTTP
// form of the status its handler ended it with: NotFound (404) and
// Internal (500) count, OK and a stream that ends well do not.
func TestCountByOutcome(t *testing.T) {
	cfg := config(t, `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say", "/test.Echo/Watch"]
      limit: "2/minute"
      count: failures
`)
	conn, _ := serve(t, cfg, core.WithStore(memAt(t, store.NewManualClock(start))))
	for range 3 {
		// Never counted: the metadata shows what a failure would leave.
		checkOK(t, "success", say(t, conn, "hi"), allowedMD("say", 2, 60, 1, 60))
		checkOK(t, "stream success", watch(t, conn, []string{"x"}), allowedMD("say", 2, 60, 1, 60))
	}
	if r := say(t, conn, "code:5"); r.code != codes.NotFound {
		t.Fatalf("got %v, want NotFound", r.code)
	}
	if r := watch(t, conn, []string{"code:13"}); r.code != codes.Internal {
		t.Fatalf("got %v, want Internal", r.code)
	}
	checkExhausted(t, "after two failures", say(t, conn, "hi"), "say", time.Minute, deniedMD("say", 2, 60, 60, 60))
}

// TestSharedLimiter: interceptors deciding with a limiter the application
// keeps; Identity gives what a call counted under, and Reset with it
// gives the caller its quota back.
func TestSharedLimiter(t *testing.T) {
	lim := core.NewLimiter(config(t, testConfig), core.WithStore(memAt(t, store.NewManualClock(start))))
	conn, e := serve(t, lim, keys)
	for range 4 {
		say(t, conn, "hi", apiKey("alice")...)
	}
	ids := e.identities()
	if len(ids) != 3 || ids[0] != core.SecretIdentity("X-Api-Key", "alice") {
		t.Fatalf("identities %q, want alice's three", ids)
	}
	if cleared, err := lim.Reset(context.Background(), ids[0], "say"); !cleared || err != nil {
		t.Fatalf("Reset: %v %v", cleared, err)
	}
	checkOK(t, "after the reset", say(t, conn, "hi", apiKey("alice")...), allowedMD("say", 3, 60, 2, 60))
}

// TestPlan: WithPlan picks the caller's limits (a claim of its verified
// token, here the subject's), shown in the metadata; no plan or an
// unknown one counts under the rule's own.
func TestPlan(t *testing.T) {
	cfg := config(t, testConfig+`  tiers:
    pro:
      rules:
        say: ["5/minute", "2/second"]
`)
	conn, _ := serve(t, cfg, core.WithStore(memAt(t, store.NewManualClock(start))), keys,
		grpcrl.WithPlan(func(ctx context.Context, m string) string {
			if id, _ := grpcrl.JWTSubject(verify)(ctx, m); id == "sub:pat" {
				return "pro"
			}
			return ""
		}))
	pro := func(r1m, r1s int) map[string]string {
		return map[string]string{
			"ratelimit-policy": `"say-1m";q=5;w=60, "say-1s";q=2;w=1`,
			"ratelimit":        `"say-1m";r=` + strconv.Itoa(r1m) + `;t=60, "say-1s";r=` + strconv.Itoa(r1s) + `;t=1`,
		}
	}
	checkOK(t, "pat 1", say(t, conn, "hi", bearer("good-pat")...), pro(4, 1))
	checkOK(t, "pat 2", say(t, conn, "hi", bearer("good-pat")...), pro(3, 0))
	r := say(t, conn, "hi", bearer("good-pat")...)
	want := pro(3, 0)
	want["retry-after"] = "1"
	checkExhausted(t, "pat 3", r, "say", time.Second, want)
	checkOK(t, "sam", say(t, conn, "hi", bearer("good-sam")...), allowedMD("say", 3, 60, 2, 60))
}

// TestRuleKeys: a rule keyed by a header reads the call's metadata entry
// of that name (hashed; without it, the peer's IP), and a rule keyed by
// a parameter reads the segment of the full method its pattern names.
func TestRuleKeys(t *testing.T) {
	var mu sync.Mutex
	var got []string
	obs := core.WithObserver(func(e core.Event) {
		mu.Lock()
		got = append(got, e.Rule+" "+e.Key)
		mu.Unlock()
	})
	conn, _ := serve(t, config(t, `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say"]
      limit: "3/minute"
      key: header:X-Api-Key
    - name: methods
      paths: ["/test.Echo/{method}"]
      limit: "3/minute"
      key: ip+param:method
`), core.WithStore(memAt(t, store.NewManualClock(start))), obs, core.WithIdentityKey([]byte("k")), keys)
	for _, c := range []struct {
		method string
		md     []string
	}{
		{sayMethod, apiKey("alice")}, {sayMethod, apiKey("alice")}, {sayMethod, nil},
		{"/test.Echo/Other", nil}, {"/test.Echo/Ping", nil}, {"/test.Echo/Other", apiKey("bob")},
	} {
		if r := invoke(t, conn, c.method, "hi", c.md...); r.code != codes.OK {
			t.Fatalf("%s %q: %v %q", c.method, c.md, r.code, r.msg)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	alice := "h:" + core.NewLimiter(nil, core.WithIdentityKey([]byte("k"))).Key(core.SecretIdentity("X-Api-Key", "alice"))
	want := []string{"say " + alice, "say " + alice, "say ip:127.0.0.1",
		"methods ip:127.0.0.1|p:Other", "methods ip:127.0.0.1|p:Ping", "methods ip:127.0.0.1|p:Other"}
	if !slices.Equal(got, want) {
		t.Errorf("keys %q, want %q", got, want)
	}
}

// TestCost: WithCost's answer is a call's cost (5 of a limit of 12: two
// calls, then ResourceExhausted), replacing the method's weight; 0 keeps
// the weight (1); a cost above the capacity is refused, nothing taken.
func TestCost(t *testing.T) {
	cfg := config(t, `
rate_limit:
  enabled: true
  rules:
    - name: say
      paths: ["/test.Echo/Say"]
      limit: "12/minute"
`)
	var cost atomic.Int64
	conn, e := serve(t, cfg, core.WithStore(memAt(t, store.NewManualClock(start))),
		grpcrl.WithCost(func(_ context.Context, fullMethod string) int64 {
			if fullMethod != "/test.Echo/Say" {
				t.Errorf("WithCost asked for %q", fullMethod)
			}
			return cost.Load()
		}))
	cost.Store(13)
	// A refusal consumes nothing: the metadata shows what is left.
	over := allowedMD("say", 12, 60, 12, 60)
	over["retry-after"] = "60"
	checkExhausted(t, "over the capacity", say(t, conn, "hi"), "say", time.Minute, over)
	cost.Store(5)
	checkOK(t, "cost 5", say(t, conn, "hi"), allowedMD("say", 12, 60, 7, 60))
	checkOK(t, "cost 5 again", say(t, conn, "hi"), allowedMD("say", 12, 60, 2, 60))
	cost.Store(0)
	checkOK(t, "the weight, 1", say(t, conn, "hi"), allowedMD("say", 12, 60, 1, 60))
	cost.Store(5)
	left := allowedMD("say", 12, 60, 1, 60)
	left["retry-after"] = "60"
	checkExhausted(t, "cost 5 with 1 left", say(t, conn, "hi"), "say", time.Minute, left)
	if got := e.served.Load(); got != 3 {
		t.Fatalf("handler ran %d times, want 3", got)
	}
}
