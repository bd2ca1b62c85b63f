package core_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/clientip"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// recStore records every store call, "key policy cost", and asks a memory
// store on a manual clock; fail makes every call fail, failPeek every
// Peek.
type recStore struct {
	mem      *memstore.Store
	mu       sync.Mutex
	log      []string
	fail     bool
	failPeek bool
}

func newRecStore(t *testing.T, clock store.Clock) *recStore {
	mem := memstore.New(memstore.WithClock(clock))
	t.Cleanup(func() { _ = mem.Close() })
	return &recStore{mem: mem}
}

func (s *recStore) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	s.mu.Lock()
	s.log = append(s.log, key+" "+p.Name+" "+strconv.FormatInt(cost, 10))
	fail := s.fail
	s.mu.Unlock()
	if fail {
		return store.Result{}, errDown
	}
	return s.mem.Take(ctx, key, p, cost)
}

func (s *recStore) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	s.mu.Lock()
	s.log = append(s.log, "peek "+key+" "+p.Name+" "+strconv.FormatInt(cost, 10))
	fail := s.fail || s.failPeek
	s.mu.Unlock()
	if fail {
		return store.Result{}, errDown
	}
	return s.mem.Peek(ctx, key, p, cost)
}

func (s *recStore) Reset(ctx context.Context, key string, p *store.Policy) (bool, error) {
	return s.mem.Reset(ctx, key, p)
}

// calls returns and forgets the calls so far, joined with "; ".
func (s *recStore) calls() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := strings.Join(s.log, "; ")
	s.log = nil
	return out
}

var errDown = fmt.Errorf("store down")

// events records Observer events as "outcome rule key allowed cost".
type events struct {
	mu  sync.Mutex
	got []string
}

func (e *events) observe(ev core.Event) {
	e.mu.Lock()
	e.got = append(e.got, fmt.Sprintf("%v %s %s %v %d", ev.Outcome, ev.Rule, ev.Key, ev.Allowed, ev.Cost))
	e.mu.Unlock()
}

func (e *events) take() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := strings.Join(e.got, "; ")
	e.got = nil
	return out
}

const listsYAML = `
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "1/minute"
  allow:
    identities: ["sub:ops-bot", "203.0.113.9", "%s"]
    networks: ["10.0.0.0/8", "2001:db8:aaaa::/48"]
  ban:
    networks: ["198.51.100.0/24", "2001:db8:bad::/48", "192.0.2.66"]
`

// listsFlow is a Flow over *http.Request as an adapter builds it: the key
// function is X-User (a plain identity) or X-Api-Key (a secret one), the
// bypass X-Role: root, the client IP per cip.
func listsFlow(t *testing.T, cip clientip.Config) (*core.Flow[*http.Request], *recStore, *events, *[]string) {
	t.Helper()
	keyer := core.NewLimiter(nil)
	cfg, err := core.ParseConfig(fmt.Appendf(nil, listsYAML, keyer.Key(core.SecretIdentity("X-Api-Key", "k-ops"))), "lists.yaml")
	if err != nil {
		t.Fatal(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0))
	st := newRecStore(t, clock)
	ev := &events{}
	var steps []string
	f := &core.Flow[*http.Request]{
		Limiter: core.NewLimiter(cfg, core.WithStore(st), core.WithObserver(ev.observe), core.WithClock(clock)),
		Key: func(r *http.Request) (string, error) {
			steps = append(steps, "key")
			if k := r.Header.Get("X-Api-Key"); k != "" {
				return core.SecretIdentity("X-Api-Key", k), nil
			}
			return r.Header.Get("X-User"), nil
		},
		Bypass: func(r *http.Request) bool {
			steps = append(steps, "bypass")
			return r.Header.Get("X-Role") == "root"
		},
		ClientIP: func(r *http.Request) string {
			return cip.ClientIP(r.RemoteAddr, r.Header.Values)
		},
	}
	return f, st, ev, &steps
}

// serve runs one request through f and writes its answer as an adapter
// does (WriteDenied), and returns the response as text: status, the
// headers but Date in order, and the body.
func serve(t *testing.T, f *core.Flow[*http.Request], remote, path string, hdr ...string) string {
	t.Helper()
	r := httptest.NewRequest("GET", path, nil)
	r.RemoteAddr = remote
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Add(hdr[i], hdr[i+1])
	}
	d, err := f.Decide(r.Context(), r, r.Method, core.URLPath(r.URL), "")
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	if d.Allowed {
		d.SetHeaders(w.Header())
		w.WriteHeader(http.StatusOK)
	} else {
		d.WriteDenied(w)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d", w.Code)
	for _, k := range slices.Sorted(func(yield func(string) bool) {
		for k := range w.Header() {
			if !yield(k) {
				return
			}
		}
	}) {
		fmt.Fprintf(&b, " %s: %s;", k, strings.Join(w.Header()[k], ","))
	}
	if w.Body.Len() > 0 {
		b.WriteString(" " + w.Body.String())
	}
	return b.String()
}

const forbidden = `403 Content-Length: 23; Content-Type: application/json; {"detail": "Forbidden"}`

func TestBanNetworks(t *testing.T) {
	proxy := clientip.Config{TrustedProxies: []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32")}}
	for _, c := range []struct {
		name   string
		cip    clientip.Config
		remote string
		hdr    []string
		path   string
		want   string // the response
		calls  string // the store calls
		event  string
		steps  string // the key function and bypass calls
	}{
		{name: "banned", remote: "198.51.100.7:1234", path: "/api/search",
			want: forbidden, event: "banned   false 0"},
		{name: "an exempt path is banned too", remote: "198.51.100.7:1234", path: "/health",
			want: forbidden, event: "banned   false 0"},
		{name: "a bypassed caller is banned too", remote: "198.51.100.7:1234", path: "/api/search", hdr: []string{"X-Role", "root"},
			want: forbidden, event: "banned   false 0"},
		{name: "an allowed identity is banned too", remote: "198.51.100.7:1234", path: "/api/search", hdr: []string{"X-User", "sub:ops-bot"},
			want: forbidden, event: "banned   false 0"},
		{name: "a single address", remote: "192.0.2.66:1", path: "/api/search",
			want: forbidden, event: "banned   false 0"},
		{name: "next to a single address", remote: "192.0.2.67:1", path: "/api/search",
			want:  `200 Ratelimit: "search";r=0;t=60; Ratelimit-Policy: "search";q=1;w=60;`,
			calls: "192.0.2.67 search 1", event: "allowed search 192.0.2.67 true 1", steps: "bypass key"},
		{name: "IPv4-mapped IPv6 peer", remote: "[::ffff:198.51.100.7]:1234", path: "/api/search",
			want: forbidden, event: "banned   false 0"},
		{name: "IPv6 peer", remote: "[2001:db8:bad:1::5]:1234", path: "/api/search",
			want: forbidden, event: "banned   false 0"},
		// Without a trusted proxy, X-Forwarded-For is the client's own
		// writing: it neither escapes a ban nor earns an allow.
		{name: "X-Forwarded-For does not escape a ban", remote: "198.51.100.7:1234", path: "/api/search",
			hdr: []string{"X-Forwarded-For", "10.0.0.1"}, want: forbidden, event: "banned   false 0"},
		{name: "X-Forwarded-For does not earn an allow", remote: "192.0.2.1:1234", path: "/api/search",
			hdr:   []string{"X-Forwarded-For", "10.0.0.1"},
			want:  `200 Ratelimit: "search";r=0;t=60; Ratelimit-Policy: "search";q=1;w=60;`,
			calls: "192.0.2.1 search 1", event: "allowed search 192.0.2.1 true 1", steps: "bypass key"},
		// Behind a trusted proxy the client is the rightmost untrusted hop:
		// an allowed address written to its left changes nothing.
		{name: "behind a proxy", cip: proxy, remote: "127.0.0.1:1", path: "/api/search",
			hdr: []string{"X-Forwarded-For", "10.0.0.1, 198.51.100.7"}, want: forbidden, event: "banned   false 0"},
		{name: "behind a proxy, mapped", cip: proxy, remote: "127.0.0.1:1", path: "/api/search",
			hdr: []string{"X-Forwarded-For", "::ffff:198.51.100.7"}, want: forbidden, event: "banned   false 0"},
		{name: "allowed network", remote: "10.1.2.3:1", path: "/api/search",
			want: "200", event: "bypassed search  true 0", steps: "bypass"},
		{name: "allowed IPv6 network", remote: "[2001:db8:aaaa:1::1]:1", path: "/api/search",
			want: "200", event: "bypassed search  true 0", steps: "bypass"},
		{name: "allowed network, exempt path", remote: "10.1.2.3:1", path: "/health",
			want: "200", event: "exempt   true 0"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, st, ev, steps := listsFlow(t, c.cip)
			if got := serve(t, f, c.remote, c.path, c.hdr...); got != c.want {
				t.Errorf("response:\n got %s\nwant %s", got, c.want)
			}
			if got := st.calls(); got != c.calls {
				t.Errorf("store calls: got %q, want %q", got, c.calls)
			}
			if got := ev.take(); got != c.event {
				t.Errorf("events: got %q, want %q", got, c.event)
			}
			if got := strings.Join(*steps, " "); got != c.steps {
				t.Errorf("steps: got %q, want %q", got, c.steps)
			}
		})
	}
}

// TestAllowNetworkOverLimit checks that an allowed network passes
// uncounted while its identity is over the limit, and that it is counted
// again once the network leaves the list.
func TestAllowNetworkOverLimit(t *testing.T) {
	f, st, _, _ := listsFlow(t, clientip.Config{})
	for range 3 {
		if got := serve(t, f, "10.9.9.9:1", "/api/search", "X-User", "alice"); got != "200" {
			t.Fatalf("allowed network: got %s", got)
		}
	}
	if got := st.calls(); got != "" {
		t.Fatalf("store calls: %q", got)
	}
	if got := serve(t, f, "192.0.2.1:1", "/api/search", "X-User", "alice"); !strings.HasPrefix(got, "200 ") {
		t.Fatalf("first counted request: %s", got)
	}
	if got := serve(t, f, "192.0.2.1:1", "/api/search", "X-User", "alice"); !strings.HasPrefix(got, "429 ") {
		t.Fatalf("second counted request: %s", got)
	}
}

func TestAllowIdentities(t *testing.T) {
	keyer := core.NewLimiter(nil)
	for _, c := range []struct {
		name, user, apiKey string
		counted            string // the store key, "" for allowed
	}{
		{name: "plain", user: "sub:ops-bot"},
		{name: "IP identity", user: "203.0.113.9"},
		{name: "secret", apiKey: "k-ops"},
		{name: "another secret", apiKey: "k-other", counted: keyer.Key(core.SecretIdentity("X-Api-Key", "k-other"))},
		// Spellings that are not the allowed identity are counted.
		{name: "case", user: "SUB:ops-bot", counted: "SUB:ops-bot"},
		{name: "trailing space", user: "sub:ops-bot ", counted: "sub:ops-bot "},
		{name: "prefix", user: "sub:ops-bo", counted: "sub:ops-bo"},
		{name: "longer", user: "sub:ops-bot2", counted: "sub:ops-bot2"},
		// A client that writes the allowed key itself as a plain
		// identity gets its digest, never the key.
		{name: "the hashed key spelled", user: keyer.Key(core.SecretIdentity("X-Api-Key", "k-ops")),
			counted: store.BoundKey(keyer.Key(core.SecretIdentity("X-Api-Key", "k-ops")))},
		{name: "the secret as a plain identity", user: "X-Api-Key:k-ops", counted: "X-Api-Key:k-ops"},
		{name: "mapped IP", user: "::ffff:203.0.113.9", counted: "::ffff:203.0.113.9"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, st, ev, _ := listsFlow(t, clientip.Config{})
			hdr := []string{"X-User", c.user}
			if c.apiKey != "" {
				hdr = []string{"X-Api-Key", c.apiKey}
			}
			got := serve(t, f, "192.0.2.1:1", "/api/search", hdr...)
			calls, events := st.calls(), ev.take()
			if c.counted == "" {
				if got != "200" || calls != "" || events != "bypassed search  true 0" {
					t.Fatalf("got %s, calls %q, events %q; want 200, no call, bypassed", got, calls, events)
				}
				return
			}
			if !strings.HasPrefix(got, "200 Ratelimit") || calls != c.counted+" search 1" {
				t.Fatalf("got %s, calls %q; want counted as %q", got, calls, c.counted)
			}
		})
	}
	// A limiter with another identity key hashes the secret otherwise:
	// the entry does not match it.
	cfg, err := core.ParseConfig(fmt.Appendf(nil, listsYAML, keyer.Key(core.SecretIdentity("X-Api-Key", "k-ops"))), "lists.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(memstore.New()), core.WithIdentityKey([]byte("another key")))
	if d := l.Decide(context.Background(), "GET", "/api/search", core.SecretIdentity("X-Api-Key", "k-ops"), false); d.Rule == nil {
		t.Fatalf("another identity key: the request was not counted")
	}
}

// TestLimiterDecideLists checks Limiter.Decide: an identity that is an IP
// address is the client IP of the network lists.
func TestLimiterDecideLists(t *testing.T) {
	cfg, err := core.ParseConfig(fmt.Appendf(nil, listsYAML, "x"), "lists.yaml")
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(memstore.New()))
	ctx := context.Background()
	for _, c := range []struct {
		id, path string
		want     string
	}{
		{"198.51.100.7", "/api/search", "banned 403"},
		{"::ffff:198.51.100.7", "/health", "banned 403"},
		{"198.51.100.7", "/health", "banned 403"},
		{"10.0.0.1", "/api/search", "allowed uncounted 200"},
		{"sub:ops-bot", "/api/search", "allowed uncounted 200"},
		{"x", "/api/search", "allowed uncounted 200"},
		{"192.0.2.1", "/api/search", "allowed counted 200"},
		{"198.51.100.7x", "/api/search", "allowed counted 200"},
	} {
		d := l.Decide(ctx, "GET", core.Path(c.path), c.id, false)
		got := fmt.Sprintf("allowed counted %d", d.Status())
		switch {
		case d.Banned:
			got = fmt.Sprintf("banned %d", d.Status())
		case d.Allowed && d.Rule == nil:
			got = fmt.Sprintf("allowed uncounted %d", d.Status())
		case !d.Allowed:
			got = fmt.Sprintf("denied %d", d.Status())
		}
		if c.path == "/health" && got == "allowed uncounted 200" {
			got = "exempt"
		}
		if got != c.want {
			t.Errorf("Decide(%q, %q): got %s, want %s", c.id, c.path, got, c.want)
		}
	}
}

// TestBannedDecision checks the answer of a banned request written both
// ways an adapter writes one (WriteDenied; Header, Status and Body).
func TestBannedDecision(t *testing.T) {
	cfg, err := core.ParseConfig([]byte("rate_limit:\n  enabled: true\n  ban:\n    networks: [192.0.2.0/24]\n"), "b.yaml")
	if err != nil {
		t.Fatal(err)
	}
	d := core.NewLimiter(cfg, core.WithStore(memstore.New())).Decide(context.Background(), "GET", "/", "192.0.2.1", false)
	if d.Allowed || !d.Banned || d.Status() != http.StatusForbidden || string(d.Body()) != `{"detail": "Forbidden"}` || d.Rule != nil || d.Key != "" {
		t.Fatalf("got %+v, status %d, body %s", d, d.Status(), d.Body())
	}
	var got []string
	var buf [64]byte
	for i := 0; ; i++ {
		name, v, ok := d.Header(i, buf[:0])
		if !ok {
			break
		}
		got = append(got, name+": "+string(v))
	}
	if want := []string{"Content-Type: application/json", "Content-Length: 23"}; !slices.Equal(got, want) {
		t.Errorf("Header: got %q, want %q", got, want)
	}
	w := httptest.NewRecorder()
	d.WriteDenied(w)
	if w.Code != 403 || len(w.Header()) != 2 || w.Header().Get("Content-Type") != "application/json" || w.Header().Get("Content-Length") != "23" || w.Body.String() != `{"detail": "Forbidden"}` {
		t.Errorf("WriteDenied: %d %v %s", w.Code, w.Header(), w.Body)
	}
}

// TestListsLargeAllocs checks that the lists cost no allocation, with
// ten thousand networks of many lengths in each.
func TestListsLargeAllocs(t *testing.T) {
	spec := core.Spec{Enabled: true, Rules: []core.RuleSpec{{Name: "search", Paths: []string{"/api/search"}, Limit: []string{"2000000000/hour"}}}}
	for i := range 10000 {
		spec.Ban.Networks = append(spec.Ban.Networks, fmt.Sprintf("100.%d.%d.0/%d", i/256, i%256, 24))
		spec.Allow.Networks = append(spec.Allow.Networks, fmt.Sprintf("2001:db8:%x::/%d", i, 48))
		spec.Allow.Identities = append(spec.Allow.Identities, "user:"+strconv.Itoa(i))
	}
	spec.Ban.Networks = append(spec.Ban.Networks, "172.16.0.0/12", "192.0.2.128/25", "203.0.113.7")
	cfg, err := core.NewConfig(spec)
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(memstore.New()))
	f := &core.Flow[string]{Limiter: l, ClientIP: func(ip string) string { return ip }}
	ctx := context.Background()
	for _, c := range []struct {
		ip   string
		want string
	}{
		{"100.39.15.9", "banned"}, // entry 9999
		{"100.39.16.9", "counted"},
		{"172.31.255.255", "banned"},
		{"192.0.2.200", "banned"},
		{"192.0.2.100", "counted"},
		{"203.0.113.7", "banned"},
		{"2001:db8:270f::", "allowed"}, // entry 9999
		{"2001:db8:2710::", "counted"},
	} {
		var d core.Decision
		decide := func() { d, _ = f.Decide(ctx, c.ip, "GET", "/api/search", "") }
		decide()
		got := "counted"
		switch {
		case d.Banned:
			got = "banned"
		case d.Rule == nil:
			got = "allowed"
		}
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.ip, got, c.want)
		}
		if n := testing.AllocsPerRun(100, decide); n != 0 {
			t.Errorf("%s: %v allocations per request, want 0", c.ip, n)
		}
	}
}

func TestListsConfigErrors(t *testing.T) {
	const head = "rate_limit:\n  enabled: true\n"
	for _, c := range []struct {
		name, body string
		want       []string
	}{
		{"host bits", "  ban:\n    networks: [10.0.0.1/8]\n",
			[]string{`rate-limit config t.yaml:4: field "ban.networks": value "10.0.0.1/8": host bits set (did you mean 10.0.0.0/8?) (want a CIDR prefix such as 10.0.0.0/8 or 2001:db8::/32, or one address)`}},
		{"not an address", "  allow:\n    networks: [\"10.0.0.300/8\", \"fe80::1%eth0\", \"10.0.0.0/33\", \"\"]\n",
			[]string{
				`rate-limit config t.yaml:4: field "allow.networks": value "10.0.0.300/8": invalid IP address (want a CIDR prefix such as 10.0.0.0/8 or 2001:db8::/32, or one address)`,
				`rate-limit config t.yaml:4: field "allow.networks": value "fe80::1%eth0": IPv6 zone not allowed (want a CIDR prefix such as 10.0.0.0/8 or 2001:db8::/32, or one address)`,
				`rate-limit config t.yaml:4: field "allow.networks": value "10.0.0.0/33": invalid prefix length (want a CIDR prefix such as 10.0.0.0/8 or 2001:db8::/32, or one address)`,
				`rate-limit config t.yaml:4: field "allow.networks": empty value (want a CIDR prefix such as 10.0.0.0/8 or 2001:db8::/32, or one address)`,
			}},
		{"given twice", "  ban:\n    networks:\n      - 192.0.2.0/24\n      - ::ffff:192.0.2.0/120\n",
			[]string{`rate-limit config t.yaml:6: field "ban.networks": value "::ffff:192.0.2.0/120": the same network as ban.networks[0] (line 5)`}},
		{"redundant", "  ban:\n    networks:\n      - 192.0.2.7\n      - 192.0.2.0/24\n",
			[]string{`rate-limit config t.yaml:5: field "ban.networks": value "192.0.2.7": inside "192.0.2.0/24" (ban.networks[1] (line 6)): this entry is redundant`}},
		{"allow inside ban", "  ban:\n    networks: [10.0.0.0/8]\n  allow:\n    networks: [10.1.0.0/16, 10.0.0.0/8, 11.0.0.0/8]\n",
			[]string{
				`rate-limit config t.yaml:6: field "allow.networks": value "10.1.0.0/16": inside "10.0.0.0/8" (allow.networks[1] (line 6)): this entry is redundant`,
				`rate-limit config t.yaml:6: field "allow.networks": value "10.1.0.0/16": inside ban.networks "10.0.0.0/8" (line 4): a banned network is refused first, so this entry could never apply`,
				`rate-limit config t.yaml:6: field "allow.networks": value "10.0.0.0/8": inside ban.networks "10.0.0.0/8" (line 4): a banned network is refused first, so this entry could never apply`,
			}},
		{"identities", "  allow:\n    identities:\n      - \"\"\n      - \"sha256:abc\"\n      - \"X-Api-Key:hmac:0123456789ABCDEF0123456789abcdef\"\n      - \":hmac:0123456789abcdef0123456789abcdef\"\n      - \"::ffff:192.0.2.1\"\n      - \"2001:DB8::1\"\n      - \"sub:a\"\n      - \"sub:a\"\n",
			[]string{
				`rate-limit config t.yaml:5: field "allow.identities": an empty identity`,
				`rate-limit config t.yaml:6: field "allow.identities": value "sha256:abc": "sha256:" starts a digest key (BoundKey): "sha256:" and 64 lower-case hex digits`,
				`rate-limit config t.yaml:7: field "allow.identities": value "X-Api-Key:hmac:0123456789ABCDEF0123456789abcdef": a secret identity's key ends in ":hmac:" and 32 lower-case hex digits (Limiter.Key)`,
				`rate-limit config t.yaml:8: field "allow.identities": value ":hmac:0123456789abcdef0123456789abcdef": a secret identity's key has a label before ":hmac:" (Limiter.Key)`,
				`rate-limit config t.yaml:9: field "allow.identities": value "::ffff:192.0.2.1": a client IP is written as the limiter names it: "192.0.2.1" (or list it in allow.networks)`,
				`rate-limit config t.yaml:10: field "allow.identities": value "2001:DB8::1": an IPv6 client counts under its group's address (its /64 by default): list it in allow.networks`,
				`rate-limit config t.yaml:12: field "allow.identities": value "sub:a": the same store key as allow.identities[6] (line 11)`,
			}},
		{"unknown fields", "  allow:\n    users: [a]\n  ban:\n    identities: [a]\n",
			[]string{
				`rate-limit config t.yaml:4: field "allow.users": unknown field (want identities or networks)`,
				`rate-limit config t.yaml:6: field "ban.identities": unknown field (want networks)`,
			}},
		{"wrong kinds", "  allow: [a]\n  ban:\n    networks: 10.0.0.0/8\n",
			[]string{
				`rate-limit config t.yaml:3: field "allow": want a mapping`,
				`rate-limit config t.yaml:5: field "ban.networks": value "10.0.0.0/8": want a list of strings`,
			}},
		{"penalty", "  rules:\n    - name: login\n      paths: [/login]\n      limit: 5/minute\n      penalty: {after: 0, within: 1x, ban: 500ms}\n",
			[]string{
				`rate-limit config t.yaml:7: rule "login": field "penalty.after": value "0": want a number of denials from 1 to 2147483647`,
				`rate-limit config t.yaml:7: rule "login": field "penalty.within": value "1x": unknown unit "x" (want second, minute, hour or day): a penalty's duration is a count and a unit, such as 30s, 15min, 1h or 1d`,
				`rate-limit config t.yaml:7: rule "login": field "penalty.ban": value "500ms": unknown unit "ms" (want second, minute, hour or day): a penalty's duration is a count and a unit, such as 30s, 15min, 1h or 1d`,
			}},
		{"penalty missing fields", "  rules:\n    - name: login\n      paths: [/login]\n      limit: 5/minute\n      penalty:\n        after: 3\n        bans: 1m\n",
			[]string{
				`rate-limit config t.yaml:8: rule "login": field "penalty.within": missing: want a duration such as 30s, 1m, 15min, 1h or 1d`,
				`rate-limit config t.yaml:8: rule "login": field "penalty.ban": missing: want a duration such as 30s, 1m, 15min, 1h or 1d`,
				`rate-limit config t.yaml:9: rule "login": field "penalty.bans": unknown field (want after, within and ban)`,
			}},
		{"penalty too long", "  rules:\n    - name: login\n      paths: [/login]\n      limit: 5/minute\n      penalty: {after: 3, within: 1m, ban: 100000d}\n",
			[]string{`rate-limit config t.yaml:7: rule "login": field "penalty.ban": value "100000d": longer than a counter can keep (320256h0m0s)`}},
		{"penalty overflow", "  rules:\n    - name: login\n      paths: [/login]\n      limit: 5/minute\n      penalty: {after: 3, within: 1000000d, ban: 1m}\n",
			[]string{`rate-limit config t.yaml:7: rule "login": field "penalty.within": value "1000000d": period "1000000d" is too long: a penalty's duration is a count and a unit, such as 30s, 15min, 1h or 1d`}},
		{"penalty not a mapping", "  rules:\n    - name: login\n      paths: [/login]\n      limit: 5/minute\n      penalty: 10\n",
			[]string{`rate-limit config t.yaml:7: rule "login": field "penalty": value "10": want a mapping of after, within and ban`}},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := core.ParseConfig([]byte(head+c.body), "t.yaml")
			if cfg != nil || err == nil {
				t.Fatalf("no error")
			}
			var got []string
			if j, ok := err.(interface{ Unwrap() []error }); ok {
				for _, e := range j.Unwrap() {
					got = append(got, e.Error())
				}
			} else {
				got = []string{err.Error()}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("errors:\n got %q\nwant %q", got, c.want)
			}
		})
	}
}

// TestAllowLongIdentity checks an identity longer than store.MaxKeyLen, which
// the store knows by its digest: listed as itself or as the digest.
func TestAllowLongIdentity(t *testing.T) {
	long := "user:" + strings.Repeat("x", store.MaxKeyLen)
	other := long + "y"
	for _, entry := range []string{long, store.BoundKey(long)} {
		cfg, err := core.NewConfig(core.Spec{Enabled: true, Allow: core.AllowSpec{Identities: []string{entry}}})
		if err != nil {
			t.Fatal(err)
		}
		l := core.NewLimiter(cfg, core.WithStore(memstore.New()))
		if d := l.Decide(context.Background(), "GET", "/", long, false); d.Rule != nil {
			t.Errorf("entry %.20q…: the identity was counted", entry)
		}
		if d := l.Decide(context.Background(), "GET", "/", other, false); d.Rule == nil {
			t.Errorf("entry %.20q…: another identity was not counted", entry)
		}
	}
}

// TestNetworkEdges checks prefixes of length 0, 32, 64, 127 and 128.
func TestNetworkEdges(t *testing.T) {
	cfg, err := core.NewConfig(core.Spec{Enabled: true,
		Ban:   core.BanSpec{Networks: []string{"0.0.0.0/0", "2001:db8::1", "2001:db8:0:1::/64", "2001:db8:0:2::/127"}},
		Allow: core.AllowSpec{Networks: []string{"::/0"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(memstore.New()))
	for _, c := range []struct {
		ip   string
		want string
	}{
		{"0.0.0.0", "banned"}, {"255.255.255.255", "banned"}, {"::ffff:1.2.3.4", "banned"},
		{"2001:db8::1", "banned"}, {"2001:db8::", "allowed"}, {"2001:db8::2", "allowed"},
		{"2001:db8:0:1:ffff:ffff:ffff:ffff", "banned"}, {"2001:db8:0:1::", "banned"}, {"2001:db8:0:0:ffff::", "allowed"},
		{"2001:db8:0:2::", "banned"}, {"2001:db8:0:2::1", "banned"}, {"2001:db8:0:2::2", "allowed"},
		{"::", "allowed"}, {"ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "allowed"},
	} {
		d := l.Decide(context.Background(), "GET", "/", c.ip, false)
		got := "counted"
		switch {
		case d.Banned:
			got = "banned"
		case d.Rule == nil:
			got = "allowed"
		}
		if got != c.want {
			t.Errorf("%s: got %s, want %s", c.ip, got, c.want)
		}
	}
}

// TestAllowSecretIdentityInCode checks that a Spec built in code cannot
// list a secret identity itself (the secret would sit in the
// configuration): its store key is asked for.
func TestAllowSecretIdentityInCode(t *testing.T) {
	_, err := core.NewConfig(core.Spec{Enabled: true, Allow: core.AllowSpec{Identities: []string{core.SecretIdentity("X-Api-Key", "k")}}})
	const want = `rate-limit config: field "allow.identities": value "SecretIdentity(\"X-Api-Key\", …)": a secret identity (SecretIdentity): write its store key, Limiter.Key(identity), which never holds the secret`
	if err == nil || err.Error() != want {
		t.Fatalf("got %v, want %s", err, want)
	}
}
