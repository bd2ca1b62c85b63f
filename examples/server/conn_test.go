package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlkit/rlkit/examples/internal/demotest"
)

// The fault suite's connection flood: examples/server, run as the real
// program in its own process, under 5,000 idle connections.

// openFiles counts the open file descriptors of process pid; -1 without
// /proc.
func openFiles(pid int) int {
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return -1
	}
	return len(ents)
}

// A flood connection sends nothing, part of a request header, or one
// whole request (read its answer, stays open as a keep-alive connection).
const (
	floodSilent = iota
	floodPartial
	floodKeepAlive
	floodKinds
)

// flood opens n connections to addr, 64 at a time, their kinds in turn,
// and returns them (closed when the test ends) with the number of
// keep-alive requests that got no answer.
func flood(t *testing.T, addr string, n int) (conns []net.Conn, unanswered int) {
	t.Helper()
	var (
		mu     sync.Mutex
		failed atomic.Int64
		wg     sync.WaitGroup
		sem    = make(chan struct{}, 64)
		errs   = make(chan error, 1)
	)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			c, err := net.DialTimeout("tcp", addr, 5*time.Second)
			if err != nil {
				select {
				case errs <- err:
				default:
				}
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			switch i % floodKinds {
			case floodPartial:
				_, _ = io.WriteString(c, "GET /api/search HTTP/1.1\r\nHost: x\r\nX-Slow: ")
			case floodKeepAlive:
				_ = c.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					failed.Add(1)
					return
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range conns {
			c.Close()
		}
	})
	select {
	case err := <-errs:
		t.Fatalf("dial: %v", err)
	default:
	}
	return conns, int(failed.Load())
}

// healthProbe GETs /health on a fresh connection every 50 ms until stop is
// closed, and returns the number of requests, the slowest, and the first
// failure (an error, a status other than 200, or an answer slower than
// within).
func healthProbe(addr string, within time.Duration, stop <-chan struct{}) (done <-chan probeResult) {
	out := make(chan probeResult, 1)
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 10 * time.Second}
	go func() {
		var r probeResult
		defer func() { out <- r }()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			start := time.Now()
			resp, err := client.Get("http://" + addr + "/health")
			took := time.Since(start)
			r.n++
			r.slowest = max(r.slowest, took)
			switch {
			case err != nil:
				r.err = errors.Join(r.err, fmt.Errorf("after %v: %w", took, err))
			case resp.StatusCode != http.StatusOK:
				r.err = errors.Join(r.err, fmt.Errorf("after %v: status %d", took, resp.StatusCode))
			case took > within:
				r.err = errors.Join(r.err, fmt.Errorf("answered after %v, want within %v", took, within))
			}
			if resp != nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	return out
}

type probeResult struct {
	n       int
	slowest time.Duration
	err     error // the failures, joined
}

// TestFaultIdleConnections: 5,000 idle connections (silent, half a
// header, keep-alive after a request) do not keep /health from answering
// within 1 s: with the default limits; with the default limits in a
// process allowed 2,048 open files, where the flood would take every
// file but for the connection limit (by default half of them), which the
// server then holds to; and with -max-conns 1000.
func TestFaultIdleConnections(t *testing.T) {
	const n, within = 5000, time.Second
	for _, tt := range []struct {
		name     string
		nofile   int // the server's limit on open files; 0: this process's
		args     []string
		maxConns int // the limit the server holds; 0: above n
	}{
		{"default limits", 0, nil, 0},
		{"default limits, 2048 files", 2048, nil, 1024},
		{"-max-conns 1000", 0, []string{"-max-conns", "1000"}, 1000},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := startServerProcess(t, tt.nofile, tt.args...)
			addr, pid := p.addr, p.pid()
			base := openFiles(pid)
			stop := make(chan struct{})
			probe := healthProbe(addr, within, stop)
			conns, unanswered := flood(t, addr, n)
			time.Sleep(time.Second) // the flood held; /health still probed
			files := openFiles(pid)
			close(stop)
			r := <-probe
			t.Logf("%d connections opened (%d keep-alive requests unanswered); server files %d before, %d after; /health: %d requests, slowest %v",
				len(conns), unanswered, base, files, r.n, r.slowest.Round(time.Millisecond))
			if r.err != nil {
				t.Errorf("/health under %d idle connections:\n%v", n, r.err)
			}
			if r.n < 10 {
				t.Errorf("/health answered %d times, want at least 10", r.n)
			}
			if tt.maxConns == 0 {
				if unanswered > 0 {
					t.Errorf("%d keep-alive requests unanswered below the connection limit, want 0", unanswered)
				}
				return
			}
			// The server holds at most maxConns connections (plus its own
			// files): the flood's others were closed to make room.
			switch {
			case base < 0:
				t.Log("no /proc: the server's open files are not counted")
			case files > base+tt.maxConns:
				t.Errorf("server has %d open files, want at most %d (%d before the flood + %d connections)", files, base+tt.maxConns, base, tt.maxConns)
			case files < base+tt.maxConns-50:
				t.Errorf("server has %d open files, want about %d (%d before the flood + %d connections): the limit is not %d", files, base+tt.maxConns, base, tt.maxConns, tt.maxConns)
			}
		})
	}
}

// TestFaultSlowClients runs the examples' check of the server limits
// (demotest.Limits) on this server, in process: each timeout, given a
// short value, closes the connections it is for (a slow body by
// -read-timeout), an oversized header gets 431, and past -max-conns
// /health still answers.
func TestFaultSlowClients(t *testing.T) {
	demotest.Limits(t, func(ctx context.Context, args []string, stdout io.Writer) error {
		return run(ctx, append([]string{"-jwt-secret", testSecret}, args...), stdout, io.Discard)
	})
}

// TestLimitFlags checks the flags of the server limits: bad values are
// usage errors, and -h lists each with its default.
func TestLimitFlags(t *testing.T) {
	for _, tt := range []struct{ args []string }{
		{[]string{"-read-timeout", "0s"}},
		{[]string{"-max-conns", "-1"}},
	} {
		var stderr strings.Builder
		err := run(t.Context(), tt.args, io.Discard, &stderr)
		if !errors.Is(err, errUsage) {
			t.Errorf("run(%q) = %v, want a usage error", tt.args, err)
		}
		if want := strings.TrimPrefix(tt.args[0], "-") + " must be positive"; !strings.Contains(stderr.String(), want) {
			t.Errorf("run(%q) stderr = %q, want it to say %q", tt.args, stderr.String(), want)
		}
	}
	cmd, stderr := mainProcess(t, "-h")
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Fatal(err)
		}
	}
	for _, want := range []string{
		"-read-header-timeout time", "(default 5s)",
		"-read-timeout time", "(default 30s)",
		"-write-timeout time", "(default 1m0s)",
		"-idle-timeout time", "(default 2m0s)",
		"-max-header-bytes bytes", "(default 16384)",
		"-max-conns n",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("-h does not show %q:\n%s", want, stderr)
		}
	}
}
