package main

import (
	"bufio"
	"io"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// A sample is one measurement of one benchmark: one line of `go test
// -bench` output, its metrics by unit ("ns/op", "B/op", "req/s", ...).
type sample struct {
	iterations int64
	metrics    map[string]float64
}

// results are the parsed outputs of every run: the samples of each
// benchmark (name without the -GOMAXPROCS suffix) in order of first
// appearance, and the skips and failures the runs reported.
type results struct {
	order   []string
	samples map[string][]sample
	skips   map[string]string // benchmark name → reason
	fails   []string          // "--- FAIL" lines, with their messages
}

func newResults() *results {
	return &results{samples: map[string][]sample{}, skips: map[string]string{}}
}

// procsSuffix is the "-2" that go test appends to a benchmark's name when
// GOMAXPROCS is not 1.
var procsSuffix = regexp.MustCompile(`-\d+$`)

// parse reads one run's output: benchmark lines ("BenchmarkX/y-2  N  v unit
// v unit ..."), "--- SKIP:" and "--- FAIL:" lines with the indented
// messages that follow them. Anything else is ignored.
func (r *results) parse(rd io.Reader) error {
	sc := bufio.NewScanner(rd)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var (
		inSkip string // the benchmark whose SKIP message lines follow
		inFail bool
	)
	for sc.Scan() {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		// A sub-benchmark that fails or skips prints its name, then the
		// verdict on the same line: "BenchmarkX/y-2 \t--- FAIL: BenchmarkX/y-2".
		for _, v := range []string{"--- FAIL: ", "--- SKIP: "} {
			if i := strings.Index(trimmed, v); i > 0 {
				trimmed = trimmed[i:]
			}
		}
		switch {
		case strings.HasPrefix(trimmed, "--- SKIP: "):
			name := strings.Fields(strings.TrimPrefix(trimmed, "--- SKIP: "))
			if len(name) > 0 {
				inSkip = procsSuffix.ReplaceAllString(name[0], "")
				if _, seen := r.skips[inSkip]; !seen {
					r.skips[inSkip] = ""
				}
			}
			inFail = false
			continue
		case strings.HasPrefix(trimmed, "--- FAIL: "):
			r.fails = append(r.fails, trimmed)
			inFail, inSkip = true, ""
			continue
		case strings.HasPrefix(line, "    ") && (inSkip != "" || inFail):
			if inSkip != "" && r.skips[inSkip] == "" {
				_, msg, _ := strings.Cut(trimmed, ": ") // drop "file_test.go:12: "
				r.skips[inSkip] = msg
			}
			if inFail {
				r.fails[len(r.fails)-1] += "\n    " + trimmed
			}
			continue
		}
		inSkip, inFail = "", false
		if !strings.HasPrefix(line, "Benchmark") {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 4 || len(f)%2 != 0 {
			continue // a benchmark's name printed alone, before its log output
		}
		n, err := strconv.ParseInt(f[1], 10, 64)
		if err != nil {
			continue
		}
		s := sample{iterations: n, metrics: map[string]float64{}}
		for i := 2; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err != nil {
				continue
			}
			s.metrics[f[i+1]] = v
		}
		name := procsSuffix.ReplaceAllString(f[0], "")
		if _, ok := r.samples[name]; !ok {
			r.order = append(r.order, name)
		}
		r.samples[name] = append(r.samples[name], s)
	}
	return sc.Err()
}

// stat summarises one metric of one benchmark over its samples.
type stat struct {
	n                int
	median, min, max float64
	sum              float64
}

// summarize returns the stat of unit over samples; n is 0 when no sample
// has the unit.
func summarize(samples []sample, unit string) stat {
	var v []float64
	for _, s := range samples {
		if x, ok := s.metrics[unit]; ok {
			v = append(v, x)
		}
	}
	if len(v) == 0 {
		return stat{}
	}
	slices.Sort(v)
	st := stat{n: len(v), min: v[0], max: v[len(v)-1]}
	for _, x := range v {
		st.sum += x
	}
	if m := len(v) / 2; len(v)%2 == 1 {
		st.median = v[m]
	} else {
		st.median = (v[m-1] + v[m]) / 2
	}
	return st
}

// overlaps reports whether the ranges of a and b overlap: then the
// difference of their medians is within the noise of the run.
func overlaps(a, b stat) bool { return a.min <= b.max && b.min <= a.max }

// ratio returns a/b, NaN when b is 0.
func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}
