package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/worksclient"
	"github.com/rlkit/rlkit/worksclient/worksredis"
)

func main() { demo.Command(run) }

// config is what the flags set.
type config struct {
	redisURL string
	interval time.Duration
	perKey   int
	owner    string
}

// run parses the flags, relays the outbox and prints the report.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("worksrelay", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg config
	fs.StringVar(&cfg.redisURL, "redis", "", "hold the leader lock and share the pacing in the Redis at `URL` (redis://[user:pass@]host:port/db); default: no Redis, a single instance")
	fs.DurationVar(&cfg.interval, "interval", worksclient.DefaultInterval, "spacing of request starts per API key")
	fs.IntVar(&cfg.perKey, "messages", 4, "messages per API in the outbox (1 to 100)")
	fs.StringVar(&cfg.owner, "owner", defaultOwner(), "this replica's name in the leader lock")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return demo.ErrUsage
	}
	usage := func(format string, args ...any) error {
		fmt.Fprintf(stderr, format+"\n", args...)
		fs.Usage()
		return demo.ErrUsage
	}
	switch {
	case fs.NArg() > 0:
		return usage("unexpected argument %q", fs.Arg(0))
	case cfg.interval <= 0:
		return usage("-interval %v: want a positive duration", cfg.interval)
	case cfg.perKey < 1 || cfg.perKey > 100:
		return usage("-messages %d: want 1 to 100", cfg.perKey)
	}
	var rdb redis.UniversalClient
	if cfg.redisURL != "" {
		opts, err := redis.ParseURL(cfg.redisURL)
		if err != nil {
			return usage("-redis: %v", err)
		}
		opts.ContextTimeoutEnabled = true
		c := redis.NewClient(opts)
		defer c.Close()
		rdb = c
	}
	rep, err := relayOutbox(ctx, cfg, rdb, stdout)
	if rep != nil {
		rep.print(stdout)
	}
	return err
}

func defaultOwner() string {
	host, err := os.Hostname()
	if err != nil {
		host = "worksrelay"
	}
	return fmt.Sprintf("%s-%d", host, os.Getpid())
}

// relayOutbox starts the fake API, fills an outbox and relays it while
// leader, until the outbox is empty or ctx ends.
func relayOutbox(ctx context.Context, cfg config, rdb redis.UniversalClient, stdout io.Writer) (*report, error) {
	api := newFakeAPI()
	defer api.Close()
	box := newOutbox(cfg.perKey)

	// The service's client paces nothing; the relay gets a paced copy. Under
	// the pacing, sent notes when each request leaves for the network.
	sent := &sendLog{base: api.Client().Transport, at: make(map[string][]time.Time)}
	tokens := &tokenSource{tokenURL: api.URL + "/oauth2/v2.0/token"}
	client, err := worksclient.NewClient(api.URL, worksclient.WithHTTPClient(&http.Client{Transport: sent}), worksclient.WithTokenSource(tokens),
		worksclient.WithTransportOptions(worksclient.WithRetry(3, time.Minute)))
	if err != nil {
		return nil, err
	}
	var (
		pacer worksclient.RateLimiter
		where string
	)
	if rdb == nil {
		pacer, where = worksclient.NewPacer(cfg.interval), "in this process"
	} else {
		rp := worksredis.NewPacer(rdb, cfg.interval)
		defer rp.Close()
		pacer, where = rp, "in Redis, shared by every replica"
	}
	relayClient := client.WithRateLimiter(pacer)
	tokens.hc = relayClient.HTTPClient() // the relay's token requests are paced too

	lock := worksredis.NewLeaderLock(rdb, cfg.owner)
	fmt.Fprintf(stdout, "fake Works API on %s\n", api.URL)
	if rdb == nil {
		fmt.Fprintln(stdout, "leader lock: none (no Redis: a single instance relays)")
	} else {
		fmt.Fprintf(stdout, "leader lock: %s (TTL %v) as %s\n", worksredis.LeaderKey, worksredis.LeaderTTL, cfg.owner)
	}
	fmt.Fprintf(stdout, "relaying %d messages over %d APIs, paced at %v per API %s\n", box.pending(), len(apis), cfg.interval, where)

	start := time.Now()
	for box.pending() > 0 {
		if rdb != nil {
			fmt.Fprintln(stdout, "waiting to become the leader")
		}
		err := lock.Run(ctx, func(ctx context.Context) error {
			if rdb != nil {
				fmt.Fprintln(stdout, "leader: relaying")
			}
			return relay(ctx, relayClient, box)
		})
		switch {
		case errors.Is(err, worksredis.ErrLeadershipLost):
			fmt.Fprintf(stdout, "%v; contending again\n", err)
		case err != nil:
			return newReport(api, sent, box, time.Since(start)), err
		}
	}
	return newReport(api, sent, box, time.Since(start)), nil
}

// api is one Works API that the outbox's messages call.
type api struct {
	method string
	path   string          // a format of the message number
	body   func(i int) any // nil: no body
}

func (a api) pathOf(i int) string { return fmt.Sprintf(a.path, i) }

// apis are the APIs of the outbox's messages: the seed's examples, an id
// percent-encoded in one of them. The bodies are the real calls', abridged.
var apis = []api{
	{"PATCH", "/v1.0/users/user%d@example.com", userPatch},
	{"POST", "/v1.0/users/user%[1]d@example.com/alias-emails/alias%[1]d%%40example.com", nil},
	{"PATCH", "/scim/v2/Users/7f0c3e2a-9b1d-4c5e-8f6a-%012d", scimPatch},
}

func userPatch(i int) any {
	return map[string]any{"userName": map[string]string{"lastName": "Kim", "firstName": fmt.Sprint("Member", i)}}
}

func scimPatch(i int) any {
	return map[string]any{
		"schemas":    []string{"urn:ietf:params:scim:api:messages:2.0:PatchOp"},
		"Operations": []map[string]any{{"op": "replace", "path": "active", "value": i%2 == 0}},
	}
}

// job is one message in the outbox: one call of the Works API.
type job struct {
	id           int
	method, path string
	body         any
}

// outbox is an in-memory outbox: jobs in the order they were written,
// removed when sent.
type outbox struct {
	mu   sync.Mutex
	jobs []job
}

func newOutbox(perKey int) *outbox {
	b := &outbox{}
	for i := range perKey {
		for _, a := range apis {
			j := job{id: len(b.jobs) + 1, method: a.method, path: a.pathOf(i)}
			if a.body != nil {
				j.body = a.body(i)
			}
			b.jobs = append(b.jobs, j)
		}
	}
	return b
}

func (b *outbox) ready() []job {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.jobs)
}

func (b *outbox) ack(id int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.jobs = slices.DeleteFunc(b.jobs, func(j job) bool { return j.id == id })
}

func (b *outbox) pending() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.jobs)
}

// relay sends the outbox's ready jobs: one lane per API key, so that APIs
// do not wait on each other, and each API's jobs in order. A job is
// removed from the outbox only once sent; when ctx ends (leadership lost,
// or shutdown) the lanes stop and the rest waits for the next leader.
func relay(ctx context.Context, api *worksclient.Client, box *outbox) error {
	lanes := map[string][]job{}
	var keys []string
	for _, j := range box.ready() {
		k := worksclient.APIKey(j.method, j.path)
		if _, ok := lanes[k]; !ok {
			keys = append(keys, k)
		}
		lanes[k] = append(lanes[k], j)
	}
	errs := make([]error, len(keys))
	var wg sync.WaitGroup
	for i, k := range keys {
		wg.Go(func() {
			for _, j := range lanes[k] {
				if err := api.Do(ctx, j.method, j.path, j.body, nil); err != nil {
					errs[i] = fmt.Errorf("message %d (%s %s): %w", j.id, j.method, j.path, err)
					return
				}
				box.ack(j.id)
			}
		})
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return err
	}
	return errors.Join(errs...)
}

// tokenSource fetches the relay's access token from the token endpoint,
// through the paced client, and keeps it until a minute before it expires.
type tokenSource struct {
	tokenURL string
	hc       *http.Client

	mu      sync.Mutex
	token   string
	expires time.Time
}

func (s *tokenSource) Token(ctx context.Context) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.token != "" && time.Until(s.expires) > time.Minute {
		return s.token, nil
	}
	form := url.Values{
		"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"},
		"assertion":  {"demo-assertion"}, // a JWT signed with the app's private key, in a real relay
		"scope":      {"directory,user"},
	}
	req, err := http.NewRequestWithContext(ctx, "POST", s.tokenURL, strings.NewReader(form.Encode()))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.hc.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var tok struct {
		AccessToken string `json:"access_token"`
		ExpiresIn   int64  `json:"expires_in"`
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token endpoint: %s", resp.Status)
	}
	if err := json.NewDecoder(resp.Body).Decode(&tok); err != nil {
		return "", fmt.Errorf("token endpoint: %w", err)
	}
	s.token, s.expires = tok.AccessToken, time.Now().Add(time.Duration(tok.ExpiresIn)*time.Second)
	return s.token, nil
}

// fakeAPI is a stand-in for the Works API on 127.0.0.1: it issues a token
// and accepts any call bearing it, and records when each call arrives,
// per API key.
type fakeAPI struct {
	*httptest.Server
	mu      sync.Mutex
	arrived map[string][]time.Time
}

const demoToken = "demo-access-token"

func newFakeAPI() *fakeAPI {
	f := &fakeAPI{arrived: make(map[string][]time.Time)}
	f.Server = httptest.NewUnstartedServer(nil)
	f.Config = demo.DefaultServerLimits().HTTPServer(http.HandlerFunc(f.serve)) // the examples' server timeouts
	f.Start()
	return f
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	key := worksclient.APIKey(r.Method, r.URL.EscapedPath())
	f.mu.Lock()
	f.arrived[key] = append(f.arrived[key], now)
	f.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case key == "POST /oauth2/v2.0/token":
		_, _ = io.WriteString(w, `{"access_token": "`+demoToken+`", "token_type": "Bearer", "expires_in": 86400}`)
	case r.Header.Get("Authorization") != "Bearer "+demoToken:
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"code": "UNAUTHORIZED", "description": "invalid access token"}`)
	default:
		w.WriteHeader(http.StatusOK)
		_, _ = io.WriteString(w, `{}`)
	}
}

// sendLog is a RoundTripper that notes when each request starts, per API
// key, and sends it on.
type sendLog struct {
	base http.RoundTripper
	mu   sync.Mutex
	at   map[string][]time.Time
}

func (s *sendLog) RoundTrip(req *http.Request) (*http.Response, error) {
	now := time.Now()
	key := worksclient.APIKey(req.Method, req.URL.EscapedPath())
	s.mu.Lock()
	s.at[key] = append(s.at[key], now)
	s.mu.Unlock()
	return s.base.RoundTrip(req)
}

// report is when each API key's requests were sent and when they arrived.
type report struct {
	sent, arrived map[string][]time.Time
	left          int
	elapsed       time.Duration
}

func newReport(api *fakeAPI, sent *sendLog, box *outbox, elapsed time.Duration) *report {
	r := &report{left: box.pending(), elapsed: elapsed}
	api.mu.Lock()
	r.arrived = maps.Clone(api.arrived)
	api.mu.Unlock()
	sent.mu.Lock()
	r.sent = maps.Clone(sent.at)
	sent.mu.Unlock()
	return r
}

// minGap returns the smallest gap between consecutive times, and false
// when there are fewer than two.
func minGap(at []time.Time) (time.Duration, bool) {
	if len(at) < 2 {
		return 0, false
	}
	g := at[1].Sub(at[0])
	for i := 2; i < len(at); i++ {
		g = min(g, at[i].Sub(at[i-1]))
	}
	return g, true
}

func (r *report) print(w io.Writer) {
	var b strings.Builder
	b.WriteString("smallest gap between requests of one API key, as the relay sent them (the pacer's\n" +
		"spacing) and as the API received them (plus loopback and scheduling jitter):\n")
	for _, k := range slices.Sorted(maps.Keys(r.sent)) {
		fmt.Fprintf(&b, "  %-42s %3d sent", k, len(r.sent[k]))
		if g, ok := minGap(r.sent[k]); ok {
			fmt.Fprintf(&b, "  gap %-8v", g.Truncate(10*time.Microsecond))
		}
		if g, ok := minGap(r.arrived[k]); ok {
			fmt.Fprintf(&b, "  received gap %v", g.Truncate(10*time.Microsecond))
		}
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "relayed in %v; %d message(s) left in the outbox\n", r.elapsed.Round(time.Millisecond), r.left)
	_, _ = io.WriteString(w, b.String())
}
