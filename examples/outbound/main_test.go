package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/examples/internal/demo"
	"github.com/rlkit/rlkit/internal/redistest"
)

// TestMain runs a worker when the test binary is started as one: the demo
// starts workers with os.Executable, which under go test is this binary.
func TestMain(m *testing.M) {
	if os.Getenv(workerEnv) != "" {
		if err := worker(context.Background(), os.Args[1:], os.Stdout); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestTwoProcessesShareOneLimit runs two worker processes against one
// redis-server: together they keep to 8 requests a second, so that their
// 16 requests span at least 15 spacings of 125 ms (each process alone
// would take half as long), and the upstream, which allows 10 a second,
// refuses none.
func TestTwoProcessesShareOneLimit(t *testing.T) {
	srv := redistest.StartServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	r, err := runDemo(ctx, config{redisURL: "redis://" + srv.Addr() + "/0", workers: 2, perProc: 8}, &out)
	if err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	if r.arrivals != 16 || r.refused != 0 {
		t.Errorf("upstream got %d requests, refused %d; want 16 and 0\n%s", r.arrivals, r.refused, out.String())
	}
	pids := map[int]bool{}
	for i, w := range r.workers {
		pids[w.PID] = true
		if len(w.Statuses) != 8 || len(w.Starts) != 8 {
			t.Errorf("worker %d: %d statuses, %d starts; want 8 and 8", i+1, len(w.Statuses), len(w.Starts))
		}
		for _, s := range w.Statuses {
			if s != http.StatusOK {
				t.Errorf("worker %d got status %d", i+1, s)
			}
		}
	}
	if len(pids) != 2 || pids[os.Getpid()] {
		t.Errorf("worker pids %v: want two processes other than the test's", pids)
	}
	// The store spaces admissions 125 ms apart on the Redis server's clock;
	// the workers' own clocks see the replies with a little jitter.
	if min := 15*125*time.Millisecond - 60*time.Millisecond; time.Duration(r.span) < min {
		t.Errorf("16 starts spanned %v; shared at 8/s they take at least %v", time.Duration(r.span), min)
	}
	if r.maxInSec > rate+1 {
		t.Errorf("%d starts within one second; the limit is %d", r.maxInSec, rate)
	}
	for _, want := range []string{"worker 1 (pid ", "8 sent, 8 answered 200, 0 answered 429"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestRunStartsRedis runs the command as the README does, without -redis:
// it starts a redis-server of its own and prints the upstream's summary.
func TestRunStartsRedis(t *testing.T) {
	redistest.Require(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if err := run(ctx, []string{"-n", "3"}, &out, &errb); err != nil {
		t.Fatalf("run: %v\n%s%s", err, out.String(), errb.String())
	}
	for _, want := range []string{"redis: redis://127.0.0.1:", "(started here", "upstream: 6 requests, 0 answered 429"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}

// TestFlags rejects bad flags with the usage.
func TestFlags(t *testing.T) {
	for _, args := range [][]string{{"-workers", "0"}, {"-n", "0"}, {"extra"}, {"-bogus"}} {
		var out, errb bytes.Buffer
		if err := run(context.Background(), args, &out, &errb); err != demo.ErrUsage {
			t.Errorf("%v: err %v, want ErrUsage", args, err)
		}
		if !strings.Contains(errb.String(), "-workers") {
			t.Errorf("%v: no usage in %q", args, errb.String())
		}
	}
}
