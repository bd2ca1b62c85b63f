package replay

import (
	"bufio"
	"net/netip"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"unicode/utf8"
)

var fuzzBatches sync.Pool

// seeds adds each line of the testdata files given to f.
func seeds(f *testing.F, files ...string) {
	for _, name := range files {
		file, err := os.Open(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		sc := bufio.NewScanner(file)
		for sc.Scan() {
			f.Add(sc.Text())
		}
		file.Close()
	}
}

// fuzzParse parses line with p and checks what a record must be: a
// request's path starts with '/' (or is "*"), its status is three digits,
// and it has an identity or a client IP; a client IP is an IP address.
func fuzzParse(t *testing.T, p *lineParser, line string) {
	b, _ := fuzzBatches.Get().(*batch)
	if b == nil {
		b = newBatch()
	}
	defer fuzzBatches.Put(b)
	b.reset()
	n := copy(b.buf, line)
	var rec Record
	if why := p.parse(b.buf[:n], &rec, b); why != "" {
		if !utf8.ValidString(why) {
			t.Errorf("reason %q is not UTF-8", why)
		}
		return
	}
	if rec.Path == "" || rec.Path[0] != '/' && rec.Path != "*" {
		t.Errorf("line %q: path %q", line, rec.Path)
	}
	if rec.Status < 100 || rec.Status > 999 || rec.Method == "" {
		t.Errorf("line %q: method %q, status %d", line, rec.Method, rec.Status)
	}
	if rec.IP == "" && rec.ID == "" {
		t.Errorf("line %q: neither identity nor client IP", line)
	}
	if _, err := netip.ParseAddr(rec.IP); rec.IP != "" && err != nil || (rec.IP == "") != (rec.Addr == "") {
		t.Errorf("line %q: client IP %q, address %q; want IP addresses, or neither", line, rec.IP, rec.Addr)
	}
}

func FuzzParseCLF(f *testing.F) {
	seeds(f, "clf.log", "combined.log")
	for _, s := range []string{
		`1.2.3.4 - - [10/Oct/2026:13:55:36 -0700] "GET /a\" b HTTP/1.1" 200 1 "r\\" "ua"`,
		`1.2.3.4 - - [10/Oct/2026:13:55:36 -0700] "GET http://h HTTP/1.1" 200 1`,
		`::ffff:1.2.3.4 - - [29/Feb/2028:00:00:00 +1400] "OPTIONS * HTTP/1.1" 204 0`,
		`[::1]:80 - - [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1" 999 -`,
		`[2001:db8::1] - - [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1" 200 -`,
		`[1.2.3.4] - - [10/Oct/2026:13:55:36 -0700] "GET / HTTP/1.1" 200 -`,
		`1.2.3.4 - - [10/Oct/2026:13:55:36 -0700] "`,
		` - - [] "" 200`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		p, err := newLineParser(&Options{Format: "clf", Identity: "field:user", Plan: "header:User-Agent"}, []string{"Referer"})
		if err != nil {
			t.Fatal(err)
		}
		fuzzParse(t, p, line)
	})
}

func FuzzParseEnvoy(f *testing.F) {
	seeds(f, "envoy.log")
	f.Add(`[2026-06-02T07:15:06.310+02:00] "GET / HTTP/1.1" 200 - 0 0 0 - "-" "-" "-" "-" "-"`)
	f.Add(`[2026-06-02T07:15:06Z] "GET / HTTP/1.1" 200 UF 0 0 0 - ", , 1.2.3.4 " "a" "b" "c" "d"`)
	f.Fuzz(func(t *testing.T, line string) {
		p, err := newLineParser(&Options{Format: "envoy", Identity: "header:X-Request-Id"}, []string{"Host", "User-Agent"})
		if err != nil {
			t.Fatal(err)
		}
		fuzzParse(t, p, line)
	})
}

func FuzzParseJSON(f *testing.F) {
	seeds(f, "nginx.jsonl", "caddy.jsonl", "app.jsonl")
	for _, s := range []string{
		`{"time":"2026-06-02T07:15:05Z","method":"GET","path":"/a","ip":"1.2.3.4","status":200}`,
		`{"time":1780384505.5,"request":"GET /a?b HTTP/1.1","ip":"1.2.3.4","status":"200","headers":{"x-api-key":"k","X-Plan":["a\ud83d\ude00"]}}`,
		`{"time":"\u0032026","a":{"b":{"c":[1,{"d":"}"}]}},"ts":-1e9}`,
		`{"msec":"1780384505.612","x":"\ud800","y":"\\","z":tru}`,
		`{"time":1780384505524102917,"path":"/a","method":"GET","ip":"1.2.3.4","status":200}`,
		`{"time":"9999999999999999999.99","path":"/a","method":"GET","ip":"1.2.3.4","status":200}`,
		`{"a":"`, `{`, `{"a" 1}`, `[1]`, `{}`, `{"t":1}  x`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, o := range []Options{
			{Format: "json", Identity: "header:X-Api-Key", Plan: "field:a.b.c", Fields: []string{"header:X-Team=team", "time=time"}},
			{Format: "nginx-json", Identity: "field:remote_user", Plan: "header:X-Plan"},
			{Format: "caddy", Identity: "header:X-Api-Key"},
		} {
			p, err := newLineParser(&o, []string{"User-Agent", "X-Plan"})
			if err != nil {
				t.Fatal(err)
			}
			fuzzParse(t, p, line)
		}
	})
}
