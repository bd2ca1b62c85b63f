package core

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// keyReqT is a request of the key tests: a caller the key function names
// (user, "" for none), a client IP and headers.
type keyReqT struct {
	user, ip string
	header   map[string]string
}

// keyEnv is a flow over keyReqT with a memory store on a fixed clock,
// recording the observer's events.
type keyEnv struct {
	t      *testing.T
	flow   *Flow[*keyReqT]
	clock  *store.ManualClock
	events []Event
}

func newKeyEnv(t *testing.T, yaml string, opts ...Option) *keyEnv {
	t.Helper()
	cfg, err := ParseConfig([]byte(yaml), "keys.yaml")
	if err != nil {
		t.Fatal(err)
	}
	e := &keyEnv{t: t, clock: store.NewManualClock(time.Unix(1_700_000_040, 0))}
	opts = append([]Option{
		WithClock(e.clock), WithStore(memstore.New(memstore.WithClock(e.clock))),
		WithObserver(func(ev Event) { e.events = append(e.events, ev) }),
	}, opts...)
	e.flow = &Flow[*keyReqT]{
		Limiter:  NewLimiter(cfg, opts...),
		Key:      func(r *keyReqT) (string, error) { return r.user, nil },
		ClientIP: func(r *keyReqT) string { return r.ip },
		Header:   func(r *keyReqT, name string) string { return r.header[name] },
	}
	return e
}

// decide decides r for path, failing the test on a key function's error.
func (e *keyEnv) decide(r *keyReqT, path Path) Decision {
	e.t.Helper()
	d, err := e.flow.Decide(context.Background(), r, "GET", path, "")
	if err != nil {
		e.t.Fatal(err)
	}
	return d
}

// expect decides r for path and checks the rule, key and remaining count
// (-1: denied).
func (e *keyEnv) expect(r *keyReqT, path Path, rule, key string, remaining int64) {
	e.t.Helper()
	d := e.decide(r, path)
	got := d.Result.Remaining
	if !d.Allowed {
		got = -1
	}
	if d.Rule == nil || d.Rule.Name != rule || d.Key != key || got != remaining {
		name := "<nil>"
		if d.Rule != nil {
			name = d.Rule.Name
		}
		e.t.Errorf("%s %+v: rule %s, key %q, remaining %d; want %s, %q, %d", path, *r, name, d.Key, got, rule, key, remaining)
	}
}

const keysYAML = `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      key: ip
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
      key: user
    - name: kb
      paths: ["/kb/{kb}/search", "/v2/kb/:kb/docs/:doc"]
      limit: "2/minute"
      key: param:kb
    - name: kb_user
      paths: ["/kb/:kb/upload"]
      limit: "2/minute"
      key: user+param:kb
    - name: api
      paths: ["/api/data"]
      limit: "2/minute"
      key: header:x-api-key
    - name: api_ip
      paths: ["/api/ip-data"]
      limit: "2/minute"
      key: ip + header:X-Api-Key
  default: "2/minute"
  default_key: ip
`

// TestRuleKeys: each kind of key, and combinations, count per what they
// name, under the store keys key.go documents.
func TestRuleKeys(t *testing.T) {
	e := newKeyEnv(t, keysYAML)
	l := e.flow.Limiter
	cfg := l.Config()
	for name, want := range map[string]string{"login": "ip", "search": "user", "kb": "param:kb", "kb_user": "user+param:kb",
		"api": "header:X-Api-Key", "api_ip": "ip+header:X-Api-Key", "default": "ip"} {
		if got := cfg.Rule(name).Key(); got != want {
			t.Errorf("rule %s: Key() = %q, want %q", name, got, want)
		}
	}
	alice := &keyReqT{user: "alice", ip: "192.0.2.1"}
	bob := &keyReqT{user: "bob", ip: "192.0.2.1"}
	anon := &keyReqT{ip: "192.0.2.1"}
	carol := &keyReqT{user: "carol", ip: "192.0.2.9"}

	// Per IP: alice and bob behind one address share the login counter.
	e.expect(alice, "/login", "login", "ip:192.0.2.1", 1)
	e.expect(bob, "/login", "login", "ip:192.0.2.1", 0)
	e.expect(anon, "/login", "login", "ip:192.0.2.1", -1)
	e.expect(carol, "/login", "login", "ip:192.0.2.9", 1)

	// Per user: the key is the caller's, as before keys per rule.
	e.expect(alice, "/api/search", "search", "alice", 1)
	e.expect(bob, "/api/search", "search", "bob", 1)
	e.expect(alice, "/api/search", "search", "alice", 0)
	e.expect(anon, "/api/search", "search", "192.0.2.1", 1)

	// Per parameter, across users and across the rule's paths (kb at
	// another segment there).
	e.expect(alice, "/kb/k1/search", "kb", "p:k1", 1)
	e.expect(carol, "/v2/kb/k1/docs/d9", "kb", "p:k1", 0)
	e.expect(bob, "/kb/k1/search", "kb", "p:k1", -1)
	e.expect(bob, "/kb/k2/search", "kb", "p:k2", 1)

	// Per user and parameter; an anonymous caller's user part is its IP.
	e.expect(alice, "/kb/k1/upload", "kb_user", "u:alice|p:k1", 1)
	e.expect(alice, "/kb/k1/upload", "kb_user", "u:alice|p:k1", 0)
	e.expect(bob, "/kb/k1/upload", "kb_user", "u:bob|p:k1", 1)
	e.expect(alice, "/kb/k2/upload", "kb_user", "u:alice|p:k2", 1)
	e.expect(anon, "/kb/k1/upload", "kb_user", "ip:192.0.2.1|p:k1", 1)

	// Per header, hashed; without it (or empty), per client IP.
	const secret = "sk_live_0123456789"
	withKey := &keyReqT{user: "alice", ip: "192.0.2.1", header: map[string]string{"X-Api-Key": secret}}
	hashedKey := "h:X-Api-Key:hmac:" + hmacHex(defaultIdentityKey, secret)
	e.expect(withKey, "/api/data", "api", hashedKey, 1)
	e.expect(&keyReqT{user: "bob", ip: "192.0.2.9", header: map[string]string{"X-Api-Key": secret}}, "/api/data", "api", hashedKey, 0)
	e.expect(alice, "/api/data", "api", "ip:192.0.2.1", 1)
	e.expect(&keyReqT{user: "bob", ip: "192.0.2.1", header: map[string]string{"X-Api-Key": ""}}, "/api/data", "api", "ip:192.0.2.1", 0)
	e.expect(withKey, "/api/ip-data", "api_ip", "ip:192.0.2.1|"+hashedKey, 1)
	e.expect(alice, "/api/ip-data", "api_ip", "ip:192.0.2.1|ip:192.0.2.1", 1)

	// A Decision keeps nothing of the keys but Key.
	if d := e.decide(bob, "/kb/k2/upload"); d.shadow != (pending{}) || d.Key != "u:bob|p:k2" {
		t.Errorf("decision %+v: want key u:bob|p:k2 and nothing pending", d)
	}

	// The default limit, per IP.
	e.expect(alice, "/other", "default", "ip:192.0.2.1", 1)
	e.expect(bob, "/elsewhere", "default", "ip:192.0.2.1", 0)

	// The observer names the rule's key; no secret reaches it.
	for _, ev := range e.events {
		if strings.Contains(ev.Key, secret) || ev.Key == "" {
			t.Errorf("event %+v: want the rule's key, never the secret", ev)
		}
	}
	if last := e.events[len(e.events)-1]; last.Rule != "default" || last.Key != "ip:192.0.2.1" {
		t.Errorf("last event %+v, want default's under ip:192.0.2.1", last)
	}
}

// TestRuleKeyCollisions: no value a client chooses makes one part's key,
// or one combination's, another's.
func TestRuleKeyCollisions(t *testing.T) {
	e := newKeyEnv(t, keysYAML)
	pairs := []struct {
		a, b   *keyReqT
		pa, pb Path
	}{
		// A user named as an IP is not that IP's anonymous caller.
		{&keyReqT{user: "192.0.2.1", ip: "192.0.2.7"}, &keyReqT{ip: "192.0.2.1"}, "/kb/k1/upload", "/kb/k1/upload"},
		{&keyReqT{user: "192.0.2.1", ip: "192.0.2.7"}, &keyReqT{user: "192.0.2.7", ip: "192.0.2.7"}, "/kb/k1/upload", "/kb/k1/upload"},
		// Nor is a user named as another part's key.
		{&keyReqT{user: "ip:192.0.2.1", ip: "192.0.2.7"}, &keyReqT{ip: "192.0.2.1"}, "/kb/k1/upload", "/kb/k1/upload"},
		// A separator in a user or a parameter spells no other split.
		{&keyReqT{user: "a|p:b", ip: "192.0.2.7"}, &keyReqT{user: "a", ip: "192.0.2.7"}, "/kb/c/upload", "/kb/b%7Cp:c/upload"},
		{&keyReqT{user: "a%7Cp:b", ip: "192.0.2.7"}, &keyReqT{user: "a|p:b", ip: "192.0.2.7"}, "/kb/c/upload", "/kb/c/upload"},
		{&keyReqT{user: "a", ip: "192.0.2.7"}, &keyReqT{user: "a", ip: "192.0.2.7"}, "/kb/b%25257C/upload", "/kb/b%257C/upload"},
		// A header's value is never the client IP it falls back to.
		{&keyReqT{ip: "192.0.2.7", header: map[string]string{"X-Api-Key": "192.0.2.1"}}, &keyReqT{ip: "192.0.2.1"}, "/api/data", "/api/data"},
		{&keyReqT{ip: "192.0.2.7", header: map[string]string{"X-Api-Key": "ip:192.0.2.1"}}, &keyReqT{ip: "192.0.2.1"}, "/api/data", "/api/data"},
		// Long values: digests of their own.
		{&keyReqT{user: strings.Repeat("u", 300), ip: "192.0.2.7"}, &keyReqT{user: strings.Repeat("u", 301), ip: "192.0.2.7"}, "/kb/k/upload", "/kb/k/upload"},
		{&keyReqT{ip: "192.0.2.7"}, &keyReqT{ip: "192.0.2.7"}, Path("/kb/" + strings.Repeat("k", 300) + "/search"), Path("/kb/" + strings.Repeat("k", 301) + "/search")},
	}
	for i, p := range pairs {
		ka, kb := e.decide(p.a, p.pa).Key, e.decide(p.b, p.pb).Key
		if ka == kb || ka == "" {
			t.Errorf("pair %d: %+v %s and %+v %s share the key %q", i, *p.a, p.pa, *p.b, p.pb, ka)
		}
		for _, k := range []string{ka, kb} {
			if len(k) > store.MaxKeyLen {
				t.Errorf("pair %d: key %.40q is not bounded", i, k)
			}
		}
	}
	if k := e.decide(&keyReqT{ip: "192.0.2.7"}, Path("/kb/"+strings.Repeat("k", 300)+"/search")).Key; k != store.BoundKey("p:"+strings.Repeat("k", 300)) {
		t.Errorf("a long parameter: key %q, want the digest of its key", k)
	}
}

// TestRuleKeyParamSpellings: every spelling of a path a router serves by
// the rule's handler with one parameter value counts under that value,
// decoded once; escapes, dot segments, "//" and a trailing slash mint no
// key. Only an encoded slash or a double escape makes another value.
func TestRuleKeyParamSpellings(t *testing.T) {
	e := newKeyEnv(t, strings.Replace(keysYAML, `limit: "2/minute"`, `limit: "1000/minute"`, -1))
	r := &keyReqT{ip: "192.0.2.7"}
	for _, c := range []struct {
		path  Path
		route string
		fold  bool
		key   string
	}{
		{"/kb/k1/search", "", false, "p:k1"},
		{"/kb/k1/search", "/kb/:kb/search", false, "p:k1"},
		{"/kb/k1/search", "/kb/:kb/search", false, "p:k1"}, // the route's cached answer
		{"/kb/%6B1/search", "", false, "p:k1"},
		{"/kb/%6b%31/search", "/kb/:kb/search", false, "p:k1"},
		{"/kb/k1/search/", "", false, "p:k1"},
		{"/kb//k1/search", "", false, "p:k1"},
		{"/kb/x/../k1/search", "", false, "p:k1"},
		{"/kb/x/%2e%2e/k1/search", "", false, "p:k1"},
		{"/kb/./k1/search", "", false, "p:k1"},
		{"/kb/x%2F..%2Fk1/search", "", false, "p:k1"},
		{"/v2/kb/k1/docs/%64", "", false, "p:k1"},
		// Case: a value as written, but behind a router that ignores it.
		{"/kb/K1/search", "", false, "p:K1"},
		{"/kb/K1/search", "", true, "p:k1"},
		{"/KB/%4B1/SEARCH", "", true, "p:k1"},
		{"/kb/K1/search", "/kb/:kb/search", true, "p:k1"},
		// An encoded slash is in the value; a double escape is text.
		{"/kb/a%2Fb/search", "", false, "p:a/b"},
		{"/kb/a%2fb/search", "/kb/:kb/search", false, "p:a/b"},
		{"/kb/a%252Fb/search", "", false, "p:a%252Fb"},
		{"/kb/x/%2e%2e/a%2Fb/search", "", false, "p:a/b"},
		{"/kb/a%7Cb/search", "", false, "p:a%7Cb"},
		{"/kb/%2e%2e/search", "", false, "p:.."},
	} {
		e.flow.FoldCase = c.fold
		d, err := e.flow.Decide(context.Background(), r, "GET", c.path, c.route)
		if err != nil || d.Rule == nil || d.Rule.Name != "kb" || d.Key != c.key {
			t.Errorf("%s (route %q, fold %v): rule %v, key %q, %v; want kb, %q", c.path, c.route, c.fold, d.Rule.Paths(), d.Key, err, c.key)
		}
	}
}

// TestRuleKeyDecide: Limiter.Decide has one identity and no request: it
// is the user part and the ip part (and so the fallback of a header
// part), and a parameter comes from the path.
func TestRuleKeyDecide(t *testing.T) {
	e := newKeyEnv(t, keysYAML)
	l := e.flow.Limiter
	ctx := context.Background()
	for _, c := range []struct {
		path     Path
		identity string
		key      string
	}{
		{"/login", "192.0.2.1", "ip:192.0.2.1"},
		{"/api/search", "alice", "alice"},
		{"/kb/k%31/search", "alice", "p:k1"},
		{"/kb/k1/upload", "alice", "u:alice|p:k1"},
		{"/kb/k1/upload", "192.0.2.1", "ip:192.0.2.1|p:k1"}, // an IP address is the client IP's
		{"/api/data", "192.0.2.1", "ip:192.0.2.1"},
		{"/api/ip-data", "alice", "ip:alice|ip:alice"},
	} {
		if d := l.Decide(ctx, "GET", c.path, c.identity, false); d.Key != c.key || !d.Allowed {
			t.Errorf("Decide(%s, %q): key %q, allowed %v; want %q, true", c.path, c.identity, d.Key, d.Allowed, c.key)
		}
	}
}

// TestRuleKeyReset: Reset takes the value of a one-part key; a key of
// several parts is reset by its store key.
func TestRuleKeyReset(t *testing.T) {
	e := newKeyEnv(t, keysYAML)
	l := e.flow.Limiter
	ctx := context.Background()
	const secret = "sk_live_0123456789"
	withKey := &keyReqT{ip: "192.0.2.1", header: map[string]string{"X-Api-Key": secret}}
	for _, c := range []struct {
		r        *keyReqT
		path     Path
		rule     string
		identity string
	}{
		{&keyReqT{user: "alice", ip: "192.0.2.1"}, "/login", "login", "192.0.2.1"},
		{&keyReqT{user: "alice", ip: "192.0.2.1"}, "/other", "default", "192.0.2.1"},
		{&keyReqT{user: "alice", ip: "192.0.2.1"}, "/kb/k1/search", "kb", "k1"},
		{withKey, "/api/data", "api", secret},
		{withKey, "/api/data", "api", SecretIdentity("X-Api-Key", secret)},
		{&keyReqT{user: "alice", ip: "192.0.2.1"}, "/api/search", "search", "alice"},
	} {
		e.decide(c.r, c.path)
		e.decide(c.r, c.path)
		if d := e.decide(c.r, c.path); d.Allowed {
			t.Fatalf("%s: the third request passed", c.path)
		}
		if cleared, err := l.Reset(ctx, c.identity, c.rule); !cleared || err != nil {
			t.Errorf("Reset(%q, %s) = %v, %v; want true, nil", c.identity, c.rule, cleared, err)
		}
		if d := e.decide(c.r, c.path); !d.Allowed || d.Result.Remaining != 1 {
			t.Errorf("%s after Reset: allowed %v, remaining %d; want a full quota", c.path, d.Allowed, d.Result.Remaining)
		}
		l.Reset(ctx, c.identity, c.rule)
	}
	// Several parts: an error, and ResetKey with the Decision's key.
	d := e.decide(&keyReqT{user: "alice", ip: "192.0.2.1"}, "/kb/k1/upload")
	_, err := l.Reset(ctx, "alice", "kb_user")
	const msg = `rate-limit reset: rule "kb_user" counts per user+param:kb, a key of several parts: reset it by its store key (ResetKey with Decision.Key or Event.Key)`
	if err == nil || err.Error() != msg {
		t.Errorf("Reset of a rule keyed by several parts: %v, want %q", err, msg)
	}
	if cleared, err := l.ResetKey(ctx, d.Key, "kb_user"); !cleared || err != nil {
		t.Errorf("ResetKey(%q) = %v, %v; want true, nil", d.Key, cleared, err)
	}
	if _, err := l.Reset(ctx, "x", "nope"); !errors.Is(err, ErrUnknownRule) {
		t.Errorf("Reset of an unknown rule: %v, want ErrUnknownRule", err)
	}
}

// TestRuleKeyOfIdentity: Limiter.RuleKey names the key a request of the
// identity counts under (Decision.Key under a rule keyed otherwise than by
// user, Limiter.Key of the caller under one keyed by user), and errs as
// Reset does.
func TestRuleKeyOfIdentity(t *testing.T) {
	e := newKeyEnv(t, keysYAML)
	l := e.flow.Limiter
	const secret = "sk_live_0123456789"
	withKey := &keyReqT{ip: "192.0.2.1", header: map[string]string{"X-Api-Key": secret}}
	for _, c := range []struct {
		r        *keyReqT
		path     Path
		rule     string
		identity string
	}{
		{&keyReqT{user: "alice", ip: "192.0.2.1"}, "/login", "login", "192.0.2.1"},
		{&keyReqT{user: "alice", ip: "192.0.2.1"}, "/kb/k%7C1/search", "kb", "k|1"},
		{withKey, "/api/data", "api", secret},
		{withKey, "/api/data", "api", SecretIdentity("X-Api-Key", secret)},
		{&keyReqT{user: "alice|x", ip: "192.0.2.1"}, "/api/search", "search", "alice|x"},
	} {
		d := e.decide(c.r, c.path)
		want := d.Key
		if want == "" {
			want = l.Key(c.r.user)
		}
		got, err := l.RuleKey(c.identity, c.rule)
		if err != nil || got != want {
			t.Errorf("RuleKey(%q, %s) = %q, %v; want %q", c.identity, c.rule, got, err, want)
		}
	}
	if _, err := l.RuleKey("alice", "kb_user"); err == nil || !strings.Contains(err.Error(), "several parts") {
		t.Errorf("RuleKey under a key of several parts: %v, want its error", err)
	}
	if _, err := l.RuleKey("x", "nope"); !errors.Is(err, ErrUnknownRule) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("RuleKey of an unknown rule: %v, want ErrUnknownRule naming it", err)
	}
}

// TestRuleKeyCallerLists: the allow list, plans and a LimitProvider know
// the caller by its own key; the penalty bans the rule's key.
func TestRuleKeyCallerLists(t *testing.T) {
	yaml := strings.Replace(keysYAML, "  default: \"2/minute\"", `  default: "2/minute"
  allow:
    identities: ["alice", "192.0.2.50"]
  tiers:
    pro:
      rules:
        login: "3/minute"`, 1)
	yaml = strings.Replace(yaml, "      key: ip\n", "      key: ip\n      penalty: {after: 1, within: 1m, ban: 15m}\n", 1)
	e := newKeyEnv(t, yaml)
	e.flow.Plan = func(r *keyReqT) string {
		if r.user == "dan" {
			return "pro"
		}
		return ""
	}
	// alice is allowed, under a rule keyed by IP too; bob behind her IP
	// is not.
	for _, r := range []*keyReqT{{user: "alice", ip: "192.0.2.1"}, {ip: "192.0.2.50"}} {
		if d := e.decide(r, "/login"); !reflect.DeepEqual(d, Decision{Allowed: true}) {
			t.Errorf("allowed %+v: %+v, want allowed, nothing counted (no key)", *r, d)
		}
	}
	e.expect(&keyReqT{user: "bob", ip: "192.0.2.1"}, "/login", "login", "ip:192.0.2.1", 1)
	// dan's plan gives login 3 per minute, counted per IP.
	d := e.decide(&keyReqT{user: "dan", ip: "192.0.2.9"}, "/login")
	if d.Plan != "pro" || d.Key != "ip:192.0.2.9" || d.Result.Remaining != 2 {
		t.Errorf("dan on pro: plan %q, key %q, remaining %d; want pro, ip:192.0.2.9, 2", d.Plan, d.Key, d.Result.Remaining)
	}
	// The penalty bans the IP: bob's denial bans carol behind it too.
	e.expect(&keyReqT{user: "carol", ip: "192.0.2.1"}, "/login", "login", "ip:192.0.2.1", 0)
	if d := e.decide(&keyReqT{user: "bob", ip: "192.0.2.1"}, "/login"); d.Allowed || !d.Penalty || d.Key != "ip:192.0.2.1" {
		t.Errorf("third login from one IP: %+v, want denied and banned", d)
	}
	e.clock.Advance(time.Minute)
	if d := e.decide(&keyReqT{user: "erin", ip: "192.0.2.1"}, "/login"); d.Allowed || !d.Penalty {
		t.Errorf("another user from the banned IP: %+v, want refused under the ban", d)
	}
	e.expect(&keyReqT{user: "erin", ip: "192.0.2.2"}, "/login", "login", "ip:192.0.2.2", 1)
	if cleared, err := e.flow.Limiter.Reset(context.Background(), "192.0.2.1", "login"); !cleared || err != nil {
		t.Errorf("Reset of the banned IP: %v, %v", cleared, err)
	}
	e.expect(&keyReqT{user: "erin", ip: "192.0.2.1"}, "/login", "login", "ip:192.0.2.1", 1)
}

// TestRuleKeyProvider: a LimitProvider is asked by the caller's key; the
// custom limits count under the rule's.
func TestRuleKeyProvider(t *testing.T) {
	var asked []string
	p := LimitProviderFunc(func(_ context.Context, key, rule string) ([]algo.Limit, bool, error) {
		asked = append(asked, key+" "+rule)
		return []algo.Limit{{Count: 5, Period: time.Minute}}, true, nil
	})
	e := newKeyEnv(t, keysYAML, WithLimitProvider(p))
	d := e.decide(&keyReqT{user: "alice", ip: "192.0.2.1"}, "/login")
	if d.Rule.Plan() != CustomPlan || d.Key != "ip:192.0.2.1" || d.Result.Remaining != 4 {
		t.Errorf("custom limits: rule plan %q, key %q, remaining %d; want %s, ip:192.0.2.1, 4", d.Rule.Plan(), d.Key, d.Result.Remaining, CustomPlan)
	}
	if len(asked) != 1 || asked[0] != "alice login" {
		t.Errorf("the provider was asked %q, want [alice login]", asked)
	}
	// A reset of the rule's key asks the provider nothing: it knows
	// callers, not keys.
	if _, err := e.flow.Limiter.Reset(context.Background(), "192.0.2.1", "login"); err != nil || len(asked) != 1 {
		t.Errorf("Reset: %v; the provider was asked %q, want only [alice login]", err, asked)
	}
}

// TestRuleKeyShadowAndOutcome: a rule in shadow mode beside the enforced
// one counts under its own key, and so does its count that waits for the
// status (Complete): bob, behind alice's IP, finds her failure counted.
func TestRuleKeyShadowAndOutcome(t *testing.T) {
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "5/minute"
      key: user
    - name: login_ip
      paths: ["/login"]
      limit: "1/minute"
      mode: shadow
      key: ip
      count: failures
`)
	l := e.flow.Limiter
	r := &keyReqT{user: "alice", ip: "192.0.2.1"}
	d := e.decide(r, "/login")
	if !d.Deferred() || d.Key != "alice" {
		t.Fatalf("decision %+v: want deferred, key alice", d)
	}
	l.Complete(context.Background(), &d, 401)
	d = e.decide(&keyReqT{user: "bob", ip: "192.0.2.1"}, "/login")
	l.Complete(context.Background(), &d, 401)
	var got []string
	for _, ev := range e.events {
		got = append(got, ev.Rule+" "+ev.Key+" "+ev.Outcome.String())
	}
	want := []string{
		"login alice allowed", "login_ip ip:192.0.2.1 allowed",
		"login bob allowed", "login_ip ip:192.0.2.1 shadow_denied",
	}
	if strings.Join(got, "; ") != strings.Join(want, "; ") {
		t.Errorf("events %q, want %q", got, want)
	}
}

// TestRuleKeyAllocs: a rule keyed otherwise than by user allocates its key
// and nothing else on a clean path; the rules keyed by user allocate
// nothing.
func TestRuleKeyAllocs(t *testing.T) {
	e := newKeyEnv(t, strings.Replace(keysYAML, `limit: "2/minute"`, `limit: "2000000000/hour"`, -1))
	e.flow.Limiter.observer = nil
	ctx := context.Background()
	withKey := &keyReqT{user: "alice", ip: "192.0.2.1", header: map[string]string{"X-Api-Key": "sk_live_0123456789"}}
	for _, c := range []struct {
		path  Path
		route string
		want  float64
	}{
		{"/api/search", "", 0},
		{"/login", "", 1},
		{"/kb/k1/search", "", 1},
		{"/kb/k1/search", "/kb/:kb/search", 1},
		{"/kb/k1/upload", "", 1},
		{"/api/data", "", 1},
		{"/api/ip-data", "", 1},
	} {
		var d Decision
		_ = e.flow.DecideTo(ctx, &d, withKey, "GET", c.path, c.route)
		if n := testing.AllocsPerRun(100, func() { _ = e.flow.DecideTo(ctx, &d, withKey, "GET", c.path, c.route) }); n != c.want && !raceOn {
			t.Errorf("%s (route %q): %v allocations per request, want %v", c.path, c.route, n, c.want)
		}
	}
}

// TestRuleKeyReload: a rule whose key changes is reported as changed (its
// counters start from zero), not kept.
func TestRuleKeyReload(t *testing.T) {
	old, err := ParseConfig([]byte(keysYAML), "a.yaml")
	if err != nil {
		t.Fatal(err)
	}
	next, err := ParseConfig([]byte(strings.Replace(keysYAML, "key: ip\n", "key: user\n", 1)), "b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ch := diffRules(old, next)
	if strings.Join(ch.afresh, ",") != "login" || len(ch.kept) != 6 {
		t.Errorf("afresh %q, kept %q; want login afresh, the 6 others kept", ch.afresh, ch.kept)
	}
}

// TestRuleKeyErrors: a bad key is an error naming file, line, rule, field
// and value.
func TestRuleKeyErrors(t *testing.T) {
	rule := func(paths, key string) string {
		return yamlLines("rate_limit:", "  rules:", "    - name: a", "      paths: "+paths, "      limit: 1/s", "      key: "+key)
	}
	const at = `rate-limit config t.yaml:6: rule "a": field "key": value `
	for _, c := range []struct {
		doc  string
		want []string
	}{
		{rule("[/a]", "cookie"), []string{at + `"cookie": "cookie": want user, ip, header:<Name> or param:<name>, or several joined by '+'`}},
		{rule("[/a]", "IP"), []string{at + `"IP": "IP": want user, ip, header:<Name> or param:<name>, or several joined by '+'`}},
		{rule("[/a]", "user:x"), []string{at + `"user:x": "user:x": user takes no name`}},
		{rule("[/a]", "header"), []string{at + `"header": "header": want header:<Name>, a header name such as X-Api-Key (letters, digits and !#$%&'*-.^_` + "`" + `|~)`}},
		{rule("[/a]", `"header:X Api"`), []string{at + `"header:X Api": "header:X Api": want header:<Name>, a header name such as X-Api-Key (letters, digits and !#$%&'*-.^_` + "`" + `|~)`}},
		{rule("[/a]", `"header:X(y)"`), []string{at + `"header:X(y)": "header:X(y)": want header:<Name>, a header name such as X-Api-Key (letters, digits and !#$%&'*-.^_` + "`" + `|~)`}},
		{rule("[/a]", `"param:"`), []string{at + `"param:": "param:": want param:<name>, the name of a parameter of the rule's paths (an ASCII letter or '_', then letters, digits or '_')`}},
		{rule("[/a/:1x]", "param:1x"), []string{
			`rate-limit config t.yaml:4: rule "a": field "paths": value "/a/:1x": ":1x" is a parameter without a valid name (an ASCII letter or '_', then letters, digits or '_'): '*', ':name' or '{name}' stands for exactly one segment`,
			at + `"param:1x": "param:1x": want param:<name>, the name of a parameter of the rule's paths (an ASCII letter or '_', then letters, digits or '_')`}},
		{rule("[/a/*]", "param:kb"), []string{at + `"param:kb": "param:kb": path "/a/*" has no parameter kb (every path of the rule must name it, as :kb or {kb})`}},
		{rule(`["/a/:kb", "/b/{id}"]`, "user+param:kb"), []string{at + `"user+param:kb": "param:kb": path "/b/{id}" has no parameter kb (every path of the rule must name it, as :kb or {kb})`}},
		{rule("[/a/:kb/:kb]", "param:kb"), []string{at + `"param:kb": "param:kb": path "/a/:kb/:kb" names kb 2 times`}},
		{rule("[/a]", "ip+ip"), []string{at + `"ip+ip": "ip" given twice`}},
		{rule("[/a]", "header:x-api-key+header:X-Api-Key"), []string{at + `"header:x-api-key+header:X-Api-Key": "header:X-Api-Key" given twice`}},
		{rule("[/a/:kb]", "user+ip+header:A+header:B+param:kb"), []string{at + `"user+ip+header:A+header:B+param:kb": 5 parts, at most 4`}},
		{rule("[/a]", "user++ip"), []string{at + `"user++ip": an empty part: want parts joined by one '+'`}},
		{rule("[/a]", "[ip]"), []string{`rate-limit config t.yaml:6: rule "a": field "key": want a string`}},
		{yamlLines("rate_limit:", "  default_key: param:kb"), []string{`rate-limit config t.yaml:2: field "default_key": value "param:kb": "param:kb": the default limit has no paths, so no parameter`}},
		{yamlLines("rate_limit:", "  default_key: host"), []string{`rate-limit config t.yaml:2: field "default_key": value "host": "host": want user, ip, header:<Name> or param:<name>, or several joined by '+'`}},
	} {
		c2, err := ParseConfig([]byte(c.doc), "t.yaml")
		if c2 != nil {
			t.Errorf("%s: a Config with an error", c.doc)
		}
		checkConfigError(t, err, c.want...)
	}
	// Built in code, the same checks.
	_, err := NewConfig(Spec{Enabled: true, Rules: []RuleSpec{{Name: "a", Paths: []string{"/a"}, Limit: []string{"1/s"}, Key: "param:kb"}}})
	checkConfigError(t, err, `rate-limit config: rule "a": field "key": value "param:kb": "param:kb": path "/a" has no parameter kb (every path of the rule must name it, as :kb or {kb})`)
}

// TestRuleKeyShadowOnly: a rule in shadow mode that no enforced rule goes
// with decides the Decision, under its own key.
func TestRuleKeyShadowOnly(t *testing.T) {
	e := newKeyEnv(t, `
rate_limit:
  enabled: true
  mode: shadow
  rules:
    - name: login
      paths: ["/login"]
      limit: "1/minute"
      key: ip
`)
	for i, want := range []Outcome{OutcomeAllowed, OutcomeShadowDenied} {
		d := e.decide(&keyReqT{user: "alice", ip: "192.0.2.1"}, "/login")
		if d.Rule == nil || d.Rule.Name != "login" || d.Key != "ip:192.0.2.1" || !d.Allowed || d.shadow != (pending{}) {
			t.Errorf("request %d: %+v, want allowed under login, key ip:192.0.2.1, nothing pending", i, d)
		}
		if ev := e.events[len(e.events)-1]; ev.Key != "ip:192.0.2.1" || ev.Outcome != want {
			t.Errorf("request %d: event %+v, want %v under ip:192.0.2.1", i, ev, want)
		}
	}
}

// TestRuleKeyShadowSlot: a rule in shadow mode with a concurrency limit
// takes its slots under its own key, not the enforced rule's: keyed by ip
// beside a rule keyed by user, two users of one address fill its one
// slot; keyed by user beside a rule keyed by ip, they do not.
func TestRuleKeyShadowSlot(t *testing.T) {
	for _, tt := range []struct {
		name, enforced, shadow string
		bobDenied              bool
	}{
		{"shadow per ip", "user", "ip", true},
		{"shadow per user", "ip", "user", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newKeyEnv(t, yamlLines("rate_limit:", "  enabled: true", "  rules:",
				"    - {name: x, paths: [/x], limit: 100/minute, key: "+tt.enforced+"}",
				"    - {name: watch, paths: [/x], limit: 100/minute, key: "+tt.shadow+", concurrent: 1, mode: shadow}"))
			alice := e.decide(&keyReqT{user: "alice", ip: "192.0.2.1"}, "/x")
			bob := e.decide(&keyReqT{user: "bob", ip: "192.0.2.1"}, "/x")
			if alice.ShadowDenied || bob.ShadowDenied != tt.bobDenied || !alice.Allowed || !bob.Allowed {
				t.Fatalf("alice shadow-denied %v, bob %v (allowed %v, %v); want false, %v, both allowed", alice.ShadowDenied, bob.ShadowDenied, alice.Allowed, bob.Allowed, tt.bobDenied)
			}
			// Completed, each gives its slot back under the key it took it:
			// a third request of bob's finds the slot free.
			e.flow.Limiter.Complete(context.Background(), &alice, 200)
			e.flow.Limiter.Complete(context.Background(), &bob, 200)
			if again := e.decide(&keyReqT{user: "bob", ip: "192.0.2.1"}, "/x"); again.ShadowDenied {
				t.Fatalf("after both completed, bob is shadow-denied: a slot was given back under another key")
			}
		})
	}
}
