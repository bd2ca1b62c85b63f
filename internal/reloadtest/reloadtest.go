package reloadtest

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// Run plays the scenario, a subtest per case, through a limiter on the
// store newStore makes (once per case). clock is the store's clock, which
// Run moves; nil means the store keeps real time (a server's), and the
// cases then skip the waits they would need and check what holds without
// them, every count exact.
func Run(t *testing.T, newStore func() store.Store, clock *store.ManualClock) {
	nonce := fmt.Sprintf("%08x", rand.Uint32())
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st := newStore()
			if cl, ok := st.(interface{ Close() error }); ok {
				t.Cleanup(func() { _ = cl.Close() })
			}
			e := &env{T: t, clock: clock, id: "reload-" + nonce + "-" + c.name}
			e.lim = core.NewLimiter(nil, core.WithStore(st), core.WithLogger(slog.New(slog.DiscardHandler)))
			e.align()
			c.run(e)
		})
	}
}

// env is one case's limiter and caller.
type env struct {
	*testing.T
	lim   *core.Limiter
	clock *store.ManualClock
	id    string // the caller's identity
	last  core.Decision
}

// align moves to the start of an hour (in real time, waits for the next
// hour when this one ends within 10s), so that no window a case counts
// in ends while it runs.
func (e *env) align() {
	if e.clock != nil {
		e.clock.Set(e.clock.Time().Truncate(time.Hour).Add(time.Hour))
		return
	}
	now := time.Now()
	if end := now.Truncate(time.Hour).Add(time.Hour); end.Sub(now) < 10*time.Second {
		time.Sleep(end.Sub(now) + 50*time.Millisecond)
	}
}

// load swaps in a configuration of the given rules (YAML, indented as
// the items of rate_limit.rules).
func (e *env) load(rules string) {
	e.Helper()
	cfg, err := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n  rules:\n"+rules), "reload.yaml")
	if err != nil {
		e.Fatal(err)
	}
	e.lim.SetConfig(cfg)
}

// expect decides a request on path and checks whether it was admitted
// and what the deciding limit has left.
func (e *env) expect(path string, allowed bool, remaining int64) {
	e.Helper()
	e.last = e.lim.Decide(context.Background(), "GET", core.Path(path), e.id, false)
	if e.last.Err != nil || e.last.Rule == nil {
		e.Fatalf("%s: rule %v, error %v", path, e.last.Rule, e.last.Err)
	}
	if e.last.Allowed != allowed || e.last.Result.Remaining != remaining {
		e.Fatalf("%s under %s %v: allowed %v, %d left; want %v, %d", path, e.last.Rule.Name, e.last.Rule.Policy.Limits,
			e.last.Allowed, e.last.Result.Remaining, allowed, remaining)
	}
}

// waitRetry lets the last denial's Retry-After pass, and reports whether
// it could: in real time the case stops there.
func (e *env) waitRetry() bool {
	if e.clock == nil {
		if e.last.Result.RetryAfter <= 0 {
			e.Fatalf("denied with Retry-After %v", e.last.Result.RetryAfter)
		}
		return false
	}
	e.clock.Advance(e.last.Result.RetryAfter)
	return true
}

// rule is one rule of a configuration as YAML: name on path /<name>,
// algorithm a, the limits, and any more fields (indented as the rule's).
func rule(name string, a algo.Algorithm, limits string, more ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "    - name: %s\n      paths: [\"/%s\", \"/%s/heavy\"]\n      algorithm: %v\n      limit: %s\n", name, name, name, a, limits)
	for _, m := range more {
		b.WriteString("      " + m + "\n")
	}
	return b.String()
}

var algorithms = []algo.Algorithm{algo.FixedWindow, algo.SlidingWindow, algo.TokenBucket, algo.GCRA}

type testCase struct {
	name string
	run  func(e *env)
}

var cases = func() []testCase {
	var out []testCase
	for _, a := range algorithms {
		out = append(out,
			testCase{"RaiseCount/" + a.String(), func(e *env) { raiseCount(e, a) }},
			testCase{"LowerCount/" + a.String(), func(e *env) { lowerCount(e, a) }},
			testCase{"Weights/" + a.String(), func(e *env) { weights(e, a) }},
			testCase{"Move/" + a.String(), func(e *env) { move(e, a) }},
			testCase{"Fresh/" + a.String(), func(e *env) { fresh(e, a) }},
			testCase{"AddLimit/" + a.String(), func(e *env) { addLimit(e, a) }},
		)
	}
	for _, a := range []algo.Algorithm{algo.TokenBucket, algo.GCRA} {
		out = append(out, testCase{"Burst/" + a.String(), func(e *env) { burst(e, a) }})
	}
	return out
}()

// raiseCount: a caller who spent 2 of 2 per hour, and was refused once,
// gets 3 more under 5 per hour, not 5.
func raiseCount(e *env, a algo.Algorithm) {
	e.load(rule("api", a, `"2/hour"`))
	e.expect("/api", true, 1)
	e.expect("/api", true, 0)
	e.expect("/api", false, 0)
	e.load(rule("api", a, `"5/hour"`))
	e.expect("/api", true, 2)
	e.expect("/api", true, 1)
	e.expect("/api", true, 0)
	e.expect("/api", false, 0)
}

// lowerCount: a caller who spent 50 of 100 per hour is refused under 10
// per hour until the window (the refill) frees room: then one request
// passes, and the next is refused again.
func lowerCount(e *env, a algo.Algorithm) {
	e.load(rule("api", a, `"100/hour"`, "weights: {\"/api/heavy\": 50}"))
	e.expect("/api/heavy", true, 50)
	e.load(rule("api", a, `"10/hour"`))
	e.expect("/api", false, 0)
	e.expect("/api", false, 0)
	if !e.waitRetry() {
		return
	}
	// A fixed window starts anew; the others have made room for one.
	left := map[algo.Algorithm]int64{algo.FixedWindow: 9}[a]
	e.expect("/api", true, left)
	if left == 0 {
		e.expect("/api", false, 0)
	}
}

// burst: a bucket of 10 with 4 left has spent 6; with a burst of 20 it
// has 14 left (13 after one more request).
func burst(e *env, a algo.Algorithm) {
	e.load(rule("api", a, `"10/hour"`, "weights: {\"/api/heavy\": 6}"))
	e.expect("/api/heavy", true, 4)
	e.load(rule("api", a, `"10/hour"`, "burst: 20"))
	e.expect("/api", true, 13)
	e.load(rule("api", a, `"10/hour"`, "burst: 8"))
	e.expect("/api", true, 0)
	e.expect("/api", false, 0)
}

// weights: new weights apply to the counts spent under the old ones.
func weights(e *env, a algo.Algorithm) {
	e.load(rule("api", a, `"10/hour"`, "weights: {\"/api/heavy\": 3}"))
	e.expect("/api/heavy", true, 7)
	e.expect("/api/heavy", true, 4)
	e.load(rule("api", a, `"10/hour"`, "weights: {\"/api/heavy\": 4}"))
	e.expect("/api/heavy", true, 0)
	e.expect("/api", false, 0)
}

// move: a rule moved in the file, another rule now before it, keeps its
// counts.
func move(e *env, a algo.Algorithm) {
	e.load(rule("api", a, `"5/hour"`) + rule("other", a, `"5/hour"`))
	e.expect("/api", true, 4)
	e.expect("/other", true, 4)
	e.load(rule("first", a, `"5/hour"`) + rule("other", a, `"5/hour"`) + rule("api", a, `"5/hour"`))
	e.expect("/api", true, 3)
	e.expect("/other", true, 3)
	e.expect("/first", true, 4)
}

// fresh: a new name, algorithm or period starts from zero, and the rule
// under its old name, algorithm and period finds its counts again.
func fresh(e *env, a algo.Algorithm) {
	other := algorithms[(int(a)+1)%len(algorithms)]
	e.load(rule("api", a, `"5/hour"`))
	e.expect("/api", true, 4)
	e.expect("/api", true, 3)
	e.load(rule("renamed", a, `"5/hour"`))
	e.expect("/renamed", true, 4)
	e.load(rule("api", other, `"5/hour"`))
	e.expect("/api", true, 4)
	e.load(rule("api", a, `"5/2hours"`))
	e.expect("/api", true, 4)
	e.load(rule("api", a, `"5/hour"`))
	e.expect("/api", true, 2)
}

// addLimit: a limit of a new period starts from zero beside the one that
// stays, which keeps its counts; it keeps them when the other goes.
func addLimit(e *env, a algo.Algorithm) {
	e.load(rule("api", a, `"5/hour"`))
	e.expect("/api", true, 4)
	e.load(rule("api", a, `["100/day", "10/hour"]`))
	e.expect("/api", true, 8)
	if got := e.last.Result.Limits[0].Remaining; got != 99 {
		e.Fatalf("the day's limit has %d left, want 99: a limit of a new period starts from zero", got)
	}
	e.load(rule("api", a, `"6/hour"`))
	e.expect("/api", true, 3)
}
