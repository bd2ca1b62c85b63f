package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// The replay benchmarks live in rlkit's own module, beside `rlkit replay`
// (cmd/rlkit/internal/replay): BenchmarkReplayCLF replays a generated
// Combined Log Format file end to end, BenchmarkReplayCLFStacked does
// under the same rules and one stacked over the API, BenchmarkCountLines
// counts the same file's lines with a bufio.Scanner, the baseline. All
// report lines/s. BenchmarkReplayDistinctKeys replays logs of ever more
// distinct keys and reports the peak memory.
const (
	replayBench  = "BenchmarkReplayCLF"
	stackedBench = "BenchmarkReplayCLFStacked"
	countBench   = "BenchmarkCountLines"
	memoryBench  = "BenchmarkReplayDistinctKeys"
	replayPkg    = "cmd/rlkit/internal/replay"
	// replayTarget is the throughput `rlkit replay` is built for, in CLF
	// lines a second, end to end.
	replayTarget = 1_000_000
)

// wantReplay reports whether the -bench regexp selects a replay benchmark.
func wantReplay(bench string) bool {
	re, err := regexp.Compile(bench)
	return err == nil && (re.MatchString(replayBench) || re.MatchString(stackedBench) || re.MatchString(countBench) || re.MatchString(memoryBench))
}

// runReplay runs the replay benchmarks, count times in one go test run,
// in rlkit's module (the parent of dir, the benchmarks module), parses
// their output into res and copies it to raw. The error says why they did
// not run or failed.
func runReplay(dir string, count int, benchtime string, raw io.Writer, res *results) error {
	args := []string{"test", "-run", "^$", "-bench", "^(" + replayBench + "|" + stackedBench + "|" + countBench + "|" + memoryBench + ")$", "-benchmem", "-count", strconv.Itoa(count)}
	if benchtime != "" {
		args = append(args, "-benchtime", benchtime)
	}
	args = append(args, ".")
	cmd := exec.Command(goCommand(), args...)
	cmd.Dir = filepath.Join(filepath.Dir(dir), filepath.FromSlash(replayPkg))
	var buf bytes.Buffer
	w := io.MultiWriter(&buf, raw, os.Stderr)
	cmd.Stdout, cmd.Stderr = w, w
	runErr := cmd.Run()
	if err := res.parse(&buf); err != nil {
		return err
	}
	if runErr != nil {
		return fmt.Errorf("go %s (in %s) ended with %v", strings.Join(args, " "), replayPkg, runErr)
	}
	return nil
}

// renderReplay writes the replay section: each benchmark's median
// lines/s, its min–max over the runs, MB/s, B/op and allocs/op, and the
// replay's median over the line count's.
func renderReplay(b *strings.Builder, r *results) {
	b.WriteString("## Replay (`rlkit replay`)\n\n")
	b.WriteString("`rlkit replay` end to end (`" + replayBench + "` in `" + replayPkg + "`): a generated Combined Log Format file of 1,000,000 lines (about 180 MB, read from the page cache; 2,000 requests a second, 60% of them from 500,000 client IPs of Zipf-distributed activity and 40% from client IPs seen once, on searches, item pages, logins, writes, exports, static files and health checks, with statuses 200, 201, 304, 401, 404 and 500) read, parsed, decided through the limiter on the log's clock (five rules and the default: fixed windows, a sliding window of two limits, a token bucket, a rule counting failures per client IP, weighted paths, exempt paths) and counted into each rule's per-key figures, and the text report written, one op being the whole file, as `rlkit replay` runs it with its defaults; `" + stackedBench + "`, the same under the same rules and one more stacked over the API (`stack: true`), so that each API request counts under two rules; against `" + countBench + "`, the same file's lines counted by a `bufio.Scanner`. " +
		"Reading and parsing, deciding, and counting run in three goroutines; go test's own run of the package (`-count` runs, `-benchmem`), one sample per run. " +
		fmt.Sprintf("The target is %s lines a second end to end on the machine of the run.\n\n", fmtRate(replayTarget)))
	replay, base := summarize(r.samples[replayBench], "lines/s"), summarize(r.samples[countBench], "lines/s")
	if replay.n == 0 && base.n == 0 {
		b.WriteString("_No rows: this scenario did not run (see the notes at the top)._\n\n")
		return
	}
	b.WriteString("| benchmark | lines/s (median) | min–max | MB/s | B/op | allocs/op | × line count |\n|---|--:|--:|--:|--:|--:|--:|\n")
	for _, row := range []struct{ name, label string }{
		{replayBench, "replay: read, parse, decide, count"},
		{stackedBench, "replay, a rule stacked over the API"},
		{countBench, "baseline: count the lines (`bufio.Scanner`)"},
	} {
		ss := r.samples[row.name]
		st := summarize(ss, "lines/s")
		if st.n == 0 {
			continue
		}
		x := fmtRatio(ratio(st.median, base.median))
		if row.name == countBench {
			x = "1 (baseline)"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s |\n", row.label, fmtRate(st.median), span(fmtRate, st),
			medianOf(func(v float64) string { return trim(v, 1) }, summarize(ss, "MB/s")), medianOf(fmtCount, summarize(ss, "B/op")), medianOf(fmtCount, summarize(ss, "allocs/op")), x)
	}
	fmt.Fprintf(b, "\n%s per row, one per run.\n\n", plural(max(replay.n, base.n), "sample"))
	if replay.n > 0 {
		verdict := "met"
		if replay.median < replayTarget {
			verdict = "not met"
		}
		fmt.Fprintf(b, "The replay's median, %s lines/s, is %s of the line count's; the target of %s lines/s is %s.\n\n",
			fmtRate(replay.median), fmtPercent(ratio(replay.median, base.median)), fmtRate(replayTarget), verdict)
	}
	if st := summarize(r.samples[stackedBench], "lines/s"); st.n > 0 && replay.n > 0 {
		fmt.Fprintf(b, "With a rule stacked over the API, the median is %s lines/s, %s of the replay's without it: each API request then counts under two rules in one call of the memory store's `TakeAll` (see the `stack` row of the features table).\n\n",
			fmtRate(st.median), fmtPercent(ratio(st.median, replay.median)))
	}
	renderReplayMemory(b, r)
}

// memoryKeys are the distinct keys of BenchmarkReplayDistinctKeys's logs.
var memoryKeys = []int{1_000_000, 3_000_000, 10_000_000, 20_000_000}

// renderReplayMemory writes the replay's memory against the distinct keys
// of its log: each size's median peak live heap, its min–max and lines/s,
// and whether the live heap still grows from 10,000,000 keys to
// 20,000,000, both far past the bounds.
func renderReplayMemory(b *strings.Builder, r *results) {
	name := func(k int) string { return memoryBench + "/keys=" + strconv.Itoa(k) }
	at := func(k int) stat { return summarize(r.samples[name(k)], "peak-live-MB") }
	ten, twenty := at(10_000_000), at(20_000_000)
	if ten.n == 0 {
		return
	}
	b.WriteString("### Memory against distinct keys\n\n")
	b.WriteString("`" + memoryBench + "`: a log of N item pages, one a millisecond, each from a client IP seen once, so that every line is a new key to the memory store and to the `items` rule, whose counters (a sliding window of 100 a minute and 1,000 an hour) live for an hour: past the bounds (a rule's figures hold at most 1,000,000 keys, `--stats-keys`; the memory store at most 1,048,576 counters, `--store-keys`, `rlkit replay`'s defaults) most lines make the store evict a live counter and the rule's figures forget a key in an open window, the most memory and work a line can cost. " +
		"The log is generated as it is read (never held in memory) and replayed under the same rules, its text report written. " +
		"Peak live heap: the most the garbage collector found live (runtime/metrics' `/gc/heap/live:bytes`, read every 10 ms and after the replay, its state still held), above what the benchmark process held live before (the other benchmarks' log); the Go runtime holds up to about twice the live heap from the system (GOGC=100). Medians over the runs.\n\n")
	b.WriteString("| distinct keys | peak live heap (MB) | min–max | lines/s |\n|--:|--:|--:|--:|\n")
	mb := func(v float64) string { return trim(v, 1) }
	for _, k := range memoryKeys {
		st := at(k)
		if st.n == 0 {
			continue
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s |\n", fmtRate(float64(k)), mb(st.median), span(mb, st),
			medianOf(fmtRate, summarize(r.samples[name(k)], "lines/s")))
	}
	fmt.Fprintf(b, "\nAt 10,000,000 distinct keys a replay held at most %s MB live.", mb(ten.median))
	if twenty.n > 0 {
		verdict := "it stays within its bounds"
		if ratio(twenty.median, ten.median) > 1.1 {
			verdict = "it still grows"
		}
		fmt.Fprintf(b, " Twice as many keys, 20,000,000, held %s MB (%s): %s.", mb(twenty.median), fmtRatio(ratio(twenty.median, ten.median)), verdict)
	}
	b.WriteString("\n\n")
}
