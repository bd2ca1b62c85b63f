package replay

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// benchRules are the rules of the replay benchmark: a search limit per
// caller, a login guard counting failures per client IP, two limits of a
// sliding window on item pages, a token bucket on writes, exports
// weighted by path, exempt static files and health checks, and the
// default.
const benchRules = `rate_limit:
  enabled: true
  default: "600/minute"
  exempt_paths: ["/health", "/static/**"]
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "10/second"
    - name: login
      paths: ["/login"]
      limit: "5/minute"
      count: failures
      key: ip
    - name: items
      paths: ["/api/items/*"]
      limit: ["100/minute", "1000/hour"]
      algorithm: sliding_window
    - name: writes
      paths: ["/api/items"]
      methods: ["POST", "PUT"]
      limit: "20/second"
      algorithm: token_bucket
      burst: 40
    - name: export
      paths: ["/api/export/*"]
      limit: "100/minute"
      weights:
        "/api/export/full": 20
`

// benchRulesStacked are benchRules and a limit stacked over the whole
// API, so that every API request counts under two rules.
const benchRulesStacked = benchRules + `    - name: api
      paths: ["/api/**"]
      limit: "3000/minute"
      stack: true
`

// benchLines is the size of the benchmarks' log.
const benchLines = 1_000_000

// genCLF writes n lines of a Combined Log Format log to w, 2,000
// requests a second, of two kinds of client: 60% of the lines come from
// 500,000 client IPs of Zipf-distributed activity (a few very busy, most
// seen a few times), 40% from client IPs each seen once (crawlers,
// scanners, mobile networks), so that most keys are new to the limiter
// and to each rule's figures. The requests are searches, item pages (a
// twentieth not found), logins (a fifth failing), writes, exports (some
// of the heavy kind), static files and health checks (exempt), and
// other pages (one in fifty failing with 500).
func genCLF(w io.Writer, n int, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	zipf := rand.NewZipf(rng, 1.1, 2, 500_000-1)
	bw := bufio.NewWriterSize(w, 1<<20)
	t := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	agents := []string{
		"Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/126.0 Safari/537.36",
		"Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.5 Mobile/15E148 Safari/604.1",
		"curl/8.5.0",
		"python-requests/2.32.3",
	}
	pages := []string{"/", "/about", "/cart", "/checkout", "/account"}
	var ts string
	var tsSec int64 = -1
	var once uint32 // client IPs seen once so far
	for i := range n {
		now := t.Add(time.Duration(i) * 500 * time.Microsecond)
		if s := now.Unix(); s != tsSec {
			tsSec, ts = s, now.Format("02/Jan/2006:15:04:05 -0700")
		}
		var ip string
		if rng.IntN(100) < 40 {
			k := 0x64400000 + once // 100.64.0.0 on, one address each
			once++
			ip = fmt.Sprintf("%d.%d.%d.%d", k>>24, k>>16&0xff, k>>8&0xff, k&0xff)
		} else {
			k := zipf.Uint64()
			ip = fmt.Sprintf("%d.%d.%d.%d", 10, k>>16&0xff, k>>8&0xff, k&0xff)
		}
		method, path, status := "GET", "", 200
		switch p := rng.IntN(100); {
		case p < 40:
			path = fmt.Sprintf("/api/search?q=term%d&page=%d", rng.IntN(5000), rng.IntN(5)+1)
		case p < 60:
			path = fmt.Sprintf("/api/items/%d", rng.IntN(100_000))
			if rng.IntN(20) == 0 {
				status = 404
			}
		case p < 65:
			method, path = "POST", "/login"
			if rng.IntN(5) == 0 {
				status = 401
			}
		case p < 70:
			method, path, status = "POST", "/api/items", 201
		case p < 73:
			path = "/api/export/csv"
			if rng.IntN(4) == 0 {
				path = "/api/export/full"
			}
		case p < 85:
			path, status = fmt.Sprintf("/static/app.%d.js", rng.IntN(50)), 304
		case p < 90:
			path = "/health"
		default:
			path = pages[rng.IntN(len(pages))]
			if rng.IntN(50) == 0 {
				status = 500
			}
		}
		fmt.Fprintf(bw, "%s - - [%s] \"%s %s HTTP/1.1\" %d %d \"https://example.com/\" \"%s\"\n",
			ip, ts, method, path, status, 200+rng.IntN(5000), agents[rng.IntN(len(agents))])
	}
	bw.Flush()
}

// benchLog writes the benchmarks' log to a file of b's and returns its
// name and size.
func benchLog(b *testing.B) (string, int64) {
	b.Helper()
	name := filepath.Join(b.TempDir(), "access.log")
	data := benchData()
	if err := os.WriteFile(name, data, 0o600); err != nil {
		b.Fatal(err)
	}
	return name, int64(len(data))
}

// benchData is the benchmarks' log, made once per run of the benchmarks.
var benchData = sync.OnceValue(func() []byte {
	var buf bytes.Buffer
	genCLF(&buf, benchLines, 1)
	return buf.Bytes()
})

func fileSource(name string) Source {
	return Source{Name: name, Open: func() (io.ReadCloser, error) { return os.Open(name) }}
}

// BenchmarkReplayCLF measures a replay end to end, as `rlkit replay`
// runs it with its defaults: reading a 1,000,000-line Combined Log Format
// file (from the page cache; see genCLF), parsing it, deciding every
// request through the limiter on the log's clock, counting each rule's
// figures, and writing the text report. One op is the whole file;
// lines/s is the throughput, against BenchmarkCountLines's over the same
// file.
func BenchmarkReplayCLF(b *testing.B) { benchReplay(b, benchRules) }

// BenchmarkReplayCLFStacked is BenchmarkReplayCLF with a rule stacked
// over the API.
func BenchmarkReplayCLFStacked(b *testing.B) { benchReplay(b, benchRulesStacked) }

// benchReplay replays the benchmarks' log under the rule file yaml, end
// to end, text report included, and reports lines/s.
func benchReplay(b *testing.B, yaml string) {
	name, size := benchLog(b)
	rules, err := Load([]byte(yaml), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	var rep *Report
	for b.Loop() {
		r, err := New(rules, Options{})
		if err != nil {
			b.Fatal(err)
		}
		if rep, err = r.Run([]Source{fileSource(name)}); err != nil {
			b.Fatal(err)
		}
		if err := rep.WriteText(io.Discard); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(benchLines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
	if rep.Lines != benchLines || rep.Malformed != 0 {
		b.Fatalf("read %d lines, %d malformed; want %d and none", rep.Lines, rep.Malformed, benchLines)
	}
}

// BenchmarkCountLines is the baseline of BenchmarkReplayCLF: the same file
// read with a bufio.Scanner that only counts its lines.
func BenchmarkCountLines(b *testing.B) {
	name, size := benchLog(b)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		f, err := os.Open(name)
		if err != nil {
			b.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		n := 0
		for sc.Scan() {
			n++
		}
		f.Close()
		if n != benchLines {
			b.Fatalf("%d lines, want %d", n, benchLines)
		}
	}
	b.ReportMetric(float64(benchLines)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkReplayDistinctKeys measures the memory a replay holds as the
// distinct keys of its logs grow past its bounds (a rule's figures hold
// at most Options.StatsKeys keys, 1,000,000 by default, and the memory
// store at most Options.StoreKeys counters, 1,048,576): a log of n item
// pages, one a millisecond, each from a client IP seen once, so that
// every line is a new key to the store and to the items rule, whose
// counters (a sliding window of 100 a minute and 1,000 an hour) live for
// an hour: past the bounds, most lines make the store evict a live
// counter and the rule's figures forget a key in an open window, the
// most work and memory a line can cost. The log is made as it is read
// (genDistinct; never held in memory) and replayed under benchRules with
// the default bounds, as `rlkit replay` runs it. It reports the peak of
// the live heap (what the last garbage collection found live,
// runtime/metrics' /gc/heap/live:bytes, read every 10 ms and once more
// after the replay, its state still held) above the live heap before (the
// other benchmarks' data, such as benchData's log), in MB, and lines/s;
// B/op and allocs/op include the generator's. The Go runtime holds up to
// about twice the live heap from the system (GOGC=100).
func BenchmarkReplayDistinctKeys(b *testing.B) {
	for _, n := range []int{1_000_000, 3_000_000, 10_000_000, 20_000_000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			rules, err := Load([]byte(benchRules), "bench.yaml")
			if err != nil {
				b.Fatal(err)
			}
			// The live heap before, after a garbage collection: the other
			// benchmarks' data, such as benchData's log.
			runtime.GC()
			ms := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			liveNow := func() uint64 {
				metrics.Read(ms)
				return ms[0].Value.Uint64()
			}
			base := liveNow()
			var live atomic.Uint64
			read := func() {
				for l := liveNow(); ; {
					if m := live.Load(); l <= m || live.CompareAndSwap(m, l) {
						return
					}
				}
			}
			done, sampled := make(chan struct{}), make(chan struct{})
			go func() {
				defer close(sampled)
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-done:
						return
					case <-tick.C:
						read()
					}
				}
			}()
			var rep *Report
			for b.Loop() {
				r, err := New(rules, Options{})
				if err != nil {
					b.Fatal(err)
				}
				pr, pw := io.Pipe()
				go func() { genDistinct(pw, n); pw.Close() }()
				src := Source{Name: "generated.log", Open: func() (io.ReadCloser, error) { return pr, nil }}
				if rep, err = r.Run([]Source{src}); err != nil {
					b.Fatal(err)
				}
				if err := rep.WriteText(io.Discard); err != nil {
					b.Fatal(err)
				}
				runtime.GC()
				read()
				runtime.KeepAlive(r)
			}
			close(done)
			<-sampled
			s := rep.Rules[slices.IndexFunc(rep.Rules, func(r RuleReport) bool { return r.Rule == "items" })]
			if rep.Lines != int64(n) || rep.Malformed != 0 || s.Requests != int64(n) || s.Windows[0].Keys != int64(n) {
				b.Fatalf("read %d lines, %d malformed, %d item pages of %d keys; want %d, none, and every line an item page of its own key", rep.Lines, rep.Malformed, s.Requests, s.Windows[0].Keys, n)
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "lines/s")
			b.ReportMetric(float64(live.Load()-min(live.Load(), base))/1e6, "peak-live-MB")
		})
	}
}

// genDistinct writes n lines of a Combined Log Format log to w, one item
// page a millisecond, each from a client IP of its own (100.64.0.0 on).
func genDistinct(w io.Writer, n int) {
	bw := bufio.NewWriterSize(w, 1<<20)
	t := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	var line []byte
	for i := range n {
		k := 0x64400000 + uint32(i)
		line = strconv.AppendUint(line[:0], uint64(k>>24), 10)
		for _, o := range []uint32{k >> 16 & 0xff, k >> 8 & 0xff, k & 0xff} {
			line = strconv.AppendUint(append(line, '.'), uint64(o), 10)
		}
		line = append(line, " - - ["...)
		line = t.Add(time.Duration(i)*time.Millisecond).AppendFormat(line, "02/Jan/2006:15:04:05 -0700")
		line = append(line, "] \"GET /api/items/42 HTTP/1.1\" 200 512 \"-\" \"curl/8.5.0\"\n"...)
		bw.Write(line)
	}
	bw.Flush()
}

// benchBatches parses the benchmarks' log into batches in memory.
func benchBatches(b *testing.B, p *lineParser) []*batch {
	var out []*batch
	data := benchData()
	for len(data) > 0 {
		bt := newBatch()
		n := copy(bt.buf, data)
		if n < len(data) {
			n = bytes.LastIndexByte(bt.buf[:n], '\n') + 1
		}
		rd := &reader{p: p}
		rd.lines1("bench", 0, bt.buf[:n], bt)
		data = data[n:]
		out = append(out, bt)
	}
	return out
}

// BenchmarkParseCLF measures the parsing alone, per line: the reading
// goroutine's share of BenchmarkReplayCLF without the reads.
func BenchmarkParseCLF(b *testing.B) {
	p, err := newLineParser(&Options{Format: "clf"}, nil)
	if err != nil {
		b.Fatal(err)
	}
	bt := newBatch()
	data := benchData()
	b.ReportAllocs()
	b.ResetTimer()
	lines := 0
	for b.Loop() {
		d := data
		for len(d) > 0 {
			bt.reset()
			n := copy(bt.buf, d)
			if n < len(d) {
				n = bytes.LastIndexByte(bt.buf[:n], '\n') + 1
			}
			rd := &reader{p: p}
			rd.lines1("bench", 0, bt.buf[:n], bt)
			lines += len(bt.recs)
			d = d[n:]
		}
	}
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
}

// BenchmarkDecideCLF measures the deciding alone, per line, over records
// parsed beforehand: the deciding goroutine's share of BenchmarkReplayCLF
// (without the counting goroutine's).
func BenchmarkDecideCLF(b *testing.B) {
	rules, err := Load([]byte(benchRules), "bench.yaml")
	if err != nil {
		b.Fatal(err)
	}
	r0, _ := New(rules, Options{})
	batches := benchBatches(b, r0.p)
	b.ReportAllocs()
	b.ResetTimer()
	lines := 0
	for b.Loop() {
		r, _ := New(rules, Options{})
		for _, bt := range batches {
			r.cur = bt
			bt.tallies = bt.tallies[:0]
			for i := range bt.recs {
				r.record(&bt.recs[i])
			}
			lines += len(bt.recs)
		}
		r.due(1 << 62)
		_ = r.report(&reader{})
	}
	b.ReportMetric(float64(lines)/b.Elapsed().Seconds(), "lines/s")
}
