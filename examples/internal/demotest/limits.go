package demotest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Limits checks that run's server applies demo.ServerLimitFlags, started
// with short values: each timeout closes the connections it is for, a
// header over -max-header-bytes gets 431, and past -max-conns idle
// connections a new one still gets /health answered within a second.
func Limits(t *testing.T, run RunFunc) {
	t.Run("timeouts", func(t *testing.T) { timeouts(t, run) })
	t.Run("max-header-bytes", func(t *testing.T) { headerLimit(t, run) })
	t.Run("max-conns", func(t *testing.T) { connLimit(t, run) })
}

// Timeouts of the timeouts check.
// Each differs from the others by more than margin, so that a bound tells
// one timeout from another: a server missing IdleTimeout, for one, closes
// idle connections after its header or read timeout (Fiber, net/http).
const (
	headerTimeout = 1 * time.Second
	idleTimeout   = 2 * time.Second
	readTimeout   = 4 * time.Second
	// margin is how late a server may close a connection, on a loaded
	// machine.
	margin = 1500 * time.Millisecond
)

// timeouts opens connections that are silent, trickle their header,
// trickle their body, or sit idle after a request, and requires the
// server to close each kind within its timeout and a margin: the silent
// and trickling-header ones within -read-header-timeout, the idle one
// within -idle-timeout but not much before, and the trickling-body one
// within -read-timeout but not within -read-header-timeout.
func timeouts(t *testing.T, run RunFunc) {
	base := Start(t, run, "-read-header-timeout", headerTimeout.String(), "-read-timeout", readTimeout.String(),
		"-idle-timeout", idleTimeout.String(), "-write-timeout", (readTimeout + time.Second).String())
	addr := strings.TrimPrefix(base, "http://")
	trickle := func(c net.Conn, first string, stop <-chan struct{}) {
		_, _ = io.WriteString(c, first)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if _, err := io.WriteString(c, "a"); err != nil {
					return
				}
			}
		}
	}
	kinds := []struct {
		name     string
		min, max time.Duration // closed after min, by max
		send     func(c net.Conn, stop <-chan struct{})
	}{
		{"silent", 0, headerTimeout + margin, func(net.Conn, <-chan struct{}) {}},
		{"trickling header", 0, headerTimeout + margin, func(c net.Conn, stop <-chan struct{}) {
			trickle(c, "GET /api/items HTTP/1.1\r\nHost: x\r\nX-Slow: ", stop)
		}},
		{"trickling body", headerTimeout + margin/3, readTimeout + margin, func(c net.Conn, stop <-chan struct{}) {
			trickle(c, "POST /api/items HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 100000\r\n\r\n", stop)
		}},
		{"idle keep-alive", idleTimeout - margin/3, idleTimeout + margin, func(c net.Conn, _ <-chan struct{}) {
			_, _ = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
		}},
	}
	const each = 10
	closedAfter := make([][]time.Duration, len(kinds))
	var wg sync.WaitGroup
	for k, kind := range kinds {
		closedAfter[k] = make([]time.Duration, each)
		for i := range each {
			wg.Add(1)
			go func() {
				defer wg.Done()
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Error(err)
					return
				}
				defer c.Close()
				start := time.Now()
				stop := make(chan struct{})
				defer close(stop)
				go kind.send(c, stop)
				// Read whatever the server answers, until it closes.
				_ = c.SetReadDeadline(start.Add(kind.max + 5*time.Second))
				_, err = io.Copy(io.Discard, c)
				if ne := net.Error(nil); errors.As(err, &ne) && ne.Timeout() {
					closedAfter[k][i] = -1 // still open
					return
				}
				closedAfter[k][i] = time.Since(start)
			}()
		}
	}
	wg.Wait()
	for k, kind := range kinds {
		fastest, slowest := time.Duration(1<<62), time.Duration(0)
		for _, d := range closedAfter[k] {
			if d < 0 {
				t.Errorf("%s: connection still open %v after it started, want closed within %v", kind.name, kind.max+5*time.Second, kind.max)
				continue
			}
			fastest, slowest = min(fastest, d), max(slowest, d)
		}
		t.Logf("%s: closed after %v to %v", kind.name, fastest.Round(time.Millisecond), slowest.Round(time.Millisecond))
		if slowest > kind.max {
			t.Errorf("%s: closed after up to %v, want within %v", kind.name, slowest, kind.max)
		}
		if fastest < kind.min {
			t.Errorf("%s: closed after %v, want not before %v", kind.name, fastest, kind.min)
		}
	}
}

// headerLimit sends a header over -max-header-bytes (and net/http's 4 KiB
// of slack), which gets 431, and one under it but over Fiber's default
// limit (4 KiB), which gets 200.
func headerLimit(t *testing.T, run RunFunc) {
	const limit = 8192
	base := Start(t, run, "-max-header-bytes", fmt.Sprint(limit))
	for _, tt := range []struct {
		size int
		want int
	}{
		{6000, http.StatusOK},
		{limit + 4096 + 1024, http.StatusRequestHeaderFieldsTooLarge},
	} {
		c, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		_, _ = fmt.Fprintf(c, "GET /health HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("a", tt.size))
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		switch {
		case err != nil:
			t.Errorf("a %d-byte header field: %v, want status %d", tt.size, err, tt.want)
		case resp.StatusCode != tt.want:
			t.Errorf("a %d-byte header field: status %d, want %d", tt.size, resp.StatusCode, tt.want)
		}
		c.Close()
	}
}

// connLimit opens 10 times -max-conns connections, silent, with half a
// header, or kept alive after a request, then requires /health on a new
// connection to answer 200 within a second, 10 times.
func connLimit(t *testing.T, run RunFunc) {
	const limit = 20
	base := Start(t, run, "-max-conns", fmt.Sprint(limit))
	addr := strings.TrimPrefix(base, "http://")
	for i := range 10 * limit {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		switch i % 3 {
		case 1:
			_, _ = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n")
		case 2:
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			_, _ = io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("keep-alive connection %d: %v", i, err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	for i := range 10 {
		start := time.Now()
		resp, err := client.Get(base + "/health")
		took := time.Since(start)
		if err != nil {
			t.Fatalf("/health %d past %d connections: %v", i+1, limit, err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || took > time.Second {
			t.Errorf("/health %d past %d connections: status %d after %v, want 200 within 1s", i+1, limit, resp.StatusCode, took)
		}
	}
}
