package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
)

// keysCmd is `rlkit keys`: the counters a service keeps in Redis, read,
// listed or cleared as the service's own limiter would.
type keysCmd struct {
	Redis          string        `required:"" placeholder:"URL" help:"Redis to read: redis://[user:password@]host:port[/db], rediss:// (TLS), unix:///path/to.sock or host:port; with --cluster, host:port[,host:port...] or a redis:// URL of seed nodes."`
	Cluster        bool          `help:"--redis names a Redis Cluster."`
	Config         string        `default:"ratelimit.yaml" help:"The service's rule file."`
	Prefix         string        `default:"rl:" help:"The key prefix of the service's store (redisstore.WithPrefix)."`
	IncrExpireKeys bool          `help:"The service's store uses the INCR+EXPIRE layout (redisstore.WithIncrExpireKeys)."`
	IdentityKeyEnv string        `placeholder:"VAR" help:"Environment variable holding the service's identity key (core.WithIdentityKey), to hash secret identities as it does."`
	Timeout        time.Duration `default:"5s" help:"Bound on the dial and on each call to Redis."`
	Format         string        `enum:"text,json" default:"text" help:"Output format: text or json."`

	Inspect keysInspectCmd `cmd:"" help:"Show one key's counters under a rule: used, remaining, reset, Retry-After."`
	Reset   keysResetCmd   `cmd:"" help:"Clear one key's counters under a rule, as Limiter.ResetKey does."`
	Top     keysTopCmd     `cmd:"" help:"List the keys nearest or over a rule's limit, found by SCAN within a bound."`

	opts *redis.Options        // standalone, from Redis
	copt *redis.ClusterOptions // with --cluster
}

// target is the key a command reads: one of --identity and --key.
type target struct {
	Rule     string `required:"" help:"The rule's name (default for the default limit)."`
	Identity string `xor:"target" required:"" help:"The caller, as the service's key function names it (alice, sub:alice, a client IP): derived into the store key as the service derives it."`
	Key      string `xor:"target" required:"" help:"The store key as it is (Decision.Key, Event.Key, a log line's key, or KEY of rlkit keys top)."`
}

type keysInspectCmd struct {
	target
	Plan string `help:"Read the counters of the rule under this plan (tiers)."`
}

type keysResetCmd struct {
	target
}

type keysTopCmd struct {
	Rule    string `required:"" help:"The rule's name (default for the default limit)."`
	Plan    string `help:"List the counters of the rule under this plan (tiers)."`
	Count   int    `short:"n" default:"10" help:"How many keys to list."`
	MaxScan int64  `default:"100000" placeholder:"M" help:"Stop after SCAN has examined about this many keys (all rules' keys count)."`
}

// Validate checks --redis and the bounds before anything runs: a bad
// command line exits 2.
func (k *keysCmd) Validate() error {
	var err error
	switch {
	case k.Timeout <= 0:
		return fmt.Errorf("--timeout %v: want a positive duration", k.Timeout)
	case strings.ContainsAny(k.Prefix, "{}"):
		return fmt.Errorf("--prefix %q: a store's prefix has no '{' or '}'", k.Prefix)
	case k.Cluster && strings.Contains(k.Redis, "://"):
		k.copt, err = redis.ParseClusterURL(k.Redis)
	case k.Cluster:
		k.copt = &redis.ClusterOptions{}
		for a := range strings.SplitSeq(k.Redis, ",") {
			if a = strings.TrimSpace(a); a == "" || !strings.Contains(a, ":") {
				return errors.New("--redis: with --cluster, want host:port[,host:port...] or a redis:// URL")
			}
			k.copt.Addrs = append(k.copt.Addrs, a)
		}
	case !strings.Contains(k.Redis, "://"):
		k.opts, err = redis.ParseURL("redis://" + k.Redis) // host:port, as redis-cli -h -p
	default:
		k.opts, err = redis.ParseURL(k.Redis)
	}
	if err != nil {
		// Not the value: a URL may hold a password.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Errorf("--redis: %v", err)
	}
	return nil
}

// Validate rejects a bound below one.
func (c *keysTopCmd) Validate() error {
	switch {
	case c.Count < 1:
		return fmt.Errorf("-n %d: want at least 1", c.Count)
	case c.MaxScan < 1:
		return fmt.Errorf("--max-scan %d: want at least 1", c.MaxScan)
	}
	return nil
}

// conn is what a keys command works with: the rule file, a limiter over
// the Redis store, and the store.
type conn struct {
	cfg   *core.Config
	lim   *core.Limiter
	store *redisstore.Store
	addr  string
	close func()
}

// open loads the rule file, finds the rule named name (under plan, when
// given) and connects to Redis, which must answer PING within the
// timeout.
func (k *keysCmd) open(ctx context.Context, name, plan string) (*conn, *core.Rule, error) {
	cfg, err := core.LoadConfig(k.Config)
	if err != nil {
		return nil, nil, err
	}
	r, err := findRule(cfg, k.Config, name, plan)
	if err != nil {
		return nil, nil, err
	}
	c, err := k.connect(ctx, cfg)
	return c, r, err
}

// connect connects to Redis, which must answer PING within the timeout,
// and returns a limiter of cfg over the store there.
func (k *keysCmd) connect(ctx context.Context, cfg *core.Config) (*conn, error) {
	opts := []core.Option{}
	if k.IdentityKeyEnv != "" {
		v := os.Getenv(k.IdentityKeyEnv)
		if v == "" {
			return nil, fmt.Errorf("--identity-key-env %s: the variable is empty or not set", k.IdentityKeyEnv)
		}
		opts = append(opts, core.WithIdentityKey([]byte(v)))
	}
	redis.SetLogger(quiet{}) // the command says what failed, once
	var rc redis.UniversalClient
	var addr string
	if k.copt != nil {
		o := k.copt
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = k.Timeout, k.Timeout, k.Timeout
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries, o.PoolSize = true, -1, 1, 4
		addr = strings.Join(o.Addrs, ",")
		rc = redis.NewClusterClient(o)
	} else {
		o := k.opts
		o.DialTimeout, o.ReadTimeout, o.WriteTimeout = k.Timeout, k.Timeout, k.Timeout
		o.ContextTimeoutEnabled, o.MaxRetries, o.DialerRetries, o.PoolSize = true, -1, 1, 4
		addr = o.Addr
		rc = redis.NewClient(o)
	}
	pctx, cancel := context.WithTimeout(ctx, k.Timeout)
	defer cancel()
	if err := rc.Ping(pctx).Err(); err != nil {
		_ = rc.Close()
		var ne net.Error
		if errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout() {
			err = fmt.Errorf("no answer within %v (--timeout)", k.Timeout)
		}
		return nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	rs, err := redisstore.New(rc,
		redisstore.WithPrefix(k.Prefix),
		redisstore.WithTimeout(k.Timeout),
		redisstore.WithIncrExpireKeys(k.IncrExpireKeys),
		redisstore.WithDenyCache(false), // answer from Redis, always
		redisstore.WithBreaker(0, 0),
		redisstore.WithBatch(0),
		redisstore.WithLogger(slog.New(slog.DiscardHandler)),
	)
	if err != nil {
		_ = rc.Close()
		return nil, err
	}
	lim := core.NewLimiter(cfg, append(opts, core.WithStore(rs))...)
	return &conn{cfg: cfg, lim: lim, store: rs, addr: addr, close: func() { _ = rs.Close(); _ = rc.Close() }}, nil
}

// quiet is a go-redis logger that writes nothing.
type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// findRule returns the rule named name of cfg, read from file, under plan
// when one is given.
func findRule(cfg *core.Config, file, name, plan string) (*core.Rule, error) {
	r := cfg.Rule(name)
	if r == nil {
		names := []string{}
		if d := cfg.Default(); d != nil {
			names = append(names, d.Name)
		}
		for _, r := range cfg.Rules() {
			names = append(names, r.Name)
		}
		return nil, fmt.Errorf("rule %q is not in %s; its rules: %s", name, file, strings.Join(names, ", "))
	}
	if plan == "" {
		return r, nil
	}
	if v := cfg.PlanRule(plan, name); v != nil {
		return v, nil
	}
	plans := cfg.Plans()
	if len(plans) == 0 {
		return nil, fmt.Errorf("plan %q: %s has no plans", plan, file)
	}
	return nil, fmt.Errorf("plan %q is not in %s; its plans: %s", plan, file, strings.Join(plans, ", "))
}

// key returns the store key t names under rule r.
func (c *conn) key(t *target, r *core.Rule) (string, error) {
	if t.Key != "" {
		return t.Key, nil
	}
	if strings.Contains(r.Key(), "+") {
		return "", fmt.Errorf("rule %q counts per %s, a key of several parts: name it with --key (Decision.Key, Event.Key, a log line's key, or rlkit keys top)", r.Name, r.Key())
	}
	return c.lim.RuleKey(t.Identity, r.Name)
}

// limitJSON is one limit's counter of a key.
type limitJSON struct {
	Limit        string `json:"limit"`
	Count        int64  `json:"count"`
	PeriodMS     int64  `json:"period_ms"`
	Burst        int64  `json:"burst"`
	Capacity     int64  `json:"capacity"`
	Used         int64  `json:"used"`
	Remaining    int64  `json:"remaining"`
	ResetAfterMS int64  `json:"reset_after_ms"`
	RetryAfterMS int64  `json:"retry_after_ms"`
	Over         bool   `json:"over"`
}

// keyJSON is one key's counters under a rule.
type keyJSON struct {
	Key          string      `json:"key"`
	Tag          string      `json:"tag"`
	Over         bool        `json:"over"`
	Remaining    int64       `json:"remaining"`
	RetryAfterMS int64       `json:"retry_after_ms"`
	Limits       []limitJSON `json:"limits"`
}

// inspectJSON is what `keys inspect` prints as JSON.
type inspectJSON struct {
	Rule       string `json:"rule"`
	Plan       string `json:"plan,omitempty"`
	Algorithm  string `json:"algorithm"`
	keyJSON           // key, tag, over, remaining, retry_after_ms, limits
	Concurrent int64  `json:"concurrent,omitempty"`
	InFlight   *int64 `json:"in_flight,omitempty"`
}

// Run prints the counters of one key under the rule.
func (c *keysInspectCmd) Run(e *env, k *keysCmd) error {
	ctx := context.Background()
	cn, r, err := k.open(ctx, c.Rule, c.Plan)
	if err != nil {
		return err
	}
	defer cn.close()
	key, err := cn.key(&c.target, r)
	if err != nil {
		return err
	}
	out := inspectJSON{Rule: r.Name, Plan: c.Plan, Algorithm: r.Policy.Algorithm.String(), keyJSON: keyJSON{Key: key, Limits: []limitJSON{}}}
	if len(r.Policy.Limits) > 0 {
		states, err := cn.store.Inspect(ctx, r.Policy, key)
		if err != nil {
			return fmt.Errorf("redis %s: %w", cn.addr, err)
		}
		out.keyJSON = toJSON(r, &states[0])
	} else {
		out.Algorithm = ""
	}
	if n := r.Concurrent(); n > 0 {
		// The slots are the base rule's, under every plan.
		held, err := cn.store.InFlight(ctx, key, cn.cfg.Rule(c.Rule).Name)
		if err != nil {
			return fmt.Errorf("redis %s: %w", cn.addr, err)
		}
		out.Concurrent, out.InFlight = n, &held
	}
	if k.Format == "json" {
		return printJSON(e.stdout, out)
	}
	return out.text(e.stdout)
}

func (o *inspectJSON) text(w io.Writer) error {
	head := "rule " + o.Rule
	if o.Plan != "" {
		head += " (plan " + o.Plan + ")"
	}
	fmt.Fprintf(w, "%s, key %s\n", head, show(o.Key))
	if len(o.Limits) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LIMIT\tALGORITHM\tBURST\tUSED\tREMAINING\tRESETS IN\tRETRY AFTER")
		for _, l := range o.Limits {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", l.Limit, o.Algorithm, dash(l.Burst), l.Used, l.Remaining, ms(l.ResetAfterMS), ms(l.RetryAfterMS))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		if o.Over {
			fmt.Fprintf(w, "over the limit: the next request is refused, Retry-After %s\n", ms(o.RetryAfterMS))
		}
	}
	if o.InFlight != nil {
		fmt.Fprintf(w, "in flight: %d of %d\n", *o.InFlight, o.Concurrent)
	}
	return nil
}

// resetJSON is what `keys reset` prints as JSON.
type resetJSON struct {
	Rule    string `json:"rule"`
	Key     string `json:"key"`
	Cleared bool   `json:"cleared"`
}

// Run clears the key's counters under the rule, under every plan, and
// lifts its penalty, as Limiter.ResetKey does.
func (c *keysResetCmd) Run(e *env, k *keysCmd) error {
	ctx := context.Background()
	cn, r, err := k.open(ctx, c.Rule, "")
	if err != nil {
		return err
	}
	defer cn.close()
	key, err := cn.key(&c.target, r)
	if err != nil {
		return err
	}
	cleared, err := cn.lim.ResetKey(ctx, key, r.Name)
	if err != nil {
		return fmt.Errorf("redis %s: %w", cn.addr, err)
	}
	if k.Format == "json" {
		return printJSON(e.stdout, resetJSON{Rule: r.Name, Key: key, Cleared: cleared})
	}
	if cleared {
		_, err = fmt.Fprintf(e.stdout, "rule %s, key %s: cleared\n", r.Name, show(key))
	} else {
		_, err = fmt.Fprintf(e.stdout, "rule %s, key %s: nothing to clear (no live counter)\n", r.Name, show(key))
	}
	return err
}

// topJSON is what `keys top` prints as JSON.
type topJSON struct {
	Rule      string    `json:"rule"`
	Plan      string    `json:"plan,omitempty"`
	Algorithm string    `json:"algorithm"`
	Pattern   string    `json:"pattern"`
	Scanned   int64     `json:"scanned"`
	Complete  bool      `json:"complete"`
	MaxScan   int64     `json:"max_scan"`
	Found     int       `json:"found"`
	Keys      []keyJSON `json:"keys"`
}

// Run lists the keys nearest or over the rule's limit.
func (c *keysTopCmd) Run(e *env, k *keysCmd) error {
	ctx := context.Background()
	cn, r, err := k.open(ctx, c.Rule, c.Plan)
	if err != nil {
		return err
	}
	defer cn.close()
	if len(r.Policy.Limits) == 0 {
		return fmt.Errorf("rule %q has no limit, only concurrent: it keeps no counter to list (inspect a key for its requests in flight)", r.Name)
	}
	var keys []redisstore.KeyState
	found := 0
	res, err := cn.store.Scan(ctx, r.Policy, c.MaxScan, func(states []redisstore.KeyState) error {
		found += len(states)
		keys = append(keys, states...)
		if len(keys) > 4*c.Count+1024 {
			keys = nearest(keys, c.Count)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis %s: %w", cn.addr, err)
	}
	keys = nearest(keys, c.Count)
	out := topJSON{Rule: r.Name, Plan: c.Plan, Algorithm: r.Policy.Algorithm.String(), Pattern: res.Pattern,
		Scanned: res.Examined, Complete: res.Complete, MaxScan: c.MaxScan, Found: found, Keys: []keyJSON{}}
	for i := range keys {
		out.Keys = append(out.Keys, toJSON(r, &keys[i]))
	}
	if k.Format == "json" {
		return printJSON(e.stdout, out)
	}
	return out.text(e.stdout)
}

// nearest sorts keys nearest their limit first and keeps n: by fewest
// remaining (a key over a limit has none left), then by longest
// Retry-After (the keys over a limit first, the longest wait first), then
// by key.
func nearest(keys []redisstore.KeyState, n int) []redisstore.KeyState {
	slices.SortFunc(keys, func(a, b redisstore.KeyState) int {
		return cmp.Or(
			cmp.Compare(a.Remaining(), b.Remaining()),
			cmp.Compare(b.RetryAfter, a.RetryAfter),
			cmp.Compare(a.Key, b.Key),
			cmp.Compare(a.Tag, b.Tag))
	})
	return keys[:min(n, len(keys))]
}

func (o *topJSON) text(w io.Writer) error {
	if len(o.Keys) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "KEY\tOVER\tREMAINING\tLIMIT\tUSED\tRESETS IN\tRETRY AFTER")
		for _, k := range o.Keys {
			l := tightest(k)
			key := show(k.Key)
			if k.Key == "" && strings.HasPrefix(k.Tag, "#") {
				key = "{" + k.Tag + "}" // a digest: no key to show
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", key, yes(k.Over), k.Remaining, l.Limit, l.Used, ms(l.ResetAfterMS), ms(k.RetryAfterMS))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
	}
	rule := o.Rule
	if o.Plan != "" {
		rule += " (plan " + o.Plan + ")"
	}
	var err error
	if o.Complete {
		_, err = fmt.Fprintf(w, "scanned all %d keys (MATCH %s): %d keys of rule %s\n", o.Scanned, o.Pattern, o.Found, rule)
	} else {
		_, err = fmt.Fprintf(w, "scanned %d keys, stopped at the bound (--max-scan %d): %d keys of rule %s found; there may be more\n", o.Scanned, o.MaxScan, o.Found, rule)
	}
	return err
}

// tightest is the limit a key is nearest: the one whose wait is longest
// when the key is over, else the one with the fewest remaining.
func tightest(k keyJSON) limitJSON {
	best := k.Limits[0]
	for _, l := range k.Limits[1:] {
		if k.Over && l.RetryAfterMS > best.RetryAfterMS || !k.Over && l.Remaining < best.Remaining {
			best = l
		}
	}
	return best
}

// toJSON is the state of one key under rule r.
func toJSON(r *core.Rule, ks *redisstore.KeyState) keyJSON {
	out := keyJSON{Key: ks.Key, Tag: ks.Tag, Over: ks.Over(), Remaining: ks.Remaining(), RetryAfterMS: millis(ks.RetryAfter)}
	for _, c := range ks.Limits {
		l := c.Limit
		capacity := l.Capacity(r.Policy.Algorithm)
		burst := int64(0)
		if r.Policy.Algorithm == algo.TokenBucket || r.Policy.Algorithm == algo.GCRA {
			burst = l.Burst
		}
		bare := l
		bare.Burst = 0 // a column of its own
		out.Limits = append(out.Limits, limitJSON{
			Limit: bare.String(), Count: l.Count, PeriodMS: millis(l.Period), Burst: burst, Capacity: capacity,
			Used: max(capacity-c.Remaining, 0), Remaining: c.Remaining,
			ResetAfterMS: millis(c.ResetAfter), RetryAfterMS: millis(c.RetryAfter), Over: c.RetryAfter > 0,
		})
	}
	return out
}

// millis is d in milliseconds, rounded up.
func millis(d time.Duration) int64 {
	return int64((d + time.Millisecond - 1) / time.Millisecond)
}

// ms writes a duration of n milliseconds in whole seconds, rounded up as
// Retry-After is ("6m", "1h2m3s"); "-" for none.
func ms(n int64) string {
	if n <= 0 {
		return "-"
	}
	s := (n + 999) / 1000
	var b strings.Builder
	for _, u := range []struct {
		secs int64
		unit string
	}{{3600, "h"}, {60, "m"}, {1, "s"}} {
		if q := s / u.secs; q > 0 {
			b.WriteString(strconv.FormatInt(q, 10) + u.unit)
			s -= q * u.secs
		}
	}
	return b.String()
}

func dash(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func yes(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// show is key as the output writes it: as it is when it is printable and
// has no space, else quoted.
func show(key string) string {
	if key != "" && !strings.ContainsFunc(key, func(r rune) bool { return r <= ' ' || r == '"' || !strconv.IsPrint(r) }) {
		return key
	}
	return strconv.Quote(key)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
