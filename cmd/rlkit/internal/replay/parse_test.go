package replay

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
)

// parsed reads src as o says and returns its records (copies) and the
// reader, with its malformed lines.
func parsed(t *testing.T, o Options, headers []string, srcs ...Source) ([]Record, *reader) {
	t.Helper()
	p, err := newLineParser(&o, headers)
	if err != nil {
		t.Fatal(err)
	}
	rd := newReader(p, nil)
	go rd.run(srcs)
	var recs []Record
	for b := range rd.out {
		for i := range b.recs {
			recs = append(recs, *b.recs[i].clone())
		}
		rd.free <- b
	}
	if rd.err != nil {
		t.Fatal(rd.err)
	}
	return recs, rd
}

func text(name, s string) Source {
	return Source{Name: name, Open: func() (io.ReadCloser, error) { return io.NopCloser(strings.NewReader(s)), nil }}
}

func fixture(name string) Source {
	return Source{Name: name, Open: func() (io.ReadCloser, error) { return os.Open(filepath.Join("testdata", name)) }}
}

func at(s string) int64 {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t.UnixNano()
}

// want is what a test checks of a record.
type want struct {
	time                       string
	method, path, ip, addr, id string
	plan                       string
	status                     int
	header, headerValue, agent string
}

func check(t *testing.T, recs []Record, wants []want) {
	t.Helper()
	if len(recs) != len(wants) {
		t.Fatalf("%d records, want %d: %+v", len(recs), len(wants), recs)
	}
	for i, w := range wants {
		r := recs[i]
		if r.Time != at(w.time) || r.Method != w.method || r.Path != w.path || r.IP != w.ip || r.Status != w.status || r.ID != w.id || r.Plan != w.plan {
			t.Errorf("record %d = {%s %q %q ip %q status %d id %q plan %q}\nwant {%s %q %q ip %q status %d id %q plan %q}", i,
				time.Unix(0, r.Time).UTC().Format(time.RFC3339Nano), r.Method, r.Path, r.IP, r.Status, r.ID, r.Plan,
				w.time, w.method, w.path, w.ip, w.status, w.id, w.plan)
		}
		if addr := w.addr; addr != "" && r.Addr != addr {
			t.Errorf("record %d: Addr %q, want %q", i, r.Addr, addr)
		}
		if w.header != "" && r.Header(w.header) != w.headerValue {
			t.Errorf("record %d: header %s = %q, want %q", i, w.header, r.Header(w.header), w.headerValue)
		}
		if w.agent != "" && r.Header("User-Agent") != w.agent {
			t.Errorf("record %d: User-Agent = %q, want %q", i, r.Header("User-Agent"), w.agent)
		}
	}
}

func TestFixtureCLF(t *testing.T) {
	recs, rd := parsed(t, Options{Format: "clf", Identity: "field:user"}, nil, fixture("clf.log"))
	check(t, recs, []want{
		{time: "2026-06-02T07:15:01Z", method: "GET", path: "/api/search", ip: "192.0.2.10", status: 200},
		{time: "2026-06-02T07:15:01Z", method: "GET", path: "/api/search", ip: "192.0.2.10", status: 200},
		{time: "2026-06-02T07:15:02Z", method: "POST", path: "/login", ip: "198.51.100.23", id: "frank", status: 401},
		// An IPv6 client counts per /64, and is matched whole against networks.
		{time: "2026-06-02T07:15:03Z", method: "GET", path: "/api/items/42", ip: "2001:db8:1:2::", addr: "2001:db8:1:2::77", status: 200},
	})
	if rd.lines != 4 || rd.malformed != 0 {
		t.Errorf("lines %d, malformed %d; want 4 and 0", rd.lines, rd.malformed)
	}
}

func TestFixtureCombined(t *testing.T) {
	const firefox = "Mozilla/5.0 (X11; Linux x86_64; rv:126.0) Gecko/20100101 Firefox/126.0"
	recs, _ := parsed(t, Options{Format: "clf"}, []string{"User-Agent", "Referer"}, fixture("combined.log"))
	check(t, recs, []want{
		{time: "2026-06-02T07:15:04Z", method: "GET", path: "/api/items/42", ip: "203.0.113.5", status: 200, agent: firefox, header: "Referer", headerValue: "https://shop.example/"},
		{time: "2026-06-02T07:15:04Z", method: "GET", path: "/static/app.3f9c.js", ip: "203.0.113.5", status: 304, agent: firefox},
		// "-" is no value.
		{time: "2026-06-02T07:15:05Z", method: "POST", path: "/login", ip: "198.51.100.23", status: 401, agent: "python-requests/2.32.3", header: "Referer", headerValue: ""},
		// A Common line among Combined ones has neither.
		{time: "2026-06-02T07:15:06Z", method: "GET", path: "/api/search", ip: "198.51.100.23", status: 200, header: "User-Agent", headerValue: ""},
	})
}

func TestFixtureNginxJSON(t *testing.T) {
	recs, _ := parsed(t, Options{Format: "nginx-json", Identity: "header:X-Api-Key"}, []string{"User-Agent"}, fixture("nginx.jsonl"))
	check(t, recs, []want{
		{time: "2026-06-02T07:15:05Z", method: "GET", path: "/api/search", ip: "192.0.2.44", id: "k-live-7f3a", status: 200, agent: "curl/8.5.0"},
		{time: "2026-06-02T07:15:05Z", method: "POST", path: "/login", ip: "198.51.100.23", status: 401},
	})
}

func TestFixtureCaddy(t *testing.T) {
	recs, _ := parsed(t, Options{Format: "caddy", Identity: "header:x-api-key"}, []string{"User-Agent"}, fixture("caddy.jsonl"))
	check(t, recs, []want{
		{time: "2026-06-02T07:15:05.524102Z", method: "GET", path: "/api/search", ip: "192.0.2.44", id: "k-live-7f3a", status: 200, agent: "curl/8.5.0"},
		// client_ip (what Caddy derived behind its trusted proxies) over remote_ip.
		{time: "2026-06-02T07:15:05.9Z", method: "POST", path: "/login", ip: "198.51.100.23", status: 401, agent: "python-requests/2.32.3"},
	})
}

func TestFixtureEnvoy(t *testing.T) {
	recs, _ := parsed(t, Options{Format: "envoy", Identity: "field:request_id"}, []string{"User-Agent", "Host"}, fixture("envoy.log"))
	check(t, recs, []want{
		{time: "2026-06-02T07:15:06.31Z", method: "GET", path: "/api/search", ip: "192.0.2.44", id: "8c7e3f0a-5d4e-4f3b-9a1c-2b6d7e8f9a0b", status: 200, agent: "curl/8.5.0", header: "Host", headerValue: "shop.example"},
		// The last address of X-Forwarded-For, the one Envoy appended:
		// the first is whatever the client sent.
		{time: "2026-06-02T07:15:06.412Z", method: "POST", path: "/login", ip: "203.0.113.9", id: "1f0e2d3c-4b5a-4968-8776-a5b4c3d2e1f0", status: 401},
	})
}

func TestFixtureJSON(t *testing.T) {
	recs, _ := parsed(t, Options{Format: "json", Identity: "field:user"}, []string{"User-Agent"}, fixture("app.jsonl"))
	check(t, recs, []want{
		{time: "2026-06-02T07:15:07.12Z", method: "GET", path: "/api/search", ip: "192.0.2.44", id: "u-1842", status: 200, agent: "curl/8.5.0"},
		{time: "2026-06-02T07:15:07.125Z", method: "POST", path: "/login", ip: "2001:db8:5:6::", addr: "2001:db8:5:6::9", status: 401},
		// The default fields' other names: ts, a request line, remote_addr.
		{time: "2026-06-02T07:15:07.5Z", method: "DELETE", path: "/api/items/42", ip: "198.51.100.23", id: "u-77", status: 204},
	})
}

func TestJSONFields(t *testing.T) {
	log := `{"ts": 1780384505123, "req": {"verb": "GET", "url": "https://shop.example/api/search?q=a"}, "code": 429, "client": {"addr": "[2001:db8::5]:443"}, "tenant": "acme", "key": "k\u00e9y-\"1\""}
{"ts": "2026-06-02T07:15:05.5+00:00", "req": {"verb": "PUT", "url": "/a%2Fb"}, "code": "204", "client": {"addr": "::ffff:192.0.2.9"}, "tenant": null, "hdrs": {"x-plan": ["pro", "free"]}}
`
	o := Options{Format: "json", Identity: "field:key", Plan: "header:X-Plan",
		Fields: []string{"time=ts", "method=req.verb", "path=req.url", "status=code", "ip=client.addr", "headers=hdrs"}}
	recs, _ := parsed(t, o, nil, text("app.log", log))
	check(t, recs, []want{
		{time: "2026-06-02T07:15:05.123Z", method: "GET", path: "/api/search", ip: "2001:db8::", addr: "2001:db8::5", id: `kéy-"1"`, status: 429},
		{time: "2026-06-02T07:15:05.5Z", method: "PUT", path: "/a%2Fb", ip: "192.0.2.9", plan: "pro", status: 204},
	})
}

func TestMalformedLines(t *testing.T) {
	log := strings.Join([]string{
		`192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET / HTTP/1.1" 200 1`,
		`192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET / HTTP/1.1" 2000 1`,
		`192.0.2.1 - - [31/Jun/2026:07:15:01 +0000] "GET / HTTP/1.1" 200 1`,
		``,
		`192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "-" 400 0`,
		`garbage`,
		`192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET / HTTP/1.1`,
		`192.0.2.1 - - [02/Jun/2026:07:15:02 +0000] "GET /ok HTTP/1.1" 200 1`,
		`192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET relative HTTP/1.1" 200 1`,
	}, "\r\n")
	recs, rd := parsed(t, Options{Format: "clf"}, nil, text("a.log", log))
	if len(recs) != 2 || recs[1].Path != "/ok" {
		t.Fatalf("records %+v, want the two good lines", recs)
	}
	want := []Malformed{
		{"a.log", 2, `status "2000" is not a three-digit code`},
		{"a.log", 3, `time "31/Jun/2026:07:15:01 +0000" is not dd/Mon/yyyy:hh:mm:ss +zzzz`},
		{"a.log", 6, `not a Common Log Format line`},
		{"a.log", 7, `the request line has no closing quote`},
		{"a.log", 9, `request target "relative" is not a path`},
	}
	// Line 5, nginx's "-" for a connection that sent no request, is no
	// request, not malformed.
	if rd.lines != 8 || rd.malformed != 5 || rd.unrequested != 1 {
		t.Errorf("lines %d, malformed %d, no request %d; want 8 (the blank one aside), 5 and 1", rd.lines, rd.malformed, rd.unrequested)
	}
	if len(rd.first) != len(want) {
		t.Fatalf("first malformed %+v, want %+v", rd.first, want)
	}
	for i := range want {
		if rd.first[i] != want[i] {
			t.Errorf("malformed %d = %+v, want %+v", i, rd.first[i], want[i])
		}
	}
}

// TestLongLine: a line longer than a batch's buffer is malformed, and the
// lines after it are read.
func TestLongLine(t *testing.T) {
	good := `192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET /a HTTP/1.1" 200 1` + "\n"
	long := `192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET /` + strings.Repeat("x", 3*batchBytes) + ` HTTP/1.1" 200 1` + "\n"
	recs, rd := parsed(t, Options{Format: "clf"}, nil, text("a.log", good+long+good+long))
	if len(recs) != 2 || rd.malformed != 2 || rd.first[0].Line != 2 || rd.first[1].Line != 4 {
		t.Fatalf("%d records, malformed %+v; want 2 records, lines 2 and 4 malformed", len(recs), rd.first)
	}
	if rd.lines != 4 {
		t.Errorf("lines %d, want 4: an overlong line is a line", rd.lines)
	}
	// The report's figures add up: every line is a request or malformed.
	rep := replayed(t, "rate_limit:\n  enabled: true\n  default: 1/minute\n", Options{}, text("a.log", good+long+good+"x\n"+long))
	if rep.Lines != 5 || rep.Malformed != 3 || rep.Requests != 2 || rep.Lines != rep.Requests+rep.Malformed {
		t.Errorf("lines %d, malformed %d, requests %d; want 5 = 2 + 3", rep.Lines, rep.Malformed, rep.Requests)
	}
}

// TestBatchBoundaries: lines cut by the end of a batch's buffer are read
// whole, and line numbers run on across batches and sources.
func TestBatchBoundaries(t *testing.T) {
	var b strings.Builder
	n := 0
	for b.Len() < 3*batchBytes {
		n++
		b.WriteString(`192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET /p/` + strings.Repeat("y", n%97) + ` HTTP/1.1" 200 1` + "\n")
	}
	b.WriteString("bad line\n")
	recs, rd := parsed(t, Options{Format: "clf"}, nil, text("a.log", b.String()), text("b.log", "x\n"))
	if len(recs) != n || rd.malformed != 2 {
		t.Fatalf("%d records, %d malformed; want %d and 2", len(recs), rd.malformed, n)
	}
	for i, r := range recs {
		if want := "/p/" + strings.Repeat("y", (i+1)%97); r.Path != want {
			t.Fatalf("record %d: path %q, want %q", i, r.Path, want)
		}
	}
	if rd.first[0] != (Malformed{"a.log", int64(n + 1), "no ident field"}) || rd.first[1].Reason != "not a Common Log Format line" || rd.first[1].File != "b.log" || rd.first[1].Line != 1 {
		t.Errorf("malformed = %+v", rd.first)
	}
}

// TestEpoch: Unix times in seconds, milliseconds, microseconds and
// nanoseconds (19 digits), told by their size; a number past int64's
// nanoseconds, or of more digits, is no time.
func TestEpoch(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"1780384505", 1780384505_000000000, true},
		{"1780384505.524102", 1780384505_524102000, true},
		{"1780384505524", 1780384505_524000000, true},
		{"1780384505524102", 1780384505_524102000, true},
		{"1780384505524102917", 1780384505_524102917, true},
		{"1780384505524102917.5", 1780384505_524102917, true},
		{"4611686018427387904", 4611686018427387904, true}, // 1<<62: the year 2116
		{"4611686018427387905", 0, false},
		{"9223372036854775807", 0, false},
		{"9999999999999999999", 0, false},
		{"17803845055241029170", 0, false},
		{"", 0, false},
		{"1780384505x", 0, false},
	} {
		got, ok := epoch([]byte(c.in))
		if got != c.want || ok != c.ok {
			t.Errorf("epoch(%q) = %d, %v; want %d, %v", c.in, got, ok, c.want, c.ok)
		}
	}
	// A JSON log's 19-digit time stamp, as a number and as a string.
	log := `{"time":1780384505524102917,"method":"GET","path":"/a","ip":"192.0.2.1","status":200}
{"time":"1780384505624102917","method":"GET","path":"/a","ip":"192.0.2.1","status":200}
`
	recs, rd := parsed(t, Options{Format: "json"}, nil, text("a.jsonl", log))
	if rd.malformed != 0 || len(recs) != 2 || recs[0].Time != 1780384505524102917 || recs[1].Time != 1780384505624102917 {
		t.Errorf("records %+v, malformed %+v; want two at their nanoseconds", recs, rd.first)
	}
}

// TestClientAddresses: a log's client address is read as the service's
// clientip reads a peer's: IPv4, IPv6 bare, bracketed, with a port or a
// zone, IPv4-mapped; an IPv6 client counts per /64 (IP) and is matched
// whole against the lists (Addr).
func TestClientAddresses(t *testing.T) {
	for _, c := range []struct{ host, ip, addr string }{
		{"203.0.113.7", "203.0.113.7", "203.0.113.7"},
		{"203.0.113.7:443", "203.0.113.7", "203.0.113.7"},
		{"2001:db8::1", "2001:db8::", "2001:db8::1"},
		{"[2001:db8::1]", "2001:db8::", "2001:db8::1"},
		{"[2001:db8::1]:443", "2001:db8::", "2001:db8::1"},
		{"[2001:DB8:0::1]", "2001:db8::", "2001:db8::1"},
		{"fe80::1%eth0", "fe80::", "fe80::1"},
		{"::ffff:203.0.113.7", "203.0.113.7", "203.0.113.7"},
		{"[::ffff:203.0.113.7]:80", "203.0.113.7", "203.0.113.7"},
	} {
		log := c.host + ` - - [02/Jun/2026:07:15:01 +0000] "GET / HTTP/1.1" 200 1` + "\n"
		recs, _ := parsed(t, Options{Format: "clf"}, nil, text("a.log", log))
		if len(recs) != 1 || recs[0].IP != c.ip || recs[0].Addr != c.addr {
			t.Errorf("client %q: records %+v; want IP %q, Addr %q", c.host, recs, c.ip, c.addr)
		}
	}
}

// TestNoRequest: a line that logs no request (nginx's "-" request line,
// an empty one, Envoy's "- - -", an nginx JSON line's empty request) is
// counted apart from the malformed lines, in every format.
func TestNoRequest(t *testing.T) {
	for _, c := range []struct {
		format, log string
	}{
		{"clf", `192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "-" 400 0
192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "" 408 0 "-" "-"
192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET / HTTP/1.1" 200 1
`},
		{"envoy", `[2026-06-02T07:15:06.412Z] "- - -" 0 - 0 0 3 - "192.0.2.1" "-" "-" "-" "-"
[2026-06-02T07:15:06.412Z] "- - HTTP/1.1" 400 DPE 0 0 3 - "192.0.2.1" "-" "-" "-" "-"
[2026-06-02T07:15:06.412Z] "GET / HTTP/1.1" 200 - 0 0 3 - "192.0.2.1" "-" "-" "-" "-"
`},
		{"nginx-json", `{"time_local":"02/Jun/2026:07:15:01 +0000","remote_addr":"192.0.2.1","request":"","request_method":"","request_uri":"","status":"400"}
{"time_local":"02/Jun/2026:07:15:01 +0000","remote_addr":"192.0.2.1","request":"-","status":"408"}
{"time_local":"02/Jun/2026:07:15:01 +0000","remote_addr":"192.0.2.1","request":"GET / HTTP/1.1","status":"200"}
`},
	} {
		recs, rd := parsed(t, Options{Format: c.format}, nil, text("a.log", c.log))
		if len(recs) != 1 || rd.lines != 3 || rd.malformed != 0 || rd.unrequested != 2 {
			t.Errorf("%s: %d records, lines %d, malformed %d %+v, no request %d; want 1, 3, 0, 2", c.format, len(recs), rd.lines, rd.malformed, rd.first, rd.unrequested)
		}
	}
	rep := replayed(t, "rate_limit:\n  enabled: true\n  default: 1/minute\n", Options{}, text("a.log", `192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "-" 400 0
192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET / HTTP/1.1" 200 1
bad
`))
	if rep.Lines != 3 || rep.Requests != 1 || rep.Malformed != 1 || rep.Unrequested != 1 {
		t.Errorf("lines %d, requests %d, malformed %d, no request %d; want 3 = 1 + 1 + 1", rep.Lines, rep.Requests, rep.Malformed, rep.Unrequested)
	}
}

// TestTargetAsNetHTTP: a logged request target gives the path net/http's
// server gives the middleware (core.URLPath of the URL http.ReadRequest
// parses): the query cut at the first '?', a '#' kept as part of the
// path; a target net/http refuses is malformed.
func TestTargetAsNetHTTP(t *testing.T) {
	for _, target := range []string{
		"/api/search", "/api/search?q=a", "/api/search#x", "/api/search#x?q=a", "/api/search?q=a#x",
		"/a%2Fb#c", "//x#y", "http://shop.example/api/search#x?q=a", "http://shop.example?x/y",
		"http://shop.example", "http://shop.example#x/api/search", "*",
	} {
		var want string
		hr, err := http.ReadRequest(bufio.NewReader(strings.NewReader("GET " + target + " HTTP/1.1\r\nHost: shop.example\r\n\r\n")))
		if err == nil {
			want = string(core.URLPath(hr.URL))
			if want == "" {
				want = "/" // an absolute target without a path: net/http serves "/"
			}
		}
		for _, c := range []struct{ format, line string }{
			{"clf", `192.0.2.1 - - [02/Jun/2026:07:15:01 +0000] "GET ` + target + ` HTTP/1.1" 200 1`},
			{"json", `{"time":"2026-06-02T07:15:01Z","method":"GET","path":"` + target + `","ip":"192.0.2.1","status":200}`},
		} {
			recs, rd := parsed(t, Options{Format: c.format}, nil, text("a.log", c.line+"\n"))
			switch {
			case err != nil && (len(recs) != 0 || rd.malformed != 1):
				t.Errorf("%s %q, which net/http refuses (%v): records %+v; want it malformed", c.format, target, err, recs)
			case err == nil && (len(recs) != 1 || recs[0].Path != want):
				t.Errorf("%s %q: records %+v; want the path %q, as net/http reads it", c.format, target, recs, want)
			}
		}
	}
}
