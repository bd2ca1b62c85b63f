package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/internal/redistest"
	"github.com/rlkit/rlkit/nethttp"
)

// keysYAML has rules whose counts stay exact for minutes whenever a test
// runs: a GCRA and a token bucket per hour (their first unit comes back
// after six minutes), a fixed window per day (awayFromMidnight), a rule
// keyed by client IP, one bounding requests in flight, and a plan.
const keysYAML = `rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - name: upload
      paths: ["/upload"]
      limit: "10/hour"
      burst: 12
      algorithm: gcra
    - name: search
      paths: ["/search"]
      limit: ["5/hour", "20/day"]
      algorithm: token_bucket
    - name: daily
      paths: ["/daily"]
      limit: "7/day"
    - name: login
      paths: ["/login"]
      limit: "3/hour"
      algorithm: gcra
      key: ip
    - name: export
      paths: ["/export"]
      concurrent: 2
  tiers:
    pro:
      rules:
        upload: {limit: "100/hour", burst: 100}
`

// service is a limiter of the rule file yaml over a store in rc, as a
// service runs it, with opts.
func service(t *testing.T, rc redis.UniversalClient, yaml string, opts ...core.Option) *core.Limiter {
	t.Helper()
	cfg, err := core.ParseConfig([]byte(yaml), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	s, err := redisstore.New(rc, redisstore.WithTimeout(redistest.StoreTimeout), redisstore.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return core.NewLimiter(cfg, append([]core.Option{core.WithStore(s)}, opts...)...)
}

// count makes n requests of identity to path (under plan, when given).
func count(t *testing.T, lim *core.Limiter, path, identity, plan string, n int) {
	t.Helper()
	for range n {
		d := lim.DecidePlan(context.Background(), "GET", core.Path(path), identity, plan, false)
		if d.Err != nil {
			t.Fatal(d.Err)
		}
	}
}

// known counts, through lim: uploads 12 for bob (his burst: over), 11 for
// erin, 10 for dave, 4 for alice, 1 for each of u00..u29, 30 for alice
// under the plan pro; searches 2 for alice, 6 for bob (5 admitted);
// daily 3 for alice; logins 3 from 192.0.2.1; exports 2 in flight for
// alice, held.
func known(t *testing.T, lim *core.Limiter) {
	t.Helper()
	awayFromMidnight(t)
	count(t, lim, "/upload", "bob", "", 12)
	count(t, lim, "/upload", "erin", "", 11)
	count(t, lim, "/upload", "dave", "", 10)
	count(t, lim, "/upload", "alice", "", 4)
	for i := range 30 {
		count(t, lim, "/upload", fmt.Sprintf("u%02d", i), "", 1)
	}
	count(t, lim, "/upload", "alice", "pro", 30)
	count(t, lim, "/search", "alice", "", 2)
	count(t, lim, "/search", "bob", "", 6)
	count(t, lim, "/daily", "alice", "", 3)
	count(t, lim, "/login", "192.0.2.1", "", 3)
	count(t, lim, "/export", "alice", "", 2) // never completed: the slots stay held
}

// awayFromMidnight waits, when the day (UTC) ends within a minute, until
// it has ended, so that the fixed window per day holds every count of a
// test.
func awayFromMidnight(t *testing.T) {
	now := time.Now().UTC()
	if left := now.Truncate(24 * time.Hour).Add(24 * time.Hour).Sub(now); left < time.Minute {
		t.Logf("waiting %v for the day to end", left)
		<-time.After(left + time.Second)
	}
}

// backend starts a Redis, a server or a Cluster, and returns the flags
// that name it and a client of it.
type backend struct {
	name  string
	start func(t *testing.T) (args []string, rc redis.UniversalClient)
}

var backends = []backend{
	{"server", func(t *testing.T) ([]string, redis.UniversalClient) {
		srv := redistest.StartServer(t)
		return []string{"--redis", "redis://" + srv.Addr()}, srv.Client(t)
	}},
	{"cluster", func(t *testing.T) ([]string, redis.UniversalClient) {
		c := redistest.StartCluster(t)
		return []string{"--cluster", "--redis", strings.Join(c.Addrs(), ",")}, c.Client(t)
	}},
}

// keysJSON runs rlkit keys with --format json and decodes its output
// into v; it fails the test unless the status is 0.
func keysJSON(t *testing.T, dir string, conn []string, v any, args ...string) {
	t.Helper()
	all := append(append([]string{"keys", "--config", "rules.yaml", "--format", "json"}, conn...), args...)
	out, errOut, code := rlkit(t, dir, all...)
	if code != 0 {
		t.Fatalf("rlkit %q: status %d, stderr %s", all, code, errOut)
	}
	if err := json.Unmarshal([]byte(out), v); err != nil {
		t.Fatalf("rlkit %q: %v\n%s", all, err, out)
	}
}

// TestKeysInspect: inspect reads what a service's limiter counted, per
// limit, exactly, by identity (derived as the service derives it) or by
// store key, under a plan, and the requests in flight; the same on a
// server and on a Cluster.
func TestKeysInspect(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conn, rc := b.start(t)
			known(t, service(t, rc, keysYAML))
			dir := files(t, "rules.yaml", keysYAML)
			type lim struct {
				limit           string
				capacity, used  int64
				remaining       int64
				over            bool
				resetMin, reset time.Duration // the reset-after's range
			}
			for _, c := range []struct {
				args  []string
				key   string
				over  bool
				limit []lim
			}{
				{[]string{"--rule", "upload", "--identity", "alice"}, "alice", false, []lim{{"10/hour", 12, 4, 8, false, 23 * time.Minute, 24 * time.Minute}}},
				{[]string{"--rule", "upload", "--key", "bob"}, "bob", true, []lim{{"10/hour", 12, 12, 0, true, 71 * time.Minute, 72 * time.Minute}}},
				{[]string{"--rule", "upload", "--identity", "carol"}, "carol", false, []lim{{"10/hour", 12, 0, 12, false, 0, 0}}},
				{[]string{"--rule", "upload", "--plan", "pro", "--identity", "alice"}, "alice", false, []lim{{"100/hour", 100, 30, 70, false, 17 * time.Minute, 18 * time.Minute}}},
				{[]string{"--rule", "search", "--identity", "bob"}, "bob", true, []lim{
					{"5/hour", 5, 5, 0, true, 59 * time.Minute, time.Hour},
					{"20/day", 20, 5, 15, false, 5*72*time.Minute - time.Minute, 5 * 72 * time.Minute}}},
				{[]string{"--rule", "daily", "--identity", "alice"}, "alice", false, []lim{{"7/day", 7, 3, 4, false, 0, 24 * time.Hour}}},
				{[]string{"--rule", "login", "--identity", "192.0.2.1"}, "ip:192.0.2.1", true, []lim{{"3/hour", 3, 3, 0, true, 59 * time.Minute, time.Hour}}},
			} {
				var got inspectJSON
				keysJSON(t, dir, conn, &got, append([]string{"inspect"}, c.args...)...)
				if got.Key != c.key || got.Over != c.over || len(got.Limits) != len(c.limit) {
					t.Errorf("inspect %q: %+v; want key %q, over %v, %d limits", c.args, got, c.key, c.over, len(c.limit))
					continue
				}
				for i, w := range c.limit {
					l := got.Limits[i]
					reset := time.Duration(l.ResetAfterMS) * time.Millisecond
					if l.Limit != w.limit || l.Capacity != w.capacity || l.Used != w.used || l.Remaining != w.remaining || l.Over != w.over ||
						reset < w.resetMin || reset > w.reset || w.over != (l.RetryAfterMS > 0) {
						t.Errorf("inspect %q: limit %d = %+v; want %+v", c.args, i, l, w)
					}
				}
			}
			// Over the limit: the wait of the next request, as its Retry-After.
			var bob inspectJSON
			keysJSON(t, dir, conn, &bob, "inspect", "--rule", "upload", "--identity", "bob")
			if w := time.Duration(bob.RetryAfterMS) * time.Millisecond; w <= 5*time.Minute || w > 6*time.Minute {
				t.Errorf("bob's retry after %v, want about 6m (GCRA 10/hour)", w)
			}
			// Requests in flight.
			var export inspectJSON
			keysJSON(t, dir, conn, &export, "inspect", "--rule", "export", "--identity", "alice")
			if export.Concurrent != 2 || export.InFlight == nil || *export.InFlight != 2 || len(export.Limits) != 0 {
				t.Errorf("inspect export alice: %+v; want 2 of 2 in flight", export)
			}
			// The text table.
			out, _, code := rlkit(t, dir, append(append([]string{"keys", "--config", "rules.yaml"}, conn...), "inspect", "--rule", "search", "--identity", "bob")...)
			want := regexp.MustCompile(`^rule search, key bob
LIMIT +ALGORITHM +BURST +USED +REMAINING +RESETS IN +RETRY AFTER
5/hour +token_bucket +- +5 +0 +(59m\d+s|1h) +(1[01]m\d*s?|12m) *
20/day +token_bucket +- +5 +15 +(5h5\dm\d*s?|6h) +- *
over the limit: the next request is refused, Retry-After (1[01]m\d*s?|12m)
$`)
			if code != 0 || !want.MatchString(out) {
				t.Errorf("inspect search bob as text: status %d, stdout\n%s\nwant it to match\n%s", code, out, want)
			}
			out, _, _ = rlkit(t, dir, append(append([]string{"keys", "--config", "rules.yaml"}, conn...), "inspect", "--rule", "export", "--identity", "alice")...)
			if out != "rule export, key alice\nin flight: 2 of 2\n" {
				t.Errorf("inspect export alice as text: %q", out)
			}
		})
	}
}

// TestKeysTop: top lists the keys nearest or over a rule's limit, in
// order (over first, then fewest remaining, then by key), finds each
// key once, and tells whether it scanned every key or stopped at
// --max-scan; the same on a server and on a Cluster.
func TestKeysTop(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conn, rc := b.start(t)
			known(t, service(t, rc, keysYAML))
			dir := files(t, "rules.yaml", keysYAML)
			size, err := rc.DBSize(context.Background()).Result()
			if err != nil {
				t.Fatal(err)
			}
			var top topJSON
			keysJSON(t, dir, conn, &top, "top", "--rule", "upload", "-n", "6")
			type row struct {
				key       string
				over      bool
				remaining int64
			}
			var got []row
			for _, k := range top.Keys {
				got = append(got, row{k.Key, k.Over, k.Remaining})
			}
			want := []row{{"bob", true, 0}, {"erin", false, 1}, {"dave", false, 2}, {"alice", false, 8}, {"u00", false, 11}, {"u01", false, 11}}
			if fmt.Sprint(got) != fmt.Sprint(want) || !top.Complete || top.Scanned != size || top.Found != 34 || top.Pattern != "rl:{*}:upload@*" {
				t.Errorf("top upload -n 6: %v, %+v\nwant %v, complete, %d scanned, 34 found", got, top, want, size)
			}
			// Under the plan, alice alone; the default of 10 rows.
			keysJSON(t, dir, conn, &top, "top", "--rule", "upload", "--plan", "pro")
			if len(top.Keys) != 1 || top.Keys[0].Key != "alice" || top.Keys[0].Remaining != 70 {
				t.Errorf("top upload --plan pro: %+v; want alice, 70 left", top.Keys)
			}
			// Bounded below the keyspace.
			keysJSON(t, dir, conn, &top, "top", "--rule", "upload", "--max-scan", "10")
			// A node whose scan ended examined all its keys, which may be
			// more than its share of the bound: exactly 10 on one server.
			if top.Complete || top.Scanned < 10 || top.Scanned >= size || b.name == "server" && top.Scanned != 10 || top.MaxScan != 10 {
				t.Errorf("top --max-scan 10 of %d keys: %+v; want 10 scanned, stopped", size, top)
			}
			out, _, code := rlkit(t, dir, append(append([]string{"keys", "--config", "rules.yaml"}, conn...), "top", "--rule", "upload", "--max-scan", "10")...)
			n := `10`
			if b.name != "server" {
				n = `\d+`
			}
			if last := lastLine(out); code != 0 || !regexp.MustCompile(`^scanned `+n+` keys, stopped at the bound \(--max-scan 10\): \d+ keys of rule upload found; there may be more$`).MatchString(last) {
				t.Errorf("top --max-scan 10 as text: status %d, last line %q", code, last)
			}
			// As text: the table, then what was scanned.
			out, _, code = rlkit(t, dir, append(append([]string{"keys", "-config", "rules.yaml"}, conn...), "top", "-rule", "search", "-n", "1")...)
			want2 := regexp.MustCompile(`^KEY +OVER +REMAINING +LIMIT +USED +RESETS IN +RETRY AFTER
bob +yes +0 +5/hour +5 +(59m\d+s|1h) +(1[01]m\d*s?|12m) *
scanned all ` + fmt.Sprint(size) + ` keys \(MATCH rl:\{\*\}:search@\*\): 2 keys of rule search
$`)
			if code != 0 || !want2.MatchString(out) {
				t.Errorf("top search -n 1 as text: status %d, stdout\n%s\nwant it to match\n%s", code, out, want2)
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	return lines[len(lines)-1]
}

// TestKeysReset: reset clears a key's counters, as the service's
// Limiter.ResetKey does (the service then admits the key again), says
// whether anything was cleared, and exits 0 either way; on a server and
// on a Cluster.
func TestKeysReset(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conn, rc := b.start(t)
			lim := service(t, rc, keysYAML)
			known(t, lim)
			dir := files(t, "rules.yaml", keysYAML)
			ctx := context.Background()
			if d := lim.Decide(ctx, "GET", "/upload", "bob", false); d.Allowed {
				t.Fatalf("bob's 13th upload admitted before the reset")
			}
			for _, c := range []struct {
				args []string
				want string
			}{
				{[]string{"--rule", "upload", "--identity", "bob"}, "rule upload, key bob: cleared\n"},
				{[]string{"--rule", "upload", "--identity", "bob"}, "rule upload, key bob: nothing to clear (no live counter)\n"},
				{[]string{"--rule", "upload", "--key", "carol"}, "rule upload, key carol: nothing to clear (no live counter)\n"},
				{[]string{"--rule", "login", "--identity", "192.0.2.1"}, "rule login, key ip:192.0.2.1: cleared\n"},
				{[]string{"--rule", "upload", "--key", "alice"}, "rule upload, key alice: cleared\n"}, // the plan's counter too
			} {
				out, errOut, code := rlkit(t, dir, append(append([]string{"keys", "--config", "rules.yaml"}, conn...), append([]string{"reset"}, c.args...)...)...)
				if code != 0 || out != c.want {
					t.Errorf("reset %q: status %d, stdout %q, stderr %q; want 0 and %q", c.args, code, out, errOut, c.want)
				}
			}
			// Another replica: the first has bob's denial in its deny cache,
			// which a reset by another process does not reach.
			lim = service(t, rc, keysYAML)
			if d := lim.Decide(ctx, "GET", "/upload", "bob", false); !d.Allowed || d.Result.Remaining != 11 {
				t.Errorf("bob after the reset: allowed %v, remaining %d; want admitted, 11 left", d.Allowed, d.Result.Remaining)
			}
			if d := lim.Decide(ctx, "GET", "/login", "192.0.2.1", false); !d.Allowed {
				t.Errorf("192.0.2.1's login after the reset: refused")
			}
			if d := lim.DecidePlan(ctx, "GET", "/upload", "alice", "pro", false); !d.Allowed || d.Result.Remaining != 99 {
				t.Errorf("alice under pro after the reset: allowed %v, remaining %d; want 99 left", d.Allowed, d.Result.Remaining)
			}
			var got resetJSON
			keysJSON(t, dir, conn, &got, "reset", "--rule", "upload", "--identity", "erin")
			if got != (resetJSON{Rule: "upload", Key: "erin", Cleared: true}) {
				t.Errorf("reset erin as JSON: %+v", got)
			}
		})
	}
}

// TestKeysIdentityKey: under a rule keyed by an API key header, an
// identity is hashed under the service's identity key, read from the
// variable --identity-key-env names; --redis takes host:port too.
func TestKeysIdentityKey(t *testing.T) {
	t.Parallel()
	srv := redistest.StartServer(t)
	const yaml = "rate_limit:\n  enabled: true\n  default: \"1000/day\"\n  rules:\n    - name: api\n      paths: [\"/api\"]\n      limit: \"10/hour\"\n      algorithm: gcra\n      key: header:X-Api-Key\n"
	cfg, err := core.ParseConfig([]byte(yaml), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	lim := core.NewLimiter(cfg, core.WithIdentityKey([]byte("service secret")))
	want, err := lim.RuleKey("sk_live_1", "api")
	if err != nil {
		t.Fatal(err)
	}
	dir := files(t, "rules.yaml", yaml)
	args := []string{"keys", "--redis", srv.Addr(), "--config", "rules.yaml", "--format", "json", "--identity-key-env", "SERVICE_IDENTITY_KEY", "inspect", "--rule", "api", "--identity", "sk_live_1"}
	cmd := exec.Command(binary, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "SERVICE_IDENTITY_KEY=service secret")
	out, err := cmd.Output()
	var got inspectJSON
	if err != nil || json.Unmarshal(out, &got) != nil || got.Key != want || !strings.HasPrefix(want, "h:X-Api-Key:hmac:") {
		t.Errorf("inspect with the service's identity key: %v, %s; want key %s", err, out, want)
	}
	// Without it, the built-in key: another hash.
	var other inspectJSON
	keysJSON(t, dir, []string{"--redis", srv.Addr()}, &other, "inspect", "--rule", "api", "--identity", "sk_live_1")
	if other.Key == want || !strings.HasPrefix(other.Key, "h:X-Api-Key:hmac:") {
		t.Errorf("inspect with the built-in identity key: key %s, want another hash than %s", other.Key, want)
	}
	// A variable not set is a bad command line, as it is to explain.
	if _, errOut, code := rlkit(t, dir, args...); code != 2 || errOut != "rlkit: keys: --identity-key-env SERVICE_IDENTITY_KEY: the variable is empty or not set (rlkit --help lists the commands)\n" {
		t.Errorf("--identity-key-env of a variable not set: status %d, stderr %q", code, errOut)
	}
}

// TestKeysUnknownRule: a rule (or plan) the file does not hold exits 1
// naming it and those it holds, before contacting Redis.
func TestKeysUnknownRule(t *testing.T) {
	dir := files(t, "rules.yaml", keysYAML)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "--rule", "uplod", "--identity", "a"}, `rlkit: rule "uplod" is not in rules.yaml; its rules: default, upload, search, daily, login, export` + "\n"},
		{[]string{"top", "--rule", "uplod"}, `rlkit: rule "uplod" is not in rules.yaml; its rules: default, upload, search, daily, login, export` + "\n"},
		{[]string{"reset", "--rule", "uplod", "--key", "a"}, `rlkit: rule "uplod" is not in rules.yaml; its rules: default, upload, search, daily, login, export` + "\n"},
		{[]string{"top", "--rule", "upload", "--plan", "gold"}, `rlkit: plan "gold" is not in rules.yaml; its plans: pro` + "\n"},
	} {
		out, errOut, code := rlkit(t, dir, append([]string{"keys", "--redis", "redis://127.0.0.1:1", "--config", "rules.yaml"}, c.args...)...)
		if code != 1 || out != "" || errOut != c.want {
			t.Errorf("keys %q: status %d, stdout %q, stderr %q; want 1 and %q", c.args, code, out, errOut, c.want)
		}
	}
}

// TestKeysNoRuleFile: without --config the rule file is ratelimit.yaml;
// when there is none, the error says what --config is for, before any
// call to Redis.
func TestKeysNoRuleFile(t *testing.T) {
	dir := t.TempDir()
	want := "rlkit: ratelimit.yaml: no such file or directory (--config names the service's rule file, ratelimit.yaml unless given: it tells each rule's algorithm, limits and keys)\n"
	for _, args := range [][]string{{"top", "--rule", "api", "-n", "2"}, {"inspect", "--rule", "api", "--identity", "a"}, {"reset", "--rule", "api", "--key", "a"}} {
		out, errOut, code := rlkit(t, dir, append([]string{"keys", "-redis", "redis://127.0.0.1:1"}, args...)...)
		if code != 1 || out != "" || errOut != want {
			t.Errorf("keys %q: status %d, stdout %q, stderr %q; want 1 and %q", args, code, out, errOut, want)
		}
	}
}

// TestKeysUnreachable: a Redis that refuses connections, or accepts them
// and never answers, exits 1 naming the address, within the timeout.
func TestKeysUnreachable(t *testing.T) {
	t.Parallel()
	dir := files(t, "rules.yaml", keysYAML)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	hole, _ := redistest.BlackHole(t)
	for _, c := range []struct {
		conn []string
		want string
	}{
		{[]string{"--redis", "redis://" + refused}, "rlkit: redis " + refused + ": dial tcp " + refused + ": connect: connection refused\n"},
		{[]string{"--cluster", "--redis", refused}, "rlkit: redis " + refused + ": "},
		{[]string{"--redis", "redis://" + hole, "--timeout", "300ms"}, "rlkit: redis " + hole + ": no answer within 300ms (--timeout)\n"},
		{[]string{"--cluster", "--redis", hole, "--timeout", "300ms"}, "rlkit: redis " + hole + ": "},
	} {
		start := time.Now()
		out, errOut, code := rlkit(t, dir, append(append([]string{"keys", "--config", "rules.yaml"}, c.conn...), "top", "--rule", "upload")...)
		took := time.Since(start)
		if code != 1 || out != "" || !strings.HasPrefix(errOut, c.want) || strings.Count(errOut, "\n") != 1 || took > 3*time.Second {
			t.Errorf("keys %q: status %d in %v, stdout %q, stderr %q; want 1 within 3s and %q", c.conn, code, took, out, errOut, c.want)
		}
	}
}

// TestKeysUsage: a bad command line exits 2 with the error on stderr.
func TestKeysUsage(t *testing.T) {
	dir := files(t, "rules.yaml", keysYAML)
	for _, args := range [][]string{
		{"keys", "inspect", "--rule", "upload", "--identity", "a"},                                                 // no --redis
		{"keys", "--redis", "redis://127.0.0.1:1", "inspect", "--rule", "upload"},                                  // neither --identity nor --key
		{"keys", "--redis", "redis://127.0.0.1:1", "inspect", "--rule", "upload", "--identity", "a", "--key", "b"}, // both
		{"keys", "--redis", "http://127.0.0.1:1", "top", "--rule", "upload"},
		{"keys", "--cluster", "--redis", "127.0.0.1:1,", "top", "--rule", "upload"},
		{"keys", "--redis", "redis://127.0.0.1:1", "--format", "xml", "top", "--rule", "upload"},
		{"keys", "--redis", "redis://127.0.0.1:1", "top", "--rule", "upload", "-n", "0"},
		{"keys", "--redis", "redis://127.0.0.1:1", "top", "--rule", "upload", "--max-scan", "0"},
		{"keys", "--redis", "redis://127.0.0.1:1", "--timeout", "0s", "top", "--rule", "upload"},
		{"keys", "--redis", "redis://127.0.0.1:1", "--prefix", "a{b}:", "top", "--rule", "upload"},
		{"keys", "--redis", "redis://127.0.0.1:1"},
	} {
		out, errOut, code := rlkit(t, dir, args...)
		if code != 2 || !strings.HasPrefix(errOut, "rlkit: ") || out != "" {
			t.Errorf("rlkit %q: status %d, stdout %q, stderr %q; want 2 and an error on stderr", args, code, out, errOut)
		}
	}
	// A URL that does not parse is not repeated: it may hold a password.
	_, errOut, code := rlkit(t, dir, "keys", "--redis", "redis://u:s3cret@127.0.0.1:x", "top", "--rule", "upload")
	if code != 2 || strings.Contains(errOut, "s3cret") {
		t.Errorf("a bad URL with a password: status %d, stderr %q; want 2, no password", code, errOut)
	}
}

// staleYAML counts under the names, algorithms and periods of saved (the
// same counters) with other counts, bursts and time units: a rule file
// older or newer than the service's.
const (
	savedYAML = `rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - {name: upload, paths: ["/upload"], limit: "10/hour", burst: 12, algorithm: gcra}
    - {name: search, paths: ["/search"], limit: "1000000/hour", algorithm: token_bucket}
    - {name: slow, paths: ["/slow"], limit: "10/hour", algorithm: token_bucket}
    - {name: feed, paths: ["/feed"], limit: "10/hour", algorithm: sliding_window}
    - {name: daily, paths: ["/daily"], limit: "7/day"}
    - {name: monthly, paths: ["/monthly"], limit: ["10/month", "100/year"], window: calendar}
    - {name: export, paths: ["/export"], limit: "10/hour", concurrent: 5}
`
	staleYAML = `rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - {name: upload, paths: ["/upload"], limit: "1/hour", burst: 1, algorithm: gcra}
    - {name: search, paths: ["/search"], limit: "10/hour", algorithm: token_bucket}
    - {name: slow, paths: ["/slow"], limit: "1/hour", burst: 10, algorithm: token_bucket}
    - {name: feed, paths: ["/feed"], limit: "2/hour", algorithm: sliding_window}
    - {name: daily, paths: ["/daily"], limit: "2/day"}
    - {name: monthly, paths: ["/monthly"], limit: ["2/month", "3/year"], window: calendar}
    - {name: export, paths: ["/export"], limit: "2/hour", concurrent: 1}
`
)

// redisKeys is every key of rc (every master of a Cluster): its value
// (DUMP) and its expiry (PEXPIRETIME, an instant, which time does not
// change).
func redisKeys(t *testing.T, rc redis.UniversalClient) map[string]string {
	t.Helper()
	out := map[string]string{}
	var mu sync.Mutex
	read := func(ctx context.Context, c *redis.Client) error {
		keys, err := c.Keys(ctx, "*").Result()
		if err != nil {
			return err
		}
		for _, k := range keys {
			v, err := c.Dump(ctx, k).Result()
			if err != nil {
				return err
			}
			at, err := c.Do(ctx, "PEXPIRETIME", k).Int64()
			if err != nil {
				return err
			}
			mu.Lock()
			out[k] = fmt.Sprintf("%q expires at %d", v, at)
			mu.Unlock()
		}
		return nil
	}
	var err error
	switch c := rc.(type) {
	case *redis.ClusterClient:
		err = c.ForEachMaster(context.Background(), read)
	case *redis.Client:
		err = read(context.Background(), c)
	}
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestKeysReadOnly: inspect and top with a rule file whose terms differ
// from those the service counted under (another count, burst or time
// unit) leave every key, value and expiry, as it was, for every
// algorithm, on a server and on a Cluster; the service's counts are
// then read intact under its own file.
func TestKeysReadOnly(t *testing.T) {
	t.Parallel()
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conn, rc := b.start(t)
			lim := service(t, rc, savedYAML)
			awayFromMidnight(t)
			rules := []string{"upload", "search", "slow", "feed", "daily", "monthly", "export"} // export: 3 slots held
			count(t, lim, "/upload", "bob", "", 11)
			for _, r := range rules[1:] {
				count(t, lim, "/"+r, "bob", "", 3)
			}
			dir := files(t, "saved.yaml", savedYAML, "stale.yaml", staleYAML)
			before := redisKeys(t, rc)
			if len(before) < len(rules) {
				t.Fatalf("%d keys: %v", len(before), before)
			}
			for _, r := range rules {
				for _, cmd := range [][]string{{"inspect", "--rule", r, "--identity", "bob"}, {"top", "--rule", r}} {
					args := append(append([]string{"keys", "--config", "stale.yaml"}, conn...), cmd...)
					if _, errOut, code := rlkit(t, dir, args...); code != 0 {
						t.Fatalf("rlkit %q: status %d, %s", args, code, errOut)
					}
					after := redisKeys(t, rc)
					for k, v := range after {
						if before[k] != v {
							t.Errorf("%q wrote %s:\nbefore %s\nafter  %s", cmd, k, before[k], v)
						}
					}
					for k, v := range before {
						if _, ok := after[k]; !ok {
							t.Errorf("%q removed %s (%s)", cmd, k, v)
						}
					}
					for k, v := range after {
						if _, ok := before[k]; !ok {
							t.Errorf("%q made %s (%s)", cmd, k, v)
						}
					}
					before = after
				}
			}
			var got inspectJSON
			keysJSON(t, dir, append(conn, "--config", "saved.yaml"), &got, "inspect", "--rule", "upload", "--identity", "bob")
			if len(got.Limits) != 1 || got.Limits[0].Used != 11 {
				t.Errorf("bob's uploads under the service's file after the stale reads: %+v; want 11 used", got.Limits)
			}
		})
	}
}

// TestKeysPenalty: a key banned by its rule's penalty is shown banned by
// inspect, with the Retry-After the limiter answers it (the rest of the
// ban), and top lists it first, over, with that Retry-After, though its
// rule's own counter would admit a request; on a server and on a
// Cluster.
func TestKeysPenalty(t *testing.T) {
	t.Parallel()
	const yaml = `rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/hour"
      algorithm: gcra
      penalty: {after: 2, within: 1h, ban: 1h}
`
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conn, rc := b.start(t)
			lim := service(t, rc, yaml)
			count(t, lim, "/login", "mallory", "", 5) // 2 admitted, 2 denied (the ban), 1 banned
			count(t, lim, "/login", "alice", "", 2)   // at her limit, not banned
			dir := files(t, "rules.yaml", yaml)
			var got inspectJSON
			keysJSON(t, dir, conn, &got, "inspect", "--rule", "login", "--identity", "mallory")
			d := lim.Decide(context.Background(), "GET", "/login", "mallory", false)
			want := d.Result.RetryAfter
			retry := time.Duration(got.RetryAfterMS) * time.Millisecond
			if !d.Penalty || !got.Banned || !got.Over || got.Remaining != 0 || retry < want || retry > want+time.Second || retry < 59*time.Minute || retry > time.Hour ||
				got.BanEndsMS != got.RetryAfterMS {
				t.Errorf("inspect a banned key: %+v; want banned, over, Retry-After %v (the limiter's, penalty %v)", got, want, d.Penalty)
			}
			var top topJSON
			keysJSON(t, dir, conn, &top, "top", "--rule", "login")
			if len(top.Keys) != 2 || top.Keys[0].Key != "mallory" || !top.Keys[0].Banned || !top.Keys[0].Over || top.Keys[0].RetryAfterMS > got.RetryAfterMS || top.Keys[0].RetryAfterMS < got.RetryAfterMS-1000 ||
				top.Keys[1].Key != "alice" || top.Keys[1].Banned || !top.Keys[1].Over || top.Found != 2 {
				t.Errorf("top of a rule with a banned key: %+v; want mallory banned first, then alice", top)
			}
			// As text.
			out, _, code := rlkit(t, dir, append(append([]string{"keys", "--config", "rules.yaml"}, conn...), "inspect", "--rule", "login", "--identity", "mallory")...)
			if last := lastLine(out); code != 0 || !regexp.MustCompile(`^banned by the rule's penalty for (59m\d+s|1h) more: the next request is refused, Retry-After (59m\d+s|1h)$`).MatchString(last) {
				t.Errorf("inspect a banned key as text: status %d, last line %q", code, last)
			}
			out, _, _ = rlkit(t, dir, append(append([]string{"keys", "--config", "rules.yaml"}, conn...), "top", "--rule", "login")...)
			if !regexp.MustCompile(`(?m)^KEY .*\nmallory +banned +0 +2/hour +2 +\S+ +(59m\d+s|1h) *\nalice +yes +0 `).MatchString(out) {
				t.Errorf("top as text:\n%s", out)
			}
		})
	}
}

// serve sends n requests to path through the nethttp middleware over lim,
// from remoteAddr, with the header X-Api-Key: apiKey when apiKey is not
// empty, counting callers by that header (nethttp.HeaderKey), as a
// service does.
func serve(t *testing.T, lim *core.Limiter, path, remoteAddr, apiKey string, n int) {
	t.Helper()
	h := nethttp.New(lim, nethttp.WithKeyFunc(nethttp.HeaderKey("X-Api-Key")))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	for range n {
		req := httptest.NewRequest("GET", path, nil)
		req.RemoteAddr = remoteAddr
		if apiKey != "" {
			req.Header.Set("X-Api-Key", apiKey)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			t.Fatalf("GET %s: %d", path, rec.Code)
		}
	}
}

// TestKeysServiceIdentity: --identity names what a service behind the
// nethttp middleware counts: with --header, an API key read by HeaderKey
// (hashed under the service's identity key, under a rule keyed by user
// or by that header); under a rule keyed by ip, an IPv6 client's
// network, /64 unless --ipv6-prefix-len says otherwise.
func TestKeysServiceIdentity(t *testing.T) {
	t.Parallel()
	const yaml = `rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - {name: api, paths: ["/api"], limit: "10/hour", algorithm: gcra}
    - {name: export, paths: ["/export"], limit: "10/hour", algorithm: gcra, key: "header:X-Api-Key"}
    - {name: login, paths: ["/login"], limit: "10/hour", algorithm: gcra, key: ip}
`
	srv := redistest.StartServer(t)
	lim := service(t, srv.Client(t), yaml, core.WithIdentityKey([]byte("service secret")))
	serve(t, lim, "/api", "192.0.2.9:1234", "sk_live_1", 3)
	serve(t, lim, "/export", "192.0.2.9:1234", "sk_live_1", 4)
	serve(t, lim, "/login", "[2001:db8::1]:1234", "", 2)
	serve(t, lim, "/login", "[2001:db8::2]:1234", "", 3) // the same /64
	dir := files(t, "rules.yaml", yaml)
	inspect := func(args ...string) (inspectJSON, string, int) {
		t.Helper()
		all := append([]string{"keys", "--redis", srv.Addr(), "--config", "rules.yaml", "--format", "json", "--identity-key-env", "SERVICE_IDENTITY_KEY", "inspect"}, args...)
		cmd := exec.Command(binary, all...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "SERVICE_IDENTITY_KEY=service secret")
		var o, e strings.Builder
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var got inspectJSON
		if err == nil {
			if err := json.Unmarshal([]byte(o.String()), &got); err != nil {
				t.Fatal(err)
			}
		}
		return got, e.String(), cmd.ProcessState.ExitCode()
	}
	for _, c := range []struct {
		args []string
		key  string
		used int64
	}{
		{[]string{"--rule", "api", "--identity", "sk_live_1", "--header", "X-Api-Key"}, "X-Api-Key:hmac:", 3},
		{[]string{"--rule", "api", "--identity", "sk_live_1", "--header", "x-api-key"}, "X-Api-Key:hmac:", 3},
		{[]string{"--rule", "export", "--identity", "sk_live_1", "--header", "X-Api-Key"}, "h:X-Api-Key:hmac:", 4},
		{[]string{"--rule", "export", "--identity", "sk_live_1"}, "h:X-Api-Key:hmac:", 4},
		{[]string{"--rule", "login", "--identity", "2001:db8::1"}, "ip:2001:db8::", 5},
		{[]string{"--rule", "login", "--identity", "2001:db8::2"}, "ip:2001:db8::", 5},
	} {
		got, errOut, code := inspect(c.args...)
		if code != 0 || !strings.HasPrefix(got.Key, c.key) || len(got.Limits) != 1 || got.Limits[0].Used != c.used {
			t.Errorf("inspect %q: status %d, %s, %+v; want key %s…, %d used", c.args, code, errOut, got, c.key, c.used)
		}
	}
	// Another grouping than the service's names another key.
	if got, _, _ := inspect("--rule", "login", "--identity", "2001:db8::1"); got.Key != "ip:2001:db8::" {
		t.Errorf("the IPv6 client's key: %q", got.Key)
	}
	var whole inspectJSON
	keysJSON(t, dir, []string{"--redis", srv.Addr(), "--ipv6-prefix-len", "128"}, &whole, "inspect", "--rule", "login", "--identity", "2001:db8::1")
	if whole.Key != "ip:2001:db8::1" || whole.Limits[0].Used != 0 {
		t.Errorf("--ipv6-prefix-len 128: %+v; want the whole address, nothing used", whole)
	}
	// A header the rule does not count per, and --header without --identity.
	if _, errOut, code := inspect("--rule", "login", "--identity", "sk_live_1", "--header", "X-Api-Key"); code != 1 || errOut != `rlkit: --header X-Api-Key: rule "login" counts per ip, not per the header's value`+"\n" {
		t.Errorf("--header under a rule keyed by ip: status %d, stderr %q", code, errOut)
	}
	if _, errOut, code := inspect("--rule", "export", "--identity", "sk_live_1", "--header", "X-Other"); code != 1 || !strings.Contains(errOut, "counts per header:X-Api-Key") {
		t.Errorf("--header of another header: status %d, stderr %q", code, errOut)
	}
	if _, errOut, code := inspect("--rule", "api", "--key", "alice", "--header", "X-Api-Key"); code != 2 || !strings.Contains(errOut, "--header names the header whose value --identity is") {
		t.Errorf("--header with --key: status %d, stderr %q", code, errOut)
	}
}

// TestKeysDigest: a key longer than 128 bytes once escaped, which top
// prints as its digest, {#...}, is read and reset again by that digest
// given to --key, under the rule and its penalty.
func TestKeysDigest(t *testing.T) {
	t.Parallel()
	const yaml = `rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - {name: upload, paths: ["/upload"], limit: "10/hour", algorithm: gcra, concurrent: 10, penalty: {after: 5, within: 1h, ban: 1h}}
`
	srv := redistest.StartServer(t)
	lim := service(t, srv.Client(t), yaml)
	long := strings.Repeat("é", 40)
	count(t, lim, "/upload", long, "", 4)
	dir := files(t, "rules.yaml", yaml)
	conn := []string{"--redis", srv.Addr()}
	var top topJSON
	keysJSON(t, dir, conn, &top, "top", "--rule", "upload")
	if len(top.Keys) != 1 || top.Keys[0].Key != "" || !strings.HasPrefix(top.Keys[0].Tag, "#") {
		t.Fatalf("top: %+v; want one digest", top.Keys)
	}
	digest := "{" + top.Keys[0].Tag + "}"
	out, _, _ := rlkit(t, dir, "keys", "--redis", srv.Addr(), "--config", "rules.yaml", "top", "--rule", "upload")
	if !strings.HasPrefix(out, "KEY ") || !strings.Contains(out, "\n"+digest+" ") {
		t.Fatalf("top as text does not print %s:\n%s", digest, out)
	}
	var got inspectJSON
	keysJSON(t, dir, conn, &got, "inspect", "--rule", "upload", "--key", digest)
	if got.Key != "" || got.Tag != top.Keys[0].Tag || len(got.Limits) != 1 || got.Limits[0].Used != 4 || got.InFlight == nil || *got.InFlight != 4 {
		t.Errorf("inspect --key %s: %+v; want 4 used, 4 in flight", digest, got)
	}
	out, errOut, code := rlkit(t, dir, "keys", "--redis", srv.Addr(), "--config", "rules.yaml", "inspect", "--rule", "upload", "--key", digest)
	if code != 0 || !strings.HasPrefix(out, "rule upload, key "+digest+"\n") {
		t.Errorf("inspect --key %s as text: status %d, %q, %s", digest, code, out, errOut)
	}
	out, errOut, code = rlkit(t, dir, "keys", "--redis", srv.Addr(), "--config", "rules.yaml", "reset", "--rule", "upload", "--key", digest)
	if code != 0 || out != "rule upload, key "+digest+": cleared\n" {
		t.Errorf("reset --key %s: status %d, %q, %s", digest, code, out, errOut)
	}
	if d := lim.Decide(context.Background(), "GET", "/upload", long, false); !d.Allowed || d.Result.Remaining != 9 {
		t.Errorf("the key after its reset by digest: %+v; want admitted, 9 left", d.Result)
	}
	// A digest that is not one.
	if _, errOut, code := rlkit(t, dir, "keys", "--redis", srv.Addr(), "--config", "rules.yaml", "inspect", "--rule", "upload", "--key", "{#nope}"); code != 1 || !strings.Contains(errOut, "is not a key's hash tag") {
		t.Errorf("inspect --key {#nope}: status %d, stderr %q", code, errOut)
	}
}

// TestKeysClusterNode: a node of a Redis Cluster named without --cluster
// is refused, naming the flag, before any command runs; with --cluster, a
// user and password are accepted in each address, and never printed.
func TestKeysClusterNode(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t)
	dir := files(t, "rules.yaml", keysYAML)
	addr := c.Addrs()[0]
	for _, cmd := range [][]string{{"top", "--rule", "upload"}, {"inspect", "--rule", "upload", "--identity", "alice"}, {"reset", "--rule", "upload", "--identity", "alice"}} {
		out, errOut, code := rlkit(t, dir, append([]string{"keys", "--config", "rules.yaml", "--redis", addr}, cmd...)...)
		if code != 1 || out != "" || errOut != "rlkit: redis "+addr+" is a node of a Redis Cluster: add --cluster\n" {
			t.Errorf("%q on a Cluster node without --cluster: status %d, stdout %q, stderr %q", cmd, code, out, errOut)
		}
	}
	// A user of the cluster's nodes.
	ctx := context.Background()
	for _, n := range c.Nodes() {
		if err := n.Client(t).Do(ctx, "ACL", "SETUSER", "ops", "on", ">s3cr3t", "~*", "&*", "+@all").Err(); err != nil {
			t.Fatal(err)
		}
	}
	seeds := "ops:s3cr3t@" + strings.Join(c.Addrs(), ",ops:s3cr3t@")
	var top topJSON
	keysJSON(t, dir, []string{"--cluster", "--redis", seeds}, &top, "top", "--rule", "upload")
	if !top.Complete {
		t.Errorf("top as ops: %+v", top)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	refused := ln.Addr().String()
	ln.Close()
	for _, redisArg := range []string{"ops:wr0ng@" + addr, "ops:s3cr3t@" + refused, "ops:s3cr3t@" + addr + ",other:s3cr3t@" + refused, "ops:s3cr3t@127.0.0.1:x"} {
		out, errOut, code := rlkit(t, dir, "keys", "--config", "rules.yaml", "--cluster", "--redis", redisArg, "top", "--rule", "upload")
		if code == 0 || out != "" || strings.Contains(errOut, "s3cr3t") || strings.Contains(errOut, "wr0ng") || !strings.HasPrefix(errOut, "rlkit: ") {
			t.Errorf("--cluster --redis %s: status %d, stdout %q, stderr %q; want a failure that shows no password", redisArg, code, out, errOut)
		}
	}
}

// TestKeysTopTies: keys over the limit in one fixed window, whose
// Retry-After differs by the microseconds between their reads, are
// listed by key among those whose Retry-After is the same in whole
// seconds, as RETRY AFTER shows it and the service answers it; on a
// server and on a Cluster.
func TestKeysTopTies(t *testing.T) {
	t.Parallel()
	const yaml = `rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - {name: daily, paths: ["/daily"], limit: "2/day"}
`
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			conn, rc := b.start(t)
			lim := service(t, rc, yaml)
			awayFromMidnight(t)
			var names []string
			for i := range 16 {
				names = append(names, fmt.Sprintf("k%02d", i))
			}
			for _, n := range names {
				count(t, lim, "/daily", n, "", 3) // over, until midnight
			}
			dir := files(t, "rules.yaml", yaml)
			var top topJSON
			keysJSON(t, dir, conn, &top, "top", "--rule", "daily", "-n", "16")
			var got []string
			for _, k := range top.Keys {
				got = append(got, k.Key)
				if !k.Over || k.Remaining != 0 {
					t.Errorf("%s: %+v; want over, none remaining", k.Key, k)
				}
			}
			// The keys by key, but where a second ticked over between two
			// reads: the key read first then shows one second more.
			want := slices.Clone(top.Keys)
			slices.SortStableFunc(want, func(a, b keyJSON) int {
				return cmp.Or(cmp.Compare((b.RetryAfterMS+999)/1000, (a.RetryAfterMS+999)/1000), cmp.Compare(a.Key, b.Key))
			})
			var wantKeys []string
			for _, k := range want {
				wantKeys = append(wantKeys, k.Key)
			}
			if !slices.Equal(got, wantKeys) || len(got) != len(names) {
				t.Errorf("top daily: %v; want %v (Retry-After in seconds, longest first, then by key)", got, wantKeys)
			}
		})
	}
}

// TestKeysIdentityUsage: an --identity that names no key the service
// counts under is a bad command line (status 2), said before any call
// to Redis, naming the value and what is wanted: empty under any rule;
// under a rule keyed by ip, anything but an IP address (alone, or with a
// port, as a RemoteAddr holds it).
func TestKeysIdentityUsage(t *testing.T) {
	const yaml = `rate_limit:
  enabled: true
  default: "1000/day"
  rules:
    - {name: api, paths: ["/api"], limit: "10/hour"}
    - {name: login, paths: ["/login"], limit: "10/hour", key: ip}
    - {name: kb, paths: ["/kb/:kb"], limit: "10/hour", key: "param:kb"}
    - {name: tenant, paths: ["/t"], limit: "10/hour", key: "header:X-Tenant"}
`
	dir := files(t, "rules.yaml", yaml)
	conn := []string{"keys", "--redis", "redis://127.0.0.1:1", "--config", "rules.yaml"}
	const ip = `want an IP address (203.0.113.7, 2001:db8::1), alone or with a port`
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"inspect", "--rule", "login", "--identity", "not-an-ip"}, `rlkit: keys inspect: --identity "not-an-ip": rule "login" counts per client IP (key: ip): ` + ip + "\n"},
		{[]string{"reset", "--rule", "login", "--identity", "192.0.2.300"}, `rlkit: keys reset: --identity "192.0.2.300": rule "login" counts per client IP (key: ip): ` + ip + "\n"},
		{[]string{"inspect", "--rule", "login", "--identity", "192.0.2.1:x"}, `rlkit: keys inspect: --identity "192.0.2.1:x": rule "login" counts per client IP (key: ip): ` + ip + "\n"},
		{[]string{"inspect", "--rule", "default", "--identity", "alice"}, ""}, // the default is per user: any identity
	} {
		out, errOut, code := rlkit(t, dir, append(conn, c.args...)...)
		if c.want == "" {
			if code != 1 || !strings.HasPrefix(errOut, "rlkit: redis 127.0.0.1:1: ") {
				t.Errorf("keys %q: status %d, stderr %q; want 1 and Redis refusing", c.args, code, errOut)
			}
			continue
		}
		if code != 2 || out != "" || errOut != c.want {
			t.Errorf("keys %q: status %d, stdout %q, stderr %q; want 2 and %q", c.args, code, out, errOut, c.want)
		}
	}
	// Empty, under any rule.
	for _, rule := range []string{"api", "login", "kb", "tenant"} {
		for _, cmd := range []string{"inspect", "reset"} {
			args := append(slices.Clone(conn), cmd, "--rule", rule, "--identity", "")
			want := `rlkit: keys ` + cmd + `: --identity "": empty; want the caller as the service's key function names it (alice, sub:alice, a client IP), or --key (the store key as it is)`
			if out, errOut, code := rlkit(t, dir, args...); code != 2 || out != "" || !strings.HasPrefix(errOut, want) {
				t.Errorf("keys %q: status %d, stdout %q, stderr %q; want 2 and %q", args, code, out, errOut, want)
			}
		}
	}
	// Addresses the service counts: alone, with a port, IPv6, mapped.
	srv := redistest.StartServer(t)
	for _, c := range []struct{ identity, key string }{
		{"192.0.2.1", "ip:192.0.2.1"},
		{"192.0.2.1:4711", "ip:192.0.2.1"},
		{"[2001:db8::1]:4711", "ip:2001:db8::"},
		{"[2001:db8::1]", "ip:2001:db8::"}, // bracketed, as a log may write it
		{"::ffff:192.0.2.1", "ip:192.0.2.1"},
	} {
		var got inspectJSON
		keysJSON(t, dir, []string{"--redis", srv.Addr()}, &got, "inspect", "--rule", "login", "--identity", c.identity)
		if got.Key != c.key {
			t.Errorf("inspect --identity %s: key %q, want %q", c.identity, got.Key, c.key)
		}
	}
}
