package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/alecthomas/kong"
	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/cmd/rlkit/internal/termtext"
	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/adapter"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
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
	IPv6PrefixLen  int           `name:"ipv6-prefix-len" default:"64" placeholder:"BITS" help:"The service's clientip.Config.IPv6PrefixLen: under a rule keyed by ip, an IPv6 --identity counts under its network of this many bits, as the service groups client IPs."`
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
	Identity string `xor:"target" help:"The caller, as the service's key function names it (alice, sub:alice, a client IP; with --header, the header's value): derived into the store key as the service derives it."`
	Header   string `placeholder:"NAME" help:"The service counts callers by this header (HeaderKey: an API key): --identity is its value, hashed as the service hashes it (give --identity-key-env)."`
	Key      string `xor:"target" help:"The store key as it is (Decision.Key, Event.Key, a log line's key, or KEY of rlkit keys top, a digest {#...} included)."`
}

// Validate wants one of --identity and --key (kong refuses both), not
// empty, and refuses --header without --identity.
func (t *target) Validate(kctx *kong.Context) error {
	for _, f := range kctx.Flags() {
		if f.Name == "identity" && f.Set && t.Identity == "" {
			// A service counts a caller without identity (or with an
			// empty header) under its client IP: "" names no key.
			return errors.New(`--identity "": empty; want the caller as the service's key function names it (alice, sub:alice, a client IP), or --key (the store key as it is)`)
		}
	}
	if t.Identity == "" && t.Key == "" {
		return errors.New("name the key: --identity (the caller, as the service's key function names it) or --key (the store key as it is)")
	}
	if t.Header != "" && t.Identity == "" {
		return errors.New("--header names the header whose value --identity is: give --identity (with --key, the store key is given as it is)")
	}
	return nil
}

// check refuses an --identity that names no key under rule r: under a
// rule keyed by ip, one that is no IP address, alone or with a port (a
// RemoteAddr), which the service's client IP never is. An address reads
// as the service reads a peer's (clientip.Config.ClientAddr), as replay
// reads a log's.
func (t *target) check(r *core.Rule) error {
	if t.Identity == "" || t.Header != "" || r.Key() != "ip" {
		return nil
	}
	var cip clientip.Config
	if _, err := netip.ParseAddr(cip.ClientAddr(t.Identity, nil)); err == nil {
		return nil
	}
	return fmt.Errorf("--identity %q: rule %q counts per client IP (key: ip): want an IP address (203.0.113.7, 2001:db8::1), alone or with a port", t.Identity, r.Name)
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
	case k.IPv6PrefixLen < 1 || k.IPv6PrefixLen > 128:
		return fmt.Errorf("--ipv6-prefix-len %d: want 1 to 128", k.IPv6PrefixLen)
	case k.Cluster && strings.Contains(k.Redis, "://"):
		k.copt, err = redis.ParseClusterURL(k.Redis)
	case k.Cluster:
		k.copt, err = clusterAddrs(k.Redis)
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
	if k.IdentityKeyEnv != "" {
		_, err = identityKey(k.IdentityKeyEnv)
	}
	return err
}

// clusterAddrs reads --redis of a Cluster given as
// [user:password@]host:port[,...]: the seed nodes' addresses, with the
// user and password of the first (the others name the same or none). Its
// errors never repeat an address, which may hold a password.
func clusterAddrs(s string) (*redis.ClusterOptions, error) {
	o := &redis.ClusterOptions{}
	for i, a := range strings.Split(s, ",") {
		a = strings.TrimSpace(a)
		host := a[strings.LastIndexByte(a, '@')+1:]
		if a == "" || !strings.Contains(host, ":") || strings.ContainsAny(host, "/?") {
			return nil, errors.New("with --cluster, want [user:password@]host:port[,host:port...] or a redis:// URL")
		}
		n, err := redis.ParseURL("redis://" + a)
		if err != nil {
			return nil, err
		}
		switch {
		case i == 0:
			o.Username, o.Password = n.Username, n.Password
		case (n.Username != "" || n.Password != "") && (n.Username != o.Username || n.Password != o.Password):
			return nil, fmt.Errorf("with --cluster, the address %d names another user or password than the first", i+1)
		}
		o.Addrs = append(o.Addrs, n.Addr)
	}
	return o, nil
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
// the Redis store (and the options it was given), and the store.
type conn struct {
	cfg   *core.Config
	lim   *core.Limiter
	opts  []core.Option
	store *redisstore.Store
	addr  string
	close func()
}

// open loads the rule file, finds the rule named name (under plan, when
// given), checks that t (nil for none) names a key under it, and
// connects to Redis, which must answer PING within the timeout. A t that
// names no key is a bad command line of cmd, reported on e.
func (k *keysCmd) open(ctx context.Context, e *env, cmd string, t *target, name, plan string) (*conn, *core.Rule, error) {
	// As core.LoadConfig loads it, a file that cannot be read said as
	// check says it.
	data, err := core.ReadConfigFile(k.Config)
	if err != nil {
		msg := k.Config + ": " + readError(k.Config, err)
		if errors.Is(err, fs.ErrNotExist) {
			msg += " (--config names the service's rule file, ratelimit.yaml unless given: it tells each rule's algorithm, limits and keys)"
		}
		return nil, nil, errors.New(msg)
	}
	cfg, err := core.ParseConfig(data, k.Config)
	if err != nil {
		return nil, nil, err
	}
	r, err := findRule(cfg, k.Config, name, plan)
	if err != nil {
		return nil, nil, err
	}
	if t != nil {
		if err := t.check(r); err != nil {
			return nil, nil, usage(e, cmd, "%v", err)
		}
	}
	c, err := k.connect(ctx, cfg)
	return c, r, err
}

// identityKey is the service's identity key (core.WithIdentityKey), held
// by the environment variable that --identity-key-env names; an error
// when it is empty or not set.
func identityKey(name string) ([]byte, error) {
	v := os.Getenv(name)
	if v == "" {
		return nil, fmt.Errorf("--identity-key-env %s: the variable is empty or not set", name)
	}
	return []byte(v), nil
}

// connect connects to Redis, which must answer PING within the timeout,
// and returns a limiter of cfg over the store there.
func (k *keysCmd) connect(ctx context.Context, cfg *core.Config) (*conn, error) {
	opts := []core.Option{core.WithClientIP(clientip.Config{IPv6PrefixLen: k.IPv6PrefixLen})}
	if k.IdentityKeyEnv != "" {
		key, err := identityKey(k.IdentityKeyEnv)
		if err != nil {
			return nil, err
		}
		opts = append(opts, core.WithIdentityKey(key))
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
	if k.copt == nil {
		// A node of a Cluster serves its own slots only: the others'
		// keys would be missing from top, and MOVED errors.
		if info, err := rc.Info(pctx, "cluster").Result(); err == nil && strings.Contains(info, "cluster_enabled:1") {
			_ = rc.Close()
			return nil, fmt.Errorf("redis %s is a node of a Redis Cluster: add --cluster", addr)
		}
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
	return &conn{cfg: cfg, lim: lim, opts: opts, store: rs, addr: addr, close: func() { _ = rs.Close(); _ = rc.Close() }}, nil
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

// keyName is the key a command reads: a store key, or the hash tag of one
// that top printed as a digest ({#...}), which names no store key.
type keyName struct {
	key, digest string
}

// String is the key as the output writes it: a digest as top prints it.
func (n keyName) String() string {
	if n.digest != "" {
		return "{" + n.digest + "}"
	}
	return show(n.key)
}

// key returns the key t names under rule r: --key as it is, or as a
// digest's hash tag when it is one as top prints it ({#...}); else
// --identity made into the store key as the service makes it: a header's
// value (--header) hashed as HeaderKey's identity is, a client IP
// grouped as the limiter's clientip.Config groups it.
func (c *conn) key(t *target, r *core.Rule) (keyName, error) {
	if t.Key != "" {
		if d, ok := strings.CutPrefix(t.Key, "{#"); ok && strings.HasSuffix(d, "}") {
			return keyName{digest: "#" + strings.TrimSuffix(d, "}")}, nil
		}
		return keyName{key: t.Key}, nil
	}
	spec, identity := r.Key(), t.Identity
	if strings.Contains(spec, "+") {
		return keyName{}, fmt.Errorf("rule %q counts per %s, a key of several parts: name it with --key (Decision.Key, Event.Key, a log line's key, or rlkit keys top)", r.Name, spec)
	}
	switch {
	case t.Header != "":
		name := http.CanonicalHeaderKey(t.Header)
		if spec != "user" && spec != "header:"+name {
			return keyName{}, fmt.Errorf("--header %s: rule %q counts per %s, not per the header's value", name, r.Name, spec)
		}
		identity = adapter.HeaderIdentity(name, identity)
	case spec == "ip":
		cip := c.lim.ClientIP()
		identity = cip.ClientIP(identity, nil)
	}
	k, err := c.lim.RuleKey(identity, r.Name)
	return keyName{key: k}, err
}

// state reads the state of the key n names under p.
func (c *conn) state(ctx context.Context, p *store.Policy, n keyName) (redisstore.KeyState, error) {
	var states []redisstore.KeyState
	var err error
	if n.digest != "" {
		states, err = c.store.InspectTags(ctx, p, n.digest)
	} else {
		states, err = c.store.Inspect(ctx, p, n.key)
	}
	if err != nil {
		return redisstore.KeyState{}, err
	}
	return states[0], nil
}

// banPolicy returns the policy of the ban of the penalty of the rule named
// rule ("<rule>!ban", see core.PenaltySpec), or nil when it has none, as
// the limiter names it: its ResetKey, which lifts a key's ban, resets the
// ban's policy, which a store that records the resets asked of it and
// clears nothing sees.
func (c *conn) banPolicy(rule string) *store.Policy {
	rec := &recorder{Store: c.store}
	lim := core.NewLimiter(c.cfg, append(c.opts[:len(c.opts):len(c.opts)], core.WithStore(rec))...)
	_, _ = lim.ResetKey(context.Background(), "", rule)
	for _, p := range rec.resets {
		if p.Name == rule+"!ban" {
			return p
		}
	}
	return nil
}

// recorder is the Redis store but for Reset, which only records the
// policy asked for.
type recorder struct {
	*redisstore.Store
	resets []*store.Policy
}

func (r *recorder) Reset(_ context.Context, _ string, p *store.Policy) (bool, error) {
	r.resets = append(r.resets, p)
	return false, nil
}

// tagStore is the Redis store with Reset by hash tag: a limiter over it
// resets, whatever key it is given, the counters of the key whose tag it
// holds (a digest that top printed).
type tagStore struct {
	*redisstore.Store
	tag string
}

func (s tagStore) Reset(ctx context.Context, _ string, p *store.Policy) (bool, error) {
	return s.ResetTag(ctx, s.tag, p)
}

// view is one key's state under a rule as the limiter answers a request
// of cost 1: the rule's counters and, when the rule has a penalty, its
// ban.
type view struct {
	redisstore.KeyState
	// banned: the penalty's ban refuses the key for banRest more.
	banned  bool
	banRest time.Duration
	// retry is the Retry-After of the next request, 0 when it would be
	// admitted; remaining, the fewest units it could take (0 under a
	// ban).
	retry     time.Duration
	remaining int64
}

// newView is the view of a key whose state is ks and, under a rule with a
// penalty, whose ban's state is ban. The limiter finds a key banned when
// its ban (GCRA, one per ban, burst one) has nothing remaining, and then
// answers the longer of the rest of the ban and the rule's own wait.
func newView(ks redisstore.KeyState, ban *redisstore.KeyState) view {
	v := view{KeyState: ks, retry: ks.RetryAfter, remaining: ks.Remaining()}
	if ban != nil && len(ban.Limits) == 1 && ban.Limits[0].Remaining == 0 {
		v.banned, v.banRest = true, ban.Limits[0].ResetAfter
		v.retry, v.remaining = max(v.banRest, ks.RetryAfter), 0
	}
	return v
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
	Banned       bool        `json:"banned,omitempty"`
	BanEndsMS    int64       `json:"ban_ends_after_ms,omitempty"`
	Limits       []limitJSON `json:"limits"`
}

// name is the key as the output writes it: a digest as {#...}, which
// --key takes back.
func (k *keyJSON) name() string {
	if k.Key == "" && strings.HasPrefix(k.Tag, "#") {
		return "{" + k.Tag + "}"
	}
	return show(k.Key)
}

// inspectJSON is what `keys inspect` prints as JSON.
type inspectJSON struct {
	Rule       string `json:"rule"`
	Plan       string `json:"plan,omitempty"`
	Algorithm  string `json:"algorithm"`
	keyJSON           // key, tag, over, remaining, retry_after_ms, banned, ban_ends_after_ms, limits
	Concurrent int64  `json:"concurrent,omitempty"`
	InFlight   *int64 `json:"in_flight,omitempty"`
}

// Run prints the counters of one key under the rule, and its penalty's
// ban.
func (c *keysInspectCmd) Run(e *env, k *keysCmd) error {
	ctx := context.Background()
	cn, r, err := k.open(ctx, e, "keys inspect", &c.target, c.Rule, c.Plan)
	if err != nil {
		return err
	}
	defer cn.close()
	n, err := cn.key(&c.target, r)
	if err != nil {
		return err
	}
	out := inspectJSON{Rule: r.Name, Plan: c.Plan, Algorithm: r.Policy.Algorithm.String(), keyJSON: keyJSON{Key: n.key, Tag: n.digest, Limits: []limitJSON{}}}
	if len(r.Policy.Limits) > 0 {
		ks, err := cn.state(ctx, r.Policy, n)
		if err != nil {
			return fmt.Errorf("redis %s: %w", cn.addr, err)
		}
		var ban *redisstore.KeyState
		if bp := cn.banPolicy(c.Rule); bp != nil {
			b, err := cn.state(ctx, bp, n)
			if err != nil {
				return fmt.Errorf("redis %s: %w", cn.addr, err)
			}
			ban = &b
		}
		out.keyJSON = toJSON(r, newView(ks, ban))
	} else {
		out.Algorithm = ""
	}
	if limit := r.Concurrent(); limit > 0 {
		// The slots are the base rule's, under every plan.
		held, err := cn.inFlight(ctx, out.keyJSON, cn.cfg.Rule(c.Rule).Name)
		if err != nil {
			return fmt.Errorf("redis %s: %w", cn.addr, err)
		}
		out.Concurrent, out.InFlight = limit, &held
	}
	if k.Format == "json" {
		return printJSON(e.stdout, out)
	}
	return out.text(e.stdout)
}

// inFlight counts the requests of the key k in flight under the
// concurrency limit of the rule named rule.
func (c *conn) inFlight(ctx context.Context, k keyJSON, rule string) (int64, error) {
	if k.Key == "" && strings.HasPrefix(k.Tag, "#") {
		return c.store.InFlightTag(ctx, k.Tag, rule)
	}
	return c.store.InFlight(ctx, k.Key, rule)
}

func (o *inspectJSON) text(w io.Writer) error {
	head := "rule " + o.Rule
	if o.Plan != "" {
		head += " (plan " + o.Plan + ")"
	}
	fmt.Fprintf(w, "%s, key %s\n", head, o.name())
	if len(o.Limits) > 0 {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "LIMIT\tALGORITHM\tBURST\tUSED\tREMAINING\tRESETS IN\tRETRY AFTER")
		for _, l := range o.Limits {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%s\t%s\n", l.Limit, o.Algorithm, dash(l.Burst), l.Used, l.Remaining, ms(l.ResetAfterMS), ms(l.RetryAfterMS))
		}
		if err := tw.Flush(); err != nil {
			return err
		}
		switch {
		case o.Banned:
			fmt.Fprintf(w, "banned by the rule's penalty for %s more: the next request is refused, Retry-After %s\n", ms(o.BanEndsMS), ms(o.RetryAfterMS))
		case o.Over:
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
	Tag     string `json:"tag,omitempty"`
	Cleared bool   `json:"cleared"`
}

// Run clears the key's counters under the rule, under every plan, and
// lifts its penalty, as Limiter.ResetKey does.
func (c *keysResetCmd) Run(e *env, k *keysCmd) error {
	ctx := context.Background()
	cn, r, err := k.open(ctx, e, "keys reset", &c.target, c.Rule, "")
	if err != nil {
		return err
	}
	defer cn.close()
	n, err := cn.key(&c.target, r)
	if err != nil {
		return err
	}
	lim := cn.lim
	if n.digest != "" {
		// The same resets, of the digest's keys.
		lim = core.NewLimiter(cn.cfg, append(cn.opts[:len(cn.opts):len(cn.opts)], core.WithStore(tagStore{cn.store, n.digest}))...)
	}
	cleared, err := lim.ResetKey(ctx, n.key, r.Name)
	if err != nil {
		return fmt.Errorf("redis %s: %w", cn.addr, err)
	}
	if k.Format == "json" {
		return printJSON(e.stdout, resetJSON{Rule: r.Name, Key: n.key, Tag: n.digest, Cleared: cleared})
	}
	if cleared {
		_, err = fmt.Fprintf(e.stdout, "rule %s, key %s: cleared\n", r.Name, n)
	} else {
		_, err = fmt.Fprintf(e.stdout, "rule %s, key %s: nothing to clear (no live counter)\n", r.Name, n)
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

// Run lists the keys nearest or over the rule's limit, or banned by its
// penalty.
func (c *keysTopCmd) Run(e *env, k *keysCmd) error {
	ctx := context.Background()
	cn, r, err := k.open(ctx, e, "keys top", nil, c.Rule, c.Plan)
	if err != nil {
		return err
	}
	defer cn.close()
	if len(r.Policy.Limits) == 0 {
		return fmt.Errorf("rule %q has no limit, only concurrent: it keeps no counter to list (inspect a key for its requests in flight)", r.Name)
	}
	ps := []*store.Policy{r.Policy}
	if bp := cn.banPolicy(c.Rule); bp != nil {
		ps = append(ps, bp) // a banned key whose counters expired is found too
	}
	var keys []view
	found := 0
	res, err := cn.store.ScanPolicies(ctx, ps, c.MaxScan, func(states [][]redisstore.KeyState) error {
		found += len(states[0])
		for j, ks := range states[0] {
			var ban *redisstore.KeyState
			if len(states) > 1 {
				ban = &states[1][j]
			}
			keys = append(keys, newView(ks, ban))
		}
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
	for _, v := range keys {
		out.Keys = append(out.Keys, toJSON(r, v))
	}
	if k.Format == "json" {
		return printJSON(e.stdout, out)
	}
	return out.text(e.stdout)
}

// nearest sorts keys nearest their limit first and keeps n: by fewest
// remaining (a key over a limit, or banned, has none left), then by
// longest Retry-After in whole seconds, as RETRY AFTER shows it and the
// service answers it (the keys refused first, the longest wait first),
// then by key. Each key's Retry-After is read on the server's clock when
// its state is: keys over the limit in one fixed window differ by the
// microseconds between their reads, which order nothing.
func nearest(keys []view, n int) []view {
	slices.SortFunc(keys, func(a, b view) int {
		return cmp.Or(
			cmp.Compare(a.remaining, b.remaining),
			cmp.Compare(seconds(millis(b.retry)), seconds(millis(a.retry))),
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
			over := yes(k.Over)
			if k.Banned {
				over = "banned"
			}
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\t%s\n", k.name(), over, k.Remaining, l.Limit, l.Used, ms(l.ResetAfterMS), ms(k.RetryAfterMS))
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
		_, err = fmt.Fprintf(w, "scanned all %s (MATCH %s): %s of rule %s\n", termtext.Counted(o.Scanned, "key"), o.Pattern, termtext.Counted(o.Found, "key"), rule)
	} else {
		_, err = fmt.Fprintf(w, "scanned %s, stopped at the bound (--max-scan %d): %s of rule %s found; there may be more\n", termtext.Counted(o.Scanned, "key"), o.MaxScan, termtext.Counted(o.Found, "key"), rule)
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
func toJSON(r *core.Rule, v view) keyJSON {
	out := keyJSON{Key: v.Key, Tag: v.Tag, Over: v.retry > 0, Remaining: v.remaining, RetryAfterMS: millis(v.retry), Banned: v.banned, BanEndsMS: millis(v.banRest)}
	for _, c := range v.Limits {
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
	s := seconds(n)
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

// seconds is n milliseconds in whole seconds, rounded up as Retry-After
// is.
func seconds(n int64) int64 {
	return (n + 999) / 1000
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
