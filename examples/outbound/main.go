package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/redisstore"
	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/nethttp"
	"github.com/rlkit/rlkit/outbound"
)

// outboundYAML is the workers' configuration: the same rule format as an
// inbound service's, here matched against the paths the workers call.
const outboundYAML = `
rate_limit:
  enabled: true
  exempt_paths: []
  rules:
    - name: partner-api
      paths: ["/v1/orders/*"]
      limit: "8/second"
      algorithm: gcra
      burst: 1
  default: "100/second"
`

// upstreamYAML is the upstream's own limit: 10 a second per caller.
const upstreamYAML = `
rate_limit:
  enabled: true
  default: "10/second"
`

// rate is what outboundYAML allows on /v1/orders/*, per second.
const rate = 8

// workerEnv marks a worker process: the program started again by the
// parent (or the test binary, which cannot take flags of its own).
const workerEnv = "RLKIT_OUTBOUND_WORKER"

func main() {
	demo.Command(func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		if os.Getenv(workerEnv) != "" {
			return worker(ctx, args, stdout)
		}
		return run(ctx, args, stdout, stderr)
	})
}

// config is what the parent's flags set.
type config struct {
	redisURL string
	workers  int
	perProc  int
}

func parseFlags(args []string, stderr io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("outbound", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&c.redisURL, "redis", "", "Redis URL the workers share (default: start redis-server on a free loopback port)")
	fs.IntVar(&c.workers, "workers", 2, "worker processes")
	fs.IntVar(&c.perProc, "n", 12, "requests per worker")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return c, err
		}
		return c, demo.ErrUsage
	}
	if fs.NArg() > 0 || c.workers < 1 || c.workers > 16 || c.perProc < 1 || c.perProc > 1000 {
		fmt.Fprintln(stderr, "outbound: -workers must be 1 to 16, -n 1 to 1000, and no arguments")
		fs.Usage()
		return c, demo.ErrUsage
	}
	return c, nil
}

// workerReport is what a worker prints, one JSON line.
type workerReport struct {
	PID      int     `json:"pid"`
	Statuses []int   `json:"statuses"`
	Starts   []int64 `json:"starts"` // Unix nanoseconds, as the request left the Transport
	Err      string  `json:"error,omitempty"`
}

// report is what run saw.
type report struct {
	workers  []workerReport
	arrivals int   // requests the upstream received
	refused  int   // of which it answered 429
	span     int64 // nanoseconds from the first start to the last, over every worker
	maxInSec int   // most starts within any one second
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	c, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	r, err := runDemo(ctx, c, stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "upstream: %d requests, %d answered 429; first start to last %.2f s (%d requests at %d/s take at least %.2f s); most in any one second: %d\n",
		r.arrivals, r.refused, float64(r.span)/1e9, r.arrivals, rate, float64(r.arrivals-1)/rate, r.maxInSec)
	return nil
}

func runDemo(ctx context.Context, c config, stdout io.Writer) (*report, error) {
	if c.redisURL == "" {
		url, stop, err := startRedis(ctx)
		if err != nil {
			return nil, err
		}
		defer stop()
		c.redisURL = url
		fmt.Fprintf(stdout, "redis: %s (started here, stopped at the end)\n", url)
	}
	up, err := core.ParseConfig([]byte(upstreamYAML), "upstream.yaml")
	if err != nil {
		return nil, err
	}
	var mu sync.Mutex
	var arrivals, refused int
	partner := func(*http.Request) (string, error) { return "partner", nil } // every caller uses the partner's key
	limited := nethttp.New(up, nethttp.WithKeyFunc(partner))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"ok": true}`+"\n")
	}))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		limited.ServeHTTP(rec, r)
		mu.Lock()
		arrivals++
		if rec.status == http.StatusTooManyRequests {
			refused++
		}
		mu.Unlock()
	}))
	defer srv.Close()
	fmt.Fprintf(stdout, "upstream: %s allows 10 requests a second for the partner's key\n", srv.URL)
	fmt.Fprintf(stdout, "%d worker processes, %d requests each, 3 at a time, through one outbound limit of %d a second in Redis\n", c.workers, c.perProc, rate)

	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	reports := make([]workerReport, c.workers)
	errs := make([]error, c.workers)
	var wg sync.WaitGroup
	for i := range c.workers {
		wg.Go(func() {
			cmd := exec.CommandContext(ctx, exe, "-upstream", srv.URL, "-redis", c.redisURL, "-n", strconv.Itoa(c.perProc))
			cmd.Env = append(os.Environ(), workerEnv+"=1")
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				errs[i] = fmt.Errorf("worker %d: %w", i+1, err)
				return
			}
			if err := json.Unmarshal(out, &reports[i]); err != nil {
				errs[i] = fmt.Errorf("worker %d: %w in %q", i+1, err, out)
				return
			}
			if reports[i].Err != "" {
				errs[i] = fmt.Errorf("worker %d: %s", i+1, reports[i].Err)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	r := &report{workers: reports}
	var starts []int64
	for i, w := range reports {
		counts := map[int]int{}
		for _, s := range w.Statuses {
			counts[s]++
		}
		fmt.Fprintf(stdout, "worker %d (pid %d): %d sent, %d answered 200, %d answered 429\n",
			i+1, w.PID, len(w.Statuses), counts[http.StatusOK], counts[http.StatusTooManyRequests])
		starts = append(starts, w.Starts...)
	}
	slices.Sort(starts)
	if len(starts) > 0 {
		r.span = starts[len(starts)-1] - starts[0]
	}
	for i := range starts {
		j, _ := slices.BinarySearch(starts, starts[i]+int64(time.Second))
		r.maxInSec = max(r.maxInSec, j-i)
	}
	mu.Lock()
	r.arrivals, r.refused = arrivals, refused
	mu.Unlock()
	return r, nil
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// worker sends its requests through the shared outbound limit and prints
// a workerReport.
func worker(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("outbound worker", flag.ContinueOnError)
	upstream := fs.String("upstream", "", "upstream base URL")
	redisURL := fs.String("redis", "", "Redis URL")
	n := fs.Int("n", 12, "requests")
	if err := fs.Parse(args); err != nil {
		return err
	}
	rep := workerReport{PID: os.Getpid()}
	if err := send(ctx, *upstream, *redisURL, *n, &rep); err != nil {
		rep.Err = err.Error()
	}
	return json.NewEncoder(stdout).Encode(rep)
}

func send(ctx context.Context, upstream, redisURL string, n int, rep *workerReport) error {
	opts, err := redis.ParseURL(redisURL)
	if err != nil {
		return err
	}
	opts.ContextTimeoutEnabled = true
	client := redis.NewClient(opts)
	defer client.Close()
	store, err := redisstore.New(client, redisstore.WithPrefix("rlkit-example:"))
	if err != nil {
		return err
	}
	defer store.Close()
	cfg, err := core.ParseConfig([]byte(outboundYAML), "outbound.yaml")
	if err != nil {
		return err
	}
	lim, err := outbound.New(cfg, store)
	if err != nil {
		return err
	}
	var mu sync.Mutex
	record := roundTripFunc(func(r *http.Request) (*http.Response, error) {
		mu.Lock()
		rep.Starts = append(rep.Starts, time.Now().UnixNano())
		mu.Unlock()
		return http.DefaultTransport.RoundTrip(r)
	})
	// Keyed by the upstream's host (outbound.KeyHost, the default): both
	// processes count under one key.
	hc := &http.Client{Transport: outbound.NewTransport(record, lim), Timeout: time.Minute}
	jobs := make(chan int)
	var wg sync.WaitGroup
	var firstErr error
	for range 3 {
		wg.Go(func() {
			for i := range jobs {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, upstream+"/v1/orders/"+strconv.Itoa(i), nil)
				if err == nil {
					var resp *http.Response
					if resp, err = hc.Do(req); err == nil {
						io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						mu.Lock()
						rep.Statuses = append(rep.Statuses, resp.StatusCode)
						mu.Unlock()
						continue
					}
				}
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return firstErr
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// startRedis starts redis-server on a free loopback port, without
// persistence, and returns its URL and a function that stops it.
func startRedis(ctx context.Context) (string, func(), error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return "", nil, errors.New("outbound: redis-server is not in PATH: install Redis, or pass -redis URL of a running one")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd.Stdout = io.Discard
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return "", nil, err
	}
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	go io.Copy(io.Discard, bufio.NewReader(stderr))
	stop := func() {
		cmd.Process.Kill()
		cmd.Wait()
	}
	url := "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	client := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + strconv.Itoa(port)})
	defer client.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if err := client.Ping(ctx).Err(); err == nil {
			return url, stop, nil
		} else if time.Now().After(deadline) || ctx.Err() != nil {
			stop()
			return "", nil, fmt.Errorf("outbound: redis-server on port %d did not answer: %w", port, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
