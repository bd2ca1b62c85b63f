package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/rlkit/rlkit/cmd/rlkit/internal/termtext"
	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/nethttp"
)

// explainCmd is `rlkit explain --config FILE METHOD PATH`.
type explainCmd struct {
	Config   string   `required:"" placeholder:"FILE" help:"The rate-limit configuration file."`
	Header   []string `short:"H" sep:"none" placeholder:"'NAME: VALUE'" help:"A request header (repeatable)."`
	Plan     string   `placeholder:"P" help:"The caller's plan (one of the file's tiers)."`
	IP       string   `name:"ip" default:"192.0.2.1" placeholder:"ADDR" help:"The client's address, the request's RemoteAddr (default: ${default})."`
	Identity string   `placeholder:"ID" xor:"identity" help:"The identity a key function names the caller by (default: none, so the client IP)."`
	// KeyHeader is the header HeaderKey counts callers by: the value is
	// -H's.
	KeyHeader      string `placeholder:"NAME" xor:"identity" help:"The service counts callers by this request header (HeaderKey(NAME), an API key): the identity is the value -H gives it, kept as a keyed hash (give --identity-key-env)."`
	IdentityKeyEnv string `placeholder:"VAR" help:"The environment variable that holds the service's identity key (core.WithIdentityKey), to hash API keys and other secret identities as the service does (default: the public built-in key)."`
	Bypass         bool   `help:"The application's bypass predicate (a super-admin) accepts the caller."`
	Format         string `enum:"text,json" default:"text" help:"Output format: text or json."`
	Method         string `arg:"" name:"method" help:"The request method (GET, POST, ...)."`
	Path           string `arg:"" name:"path" help:"The request path as sent, escapes and all (a query is shown and ignored)."`
}

// explainEpoch is the instant of the explained first request, on a
// virtual clock: the start of a day, a month and a year in UTC, so that
// every window of a whole number of seconds that divides a day starts
// there.
var explainEpoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// explainPort is the port of the request's RemoteAddr.
const explainPort = "40000"

// report is what explain prints: the JSON object of --format json, and
// the text report's content.
type report struct {
	Config    string     `json:"config"`
	Enabled   bool       `json:"enabled"`
	Request   request    `json:"request"`
	Spellings []spelling `json:"spellings"`
	Exempt    bool       `json:"exempt"`
	// FoldCase lists the rules a router that matches paths without
	// regard to ASCII case (Flow.FoldCase, Fiber's default) counts the
	// request under, when they differ from Rules; else it is left out.
	FoldCase []ruleRef `json:"fold_case,omitempty"`
	Caller   caller    `json:"caller"`
	Lists    lists     `json:"lists"`
	Rules    []rule    `json:"rules"`
	Response response  `json:"response"`

	keyHeader string // --key-header
}

type request struct {
	Method string `json:"method"`
	Path   string `json:"path"` // as given, without the query
	// RouterPath is the path as net/http's routers read it
	// (core.URLPath), which the spellings are of.
	RouterPath string              `json:"router_path"`
	Query      string              `json:"query"`
	Headers    map[string][]string `json:"headers"`
}

type spelling struct {
	Spelling      string `json:"spelling"`
	Exempt        bool   `json:"exempt"`
	ExemptPattern string `json:"exempt_pattern"`
}

type ruleRef struct {
	Name string `json:"name"`
	Cost int64  `json:"cost"`
}

type caller struct {
	IP       string `json:"ip"`        // --ip
	ClientIP string `json:"client_ip"` // as the limiter derives it (IPv6 grouped)
	Identity string `json:"identity"`
	// IdentitySource is "identity" (--identity), "key_header" (the
	// value of the header --key-header names) or "client_ip".
	IdentitySource string `json:"identity_source"`
	StoreKey       string `json:"store_key"` // Limiter.Key(identity)
	Plan           string `json:"plan"`
	// PlanKnown: the plan is one of the file's; an unknown one counts
	// under the rules' own limits.
	PlanKnown bool `json:"plan_known"`
}

type lists struct {
	Banned        bool   `json:"banned"`
	BanNetwork    string `json:"ban_network"`
	AllowNetwork  string `json:"allow_network"`
	AllowIdentity string `json:"allow_identity"`
	Bypassed      bool   `json:"bypassed"` // --bypass
	// Allowed: the request passes uncounted by the allow list or the
	// bypass (were it not exempt).
	Allowed bool `json:"allowed"`
}

type rule struct {
	Name string `json:"name"`
	// Role is "applies" (the first match, or the default), "shadow"
	// (in shadow mode, counted beside it) or "stacked".
	Role           string             `json:"role"`
	Stacked        bool               `json:"stacked"`
	Shadow         bool               `json:"shadow"`
	Default        bool               `json:"default"`
	MatchedPattern string             `json:"matched_pattern"`
	Spelling       string             `json:"spelling"`
	Cost           int64              `json:"cost"`
	Matches        []match            `json:"matches"`
	Algorithm      string             `json:"algorithm"`
	Window         string             `json:"window"` // "calendar" or ""
	Timezone       string             `json:"timezone"`
	Limits         []limit            `json:"limits"`
	Plans          map[string][]limit `json:"plans"`
	Plan           string             `json:"plan"` // the plan whose limits count ("": the rule's own)
	Count          string             `json:"count"`
	Concurrent     int64              `json:"concurrent"`
	Wait           string             `json:"wait"`
	Consistency    string             `json:"consistency"`   // "exact" or "lease"
	LeaseBlock     int64              `json:"lease_block"`   // a lease rule's lease_block; 0 for exact
	LargestBlock   int64              `json:"largest_block"` // min(lease_block, capacity/8); 0 for exact
	Key            string             `json:"key"`
	StoreKey       string             `json:"store_key"`
	RedisKeys      []string           `json:"redis_keys"`
	Outcome        string             `json:"outcome"`
}

type match struct {
	Spelling string `json:"spelling"`
	Pattern  string `json:"pattern"`
	Cost     int64  `json:"cost"`
}

type limit struct {
	Limit    string  `json:"limit"`
	Count    int64   `json:"count"`
	Period   float64 `json:"period_seconds"`
	Burst    int64   `json:"burst"`
	Calendar string  `json:"calendar"`
}

type response struct {
	Status int `json:"status"`
	// Handler: the request reached the application's handler.
	Handler bool                `json:"handler"`
	Headers map[string][]string `json:"headers"`
	Body    string              `json:"body"`
	// Error says why the request could not be sent (net/http refuses
	// its path); Status is then 0.
	Error string `json:"error,omitempty"`
}

// limitHeaders are the response headers explain shows.
var limitHeaders = []string{"RateLimit", "RateLimit-Policy", "X-RateLimit-Limit", "X-RateLimit-Remaining", "X-RateLimit-Reset", "Retry-After"}

// usage reports a bad command line of the command cmd ("explain",
// "keys inspect") that only its Run finds: status 2.
func usage(e *env, cmd, format string, args ...any) error {
	fmt.Fprintf(e.stderr, "rlkit: "+cmd+": "+format+"\n", args...)
	return exitError{exitUsage}
}

// Run explains what the limiter does with the request.
func (c *explainCmd) Run(e *env) error {
	target := c.Path
	if target == "" || target[0] != '/' {
		return usage(e, "explain", "path %q must start with '/' (the path as sent, such as /api/search?q=1)", c.Path)
	}
	path, query, _ := strings.Cut(target, "?")
	if up := strings.ToUpper(c.Method); up != c.Method && token(c.Method) {
		fmt.Fprintf(e.stderr, "rlkit: explain: note: methods are case-sensitive, as net/http and the rules' methods read them: %q is not %s\n", c.Method, up)
	}
	req, err := http.NewRequest(c.Method, "/", nil)
	if err != nil || c.Method == "" {
		return usage(e, "explain", "method %q is not an HTTP method", c.Method)
	}
	ip, err := netip.ParseAddr(c.IP)
	switch {
	case err != nil:
		return usage(e, "explain", "--ip %q is not an IP address (such as 192.0.2.1 or 2001:db8::1)", c.IP)
	case ip.Zone() != "":
		return usage(e, "explain", "--ip %q has a zone (%%%s): a client address the limiter sees has none; give the address alone", c.IP, ip.Zone())
	}
	for _, h := range c.Header {
		name, value, ok := strings.Cut(h, ":")
		if !ok || !token(name) {
			return usage(e, "explain", "-H %q is not a header: want 'Name: value'", h)
		}
		value = strings.TrimSpace(value)
		if strings.ContainsAny(value, "\r\n\x00") {
			return usage(e, "explain", "-H %q: a header value cannot hold a line break or NUL", h)
		}
		req.Header.Add(name, value)
	}
	req.RemoteAddr = net.JoinHostPort(ip.String(), explainPort)
	if h := req.Header.Get("Host"); h != "" {
		req.Host = h
	}

	if c.KeyHeader != "" && !token(c.KeyHeader) {
		return usage(e, "explain", "--key-header %q is not a header name", c.KeyHeader)
	}
	var key []byte
	if c.IdentityKeyEnv != "" {
		if key, err = identityKey(c.IdentityKeyEnv); err != nil {
			return usage(e, "explain", "%v", err)
		}
	}

	data, err := core.ReadConfigFile(c.Config)
	if err == nil {
		var cfg *core.Config
		if cfg, err = core.ParseConfig(data, c.Config); err == nil {
			rep := c.explain(cfg, req, path, query, key)
			return c.print(e.stdout, rep)
		}
		for _, f := range errorFindings(c.Config, data, err) {
			fmt.Fprintln(e.stderr, f.text())
		}
		return exitError{exitFail}
	}
	fmt.Fprintln(e.stderr, c.Config+": "+readError(c.Config, err))
	return exitError{exitFail}
}

// token reports whether s is a valid header name (RFC 9110 token).
func token(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// explain works the report out: from cfg's own answers for the path,
// lists and rules, and from a first request sent through the nethttp
// middleware over a limiter of cfg on a fresh memory store; key is the
// service's identity key (nil: the built-in one).
func (c *explainCmd) explain(cfg *core.Config, req *http.Request, path, query string, key []byte) *report {
	var events []core.Event // the observer is called on the request's goroutine, which send waits for
	lopts := []core.Option{
		core.WithClock(store.NewManualClock(explainEpoch)),
		core.WithObserver(func(ev core.Event) { events = append(events, ev) }),
	}
	if key != nil {
		lopts = append(lopts, core.WithIdentityKey(key))
	}
	lim := core.NewLimiter(cfg, lopts...)
	var opts []nethttp.Option
	switch {
	case c.Identity != "":
		id := c.Identity
		opts = append(opts, nethttp.WithKeyFunc(func(*http.Request) (string, error) { return id, nil }))
	case c.KeyHeader != "":
		opts = append(opts, nethttp.WithKeyFunc(nethttp.HeaderKey(c.KeyHeader)))
	}
	if c.Bypass {
		opts = append(opts, nethttp.WithBypass(func(*http.Request) bool { return true }))
	}
	if c.Plan != "" {
		plan := c.Plan
		opts = append(opts, nethttp.WithPlan(func(*http.Request) string { return plan }))
	}

	rep := &report{
		keyHeader: c.KeyHeader,
		Config:    c.Config,
		Enabled:   cfg.Enabled(),
		Rules:     []rule{},
		Request:   request{Method: c.Method, Path: path, RouterPath: path, Query: query, Headers: c.shownHeaders(lim, req.Header)},
	}
	// The path as net/http's server reads the request line: the spellings
	// are of what it reads, and a request it refuses is not sent.
	target, why := readTarget(c.Method, c.Path)
	var p core.Path = core.Path(path)
	if why == "" {
		p = core.URLPath(target)
		rep.Request.RouterPath = string(p)
	}

	// 1. The spellings, and exempt paths.
	for _, s := range p.Spellings() {
		pat, ok := cfg.ExemptPattern(s)
		rep.Spellings = append(rep.Spellings, spelling{Spelling: s, Exempt: ok, ExemptPattern: pat})
	}
	rep.Exempt = cfg.Exempt(p)

	// 2. The caller, and the lists.
	cip := lim.ClientIP()
	addr := cip.ClientAddr(req.RemoteAddr, req.Header.Values)
	identity, _ := nethttp.Identity(req, lim, opts...) // the key function given never fails
	rep.Caller = caller{IP: c.IP, ClientIP: cip.ClientIP(req.RemoteAddr, req.Header.Values), Identity: identity, IdentitySource: "client_ip", StoreKey: lim.Key(identity), Plan: c.Plan}
	switch {
	case c.Identity != "":
		rep.Caller.IdentitySource = "identity"
	case c.KeyHeader != "" && req.Header.Get(c.KeyHeader) != "":
		// The identity holds the secret: it is shown as the store keeps it.
		rep.Caller.IdentitySource, rep.Caller.Identity = "key_header", rep.Caller.StoreKey
	}
	rep.Caller.PlanKnown = slices.Contains(cfg.Plans(), c.Plan)
	if n, ok := cfg.BanNetwork(addr); ok && cfg.Enabled() {
		rep.Lists.Banned, rep.Lists.BanNetwork = true, n.String()
	}
	if n, ok := cfg.AllowNetwork(addr); ok {
		rep.Lists.AllowNetwork = n.String()
	}
	if cfg.AllowsIdentity(rep.Caller.StoreKey) {
		rep.Lists.AllowIdentity = rep.Caller.StoreKey
	}
	rep.Lists.Bypassed = c.Bypass
	rep.Lists.Allowed = !rep.Lists.Banned && (rep.Lists.AllowNetwork != "" || rep.Lists.AllowIdentity != "" || c.Bypass)

	// 5. The first request, through the middleware.
	if why != "" {
		rep.Response.Error = "net/http refuses this path before any middleware runs (400 Bad Request): " + why
	} else {
		req.URL, req.RequestURI = target, c.Path
		rep.Response = send(lim, opts, req)
	}

	// 3 and 4. The rules, and the keys they count under.
	rules, costs := cfg.MatchRules(c.Method, p, false)
	x := &ruleContext{cfg: cfg, sp: p.Spellings(), plan: c.Plan, events: events, now: time.Now()}
	for i, r := range rules {
		rep.Rules = append(rep.Rules, x.describe(r, i == 0, costs[i]))
	}
	if fr, fc := cfg.MatchRules(c.Method, p, true); !sameRules(rules, costs, fr, fc) {
		for i, r := range fr {
			rep.FoldCase = append(rep.FoldCase, ruleRef{Name: r.Name, Cost: fc[i]})
		}
	}
	return rep
}

// shownHeaders is h as the report shows it: the value of the header
// --key-header names, an API key, as the limiter keeps it, its keyed
// hash.
func (c *explainCmd) shownHeaders(lim *core.Limiter, h http.Header) map[string][]string {
	out := make(map[string][]string, len(h))
	name := http.CanonicalHeaderKey(c.KeyHeader)
	for n, vs := range h {
		if c.KeyHeader != "" && n == name {
			hashed := make([]string, len(vs))
			for i, v := range vs {
				hashed[i] = lim.Key(core.SecretIdentity(n, v))
			}
			vs = hashed
		}
		out[n] = vs
	}
	return out
}

// readTarget reads a request of method whose request-target is target
// (the path as sent, with its query) as net/http's server reads it, with
// http.ReadRequest: the URL the server's handlers get, or why the server
// answers 400 Bad Request before any handler runs. It refuses what
// url.ParseRequestURI refuses (an invalid escape, a control character),
// a raw space, which ends the target, and a line break, which ends the
// line.
func readTarget(method, target string) (*url.URL, string) {
	line := method + " " + target + " HTTP/1.1"
	req, err := http.ReadRequest(bufio.NewReader(strings.NewReader(line + "\r\nHost: rlkit.invalid\r\n\r\n")))
	var ue *url.Error
	switch {
	case errors.As(err, &ue):
		return nil, ue.Err.Error()
	case err != nil:
		return nil, fmt.Sprintf("in the request line %q: %v", line, err)
	case req.RequestURI != target:
		return nil, fmt.Sprintf("a line break ends the request line, whose path net/http reads as %q", req.RequestURI)
	}
	return req.URL, ""
}

// send sends req through the nethttp middleware of lim with opts, to a
// handler that answers 200, and returns the response.
func send(lim *core.Limiter, opts []nethttp.Option, req *http.Request) response {
	handled := false
	h := nethttp.New(lim, opts...)(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		handled = true
		w.WriteHeader(http.StatusOK)
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req.WithContext(context.Background()))
	resp := response{Status: rec.Code, Handler: handled, Headers: map[string][]string{}}
	for _, name := range limitHeaders {
		if v := rec.Header().Values(name); len(v) > 0 {
			resp.Headers[name] = v
		}
	}
	if !handled {
		resp.Body = rec.Body.String()
	}
	return resp
}

// ruleContext is what describe reads besides the rule: the configuration,
// the spellings of the request's path, the caller's plan, the events of
// the first request, and the instant of the Redis keys.
type ruleContext struct {
	cfg    *core.Config
	sp     []string
	plan   string
	events []core.Event
	now    time.Time
}

// describe is rule r of the request (first: the first of MatchRules, the
// rule that applies) at cost.
func (x *ruleContext) describe(r *core.Rule, first bool, cost int64) rule {
	cfg, plan := x.cfg, x.plan
	out := rule{
		Name: r.Name, Stacked: r.Stacked(), Shadow: r.Shadow(), Default: r == cfg.Default(), Cost: cost,
		Matches: []match{}, Algorithm: r.Policy.Algorithm.String(), Limits: limits(r.Policy.Limits),
		Plans: map[string][]limit{}, Count: r.Count(), Concurrent: r.Concurrent(), Key: r.Key(), RedisKeys: []string{},
		Consistency: r.Consistency(), LeaseBlock: r.LeaseBlock(),
	}
	if r.LeaseBlock() > 0 {
		out.LargestBlock = min(r.LeaseBlock(), r.Policy.Capacity()/8)
	}
	switch {
	case r.Stacked():
		out.Role = "stacked"
	case first:
		out.Role = "applies"
	default:
		out.Role = "shadow"
	}
	if w := r.Wait(); w > 0 {
		out.Wait = w.String()
	}
	if r.Policy.Calendar() {
		out.Window = "calendar"
		out.Timezone = "UTC"
		if r.Policy.Location != nil {
			out.Timezone = r.Policy.Location.String()
		}
	}
	for _, s := range x.sp {
		if len(s) > 1 && s[len(s)-1] == '/' {
			continue // a rule ignores a trailing slash: the spelling without it follows
		}
		if pat, c, ok := r.MatchSpelling(s, false); ok {
			out.Matches = append(out.Matches, match{Spelling: s, Pattern: pat, Cost: c})
			if out.MatchedPattern == "" && c == cost {
				out.MatchedPattern, out.Spelling = pat, s
			}
		}
	}
	policy := r.Policy
	for _, name := range cfg.Plans() {
		if v := cfg.PlanRule(name, r.Name); v != nil {
			out.Plans[name] = limits(v.Policy.Limits)
			if name == plan {
				out.Plan, policy = name, v.Policy
			}
		}
	}
	for _, ev := range x.events {
		if ev.Rule == r.Name {
			out.Outcome = ev.Outcome.String()
			if ev.Key != "" && ev.Cost > 0 {
				out.StoreKey = ev.Key
			}
		}
	}
	if out.StoreKey != "" {
		out.RedisKeys = append(out.RedisKeys, redisstore.KeyNames(redisstore.DefaultPrefix, out.StoreKey, policy, x.now)...)
		if r.Concurrent() > 0 {
			out.RedisKeys = append(out.RedisKeys, redisstore.SlotsKeyName(redisstore.DefaultPrefix, out.StoreKey, r.Name))
		}
	}
	return out
}

// limits is ls as the report shows them.
func limits(ls []algo.Limit) []limit {
	out := make([]limit, len(ls))
	for i, l := range ls {
		out[i] = limit{Limit: l.String(), Count: l.Count, Period: l.Period.Seconds(), Burst: l.Burst}
		if l.Calendar != 0 {
			out[i].Calendar = l.Calendar.String()
		}
	}
	return out
}

// sameRules reports whether two answers of MatchRules are the same.
func sameRules(a []*core.Rule, ac []int64, b []*core.Rule, bc []int64) bool {
	return slices.Equal(a, b) && slices.Equal(ac, bc)
}

// print writes rep as c.Format says.
func (c *explainCmd) print(w io.Writer, rep *report) error {
	if c.Format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	_, err := io.WriteString(w, rep.text())
	return err
}

// text is the report as text: one section per question, in order.
func (rep *report) text() string {
	var b strings.Builder
	// line writes a line of format, a constant, and args, each string
	// of which is shown.
	line := func(indent int, format string, args ...any) {
		for i, a := range args {
			if s, ok := a.(string); ok {
				args[i] = shown(s)
			}
		}
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	target := rep.Request.Path
	if rep.Request.Query != "" {
		target += "?" + rep.Request.Query
	}
	line(0, "%s %s under %s", rep.Request.Method, target, rep.Config)
	if !rep.Enabled {
		line(0, "limiting is off in this file (enabled is false or missing): every request passes untouched")
	}

	line(0, "")
	line(0, "1. Path")
	if rep.Request.Query != "" {
		line(1, "query %q: ignored, as the limiter ignores it", rep.Request.Query)
	}
	if rep.Request.RouterPath != rep.Request.Path {
		line(1, "net/http reads the path as %s", rep.Request.RouterPath)
	}
	line(1, "spellings the limiter matches (the request is exempt only when every one is):")
	width := 0
	for _, s := range rep.Spellings {
		width = max(width, utf8.RuneCountInString(termtext.Printable(s.Spelling)))
	}
	for _, s := range rep.Spellings {
		if s.Exempt {
			line(2, "%-*s  exempt by %q", width, s.Spelling, s.ExemptPattern)
		} else {
			line(2, "%-*s  not exempt", width, s.Spelling)
		}
	}
	line(1, "exempt: %s", yesNo(rep.Exempt))
	if rep.FoldCase != nil {
		var rs []string
		for _, r := range rep.FoldCase {
			rs = append(rs, fmt.Sprintf("%s (cost %d)", r.Name, r.Cost))
		}
		line(1, "behind a router that matches paths without regard to case (Fiber's default, Flow.FoldCase) it counts under %s instead", strings.Join(rs, ", "))
	}

	line(0, "")
	line(0, "2. Caller")
	cl := rep.Caller
	line(1, "client IP   %s", cl.ClientIP)
	switch {
	case cl.IdentitySource == "identity":
		line(1, "identity    %s (--identity)", cl.Identity)
	case cl.IdentitySource == "key_header":
		line(1, "identity    the value of %s (--key-header), a secret kept as its keyed hash", http.CanonicalHeaderKey(rep.keyHeader))
	case rep.keyHeader != "":
		line(1, "identity    %s (the client IP: the request has no %s header, and HeaderKey counts it under its client IP)", cl.Identity, http.CanonicalHeaderKey(rep.keyHeader))
	default:
		line(1, "identity    %s (the client IP: no key function names the caller; --identity gives one)", cl.Identity)
	}
	line(1, "store key   %s (Limiter.Key of the identity)", cl.StoreKey)
	switch {
	case cl.Plan == "":
		line(1, "plan        none (--plan gives one)")
	case cl.PlanKnown:
		line(1, "plan        %s", cl.Plan)
	case len(rep.planNames()) == 0:
		line(1, "plan        %q: the file has no plans, so it changes nothing", cl.Plan)
	default:
		line(1, "plan        %q: not a plan of the file (%s): counts under the rules' own limits, as the limiter does", cl.Plan, strings.Join(rep.planNames(), ", "))
	}
	ls := rep.Lists
	if ls.Banned {
		line(1, "banned      yes: ban.networks %s; refused with 403 before anything else, exempt paths included", ls.BanNetwork)
	} else {
		line(1, "banned      no")
	}
	var why []string
	if ls.AllowNetwork != "" {
		why = append(why, "allow.networks "+ls.AllowNetwork)
	}
	if ls.AllowIdentity != "" {
		why = append(why, "allow.identities "+strconv.Quote(ls.AllowIdentity))
	}
	if ls.Bypassed {
		why = append(why, "the application's bypass predicate (--bypass)")
	}
	switch {
	case len(why) == 0:
		line(1, "allowed     no")
	case ls.Banned:
		line(1, "allowed     by %s, but the ban comes first", verbatim(strings.Join(why, ", ")))
	default:
		line(1, "allowed     yes: %s; passes uncounted", verbatim(strings.Join(why, ", ")))
	}

	line(0, "")
	line(0, "3. Rules")
	if why := rep.uncounted(); why != "" {
		line(1, "none counts this request (%s); were it counted:", why)
	}
	if len(rep.Rules) == 0 {
		line(1, "none: the default limit is in shadow mode and no rule matches")
	}
	for _, r := range rep.Rules {
		line(1, "%s: %s", r.Name, r.roleText())
		if len(r.Matches) == 0 && r.Default {
			line(2, "matches     no rule's paths (the default limit)")
		}
		for i, m := range r.Matches {
			label := "matches    "
			if i > 0 {
				label = "           "
			}
			line(2, "%s %s by %q, cost %d", label, m.Spelling, m.Pattern, m.Cost)
		}
		if r.Default || len(r.Matches) > 1 {
			line(2, "cost        %d", r.Cost)
		}
		line(2, "limits      %s", r.limitsText(r.Limits))
		if len(r.Plans) > 0 {
			var ps []string
			for _, name := range rep.planNames() {
				p := name + ": " + r.limitsText(r.Plans[name])
				if name == r.Plan {
					p += " (selected by --plan)"
				}
				ps = append(ps, p)
			}
			line(2, "plans       %s", strings.Join(ps, "; "))
		}
		line(2, "count       %s", countText(r.Count))
		if r.Concurrent > 0 {
			line(2, "concurrent  %d in flight per key", r.Concurrent)
		} else {
			line(2, "concurrent  none")
		}
		if r.Wait != "" {
			line(2, "wait        up to %s for room", r.Wait)
		} else {
			line(2, "wait        none")
		}
		if r.Shadow {
			line(2, "mode        shadow: counts and reports, denies nothing")
		} else {
			line(2, "mode        enforce")
		}
		switch {
		case r.Consistency == "lease" && r.Role == "applies" && rep.stacked():
			line(2, "consistency lease, but this request counts under stacked rules too: all of them are taken in one store call")
		case r.Consistency == "lease" && r.LargestBlock == 0:
			line(2, "consistency lease: every request decided alone (an eighth of the capacity is under a unit)")
		case r.Consistency == "lease":
			line(2, "consistency lease: blocks of at most %d units per process and key (lease_block %d, an eighth of the capacity)", r.LargestBlock, r.LeaseBlock)
		default:
			line(2, "consistency exact: one store call per decision")
		}
		line(2, "key         %s", r.Key)
	}

	line(0, "")
	line(0, "4. Store keys")
	if why := rep.uncounted(); why != "" {
		line(1, "nothing counted: %s", why)
	}
	for _, r := range rep.Rules {
		if r.StoreKey == "" {
			line(1, "%s: key %s (nothing counted)", r.Name, r.Key)
			continue
		}
		line(1, "%s: key %s → %s", r.Name, r.Key, r.StoreKey)
		for _, k := range r.RedisKeys {
			line(2, "redis  %s", k)
		}
	}
	if rep.counted() {
		line(1, "(redis: the default prefix rl:; a fixed window's key ends in its window, a calendar limit's in")
		line(1, " its period, as of now. The memory store keeps no key names, only their hashes.)")
	}

	line(0, "")
	line(0, "5. First request (a fresh memory store, clock at %s)", explainEpoch.Format(time.RFC3339))
	resp := rep.Response
	switch {
	case resp.Error != "":
		line(1, "not sent: %s", verbatim(resp.Error)) // quoted where it cites the request
		return b.String()
	case resp.Handler:
		line(1, "status %d: passed to the handler", resp.Status)
	default:
		line(1, "status %d: refused", resp.Status)
	}
	for _, name := range limitHeaders {
		for _, v := range resp.Headers[name] {
			line(1, "%s: %s", name, v)
		}
	}
	if resp.Body != "" {
		line(1, "body %s", resp.Body)
	}
	return b.String()
}

// planNames are the file's plans, sorted, as the rules list them.
func (rep *report) planNames() []string {
	for _, r := range rep.Rules {
		if len(r.Plans) > 0 {
			return slices.Sorted(maps.Keys(r.Plans))
		}
	}
	return nil
}

// uncounted says why the first request counted under no rule, or "".
func (rep *report) uncounted() string {
	switch {
	case rep.Response.Error != "":
		return "net/http refuses the path with 400 before the limiter sees it"
	case !rep.Enabled:
		return "limiting is off"
	case rep.Lists.Banned:
		return "the client is banned"
	case rep.Exempt:
		return "the path is exempt"
	case rep.Lists.Allowed:
		return "the caller is allowed"
	}
	return ""
}

// stacked reports whether an enforced stacked rule counts the request:
// the store then takes every rule's count in one call, the applying
// rule's too, whatever its consistency.
func (rep *report) stacked() bool {
	for _, r := range rep.Rules {
		if r.Stacked && !r.Shadow {
			return true
		}
	}
	return false
}

// counted reports whether a rule counted the first request.
func (rep *report) counted() bool {
	for _, r := range rep.Rules {
		if r.StoreKey != "" {
			return true
		}
	}
	return false
}

// roleText says what the rule does with the request.
func (r *rule) roleText() string {
	switch {
	case r.Stacked && r.Shadow:
		return "stacked, in shadow mode: counted beside the rule that applies, denies nothing"
	case r.Stacked:
		return "stacked, counted beside the rule that applies"
	case r.Role == "shadow":
		return "in shadow mode, counted beside the rule that applies: denies nothing"
	case r.Default && r.Shadow:
		return "applies in shadow mode, no rule matches: the default limit, which denies nothing"
	case r.Default:
		return "applies, no rule matches: the default limit"
	case r.Shadow:
		return "applies in shadow mode, the first rule in order that a spelling matches: denies nothing"
	}
	return "applies, the first rule in order that a spelling matches"
}

// limitsText is the rule's algorithm and ls.
func (r *rule) limitsText(ls []limit) string {
	if len(ls) == 0 {
		return "none (requests in flight only)"
	}
	var s []string
	for _, l := range ls {
		s = append(s, l.Limit)
	}
	out := r.Algorithm + " " + strings.Join(s, ", ")
	if r.Window == "calendar" {
		out += " (calendar periods in " + r.Timezone + ")"
	}
	return out
}

// countText says which requests a rule of count mode m counts.
func countText(m string) string {
	switch m {
	case "failures":
		return "failures (responses of status 400 and above)"
	case "successes":
		return "successes (responses below 400)"
	}
	return m + " (every request, before the handler)"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// shown is a string of the text report (a path, an identity, a header's
// value, a name of the file's) as the report writes it, so that it never
// moves a terminal's cursor or colours it: quoted (%q) as strconv.Quote
// quotes it, escaping what is not printable; else (%s) as
// termtext.Printable writes it.
type shown string

func (s shown) Format(f fmt.State, verb rune) {
	v := string(s)
	if verb != 'q' {
		v = termtext.Printable(v)
	}
	fmt.Fprintf(f, fmt.FormatString(f, verb), v)
}

// verbatim is text of the report printable already (strconv.Quote's,
// the file's networks), which a line writes as it is.
type verbatim string
