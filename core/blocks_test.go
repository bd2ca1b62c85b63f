package core_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// leaseYAML is one lease rule, search, of the given limit, algorithm and
// more lines (burst, lease_block), over a default limit.
const leaseYAML = `
rate_limit:
  enabled: true
  consistency: %s
  rules:
    - name: search
      paths: ["/api/search"]
      limit: %q
      algorithm: %s
%s`

func leaseConfig(t testing.TB, consistency, limit, algorithm, more string) *core.Config {
	t.Helper()
	cfg, err := core.ParseConfig(fmt.Appendf(nil, leaseYAML, consistency, limit, algorithm, more), "lease.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// process is one process of a fleet: its own Limiter over its own view
// of the store the fleet shares, which counts the takes it asks for (their
// costs) and fails while down is set.
type process struct {
	*core.Limiter
	shared store.Store
	mu     sync.Mutex
	takes  []int64
	down   atomic.Bool
	hold   func(cost int64) // when set, called before each take
}

var errStoreDown = errors.New("store down")

func (p *process) Take(ctx context.Context, key string, pol *store.Policy, cost int64) (store.Result, error) {
	p.mu.Lock()
	p.takes = append(p.takes, cost)
	hold := p.hold
	p.mu.Unlock()
	if hold != nil {
		hold(cost)
	}
	if p.down.Load() {
		return store.Result{}, errStoreDown
	}
	return p.shared.Take(ctx, key, pol, cost)
}

func (p *process) Peek(ctx context.Context, key string, pol *store.Policy, cost int64) (store.Result, error) {
	if p.down.Load() {
		return store.Result{}, errStoreDown
	}
	return p.shared.Peek(ctx, key, pol, cost)
}

func (p *process) Reset(ctx context.Context, key string, pol *store.Policy) (bool, error) {
	return p.shared.Reset(ctx, key, pol)
}

// calls returns and forgets the costs of the takes asked for so far.
func (p *process) calls() []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := p.takes
	p.takes = nil
	return out
}

// fleet starts n processes of cfg sharing one memory store on clock.
func fleet(t testing.TB, n int, cfg *core.Config, clock store.Clock, opts ...core.Option) ([]*process, *memstore.Store) {
	t.Helper()
	mem := memstore.New(memstore.WithClock(clock))
	t.Cleanup(func() { _ = mem.Close() })
	ps := make([]*process, n)
	for i := range ps {
		p := &process{shared: mem}
		p.Limiter = core.NewLimiter(cfg, append([]core.Option{core.WithStore(p), core.WithClock(clock)}, opts...)...)
		ps[i] = p
	}
	return ps, mem
}

func (p *process) search(user string) core.Decision {
	return p.Decide(context.Background(), "GET", "/api/search", user, false)
}

// TestLeaseBlocksGrow: one process, 100 requests of one key far from its
// limit: the first is decided alone, the second, in the same window, asks
// for its cost and a block of 1, and each block spent in full doubles the
// next (2, 4, 8, ...), so 8 store calls decide them all;
// the store counted every unit handed out, and the headers count the
// units held as remaining.
func TestLeaseBlocksGrow(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig(t, "lease", "1000/minute", "fixed_window", "")
	ps, mem := fleet(t, 1, cfg, clock)
	p := ps[0]
	for i := range 100 {
		if d := p.search("alice"); !d.Allowed || d.Err != nil {
			t.Fatalf("request %d: allowed %v, err %v", i+1, d.Allowed, d.Err)
		}
	}
	if got, want := fmt.Sprint(p.calls()), "[1 2 3 5 9 17 33 65]"; got != want {
		t.Errorf("takes %s, want %s", got, want)
	}
	res, err := mem.Peek(context.Background(), "alice", cfg.Rule("search").Policy, 0)
	if err != nil || res.Remaining != 1000-135 {
		t.Errorf("store remaining %d (%v), want %d", res.Remaining, err, 1000-135)
	}
	// 35 units of the last block are left: 865 in the store and 35 here.
	if d := p.search("alice"); d.Result.Remaining != 865+34 || len(p.calls()) != 0 {
		t.Errorf("remaining %d, want %d, from the block", d.Result.Remaining, 865+34)
	}
}

// TestLeaseWindowsAdmitTheLimit: four processes share a fixed window of
// 100 a minute; requests of one key go to each in turn, 1,000 per window
// over three windows: every window admits exactly 100, as exact mode does,
// and near the limit the blocks shrink to nothing (one store call per
// request).
func TestLeaseWindowsAdmitTheLimit(t *testing.T) {
	for _, alg := range []string{"fixed_window", "sliding_window"} {
		t.Run(alg, func(t *testing.T) {
			clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg := leaseConfig(t, "lease", "100/minute", alg, "      lease_block: 10\n")
			ps, _ := fleet(t, 4, cfg, clock)
			for w := range 3 {
				admitted := 0
				for i := range 1000 {
					if ps[i%4].search("alice").Allowed {
						admitted++
					}
					clock.Advance(50 * time.Millisecond) // 50 s of the window
				}
				if admitted != 100 {
					t.Errorf("window %d: admitted %d, want 100", w, admitted)
				}
				// Far from the limit blocks spared store calls; near it
				// every process asked for its requests alone.
				calls := 0
				for i, p := range ps {
					c := p.calls()
					calls += len(c)
					if len(c) == 0 || c[len(c)-1] != 1 {
						t.Errorf("window %d, process %d: takes %v, want the last of 1", w, i, c)
					}
				}
				if calls >= 1000 {
					t.Errorf("window %d: %d store calls for 1000 requests", w, calls)
				}
				// To the start of the window after next, where a sliding
				// window's previous count is empty.
				clock.Advance(70 * time.Second)
			}
		})
	}
}

// TestLeaseBlockEndsWithItsWindow: a block taken just before its window
// ends is not spent in the next: the next request asks the store.
func TestLeaseBlockEndsWithItsWindow(t *testing.T) {
	for _, tc := range []struct {
		name, limit, algorithm, more string
		remaining                    int64 // after the first request of the next window
	}{
		{"fixed_window", "1000/minute", "fixed_window", "", 999},
		// The count of the window before weighs in full at its end.
		{"sliding_window", "1000/minute", "sliding_window", "", 1000 - 1 - 11},
		// 2026-01-01 00:00 in Tokyo is 2025-12-31 15:00 UTC.
		{"calendar", "1000/day", "fixed_window", "      window: calendar\n      timezone: Asia/Tokyo\n", 999},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := time.Date(2026, 1, 1, 0, 1, 0, 0, time.UTC) // a minute's end
			if tc.name == "calendar" {
				end = time.Date(2025, 12, 31, 15, 0, 0, 0, time.UTC) // midnight in Tokyo
			}
			blockEndsWithItsWindow(t, leaseConfig(t, "lease", tc.limit, tc.algorithm, tc.more), end, tc.remaining)
		})
	}
}

func blockEndsWithItsWindow(t *testing.T, cfg *core.Config, end time.Time, remaining int64) {
	clock := store.NewManualClock(end.Add(-time.Second)) // 1 s before the window ends
	ps, _ := fleet(t, 1, cfg, clock)
	p := ps[0]
	for range 4 {
		p.search("alice") // alone, the blocks of 1, then 2: both units left
	}
	if got := fmt.Sprint(p.calls()); got != "[1 2 3]" {
		t.Fatalf("takes %s, want [1 2 3]", got)
	}
	clock.Advance(999 * time.Millisecond)
	p.search("alice") // the units left, in the window they were taken in
	p.search("alice")
	if got := fmt.Sprint(p.calls()); got != "[]" {
		t.Fatalf("takes %s within the window, want none", got)
	}
	p.search("alice") // a block of 4, 1 ms before the window ends
	if got := fmt.Sprint(p.calls()); got != "[5]" {
		t.Fatalf("takes %s, want [5]", got)
	}
	clock.Advance(time.Millisecond) // the next window
	// The block ended unspent: the next is what was spent of it, none,
	// so the request is decided alone, in a window of its own.
	if d := p.search("alice"); !d.Allowed || d.Result.Remaining != remaining {
		t.Fatalf("in a new window: allowed %v, remaining %d, want %d", d.Allowed, d.Result.Remaining, remaining)
	}
	if got := fmt.Sprint(p.calls()); got != "[1]" {
		t.Errorf("takes %s in the new window, want [1]: the block ended with its window", got)
	}
}

// TestLeaseTokenBucketBound drives four processes to the stated bound of
// a token bucket (and of GCRA): each holds a full block (B = 10 units) when the bucket
// is emptied; once it has refilled (800 units), 840 requests pass at one
// instant, C + P × B, where exact mode lets 800 pass.
func TestLeaseTokenBucketBound(t *testing.T) {
	for _, tc := range []struct{ algorithm, mode string }{{"token_bucket", "lease"}, {"token_bucket", "exact"}, {"gcra", "lease"}, {"gcra", "exact"}} {
		mode := tc.mode
		t.Run(tc.algorithm+"/"+mode, func(t *testing.T) {
			clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			more := ""
			if mode == "lease" {
				more = "      lease_block: 10\n"
			}
			cfg := leaseConfig(t, mode, "800/10s", tc.algorithm, more)
			ps, mem := fleet(t, 4, cfg, clock)
			pol := cfg.Rule("search").Policy
			ctx := context.Background()
			for _, p := range ps {
				// Blocks of 1, 2, 4, 8, then 10 (lease_block): the
				// process stops as it takes the block of 10.
				for i := 0; i < 100; i++ {
					p.search("alice")
					if c := p.calls(); len(c) > 0 && c[len(c)-1] == 11 {
						break
					}
				}
				clock.Advance(10 * time.Second) // refilled: every block is taken from a full bucket
			}
			res, _ := mem.Peek(ctx, "alice", pol, 0)
			if res.Remaining > 0 {
				if _, err := mem.Take(ctx, "alice", pol, res.Remaining); err != nil {
					t.Fatal(err)
				}
			}
			clock.Advance(10 * time.Second) // full again
			admitted := 0
			for i := range 4000 {
				if ps[i%4].search("alice").Allowed {
					admitted++
				}
			}
			want := 800
			if mode == "lease" {
				want = 800 + 4*10
			}
			if admitted != want {
				t.Errorf("admitted %d at one instant, want %d", admitted, want)
			}
		})
	}
}

// TestLeaseHeldUnitsGoOnce: a request heavier than what is left of the
// block takes those units with it into its store call; a light request
// that comes meanwhile waits for that call's block instead of spending
// them again.
func TestLeaseHeldUnitsGoOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  consistency: lease
  rules:
    - name: search
      paths: ["/api/search", "/api/search/heavy"]
      limit: "1000/minute"
      weights: {"/api/search/heavy": 3}
`), "lease.yaml")
		if err != nil {
			t.Fatal(err)
		}
		ps, _ := fleet(t, 1, cfg, clock)
		p := ps[0]
		p.search("alice") // alone
		p.search("alice") // a block of 1
		p.search("alice") // spent
		p.search("alice") // a block of 2
		p.search("alice") // one unit left
		p.calls()
		release := make(chan struct{})
		p.hold = func(cost int64) {
			if cost == 3 { // the heavy request: 3 - 1 held + a block of 1
				<-release
			}
		}
		heavy := make(chan core.Decision, 1)
		go func() { heavy <- p.Decide(context.Background(), "GET", "/api/search/heavy", "alice", false) }()
		synctest.Wait()
		light := make(chan core.Decision, 1)
		go func() { light <- p.search("alice") }()
		synctest.Wait()
		select {
		case <-light:
			t.Fatal("a light request was decided while the heavy one held the block's last unit")
		default:
		}
		close(release)
		if d := <-heavy; !d.Allowed || d.Cost != 3 {
			t.Errorf("heavy: allowed %v, cost %d", d.Allowed, d.Cost)
		}
		if d := <-light; !d.Allowed {
			t.Error("light refused")
		}
		// 2 + 3 for the first four, 3 for the heavy one and its block of
		// 1, which the light one spent: 8 units taken, 8 decided.
		if got := fmt.Sprint(p.calls()); got != "[3]" {
			t.Errorf("takes %s, want [3]", got)
		}
	})
}

// TestLeaseStoreDown: a process whose store fails spends the block it
// holds, then the failure policy applies to each request: open lets it
// pass uncounted, closed refuses it.
func TestLeaseStoreDown(t *testing.T) {
	for _, failure := range []string{"open", "closed"} {
		t.Run(failure, func(t *testing.T) {
			clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg := leaseConfig(t, "lease", "1000/minute", "fixed_window", "  failure: "+failure+"\n")
			ps, _ := fleet(t, 1, cfg, clock)
			p := ps[0]
			for range 11 {
				p.search("alice") // alone, then blocks of 1, 2, 4: 1 + 2 + 3 + 5 = 11 requests, the last block spent
			}
			p.search("alice") // a block of 8 and the request: 8 left
			p.calls()
			p.down.Store(true)
			for i := range 8 {
				if d := p.search("alice"); !d.Allowed || d.Err != nil {
					t.Fatalf("request %d on the block: allowed %v, err %v", i+1, d.Allowed, d.Err)
				}
			}
			if got := p.calls(); len(got) != 0 {
				t.Fatalf("takes %v while the block lasts, want none", got)
			}
			d := p.search("alice")
			if !errors.Is(d.Err, errStoreDown) || d.Allowed != (failure == "open") {
				t.Errorf("past the block: allowed %v, err %v", d.Allowed, d.Err)
			}
		})
	}
}

// TestLeaseReset: Reset drops the blocks this process holds of the key:
// its next request asks the store, which has the full limit again.
func TestLeaseReset(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig(t, "lease", "1000/minute", "fixed_window", "")
	ps, _ := fleet(t, 1, cfg, clock)
	p := ps[0]
	for range 4 {
		p.search("alice")
	}
	p.calls()
	if _, err := p.Limiter.Reset(context.Background(), "alice", "search"); err != nil {
		t.Fatal(err)
	}
	d := p.search("alice")
	if got := p.calls(); len(got) != 1 {
		t.Fatalf("takes %v after the reset, want one", got)
	}
	if d.Result.Remaining != 1000-1 {
		t.Errorf("remaining %d after the reset, want %d", d.Result.Remaining, 999)
	}
}

// TestLeaseConcurrent: 64 goroutines over four processes, one key, one
// fixed window: exactly the limit passes (run with -race).
func TestLeaseConcurrent(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig(t, "lease", "5000/minute", "fixed_window", "      lease_block: 64\n")
	ps, _ := fleet(t, 4, cfg, clock)
	var admitted atomic.Int64
	var wg sync.WaitGroup
	for g := range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if ps[g%4].search("alice").Allowed {
					admitted.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	if admitted.Load() != 5000 {
		t.Errorf("admitted %d of 12,800, want 5000", admitted.Load())
	}
}

// TestLeaseConfig: consistency and lease_block, in the file and on rules,
// and where each applies.
func TestLeaseConfig(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  consistency: lease
  lease_block: 200
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "100/second"
    - name: upload
      paths: ["/api/upload"]
      limit: "10/minute"
      lease_block: 5
    - name: admin
      paths: ["/api/admin"]
      limit: "10/minute"
      consistency: exact
    - name: login
      paths: ["/login"]
      limit: "5/minute"
      count: failures
    - name: all
      paths: ["/api/**"]
      limit: "1000/hour"
      stack: true
`), "lease.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range append(cfg.Rules(), cfg.Default()) {
		got = append(got, fmt.Sprintf("%s %s %d", r.Name, r.Consistency(), r.LeaseBlock()))
	}
	if want := "search lease 200; upload lease 5; admin exact 0; login exact 0; all exact 0; default lease 200"; strings.Join(got, "; ") != want {
		t.Errorf("got  %s\nwant %s", strings.Join(got, "; "), want)
	}
	exact, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "100/second"
      consistency: lease
`), "lease.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if r := exact.Rule("search"); r.Consistency() != "lease" || r.LeaseBlock() != 1000 || exact.Default().Consistency() != "exact" {
		t.Errorf("rule %s %d, default %s; want lease 1000, exact", r.Consistency(), r.LeaseBlock(), exact.Default().Consistency())
	}
}

// TestLeaseConfigErrors: each mistake is named with its line, rule, field
// and value.
func TestLeaseConfigErrors(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"file value", "  consistency: eventual\n", `lease.yaml:3: field "consistency": value "eventual": want exact or lease`},
		{"rule value", "      consistency: strong\n", `lease.yaml:9: rule "search": field "consistency": value "strong": want exact or lease`},
		{"block without lease", "      lease_block: 10\n", `lease.yaml:9: rule "search": field "lease_block": value "10": lease_block needs consistency: lease (in the file or on the rule): it sizes the blocks of lease mode`},
		{"file block without lease", "  lease_block: 10\n", `lease.yaml:3: field "lease_block": value "10": lease_block needs consistency: lease (in the file or on the rule): it sizes the blocks of lease mode`},
		{"block zero", "      consistency: lease\n      lease_block: 0\n", `lease.yaml:10: rule "search": field "lease_block": value "0": want 1 to`},
		{"by outcome", "      consistency: lease\n      count: failures\n", `lease.yaml:9: rule "search": field "consistency": value "lease": lease mode decides from blocks taken before the request: a rule that counts failures asks the store before the handler and counts after it`},
		{"stacked", "      consistency: lease\n      stack: true\n", `lease.yaml:9: rule "search": field "consistency": value "lease": lease mode decides from blocks taken before the request: a stacked rule is taken in one store call with the rule that applies`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			doc := "\nrate_limit:\n  enabled: true\n  rules:\n    - name: search\n      paths: [\"/api/search\"]\n      limit: \"100/second\"\n"
			if strings.HasPrefix(tc.doc, "  c") || strings.HasPrefix(tc.doc, "  l") {
				doc = "\nrate_limit:\n" + tc.doc + "  enabled: true\n  rules:\n    - name: search\n      paths: [\"/api/search\"]\n      limit: \"100/second\"\n"
			} else {
				doc += "      algorithm: fixed_window\n" + tc.doc
			}
			_, err := core.ParseConfig([]byte(doc), "lease.yaml")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant one containing %s", err, tc.want)
			}
		})
	}
}

// TestLeaseFileBlockOnRuleLease: a rule that says consistency: lease
// itself, in a file that is not in lease mode, takes the file's
// lease_block.
func TestLeaseFileBlockOnRuleLease(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  lease_block: 10
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "100000/second"
      algorithm: token_bucket
      consistency: lease
`), "lease.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Rule("search").LeaseBlock(); got != 10 {
		t.Errorf("rule's lease_block %d, want the file's 10", got)
	}
}

// TestLeaseBlockOnExactRule: lease_block on a rule that stays exact under
// a lease file (it counts failures) is an error.
func TestLeaseBlockOnExactRule(t *testing.T) {
	_, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  consistency: lease
  rules:
    - name: login
      paths: ["/login"]
      limit: "5/minute"
      count: failures
      lease_block: 50
`), "lease.yaml")
	want := `lease.yaml:10: rule "login": field "lease_block": value "50": the rule takes no blocks: a rule that counts failures asks the store before the handler and counts after it`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("error %v\nwant one containing %s", err, want)
	}
}

// panicky panics on its first Take.
type panicky struct {
	store.Store
	mu    sync.Mutex
	armed bool
}

func (p *panicky) Take(ctx context.Context, key string, pol *store.Policy, cost int64) (store.Result, error) {
	p.mu.Lock()
	a := p.armed
	p.armed = false
	p.mu.Unlock()
	if a {
		panic("store bug")
	}
	return p.Store.Take(ctx, key, pol, cost)
}

// TestLeaseStorePanicFreesTheKey: a store that panics while a block is
// asked for leaves the key free: the next request of it is decided at
// once, not held until its context ends.
func TestLeaseStorePanicFreesTheKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		cfg := leaseConfig(t, "lease", "1000/minute", "fixed_window", "")
		mem := memstore.New(memstore.WithClock(clock))
		defer mem.Close()
		ps := &panicky{Store: mem, armed: true}
		l := core.NewLimiter(cfg, core.WithStore(ps), core.WithClock(clock))
		func() {
			defer func() { recover() }() // net/http recovers a handler's panic
			l.Decide(context.Background(), "GET", "/api/search", "alice", false)
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		start := time.Now()
		d := l.Decide(ctx, "GET", "/api/search", "alice", false)
		if el := time.Since(start); el > time.Second {
			t.Errorf("the next request of the key waited %v (allowed %v, err %v): the key is wedged", el, d.Allowed, d.Err)
		}
	})
}

// slowDown is a store that is down: each call fails after 100 ms.
type slowDown struct{ store.Store }

func (s slowDown) Take(ctx context.Context, key string, pol *store.Policy, cost int64) (store.Result, error) {
	time.Sleep(100 * time.Millisecond)
	return store.Result{}, errors.New("down")
}

// TestLeaseStoreDownAnswersAtOnce: with the store down, the requests of a
// key that waited for a block ask the store side by side once its call
// fails: every answer comes within one failed call more, as in exact
// mode, not one failed call after another.
func TestLeaseStoreDownAnswersAtOnce(t *testing.T) {
	for _, mode := range []string{"exact", "lease"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
				cfg := leaseConfig(t, mode, "1000/minute", "fixed_window", "")
				mem := memstore.New(memstore.WithClock(clock))
				defer mem.Close()
				l := core.NewLimiter(cfg, core.WithStore(slowDown{mem}), core.WithClock(clock))
				var wg sync.WaitGroup
				var mu sync.Mutex
				var worst time.Duration
				for range 20 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						start := time.Now()
						l.Decide(context.Background(), "GET", "/api/search", "alice", false)
						mu.Lock()
						worst = max(worst, time.Since(start))
						mu.Unlock()
					}()
				}
				wg.Wait()
				t.Logf("%s: slowest answer %v", mode, worst)
				if worst > 200*time.Millisecond {
					t.Errorf("slowest answer %v with a store failing in 100ms", worst)
				}
			})
		})
	}
}

// TestLeaseClockBack: the process's clock steps back while the store
// (Redis) keeps its own and enters the next window: the blocks held are
// void, and the next window admits exactly its limit.
func TestLeaseClockBack(t *testing.T) {
	for _, mode := range []string{"exact", "lease"} {
		t.Run(mode, func(t *testing.T) {
			t0 := time.Date(2026, 1, 1, 0, 0, 30, 0, time.UTC)
			server := store.NewManualClock(t0)
			local := store.NewManualClock(t0)
			cfg := leaseConfig(t, mode, "100/minute", "fixed_window", "")
			mem := memstore.New(memstore.WithClock(server))
			defer mem.Close()
			l := core.NewLimiter(cfg, core.WithStore(mem), core.WithClock(local))
			for range 6 { // blocks of 1, 2, 4: 4 units held
				l.Decide(context.Background(), "GET", "/api/search", "alice", false)
			}
			local.Set(t0.Add(-time.Hour))        // the wall clock steps back
			server.Set(t0.Add(40 * time.Second)) // Redis: the next window
			admitted := 0
			for range 300 {
				if l.Decide(context.Background(), "GET", "/api/search", "alice", false).Allowed {
					admitted++
				}
			}
			if admitted != 100 {
				t.Errorf("%s: admitted %d in the server's next window, want 100", mode, admitted)
			}
		})
	}
}

// resetHook runs hook inside Reset, before the store forgets the key: the
// requests that come while Limiter.Reset runs.
type resetHook struct {
	store.Store
	hook func()
}

func (r *resetHook) Reset(ctx context.Context, key string, p *store.Policy) (bool, error) {
	if r.hook != nil {
		r.hook()
	}
	return r.Store.Reset(ctx, key, p)
}

// TestLeaseResetWhileTaking: blocks taken while the store resets are
// dropped with the others: after Reset the key has exactly its limit.
func TestLeaseResetWhileTaking(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig(t, "lease", "100/minute", "fixed_window", "")
	mem := memstore.New(memstore.WithClock(clock))
	defer mem.Close()
	rh := &resetHook{Store: mem}
	l := core.NewLimiter(cfg, core.WithStore(rh), core.WithClock(clock))
	search := func() bool { return l.Decide(context.Background(), "GET", "/api/search", "alice", false).Allowed }
	rh.hook = func() {
		for range 6 { // blocks of 1, 2, 4: 4 units held when the store resets
			search()
		}
	}
	if _, err := l.Reset(context.Background(), "alice", "search"); err != nil {
		t.Fatal(err)
	}
	admitted := 0
	for range 300 {
		if search() {
			admitted++
		}
	}
	if admitted != 100 {
		t.Errorf("admitted %d after the reset, want 100", admitted)
	}
}

// TestLeaseHeavyRequestSpendsHeldUnits: a request heavier than the units
// held, with no room in the store for a block, asks the store for its
// cost less those units: admitted when they and the store's cover it, as
// in exact mode.
func TestLeaseHeavyRequestSpendsHeldUnits(t *testing.T) {
	for _, mode := range []string{"exact", "lease"} {
		t.Run(mode, func(t *testing.T) {
			clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			cfg, err := core.ParseConfig(fmt.Appendf(nil, `
rate_limit:
  enabled: true
  consistency: %s
  rules:
    - name: search
      paths: ["/api/search", "/api/heavy"]
      limit: "20/minute"
      weights: {"/api/heavy": 5}
`, mode), "lease.yaml")
			if err != nil {
				t.Fatal(err)
			}
			mem := memstore.New(memstore.WithClock(clock))
			defer mem.Close()
			l := core.NewLimiter(cfg, core.WithStore(mem), core.WithClock(clock))
			for range 4 {
				l.Decide(context.Background(), "GET", "/api/search", "alice", false)
			}
			// Other processes take what is left but 4 units (exact mode: 5,
			// since no unit is held here).
			pol := cfg.Rule("search").Policy
			res, _ := mem.Peek(context.Background(), "alice", pol, 0)
			other := res.Remaining - 4
			if mode == "exact" {
				other = res.Remaining - 5
			}
			if _, err := mem.Take(context.Background(), "alice", pol, other); err != nil {
				t.Fatal(err)
			}
			d := l.Decide(context.Background(), "GET", "/api/heavy", "alice", false)
			if !d.Allowed {
				t.Errorf("%s: heavy request (5) refused with 5 units of the key left (held here + store)", mode)
			}
		})
	}
}

// TestLeaseProviderCallersShareBlocks: custom limits (LimitProvider) under
// a rule keyed by a header give each caller of one org a policy of its
// own, all counting in one store counter: one process holds one block of
// that counter, so a token bucket admits at most C + 1 × B at one instant.
func TestLeaseProviderCallersShareBlocks(t *testing.T) {
	for _, mode := range []string{"exact", "lease"} {
		t.Run(mode, func(t *testing.T) {
			clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			more := "      key: header:X-Org\n"
			if mode == "lease" {
				more += "      lease_block: 10\n"
			}
			cfg := leaseConfig(t, mode, "800/10s", "token_bucket", more)
			lims := cfg.Rule("search").Policy.Limits
			prov := core.LimitProviderFunc(func(context.Context, string, string) ([]algo.Limit, bool, error) {
				return lims, true, nil
			})
			admitted, last := orgBurst(t, cfg, clock, prov, []string{"u1", "u2", "u3", "u4"})
			if last.Rule.Plan() != core.CustomPlan {
				t.Fatalf("plan %q", last.Rule.Plan())
			}
			want := 800
			if mode == "lease" {
				want = 800 + 1*10 // P × B, P = 1
			}
			if admitted != want {
				t.Errorf("%s: admitted %d at one instant, want %d (the stated bound)", mode, admitted, want)
			}
		})
	}
}

// orgBurst is the rig of the LimitProvider tests: one process of cfg on
// clock, whose limits prov gives per caller, all of org acme (the rule's
// key, header:X-Org). Each of users in turn grows its block to 10 (blocks
// of 1, 2, 4, 8, then 10); the store's counter is then emptied under the
// last caller's policy and refilled by the clock, and the users' requests
// at one instant, in turn, counted. It returns what was admitted and the
// last decision before the emptying.
func orgBurst(t *testing.T, cfg *core.Config, clock *store.ManualClock, prov core.LimitProvider, users []string) (int, core.Decision) {
	t.Helper()
	ps, mem := fleet(t, 1, cfg, clock, core.WithLimitProvider(prov))
	p := ps[0]
	type req struct{ user string }
	f := &core.Flow[req]{
		Limiter: p.Limiter,
		Key:     func(r req) (string, error) { return r.user, nil },
		Header:  func(req, string) string { return "acme" },
	}
	var last core.Decision
	for _, u := range users {
		p.calls()
		for range 100 { // blocks of 1, 2, 4, 8, then 10
			last, _ = f.Decide(context.Background(), req{u}, "GET", "/api/search", "")
			if c := p.calls(); len(c) > 0 && c[len(c)-1] == 11 {
				break
			}
		}
	}
	ctx := context.Background()
	pol := last.Rule.Policy
	res, _ := mem.Peek(ctx, last.Key, pol, 0)
	if res.Remaining > 0 {
		mem.Take(ctx, last.Key, pol, res.Remaining)
	}
	clock.Advance(10 * time.Second) // full again
	admitted := 0
	for i := range 4000 {
		if d, _ := f.Decide(ctx, req{users[i%len(users)]}, "GET", "/api/search", ""); d.Allowed {
			admitted++
		}
	}
	return admitted, last
}

// TestLeaseReloadNewTerms: a reload that lowers a rule's limit keeps its
// counter; the units of a block taken under the old limit are not spent
// under the new one: with the counter past the new limit, the next
// request is refused, as in exact mode. A reload that keeps the terms
// keeps the blocks.
func TestLeaseReloadNewTerms(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ps, _ := fleet(t, 1, leaseConfig(t, "lease", "1000/minute", "fixed_window", ""), clock)
	p := ps[0]
	for range 21 {
		p.search("alice") // alone, blocks of 1, 2, 4, 8, then 16, all of it left
	}
	p.calls()
	p.SetConfig(leaseConfig(t, "lease", "1000/minute", "fixed_window", ""))
	if d := p.search("alice"); !d.Allowed || len(p.calls()) != 0 {
		t.Fatalf("same terms after a reload: allowed %v, takes made; want the block spent", d.Allowed)
	}
	p.SetConfig(leaseConfig(t, "lease", "10/minute", "fixed_window", ""))
	if d := p.search("alice"); d.Allowed {
		t.Errorf("under 10/minute with %d units counted: admitted, want refused", 1000-d.Result.Remaining)
	}
	if got := p.calls(); len(got) != 1 || got[0] != 1 {
		t.Errorf("takes %v under the new terms, want [1]: the request alone", got)
	}
}

// TestLeaseSparseKeyTakesNoBlock: a key whose requests come one per
// window of its shortest limit never takes a block, so none of its units
// is lost with an ended block: under 16 a second and 100 an hour, one
// request every 1.5 s, exactly 100 of 300 are admitted, each decided
// alone.
func TestLeaseSparseKeyTakesNoBlock(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  consistency: lease
  rules:
    - name: search
      paths: ["/api/search"]
      limit: ["16/second", "100/hour"]
`), "lease.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ps, _ := fleet(t, 1, cfg, clock)
	p := ps[0]
	admitted := 0
	for range 300 {
		if p.search("alice").Allowed {
			admitted++
		}
		clock.Advance(1500 * time.Millisecond)
	}
	if admitted != 100 {
		t.Errorf("admitted %d, want 100", admitted)
	}
	for _, c := range p.calls() {
		if c != 1 {
			t.Fatalf("a take of %d: a block was taken", c)
		}
	}
}

// TestLeaseCostOverCapacity: a request whose cost (given by the adapter)
// is above the rule's capacity is refused, as in exact mode, whatever
// units the process holds: the units held were counted in the store, so
// the rest of the cost never fits beside them.
func TestLeaseCostOverCapacity(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig(t, "lease", "100/minute", "fixed_window", "")
	ps, _ := fleet(t, 1, cfg, clock)
	p := ps[0]
	for range 6 {
		p.search("alice") // alone, blocks of 1 and 2, then 4: 4 units held
	}
	type req struct{ cost int64 }
	f := &core.Flow[req]{
		Limiter: p.Limiter,
		Key:     func(req) (string, error) { return "alice", nil },
		Cost:    func(r req) int64 { return r.cost },
	}
	d, err := f.Decide(context.Background(), req{101}, "GET", "/api/search", "")
	if err != nil || d.Allowed {
		t.Errorf("a request of cost 101 under 100/minute: allowed %v (%v), want refused", d.Allowed, err)
	}
}

// heavyRig is a fleet of one process, p, on a memory store, mem, at t0 on
// clock, whose rule search (policy pol) counts /api/heavy at a weight,
// holding 8 units of alice: its first 12 requests were decided alone, then
// from blocks of 1, 2, 4 and 8.
type heavyRig struct {
	p     *process
	mem   *memstore.Store
	pol   *store.Policy
	clock *store.ManualClock
	t0    time.Time
}

// newHeavyRig makes a heavyRig of the file's consistency, with fileMore
// lines in the file and ruleMore in the rule, a limit and a weight.
func newHeavyRig(t *testing.T, consistency, limit string, weight int, fileMore, ruleMore string) *heavyRig {
	t.Helper()
	cfg, err := core.ParseConfig(fmt.Appendf(nil, `
rate_limit:
  enabled: true
  consistency: %s
%s  rules:
    - name: search
      paths: ["/api/search", "/api/heavy"]
      limit: %q
      weights: {"/api/heavy": %d}
%s`, consistency, fileMore, limit, weight, ruleMore), "lease.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r := &heavyRig{t0: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), pol: cfg.Rule("search").Policy}
	r.clock = store.NewManualClock(r.t0)
	ps, mem := fleet(t, 1, cfg, r.clock)
	r.p, r.mem = ps[0], mem
	for range 12 {
		r.p.search("alice")
	}
	return r
}

// heavy decides a request of alice on /api/heavy.
func (r *heavyRig) heavy() core.Decision {
	return r.p.Decide(context.Background(), "GET", "/api/heavy", "alice", false)
}

// fill takes, as other processes would, what the store has left of alice,
// and returns it.
func (r *heavyRig) fill(t *testing.T) int64 {
	res, _ := r.mem.Peek(context.Background(), "alice", r.pol, 0)
	if res.Remaining > 0 {
		if got, err := r.mem.Take(context.Background(), "alice", r.pol, res.Remaining); err != nil || !got.Allowed {
			t.Errorf("taking the %d left: allowed %v, err %v", res.Remaining, got.Allowed, err)
		}
	}
	return res.Remaining
}

// acrossWindowEnd sets the clock to the last millisecond of the first
// minute, and makes the store call of cost moved answer 2 ms later, in the
// next minute; then calls at, if not nil, with the cost of every call.
func (r *heavyRig) acrossWindowEnd(moved int64, at func(cost int64)) {
	r.clock.Set(r.t0.Add(time.Minute - time.Millisecond))
	r.p.hold = func(cost int64) {
		if cost == moved {
			r.clock.Set(r.t0.Add(time.Minute + time.Millisecond))
		}
		if at != nil {
			at(cost)
		}
	}
}

// TestLeaseHeldUnitsEndWithTheirWindow: a heavy request puts the units
// held of a block into its store call, which the store answers after the
// block's window has ended, counting it in the next window: the held
// units, counted in the old window, are not spent in the new one, which
// admits its limit, as in exact mode.
func TestLeaseHeldUnitsEndWithTheirWindow(t *testing.T) {
	for _, mode := range []string{"exact", "lease"} {
		t.Run(mode, func(t *testing.T) {
			r := newHeavyRig(t, mode, "100/minute", 10, "", "")
			moved := int64(2) // 10 - 8 held
			if mode == "exact" {
				moved = 10
			}
			r.acrossWindowEnd(moved, nil)
			heavy := r.heavy()
			r.p.hold = nil
			inNext := int64(0)
			if heavy.Allowed {
				inNext += heavy.Cost // decided by the store, in the next window
			}
			inNext += r.fill(t) // other processes take what is left of the next window
			for range 100 {
				if r.p.search("alice").Allowed {
					inNext++
				}
			}
			if inNext != 100 {
				t.Errorf("%s: admitted %d in the window after 00:01, want its limit, 100", mode, inNext)
			}
		})
	}
}

// TestLeaseProviderPoliciesShareBlocks: two callers of one org get
// custom limits that share the org's 10 s token bucket but differ in their
// first limit: one process holds one block of the shared counter, so at
// most C + P × B (P = 1) pass at one instant.
func TestLeaseProviderPoliciesShareBlocks(t *testing.T) {
	clock := store.NewManualClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cfg := leaseConfig(t, "lease", "800/10s", "token_bucket", "      key: header:X-Org\n      lease_block: 10\n")
	shared := algo.Limit{Count: 800, Period: 10 * time.Second}
	prov := core.LimitProviderFunc(func(_ context.Context, key, _ string) ([]algo.Limit, bool, error) {
		if key == "u2" {
			return []algo.Limit{{Count: 8000, Period: time.Second}, shared}, true, nil
		}
		return []algo.Limit{shared}, true, nil
	})
	admitted, _ := orgBurst(t, cfg, clock, prov, []string{"u1", "u2"}) // u2's policy comes last: emptying it empties both counters
	if admitted != 800+1*10 {
		t.Errorf("admitted %d at one instant, want %d (C + P × B)", admitted, 800+10)
	}
}

// TestLeaseStoreDownSpendsHeldUnitsFirst: with the store down (failure:
// closed), a heavy request's call for a block fails and gives back the 8
// units it held; the light request that waited for it spends one of them,
// since a process spends the blocks it holds before the failure policy
// applies.
func TestLeaseStoreDownSpendsHeldUnitsFirst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newHeavyRig(t, "lease", "1000/minute", 10, "  failure: closed\n", "")
		p := r.p
		release := make(chan struct{})
		p.hold = func(cost int64) {
			if cost == 2 { // the heavy request: 10 - 8 held
				<-release
			}
		}
		heavy := make(chan core.Decision, 1)
		go func() { heavy <- r.heavy() }()
		synctest.Wait()
		light := make(chan core.Decision, 1)
		go func() { light <- p.search("alice") }()
		synctest.Wait()
		p.down.Store(true)
		close(release)
		<-heavy
		d := <-light
		p.hold = nil
		after := p.search("alice")
		if !d.Allowed || !after.Allowed {
			t.Errorf("store down, 8 units in the block: the waiting request allowed %v (err %v), the next %v; want both from the block", d.Allowed, d.Err, after.Allowed)
		}
	})
}

// TestLeaseLapsedHeldUnitsRefused: as above, but other processes fill the
// next window before the request asks for the units its lapsed held units
// stood for: it is refused, and the 2 units the store counted for it in
// the new window stay the process's block, spent by its next requests:
// the new window admits exactly its limit.
func TestLeaseLapsedHeldUnitsRefused(t *testing.T) {
	r := newHeavyRig(t, "lease", "100/minute", 10, "", "")
	p := r.p
	others := int64(0)
	// 10 - 8 held is answered in the next window; when the lapsed units
	// are asked again, others took the rest first.
	r.acrossWindowEnd(2, func(cost int64) {
		if cost == 8 {
			others = r.fill(t)
		}
	})
	heavy := r.heavy()
	p.hold = nil
	if heavy.Allowed || others != 98 {
		t.Fatalf("heavy allowed %v, others took %d; want refused, 98", heavy.Allowed, others)
	}
	p.calls()
	admitted := others
	for i := range 10 {
		if p.search("alice").Allowed {
			admitted++
		}
		if got := p.calls(); i < 2 && len(got) > 0 {
			t.Errorf("request %d: takes %v, want it spent from the block", i+1, got)
		}
	}
	if admitted != 100 {
		t.Errorf("admitted %d in the new window, want 100", admitted)
	}
}

// TestLeaseBucketHeldUnitsKeepTheBound: token bucket (and GCRA) 800/10s,
// B = 10. A heavy request (cost 100) puts 8 held units into its call, and
// the block's life (1 min) ends while the store answers: a bucket has no
// window, so the held units (at most B) are spent, and no more than the
// block stays with the process. Ten seconds later (the bucket full again)
// the fleet takes the bucket's 800: at most C + P × B = 810 pass at one
// instant.
func TestLeaseBucketHeldUnitsKeepTheBound(t *testing.T) {
	for _, alg := range []string{"token_bucket", "gcra"} {
		t.Run(alg, func(t *testing.T) {
			r := newHeavyRig(t, "lease", "800/10s", 100, "", "      algorithm: "+alg+"\n      lease_block: 10\n")
			// 100 - 8 held is answered after the block's life; if the
			// lapsed units were asked again, the fleet took the bucket.
			r.acrossWindowEnd(92, func(cost int64) {
				if cost == 8 {
					r.fill(t)
				}
			})
			r.heavy()
			r.p.hold = nil
			r.clock.Advance(10 * time.Second) // the bucket is full again
			admitted := r.fill(t)             // the rest of the fleet
			for range 200 {
				if r.p.search("alice").Allowed {
					admitted++
				}
			}
			if admitted > 800+10 {
				t.Errorf("%s: admitted %d at one instant, want at most C + P × B = 810", alg, admitted)
			}
		})
	}
}

// TestLeaseLapsedRetakeRemaining: as TestLeaseLapsedHeldUnitsRefused:
// after the refused retake the store has 0 left and the process 2 units;
// a request spent from them reports what is left: the store's 0 and the
// block's units.
func TestLeaseLapsedRetakeRemaining(t *testing.T) {
	r := newHeavyRig(t, "lease", "100/minute", 10, "", "")
	r.acrossWindowEnd(2, func(cost int64) {
		if cost == 8 {
			r.fill(t)
		}
	})
	heavy := r.heavy()
	r.p.hold = nil
	if heavy.Allowed {
		t.Fatal("setup: heavy allowed")
	}
	d := r.p.search("alice")
	if !d.Allowed || d.Result.Remaining != 1 {
		t.Errorf("from the kept block: allowed %v, remaining %d; want allowed, 1 (store 0 + 1 in the block)", d.Allowed, d.Result.Remaining)
	}
}

// TestLeaseLapsedRetakePanics: as TestLeaseLapsedHeldUnitsRefused, but
// the retake of the lapsed units panics: the 2 units the store counted
// for the request in the new window stay the block, as when the retake is
// refused or fails.
func TestLeaseLapsedRetakePanics(t *testing.T) {
	r := newHeavyRig(t, "lease", "100/minute", 10, "", "")
	p := r.p
	r.acrossWindowEnd(2, func(cost int64) {
		if cost == 8 {
			panic("store bug")
		}
	})
	func() {
		defer func() { _ = recover() }()
		r.heavy()
	}()
	p.hold = nil
	p.calls()
	p.search("alice")
	p.search("alice")
	if got := p.calls(); len(got) != 0 {
		t.Errorf("takes %v; want both spent from the 2 units counted for the heavy request", got)
	}
}
