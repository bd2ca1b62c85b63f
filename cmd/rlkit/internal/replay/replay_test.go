package replay

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	_ "time/tzdata" // the calendar test's time zone, whatever the system has

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/nethttp"
)

// replayed replays logs under the rule file yaml.
func replayed(t *testing.T, yaml string, o Options, logs ...Source) *Report {
	t.Helper()
	rules, err := Load([]byte(yaml), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(rules, o)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run(logs)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func ruleOf(t *testing.T, rep *Report, name string) RuleReport {
	t.Helper()
	for _, r := range rep.Rules {
		if r.Rule == name && r.Plan == "" {
			return r
		}
	}
	t.Fatalf("no rule %q in the report", name)
	return RuleReport{}
}

// req is one request of a crafted JSON log.
type req struct {
	ms     int64 // milliseconds after t0
	method string
	path   string
	ip     string
	status int
	user   string
}

// t0 is the crafted logs' start: a whole second (and minute).
var t0 = time.Date(2026, 6, 2, 7, 15, 0, 0, time.UTC)

// jsonLog writes reqs as JSON lines of the json format's default fields.
func jsonLog(reqs ...req) Source {
	var b strings.Builder
	for _, r := range reqs {
		m, ip, st := r.method, r.ip, r.status
		if m == "" {
			m = "GET"
		}
		if ip == "" {
			ip = "192.0.2.1"
		}
		if st == 0 {
			st = 200
		}
		fmt.Fprintf(&b, `{"time":%q,"method":%q,"path":%q,"ip":%q,"status":%d,"user":%q}`+"\n",
			t0.Add(time.Duration(r.ms)*time.Millisecond).Format(time.RFC3339Nano), m, r.path, ip, st, r.user)
	}
	return text("crafted.jsonl", b.String())
}

// TestAlgorithms checks each algorithm's refusals on a log of one caller,
// counted by hand under "2/second" (burst 2) from these instants (in
// seconds after a whole second): 0, .1, .2, .5, .75, 1.0, 1.1, 1.2, 1.6,
// 2.05.
//
//   - fixed_window: [0,1) admits 0 and .1, refuses .2, .5, .75; [1,2)
//     admits 1.0 and 1.1, refuses 1.2 and 1.6; [2,3) admits 2.05: 5.
//   - sliding_window: admitted while prev×(1−elapsed) + cur + 1 ≤ 2:
//     [0,1) as above (cur 2); in [1,2) prev is 2: 1.0 (3), 1.1 (2.8),
//     1.2 (2.6) refused, 1.6 (1.8) admitted (cur 1); at 2.05 prev is 1:
//     1.95, admitted: 6.
//   - token_bucket (capacity 2, 2 tokens a second in whole tokens): 0
//     and .1 take both; .2 finds none; .5 finds the one refilled since 0;
//     .75 none (the second comes at 1.0); 1.0 takes it; 1.1 and 1.2 none;
//     1.6 one; 2.05 one: 4 refused (.2, .75, 1.1, 1.2).
//   - gcra (emission interval .5 s, tolerance 1 s): admitted while
//     TAT+.5−now ≤ 1: TAT after 0, .1 is 1.0; .2 (1.3) refused; .5 (1.0)
//     admitted, TAT 1.5; .75 (1.25) refused; 1.0 (1.0) admitted, TAT 2.0;
//     1.1 (1.4) and 1.2 (1.3) refused; 1.6 (.9) and 2.05 (.95) admitted:
//     4, as the continuous token bucket it is.
func TestAlgorithms(t *testing.T) {
	var reqs []req
	for _, ms := range []int64{0, 100, 200, 500, 750, 1000, 1100, 1200, 1600, 2050} {
		reqs = append(reqs, req{ms: ms, path: "/api/search"})
	}
	for _, c := range []struct {
		algorithm string
		refused   int64
	}{{"fixed_window", 5}, {"sliding_window", 6}, {"token_bucket", 4}, {"gcra", 4}} {
		t.Run(c.algorithm, func(t *testing.T) {
			yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: search\n      paths: [/api/search]\n      limit: 2/second\n      algorithm: " + c.algorithm + "\n"
			rep := replayed(t, yaml, Options{Format: "json"}, jsonLog(reqs...))
			r := ruleOf(t, rep, "search")
			if r.Requests != 10 || r.Refused != c.refused {
				t.Errorf("requests %d, refused %d; want 10 and %d", r.Requests, r.Refused, c.refused)
			}
			if len(r.TopRefused) != 1 || r.TopRefused[0] != (KeyCount{"192.0.2.1", c.refused, 0}) {
				t.Errorf("top refused %+v, want 192.0.2.1 with %d, exact", r.TopRefused, c.refused)
			}
			// The demand, refused or not, per fixed 1s window: 5, 4, 1.
			w := r.Windows[0]
			if w.Keys != 1 || w.KeyWindows != 3 || w.Units != 10 || w.PeakMax != 5 || w.Recommended != 5 || !w.Exact {
				t.Errorf("window report %+v, want 1 key, 3 windows, 10 units, peak 5, recommended 5", w)
			}
		})
	}
}

// TestCalendarWindow: a limit per calendar day of Asia/Tokyo (UTC+9)
// counts from 15:00 UTC to the next; the recommendations cut the same
// days. 2/day: four requests before 15:00 UTC (two refused), three after
// (one refused).
func TestCalendarWindow(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: export\n      paths: [/export]\n      limit: 2/day\n      window: calendar\n      timezone: Asia/Tokyo\n"
	base := time.Date(2026, 6, 2, 15, 0, 0, 0, time.UTC).Sub(t0).Milliseconds()
	var reqs []req
	for _, ms := range []int64{-2000, -1000, -1000, -1, 0, 0, 1000} {
		reqs = append(reqs, req{ms: base + ms, path: "/export"})
	}
	r := ruleOf(t, replayed(t, yaml, Options{Format: "json"}, jsonLog(reqs...)), "export")
	if r.Refused != 3 || r.Windows[0].KeyWindows != 2 || r.Windows[0].PeakMax != 4 || r.Windows[0].Window != "calendar days of Asia/Tokyo" {
		t.Errorf("refused %d, windows %+v; want 3 refused, 2 days, peak 4", r.Refused, r.Windows[0])
	}
}

// TestCountFailures: a rule counting failures counts a request by the
// status the log gives it, after the fact; a full counter refuses
// whatever the request would have been answered.
func TestCountFailures(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: login\n      paths: [/login]\n      limit: 2/minute\n      count: failures\n"
	var reqs []req
	for i, st := range []int{200, 401, 200, 401, 500, 200, 401} {
		reqs = append(reqs, req{ms: int64(i) * 1000, method: "POST", path: "/login", status: st})
	}
	// 200 (nothing counted), 401 (1), 200, 401 (2): then the counter is
	// full: 500, 200 and 401 are refused.
	r := ruleOf(t, replayed(t, yaml, Options{Format: "json"}, jsonLog(reqs...)), "login")
	if r.Requests != 7 || r.Refused != 3 || r.Count != "failures" {
		t.Errorf("requests %d, refused %d; want 7 and 3", r.Requests, r.Refused)
	}
	// The demand is the failures': 401, 401, 500, 401.
	if w := r.Windows[0]; w.Units != 4 || w.PeakMax != 4 || w.LimitRefusedShare != 0.5 {
		t.Errorf("window %+v, want 4 units, peak 4, half refused by a limit of 2", w)
	}
}

// TestExemptAndSpellings: exempt paths, path spellings and case are
// matched as the service matches them.
func TestExemptAndSpellings(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  exempt_paths: [/health]\n  rules:\n    - name: search\n      paths: [/api/search]\n      limit: 1/minute\n"
	paths := []string{"/health", "/health/", "/%68ealth", "/api/search", "/api%2Fsearch", "/api/./search", "/API/search"}
	var reqs []req
	for i, p := range paths {
		reqs = append(reqs, req{ms: int64(i), path: p})
	}
	rep := replayed(t, yaml, Options{Format: "json"}, jsonLog(reqs...))
	if s, d := ruleOf(t, rep, "search"), ruleOf(t, rep, "default"); rep.Exempt != 1 || s.Requests != 3 || s.Refused != 2 || d.Requests != 3 {
		t.Errorf("exempt %d, search %d requests (%d refused), default %d; want 1, 3 (2), 3", rep.Exempt, s.Requests, s.Refused, d.Requests)
	}
	// Behind a router that ignores case, /API/search is the search too.
	rep = replayed(t, yaml, Options{Format: "json", FoldCase: true}, jsonLog(reqs...))
	if s := ruleOf(t, rep, "search"); s.Requests != 4 || s.Refused != 3 {
		t.Errorf("fold case: search %d requests, %d refused; want 4 and 3", s.Requests, s.Refused)
	}
}

// TestIdentities: a request counts as its client IP, a field's value or a
// header's (hashed, as HeaderKey counts it), and as its client IP when it
// has none.
func TestIdentities(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: api\n      paths: [/api/**]\n      limit: 1/minute\n"
	log := `{"time":"2026-06-02T07:15:00Z","method":"GET","path":"/api/a","ip":"192.0.2.1","status":200,"user":"alice","headers":{"X-Api-Key":["k1"]}}
{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/api/a","ip":"192.0.2.1","status":200,"user":"bob","headers":{"X-Api-Key":["k2"]}}
{"time":"2026-06-02T07:15:02Z","method":"GET","path":"/api/a","ip":"192.0.2.2","status":200,"user":"alice","headers":{"X-Api-Key":["k1"]}}
{"time":"2026-06-02T07:15:03Z","method":"GET","path":"/api/a","ip":"192.0.2.2","status":200,"user":"","headers":{}}
{"time":"2026-06-02T07:15:04Z","method":"GET","path":"/api/a","ip":"192.0.2.2","status":200,"user":"-","headers":{"X-Api-Key":[""]}}
`
	for _, c := range []struct {
		identity string
		refused  int64
		top      string
	}{
		{"ip", 3, "192.0.2.2"},               // 1: 192.0.2.1 twice, 192.0.2.2 thrice
		{"field:user", 2, "192.0.2.2"},       // alice twice; the last two as 192.0.2.2
		{"header:X-Api-Key", 2, "192.0.2.2"}, // k1 twice; the last two as 192.0.2.2
	} {
		r := ruleOf(t, replayed(t, yaml, Options{Format: "json", Identity: c.identity}, text("a.jsonl", log)), "api")
		if r.Refused != c.refused || len(r.TopRefused) == 0 || r.TopRefused[0].Key != c.top && c.identity == "ip" {
			t.Errorf("--identity %s: refused %d, top %+v; want %d", c.identity, r.Refused, r.TopRefused, c.refused)
		}
		keys := map[string]int64{}
		for _, k := range r.TopRefused {
			keys[k.Key] = k.Refused
		}
		switch c.identity {
		case "field:user":
			if keys["alice"] != 1 || keys["192.0.2.2"] != 1 {
				t.Errorf("--identity field:user: refused keys %v, want alice and 192.0.2.2 once each", keys)
			}
		case "header:X-Api-Key":
			hashed := 0
			for k, n := range keys {
				if strings.HasPrefix(k, "X-Api-Key:hmac:") && n == 1 {
					hashed++
				}
			}
			if hashed != 1 || keys["192.0.2.2"] != 1 {
				t.Errorf("--identity header:X-Api-Key: refused keys %v, want k1's keyed hash and 192.0.2.2 once each", keys)
			}
		}
	}
}

// TestNoClientIP: a client address that is no IP address ("-", a host
// name, "unix:", an octet above 255) gives the line no client IP. Counted
// under its client IP, the line is malformed, its reason naming the field
// and the value; counted under an identity the line gives, it is decided
// under that identity without a client IP: neither banned nor allowed by
// the networks of the lists, as the service decides a request whose peer
// address does not parse (nethttp, below). A rule keyed by ip counts all
// such lines under one key, "ip:", the empty client IP's.
func TestNoClientIP(t *testing.T) {
	for _, c := range []struct{ format, line, why string }{
		{"clf", `- - - [02/Jun/2026:07:15:01 +0000] "GET /api/a HTTP/1.1" 200 1`, `client address "-" is not an IP address`},
		{"clf", `notanip - - [02/Jun/2026:07:15:01 +0000] "GET /api/a HTTP/1.1" 200 1`, `client address "notanip" is not an IP address`},
		{"clf", `999.1.1.1 - - [02/Jun/2026:07:15:01 +0000] "GET /api/a HTTP/1.1" 200 1`, `client address "999.1.1.1" is not an IP address`},
		{"clf", `unix: - - [02/Jun/2026:07:15:01 +0000] "GET /api/a HTTP/1.1" 200 1`, `client address "unix:" is not an IP address`},
		{"clf", `client.example - - [02/Jun/2026:07:15:01 +0000] "GET /api/a HTTP/1.1" 200 1`, `client address "client.example" is not an IP address`},
		{"json", `{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/api/a","ip":"-","status":200}`, `client IP (ip, remote_addr or client_ip) "-" is not an IP address`},
		{"json", `{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/api/a","remote_addr":"notanip","status":200}`, `client IP (ip, remote_addr or client_ip) "notanip" is not an IP address`},
		{"nginx-json", `{"time_iso8601":"2026-06-02T07:15:01+00:00","remote_addr":"unix:","request":"GET /api/a HTTP/1.1","status":"200"}`, `client IP (remote_addr) "unix:" is not an IP address`},
		{"envoy", `[2026-06-02T07:15:01.000Z] "GET /api/a HTTP/1.1" 200 - 0 1 1 1 "198.51.100.23, notanip" "-" "-" "-" "-"`, `X-Forwarded-For's last address "notanip" is not an IP address`},
	} {
		recs, rd := parsed(t, Options{Format: c.format}, nil, text("a.log", c.line+"\n"))
		if len(recs) != 0 || len(rd.first) != 1 || rd.first[0].Reason != c.why {
			t.Errorf("%s %s: records %+v, malformed %+v; want it malformed: %s", c.format, c.line, recs, rd.first, c.why)
		}
	}
	// The user field names the caller: the line counts under it, with no
	// client IP; without it, it is malformed.
	for _, c := range []struct{ user, why string }{
		{"alice", ""},
		{"-", `no identity (user) and client address "notanip" is not an IP address`},
	} {
		line := `notanip - ` + c.user + ` [02/Jun/2026:07:15:01 +0000] "GET /api/a HTTP/1.1" 200 1` + "\n"
		recs, rd := parsed(t, Options{Format: "clf", Identity: "field:user"}, nil, text("a.log", line))
		switch {
		case c.why == "" && (len(recs) != 1 || recs[0].ID != "alice" || recs[0].IP != "" || recs[0].Addr != ""):
			t.Errorf("user %s: records %+v; want alice's, with no client IP", c.user, recs)
		case c.why != "" && (len(recs) != 0 || len(rd.first) != 1 || rd.first[0].Reason != c.why):
			t.Errorf("user %s: records %+v, malformed %+v; want it malformed: %s", c.user, recs, rd.first, c.why)
		}
	}

	// Every network banned, and every network allowed.
	for _, list := range []string{"ban", "allow"} {
		yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  " + list + ":\n    networks: [0.0.0.0/0, \"::/0\"]\n" +
			"  rules:\n    - name: api\n      paths: [/api/**]\n      limit: 1/minute\n    - name: perip\n      paths: [/ip/**]\n      limit: 1/minute\n      key: ip\n"
		var log strings.Builder
		for _, l := range []string{"- alice /api/a", "notanip alice /api/a", "unix: bob /api/a", "- carol /ip/a", "notanip dave /ip/a"} {
			f := strings.Fields(l)
			fmt.Fprintf(&log, "%s - %s [02/Jun/2026:07:15:01 +0000] \"GET %s HTTP/1.1\" 200 1\n", f[0], f[1], f[2])
		}
		rep := replayed(t, yaml, Options{Identity: "field:user"}, text("a.log", log.String()))
		api, perip := ruleOf(t, rep, "api"), ruleOf(t, rep, "perip")
		if rep.Malformed != 0 || rep.Banned != 0 || api.Bypassed != 0 || api.Requests != 3 || api.Refused != 1 || perip.Requests != 2 || perip.Refused != 1 ||
			len(api.TopRefused) != 1 || api.TopRefused[0].Key != "alice" || len(perip.TopRefused) != 1 || perip.TopRefused[0].Key != "ip:" {
			t.Errorf("%s every network: malformed %d, banned %d; api %+v; perip %+v; want alice refused once under api, and ip: (no client IP) once under perip", list, rep.Malformed, rep.Banned, api, perip)
		}
		// The service: a peer address that does not parse is neither
		// banned nor allowed.
		cfg, err := core.ParseConfig([]byte(yaml), "rules.yaml")
		if err != nil {
			t.Fatal(err)
		}
		h := nethttp.New(core.NewLimiter(cfg), nethttp.WithKeyFunc(func(*http.Request) (string, error) { return "alice", nil }))(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		var codes []int
		for range 2 {
			r := httptest.NewRequest("GET", "/api/a", nil)
			r.RemoteAddr = "notanip"
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			codes = append(codes, w.Code)
		}
		if !slices.Equal(codes, []int{200, 429}) {
			t.Errorf("%s every network: the service answers %v to alice from a peer address that does not parse; want 200, 429 (neither banned nor allowed)", list, codes)
		}
	}
}

// TestRuleKeys: a rule keyed by a header and a path parameter counts per
// the log's values of them, as the service does.
func TestRuleKeys(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: reindex\n      paths: [/kb/:kb/reindex]\n      limit: 1/minute\n      key: ip+param:kb\n    - name: ua\n      paths: [/ua]\n      limit: 1/minute\n      key: header:User-Agent\n"
	log := `192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "POST /kb/a/reindex HTTP/1.1" 200 1 "-" "bot/1"
192.0.2.1 - - [02/Jun/2026:07:15:02 +0000] "POST /kb/b/reindex HTTP/1.1" 200 1 "-" "bot/1"
192.0.2.1 - - [02/Jun/2026:07:15:03 +0000] "POST /kb/a/reindex HTTP/1.1" 200 1 "-" "bot/1"
192.0.2.1 - - [02/Jun/2026:07:15:04 +0000] "GET /ua HTTP/1.1" 200 1 "-" "bot/1"
192.0.2.2 - - [02/Jun/2026:07:15:05 +0000] "GET /ua HTTP/1.1" 200 1 "-" "bot/1"
192.0.2.3 - - [02/Jun/2026:07:15:06 +0000] "GET /ua HTTP/1.1" 200 1 "-" "bot/1"
192.0.2.3 - - [02/Jun/2026:07:15:07 +0000] "GET /ua HTTP/1.1" 200 1 "-" "bot/2"
`
	rep := replayed(t, yaml, Options{Format: "clf"}, text("a.log", log))
	if r := ruleOf(t, rep, "reindex"); r.Refused != 1 || r.Windows[0].Keys != 2 {
		t.Errorf("reindex: refused %d, keys %d; want 1 (kb a twice) and 2", r.Refused, r.Windows[0].Keys)
	}
	if r := ruleOf(t, rep, "ua"); r.Refused != 2 || r.Windows[0].Keys != 2 {
		t.Errorf("ua: refused %d, keys %d; want 2 (bot/1 thrice, whatever the IP) and 2", r.Refused, r.Windows[0].Keys)
	}
}

// TestWaits: a rule's wait is replayed on the log's clock. 1/second, wait
// 2s, wait_queue 2; four requests at 0: the first is admitted; the
// second is held and admitted at 1s; the third is held, finds the second
// took 1s's room and is admitted at 2s, within its wait; the fourth finds
// the queue full and is refused at once.
func TestWaits(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: slow\n      paths: [/slow]\n      limit: 1/second\n      wait: 2s\n      wait_queue: 2\n"
	reqs := []req{{ms: 0, path: "/slow"}, {ms: 0, path: "/slow"}, {ms: 0, path: "/slow"}, {ms: 0, path: "/slow"}, {ms: 5000, path: "/slow"}}
	rep := replayed(t, yaml, Options{Format: "json"}, jsonLog(reqs...))
	r := ruleOf(t, rep, "slow")
	if r.Requests != 5 || r.Refused != 1 || r.Waited != 2 || rep.Held != 2 || r.WaitSeconds != 2 {
		t.Errorf("requests %d, refused %d, waited %d, held %d; want 5, 1, 2, 2", r.Requests, r.Refused, r.Waited, rep.Held)
	}
	// A wait of 500ms is too short for a Retry-After of a second: no
	// request waits.
	rep = replayed(t, strings.Replace(strings.Replace(yaml, "wait: 2s", "wait: 500ms", 1), "      wait_queue: 2\n", "", 1), Options{Format: "json"}, jsonLog(reqs...))
	if r := ruleOf(t, rep, "slow"); r.Refused != 3 || r.Waited != 0 {
		t.Errorf("wait 500ms: refused %d, waited %d; want 3 and 0", r.Refused, r.Waited)
	}
}

// TestOutOfOrder: a request logged before one already decided is decided
// at the clock's time: the clock never moves back. Its units count in the
// window of its own time stamp, one of the last two its key counted in.
func TestOutOfOrder(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: s\n      paths: [/s]\n      limit: 2/second\n"
	rep := replayed(t, yaml, Options{Format: "json"},
		jsonLog(req{ms: 0, path: "/s"}, req{ms: 1500, path: "/s"}),
		jsonLog(req{ms: 200, path: "/s"}, req{ms: 900, path: "/s"}, req{ms: 1600, path: "/s"}))
	// At 0: 1 (window 0); 1.5: 1 (window 1); .2 and .9 decided at 1.5:
	// 2, 3 (refused); 1.6: 4 (refused).
	r := ruleOf(t, rep, "s")
	if r.Refused != 2 || rep.OutOfOrder != 2 || rep.OutOfOrderMaxSeconds != 1.3 || rep.From != "2026-06-02T07:15:00Z" || rep.To != "2026-06-02T07:15:01.6Z" {
		t.Errorf("refused %d, out of order %d by %vs, from %s to %s; want 2, 2 by 1.3s, 07:15:00 to 07:15:01.6", r.Refused, rep.OutOfOrder, rep.OutOfOrderMaxSeconds, rep.From, rep.To)
	}
	if len(rep.Notes) != 0 {
		t.Errorf("notes %q; want none for requests out of order by less than a minute", rep.Notes)
	}
	// Per window of its own time stamp: 0, .2, .9 in the first, 1.5 and
	// 1.6 in the second.
	if w := r.Windows[0]; w.KeyWindows != 2 || w.Units != 5 || w.PeakMax != 3 || w.LimitRefusedShare != 0.2 || !w.Exact || w.DisplacedUnits != 0 {
		t.Errorf("windows %+v, want 2 (3 and 2 units), exact", w)
	}
}

// TestOutOfOrderNote: when requests were out of order by more than a
// minute, a note names the line that moved the clock farthest ahead of a
// line after it, and its time stamp.
func TestOutOfOrderNote(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n"
	rep := replayed(t, yaml, Options{Format: "json"},
		jsonLog(req{ms: 0, path: "/"}, req{ms: 90_000, path: "/"}, req{ms: 1000, path: "/"}), // 1m29s back
		jsonLog(req{ms: 2000, path: "/"}, req{ms: 7_200_000, path: "/"}, req{ms: 7_200_500, path: "/"}, req{ms: 3000, path: "/"}, req{ms: 7_200_000, path: "/"}))
	want := []string{"requests were out of order by up to 1h59m57.5s: crafted.jsonl:3, logged at 2026-06-02T09:15:00.5Z, moved the clock that far ahead of a line after it; " +
		"a request logged before the clock is decided at the clock's time, and counts in the per-key figures at its own"}
	if !slices.Equal(rep.Notes, want) || rep.OutOfOrder != 4 || rep.OutOfOrderMaxSeconds != 7197.5 {
		t.Errorf("notes %q, out of order %d by %vs; want %q, 4 by 7197.5s", rep.Notes, rep.OutOfOrder, rep.OutOfOrderMaxSeconds, want)
	}
}

// TestMaxAhead: a line more than MaxAhead later than both the line
// before it and the line after it is taken at the time of the line before
// (the first line of all: of the line after), counted as an outlier and
// named in a note; a line ahead of the line before it alone (a gap in the
// traffic, the last line), or two lines ahead together, are not outliers.
func TestMaxAhead(t *testing.T) {
	const year = 365 * 24 * 3600 * 1000
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: s\n      paths: [/s]\n      limit: 2/second\n"
	// Two requests a second for 10 seconds; extra ones (ms) after second
	// after, or first when after is -1.
	log := func(after int, extra ...int64) Source {
		var reqs []req
		if after < 0 {
			for _, ms := range extra {
				reqs = append(reqs, req{ms: ms, path: "/s"})
			}
		}
		for sec := range 10 {
			reqs = append(reqs, req{ms: int64(sec) * 1000, path: "/s"}, req{ms: int64(sec)*1000 + 500, path: "/s"})
			if sec == after {
				for _, ms := range extra {
					reqs = append(reqs, req{ms: ms, path: "/s"})
				}
			}
		}
		return jsonLog(reqs...)
	}
	for _, c := range []struct {
		name                 string
		log                  Source
		maxAhead             time.Duration
		outliers, late       int64
		refused, peak, units int64
		from, to, note       string
	}{
		{"a line a year ahead", log(3, year+3600), time.Minute, 1, 0, 1, 3, 21, "07:15:00Z", "07:15:09.5Z",
			"1 line more than 1m0s later than both the line before and the line after (--max-ahead), taken at the time of the line before (the first line of all: of the line after); " +
				"the first, crafted.jsonl:9, was logged at 2027-06-02T07:15:03.6Z"},
		{"a line a year ahead, no bound", log(3, year+3600), 0, 0, 12, 11, 2, 21, "07:15:00Z", "2027-06-02T07:15:03.6Z", ""},
		{"a line 61s ahead", log(3, 64_600), time.Minute, 1, 0, 1, 3, 21, "07:15:00Z", "07:15:09.5Z", ""},
		{"a line 59s ahead", log(3, 62_600), time.Minute, 0, 12, 11, 2, 21, "07:15:00Z", "07:16:02.6Z", ""},
		{"two lines a year ahead", log(3, year+3600, year+3700), time.Minute, 0, 12, 12, 2, 22, "07:15:00Z", "2027-06-02T07:15:03.7Z", ""},
		{"the first line a year ahead", log(-1, year), time.Minute, 1, 0, 1, 3, 21, "07:15:00Z", "07:15:09.5Z", ""},
		{"a gap", log(9, 7_200_000, 7_200_500), time.Minute, 0, 0, 0, 2, 22, "07:15:00Z", "09:15:00.5Z", ""},
		{"the last line ahead", log(9, 7_200_000), time.Minute, 0, 0, 0, 2, 21, "07:15:00Z", "09:15:00Z", ""},
	} {
		rep := replayed(t, yaml, Options{Format: "json", MaxAhead: c.maxAhead}, c.log)
		r := ruleOf(t, rep, "s")
		w := r.Windows[0]
		if !strings.Contains(c.to, "T") {
			c.to = "2026-06-02T" + c.to
		}
		if rep.Outliers != c.outliers || rep.OutOfOrder != c.late || r.Refused != c.refused || w.PeakMax != c.peak || w.Units != c.units ||
			rep.From != "2026-06-02T"+c.from || rep.To != c.to {
			t.Errorf("%s: outliers %d, out of order %d, refused %d, peak %d, units %d, from %s to %s; want %d, %d, %d, %d, %d, %s to %s", c.name,
				rep.Outliers, rep.OutOfOrder, r.Refused, w.PeakMax, w.Units, rep.From, rep.To, c.outliers, c.late, c.refused, c.peak, c.units, c.from, c.to)
		}
		if c.note != "" && (len(rep.Notes) != 1 || rep.Notes[0] != c.note) {
			t.Errorf("%s: notes %q, want %q", c.name, rep.Notes, c.note)
		}
	}
}

// TestMaxAheadAcrossLogs: a line held to be compared with the line after
// it is compared across logs and across the batches a log is read in,
// and decided as it was logged.
func TestMaxAheadAcrossLogs(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: x\n      paths: [/x]\n      limit: 1/minute\n"
	// The last line of a log, and the next log back at its time.
	a := text("a.jsonl", `{"time":"2026-06-02T07:15:00Z","method":"GET","path":"/s","ip":"192.0.2.1","status":200}
{"time":"2027-06-02T07:15:00Z","method":"GET","path":"/x","ip":"192.0.2.9","status":200}
`)
	b := text("b.jsonl", `{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/s","ip":"192.0.2.1","status":200}
`)
	rep := replayed(t, yaml, Options{Format: "json", MaxAhead: time.Minute}, a, b)
	if x := ruleOf(t, rep, "x"); rep.Outliers != 1 || rep.OutOfOrder != 0 || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "the first, a.jsonl:2, was logged at 2027-06-02T07:15:00Z") ||
		x.Requests != 1 || len(x.Windows) != 1 || x.Windows[0].Keys != 1 {
		t.Errorf("outliers %d, out of order %d, notes %q, rule x %+v; want the last line of a.jsonl, on /x", rep.Outliers, rep.OutOfOrder, rep.Notes, x)
	}
	// Lines of 120 bytes: the first batch (a MiB) ends with line 8,738,
	// a year ahead.
	var big strings.Builder
	const last = batchBytes / 120
	for i := range last + 100 {
		at, path := t0.Add(time.Duration(i)*10*time.Millisecond), "/s"
		if i+1 == last {
			at, path = at.AddDate(1, 0, 0), "/x"
		}
		line := fmt.Sprintf(`{"time":%q,"method":"GET","path":%q,"ip":"192.0.2.1","status":200,"pad":"`, at.Format("2006-01-02T15:04:05.000Z07:00"), path)
		big.WriteString(line + strings.Repeat("p", 120-len(line)-3) + "\"}\n")
	}
	if big.Len() != 120*(last+100) {
		t.Fatalf("lines of %d bytes in all, want 120 each", big.Len())
	}
	rep = replayed(t, yaml, Options{Format: "json", MaxAhead: time.Minute}, text("big.jsonl", big.String()))
	if x := ruleOf(t, rep, "x"); rep.Outliers != 1 || rep.OutOfOrder != 0 || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "the first, big.jsonl:8738, was logged at 2027-06-02T07:16:27.37Z") ||
		x.Requests != 1 || rep.Requests != last+100 {
		t.Errorf("outliers %d, out of order %d, notes %q, requests %d, rule x %+v; want line 8,738, on /x", rep.Outliers, rep.OutOfOrder, rep.Notes, rep.Requests, x)
	}
}

// TestKeyTableOwnWindows: a key's units count in the window of their own
// time stamp when it is one of the last two windows the key counted in; a
// window later than both ends the earlier, one between them takes the
// earlier's place, and one earlier than both counts in the earlier
// (displaced).
func TestKeyTableOwnWindows(t *testing.T) {
	kt := newKeyTable([]window{{period: int64(time.Second)}}, 10)
	s := func(sec float64) int64 { return int64(sec * float64(time.Second)) }
	for _, at := range []float64{
		0.5, // window 0
		1.5, // window 1
		0.7, // window 0, the earlier held: 2
		3.2, // window 3: window 0 ends with 2; 1 and 3 held
		1.1, // window 1: 2
		0.1, // window 0, earlier than 1 and 3: counted in 1 (3), displaced
		2.5, // window 2, between 1 and 3: window 1 ends with 3; 2 and 3 held
	} {
		kt.add("a", 1, s(at))
	}
	kt.add("b", 4, s(1.2))
	kt.finish()
	// Key-window counts: a's 2, 3, 1, 1 and b's 4.
	c, p := &kt.counts[0], &kt.peaks[0]
	if c.cnt != 5 || c.tot != 11 || c.lin[1] != 2 || c.lin[2] != 1 || c.lin[3] != 1 || c.lin[4] != 1 || kt.displaced[0] != 1 {
		t.Errorf("key windows %d, units %d, counts 1:%d 2:%d 3:%d 4:%d, displaced %d; want 5, 11, 2, 1, 1, 1 and 1",
			c.cnt, c.tot, c.lin[1], c.lin[2], c.lin[3], c.lin[4], kt.displaced[0])
	}
	if p.cnt != 2 || p.lin[3] != 1 || p.lin[4] != 1 {
		t.Errorf("peaks: %d keys, 3:%d, 4:%d; want a's 3 and b's 4", p.cnt, p.lin[3], p.lin[4])
	}
}

// TestFutureLineFigures: a line a year ahead of the lines around it
// counts in its own window; the lines after it, decided at its instant
// (the clock never moves back), count in theirs: the key's figures are
// its demand, per window of its requests' own time stamps.
func TestFutureLineFigures(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: s\n      paths: [/s]\n      limit: 2/second\n"
	var reqs []req
	for sec := range 10 {
		reqs = append(reqs, req{ms: int64(sec) * 1000, path: "/s"}, req{ms: int64(sec)*1000 + 500, path: "/s"})
		if sec == 3 {
			reqs = append(reqs, req{ms: int64(sec)*1000 + 600 + 365*24*3600*1000, path: "/s"})
		}
	}
	rep := replayed(t, yaml, Options{Format: "json"}, jsonLog(reqs...))
	r := ruleOf(t, rep, "s")
	if w := r.Windows[0]; w.Keys != 1 || w.KeyWindows != 11 || w.Units != 21 || w.PeakMax != 2 || w.LimitRefusedShare != 0 || w.Recommended != 2 || !w.Exact {
		t.Errorf("windows %+v; want 11 key windows (10 of 2 units and the year-ahead line's), a peak of 2, exact", w)
	}
	// The 12 requests after it are decided at its instant, in its
	// window: the first is admitted, 11 refused.
	if rep.OutOfOrder != 12 || r.Refused != 11 {
		t.Errorf("out of order %d, refused %d; want 12 and 11", rep.OutOfOrder, r.Refused)
	}
}

// TestGzip: a log compressed with gzip is read through it, whatever its
// name, and gives the report the plain log gives.
func TestGzip(t *testing.T) {
	plain := `192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search HTTP/1.1" 200 1
192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search HTTP/1.1" 200 1
`
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	io.WriteString(zw, strings.Repeat(plain, 1000))
	zw.Close()
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: search\n      paths: [/api/search]\n      limit: 10/second\n"
	rep := replayed(t, yaml, Options{}, text("a.log.gz", z.String()))
	if r := ruleOf(t, rep, "search"); rep.Lines != 2000 || r.Requests != 2000 || r.Refused != 1990 {
		t.Errorf("lines %d, requests %d, refused %d; want 2000, 2000, 1990", rep.Lines, r.Requests, r.Refused)
	}
	// A truncated stream is an error, not the end of the log.
	rules, _ := Load([]byte(yaml), "rules.yaml")
	rp, _ := New(rules, Options{})
	if _, err := rp.Run([]Source{text("cut.gz", z.String()[:z.Len()/2])}); err == nil || !strings.Contains(err.Error(), "cut.gz") {
		t.Errorf("a truncated gzip log: error %v, want one naming it", err)
	}
}

// TestStatsKeyBound: the keys a rule's figures hold stay within
// StatsKeys, and the store's within StoreKeys, with many more distinct
// keys. Keys seen only in windows that have ended when they are forgotten
// leave every per-window figure exact; the requests and refusals are
// counted exactly whatever is forgotten.
func TestStatsKeyBound(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: s\n      paths: [/s]\n      limit: 1/second\n    - name: h\n      paths: [/h]\n      limit: 1/hour\n"
	const keys = 5000
	var b strings.Builder
	for i := range keys {
		// Key i sends two requests in second i: one refused.
		ip := fmt.Sprintf("10.0.%d.%d", i/256, i%256)
		ts := t0.Add(time.Duration(i) * time.Second).Format("02/Jan/2006:15:04:05 -0700")
		for range 2 {
			fmt.Fprintf(&b, "%s - - [%s] \"GET /s HTTP/1.1\" 200 1\n", ip, ts)
		}
	}
	rules, err := Load([]byte(yaml), "rules.yaml")
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(rules, Options{StatsKeys: 50, StoreKeys: 64})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := r.Run([]Source{text("a.log", b.String())})
	if err != nil {
		t.Fatal(err)
	}
	s := ruleOf(t, rep, "s")
	w := s.Windows[0]
	if s.Requests != 2*keys || s.Refused != keys || w.KeyWindows != keys || w.Units != 2*keys || w.Keys != keys || w.PeakMax != 2 {
		t.Errorf("requests %d, refused %d, windows %+v; want %d, %d, %d windows and keys of 2", s.Requests, s.Refused, w, 2*keys, keys, keys)
	}
	if w.Exact || w.EvictedKeys == 0 || w.SplitWindows != 0 || w.Recommended != 2 || w.LimitRefusedShare != 0.5 {
		t.Errorf("window %+v: want keys forgotten, none in an open window, recommended 2, half refused at 1", w)
	}
	if most := r.stats[statKey{"s", ""}].table.most; most > 50 {
		t.Errorf("the key table held %d keys, past its bound of 50", most)
	}
	if rep.StoreKeys > 64 {
		t.Errorf("the store holds %d keys, past its bound of 64", rep.StoreKeys)
	}

	// Under a limit per hour every window is open when keys are
	// forgotten: the report says so.
	r, _ = New(rules, Options{StatsKeys: 50})
	rep, err = r.Run([]Source{text("a.log", strings.ReplaceAll(b.String(), "GET /s ", "GET /h "))})
	if err != nil {
		t.Fatal(err)
	}
	h := ruleOf(t, rep, "h")
	if w := h.Windows[0]; h.Requests != 2*keys || h.Refused != keys || w.Exact || w.SplitWindows == 0 || w.Units != 2*keys {
		t.Errorf("per hour: requests %d, refused %d, window %+v; want %d, %d, split windows reported, every unit counted", h.Requests, h.Refused, w, 2*keys, keys)
	}
	// Counters that last an hour fill the store: it evicts live ones to
	// stay within its bound, as the service's would.
	r, _ = New(rules, Options{StoreKeys: 64})
	if rep, err = r.Run([]Source{text("a.log", strings.ReplaceAll(b.String(), "GET /s ", "GET /h "))}); err != nil {
		t.Fatal(err)
	}
	if rep.StoreKeys > 64 || rep.StoreEvictions == 0 {
		t.Errorf("per hour: the store holds %d keys (%d evicted), want at most 64, some evicted", rep.StoreKeys, rep.StoreEvictions)
	}
}

// TestPlansListsPenaltyShadow: plans, the allow and ban lists, a penalty
// and a rule in shadow mode behave as in the service.
func TestPlansListsPenaltyShadow(t *testing.T) {
	yaml := `rate_limit:
  enabled: true
  default: 1000/second
  allow:
    identities: ["sub:ops"]
  ban:
    networks: ["203.0.113.0/24"]
  tiers:
    pro:
      rules:
        api: 3/minute
  rules:
    - name: api
      paths: [/api/**]
      limit: 1/minute
    - name: beta
      paths: [/beta]
      limit: 1/minute
      mode: shadow
    - name: guard
      paths: [/login]
      limit: 1/minute
      penalty: {after: 2, within: 1m, ban: 10m}
`
	var b strings.Builder
	line := func(sec int, ip, user, plan, path string) {
		fmt.Fprintf(&b, `{"time":%q,"method":"GET","path":%q,"ip":%q,"status":200,"user":%q,"plan":%q}`+"\n",
			t0.Add(time.Duration(sec)*time.Second).Format(time.RFC3339), path, ip, user, plan)
	}
	for i := range 2 {
		line(i, "192.0.2.1", "alice", "", "/api/a") // 1 refused
	}
	for i := range 4 {
		line(i, "192.0.2.2", "bob", "pro", "/api/a") // 3 a minute: 1 refused
	}
	for i := range 3 {
		line(i, "192.0.2.3", "sub:ops", "", "/api/a") // allowed: never counted
	}
	line(5, "203.0.113.5", "eve", "", "/api/a") // banned
	for i := range 3 {
		line(i, "192.0.2.4", "carol", "", "/beta") // would refuse 2
	}
	// 1 admitted; 2 denied; 3 denied, the second denial, which bans; 4
	// and 5 refused by the ban: 4 refused, 2 by the penalty.
	for i := range 5 {
		line(10+i, "192.0.2.5", "dave", "", "/login")
	}
	rep := replayed(t, yaml, Options{Format: "json", Identity: "field:user", Plan: "field:plan"}, text("a.jsonl", b.String()))
	if rep.Banned != 1 {
		t.Errorf("banned %d, want 1", rep.Banned)
	}
	if r := ruleOf(t, rep, "api"); r.Requests != 5 || r.Refused != 1 || r.Bypassed != 3 {
		t.Errorf("api: %d requests, %d refused, %d bypassed; want 5, 1, 3", r.Requests, r.Refused, r.Bypassed)
	}
	var pro *RuleReport
	for i := range rep.Rules {
		if rep.Rules[i].Rule == "api" && rep.Rules[i].Plan == "pro" {
			pro = &rep.Rules[i]
		}
	}
	if pro == nil || pro.Requests != 4 || pro.Refused != 1 || !slices.Equal(pro.Limits, []string{"3/minute"}) || pro.Windows[0].Count != 3 {
		t.Errorf("api under plan pro: %+v; want 4 requests, 1 refused, 3/minute", pro)
	}
	if r := ruleOf(t, rep, "beta"); r.Mode != "shadow" || r.Requests != 3 || r.Refused != 2 {
		t.Errorf("beta: mode %s, %d requests, %d refused; want shadow, 3, 2", r.Mode, r.Requests, r.Refused)
	}
	if r := ruleOf(t, rep, "guard"); r.Requests != 5 || r.Refused != 4 || r.Penalized != 2 {
		t.Errorf("guard: %d requests, %d refused, %d penalized; want 5, 4, 2", r.Requests, r.Refused, r.Penalized)
	}
}

// TestStacked: a stacked rule counts beside the rule that applies; a
// request it refuses counts under the other rule too, refused by neither
// the other rule nor its figures' demand lost.
func TestStacked(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: site\n      paths: [/**]\n      limit: 2/minute\n      stack: true\n    - name: api\n      paths: [/api/**]\n      limit: 10/minute\n"
	rep := replayed(t, yaml, Options{Format: "json"}, jsonLog(req{ms: 0, path: "/api/a"}, req{ms: 1, path: "/api/b"}, req{ms: 2, path: "/api/c"}))
	site, api := ruleOf(t, rep, "site"), ruleOf(t, rep, "api")
	if !site.Stacked || site.Requests != 3 || site.Refused != 1 || api.Requests != 3 || api.Refused != 0 || api.Windows[0].Units != 3 {
		t.Errorf("site %d requests, %d refused; api %d requests, %d refused, %d units; want 3, 1; 3, 0, 3", site.Requests, site.Refused, api.Requests, api.Refused, api.Windows[0].Units)
	}
}

// TestNotReplayed: a concurrency limit is not replayed (a log has no
// durations), and a header a rule counts per that the log lacks falls
// back to the client IP: the report says both.
func TestNotReplayed(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1000/second\n  rules:\n    - name: upload\n      paths: [/upload]\n      concurrent: 1\n    - name: keyed\n      paths: [/k]\n      limit: 1/minute\n      key: header:X-Api-Key\n"
	rep := replayed(t, yaml, Options{}, text("a.log", `192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "POST /upload HTTP/1.1" 200 1
192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "POST /upload HTTP/1.1" 200 1
192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET /k HTTP/1.1" 200 1
192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET /k HTTP/1.1" 200 1
`))
	if r := ruleOf(t, rep, "upload"); r.Concurrent != 1 || r.Refused != 0 || r.Requests != 2 || !strings.HasPrefix(r.NotReplayed, "concurrent: 1: the log has no request durations") || len(r.Windows) != 0 {
		t.Errorf("upload: %+v; want 2 requests, none refused, not replayed", r)
	}
	if r := ruleOf(t, rep, "keyed"); r.Refused != 1 || len(rep.Notes) != 1 || !strings.Contains(rep.Notes[0], "header X-Api-Key, which the clf log does not hold") {
		t.Errorf("keyed: refused %d, notes %q; want 1 and the header named", r.Refused, rep.Notes)
	}
}

// TestStackedWeight: a rule that would have admitted a request another
// rule refused counts the request's demand at its path's weight, as it
// would have charged it. search (weight 5) admits all five requests of
// one caller in a minute; the stacked st refuses the last two.
func TestStackedWeight(t *testing.T) {
	yaml := `rate_limit:
  enabled: true
  default: 1000/second
  rules:
    - name: search
      paths: [/api/search]
      limit: 1000/minute
      weights:
        /api/search: 5
    - name: st
      paths: [/api/**]
      limit: 3/minute
      stack: true
`
	var reqs []req
	for i := range 5 {
		reqs = append(reqs, req{ms: int64(i) * 1000, path: "/api/search"})
	}
	rep := replayed(t, yaml, Options{Format: "json"}, jsonLog(reqs...))
	s, st := ruleOf(t, rep, "search"), ruleOf(t, rep, "st")
	if st.Refused != 2 || s.Requests != 5 || s.Refused != 0 {
		t.Fatalf("st refused %d, search %d requests (%d refused); want 2, 5 (0)", st.Refused, s.Requests, s.Refused)
	}
	if w := s.Windows[0]; w.Units != 25 || w.PeakMax != 25 || w.Recommended != 25 {
		t.Errorf("search: %d units, peak %d, recommended %d; want 25, 25, 25", w.Units, w.PeakMax, w.Recommended)
	}
	if w := st.Windows[0]; w.Units != 5 {
		t.Errorf("st: %d units, want 5", w.Units)
	}
}

// TestBracketedIPv6: a bracketed IPv6 client without a port is an
// address: banned by the ban list's network, and counted per /64.
func TestBracketedIPv6(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1/minute\n  ban:\n    networks: [\"2001:db8:bad::/48\"]\n"
	log := `[2001:db8:bad::1] - - [02/Jun/2026:07:15:01 +0000] "GET / HTTP/1.1" 200 1
[2001:db8:1:2::1] - - [02/Jun/2026:07:15:02 +0000] "GET / HTTP/1.1" 200 1
[2001:db8:1:2::2] - - [02/Jun/2026:07:15:03 +0000] "GET / HTTP/1.1" 200 1
`
	rep := replayed(t, yaml, Options{}, text("a.log", log))
	d := ruleOf(t, rep, "default")
	if rep.Banned != 1 || d.Requests != 2 || d.Refused != 1 || len(d.TopRefused) != 1 || d.TopRefused[0].Key != "2001:db8:1:2::" {
		t.Errorf("banned %d, default %d requests, %d refused, top %+v; want 1, 2, 1 of 2001:db8:1:2::", rep.Banned, d.Requests, d.Refused, d.TopRefused)
	}
}

// TestTextEscapes: the text report writes the keys refused most and the
// file names of malformed lines with control bytes, bytes that are not
// UTF-8 and backslashes escaped (\xNN, \\), so that a client's identity
// never writes terminal controls; printable UTF-8 stays as it is.
func TestTextEscapes(t *testing.T) {
	yaml := "rate_limit:\n  enabled: true\n  default: 1/minute\n"
	log := `{"time":"2026-06-02T07:15:00Z","method":"GET","path":"/","ip":"192.0.2.1","status":200,"user":"\u001b[2J\u009bevil\\é\r"}
{"time":"2026-06-02T07:15:01Z","method":"GET","path":"/","ip":"192.0.2.1","status":200,"user":"\u001b[2J\u009bevil\\é\r"}
`
	rep := replayed(t, yaml, Options{Format: "json", Identity: "field:user"}, text("a\x1b]0;x\x07.jsonl", log+"bad\n"), text("b.jsonl", strings.Repeat(`{"time":"2026-06-02T07:15:02Z","method":"GET","path":"/","ip":"192.0.2.1","status":200,"user":"`+"\xff"+`x"}`+"\n", 2)))
	var b bytes.Buffer
	if err := rep.WriteText(&b); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		`refused most: \x1b[2J\xc2\x9bevil\\é\x0d 1`,
		`malformed: a\x1b]0;x\x07.jsonl:3: not a JSON object`,
		`\xffx 1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the text report lacks %q:\n%s", want, out)
		}
	}
	for i := 0; i < len(out); i++ {
		if c := out[i]; c < ' ' && c != '\n' || c == 0x7f {
			t.Fatalf("the text report holds the control byte %#x at %d:\n%q", c, i, out)
		}
	}
	if strings.Contains(out, "\u009b") || !utf8.ValidString(out) {
		t.Errorf("the text report holds a C1 control or invalid UTF-8:\n%q", out)
	}
}
