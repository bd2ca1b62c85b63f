package demo

import (
	"bufio"
	"errors"
	"flag"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// listen opens a Listener on a free loopback port with at most max
// connections, closed at the end of the test.
func listen(t *testing.T, max int) *Listener {
	t.Helper()
	l := ServerLimits{ReadHeaderTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second, IdleTimeout: time.Second, MaxHeaderBytes: 1 << 10, MaxConns: max}
	ln, err := l.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln
}

// dialAccept dials ln and accepts the connection: the client's end and
// the server's.
func dialAccept(t *testing.T, ln *Listener) (client, server net.Conn) {
	t.Helper()
	client, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Close() })
	return client, server
}

// closed reports whether the server closed c: a read ends (EOF, reset)
// within a second rather than timing out.
func closed(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	return !errors.As(err, &ne) || !ne.Timeout()
}

// open reports whether c is still open: a read times out after 50 ms.
func open(c net.Conn) bool {
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

func wantOpen(t *testing.T, ln *Listener, want int) {
	t.Helper()
	if got := ln.Open(); got != want {
		t.Errorf("Open() = %d, want %d", got, want)
	}
}

func TestListenerClosesLongestIdle(t *testing.T) {
	ln := listen(t, 3)
	c1, s1 := dialAccept(t, ln)
	c2, _ := dialAccept(t, ln)
	c3, s3 := dialAccept(t, ln)
	wantOpen(t, ln, 3)
	ln.Busy(s1, true)  // c1 busy: kept
	ln.Busy(s3, false) // c3 idle again: now the newest idle one
	c4, _ := dialAccept(t, ln)
	if !closed(c2) {
		t.Error("the longest idle connection (2) is open, want it closed for the 4th")
	}
	wantOpen(t, ln, 3)
	c5, _ := dialAccept(t, ln)
	if !closed(c3) {
		t.Error("connection 3, idle longest now, is open, want it closed for the 5th")
	}
	for i, c := range []net.Conn{c1, c4, c5} {
		if !open(c) {
			t.Errorf("connection %d closed, want it open", []int{1, 4, 5}[i])
		}
	}
	wantOpen(t, ln, 3)

	// A closed connection frees its place: no one is closed for the next.
	ln.Busy(s1, false)
	s1.Close()
	wantOpen(t, ln, 2)
	c6, _ := dialAccept(t, ln)
	for i, c := range []net.Conn{c4, c5, c6} {
		if !open(c) {
			t.Errorf("connection %d closed, want it open", []int{4, 5, 6}[i])
		}
	}
	wantOpen(t, ln, 3)
}

func TestListenerAllBusy(t *testing.T) {
	ln := listen(t, 2)
	c1, s1 := dialAccept(t, ln)
	c2, s2 := dialAccept(t, ln)
	ln.ConnState(s1, http.StateActive)
	ln.ConnState(s2, http.StateActive)
	// Every place is busy: the next connection gets 503 and is closed;
	// Accept waits for one it can keep.
	refused, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer refused.Close()
	accepted := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		accepted <- c
	}()
	_ = refused.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(refused), nil)
	if err != nil {
		t.Fatalf("past the limit with every connection busy: %v, want a 503", err)
	}
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") != "1" || !resp.Close {
		t.Errorf("past the limit: status %d, Retry-After %q, close %v; want 503, 1, true", resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close)
	}
	if !closed(refused) {
		t.Error("the refused connection is open, want it closed")
	}
	wantOpen(t, ln, 2)

	// A response written: connection 2 is idle, and the next one takes its place.
	ln.ConnState(s2, http.StateIdle)
	c3, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c3.Close()
	s3 := <-accepted
	defer s3.Close()
	if !closed(c2) || !open(c1) || !open(c3) {
		t.Error("want connection 2 closed for the 3rd, 1 and 3 open")
	}
	wantOpen(t, ln, 2)

	// A hijacked connection is no longer counted.
	ln.ConnState(s1, http.StateHijacked)
	wantOpen(t, ln, 1)
}

// TestHTTPServer checks that HTTPServer applies every limit, and that a
// connection busy with a request (its header read, its body coming) is not
// closed for a newcomer while an idle one is.
func TestHTTPServer(t *testing.T) {
	ln := listen(t, 2)
	ln.Limits.ReadHeaderTimeout, ln.Limits.ReadTimeout = 5*time.Second, 5*time.Second
	srv := ln.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		_, _ = w.Write(body)
	}))
	l := ln.Limits
	if srv.ReadHeaderTimeout != l.ReadHeaderTimeout || srv.ReadTimeout != l.ReadTimeout || srv.WriteTimeout != l.WriteTimeout ||
		srv.IdleTimeout != l.IdleTimeout || srv.MaxHeaderBytes != l.MaxHeaderBytes || srv.ConnState == nil {
		t.Errorf("HTTPServer: %v %v %v %v %v, ConnState set %v; want %+v and ConnState set",
			srv.ReadHeaderTimeout, srv.ReadTimeout, srv.WriteTimeout, srv.IdleTimeout, srv.MaxHeaderBytes, srv.ConnState != nil, l)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { srv.Close() })

	busy, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	_, _ = io.WriteString(busy, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nab")
	idle, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	for deadline := time.Now().Add(5 * time.Second); ; { // until both are accepted and the busy one's header read
		ln.mu.Lock()
		n, idles := ln.open, ln.idle.Len()
		ln.mu.Unlock()
		if n == 2 && idles == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 5s: %d connections open, %d idle; want 2 and 1 (the other busy)", n, idles)
		}
		time.Sleep(time.Millisecond)
	}
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := client.Post("http://"+ln.Addr().String(), "text/plain", strings.NewReader("new"))
	if err != nil {
		t.Fatalf("a third connection: %v", err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(got) != "new" {
		t.Errorf("third connection: body %q, want %q", got, "new")
	}
	if !closed(idle) {
		t.Error("the idle connection is open, want it closed for the third")
	}
	_, _ = io.WriteString(busy, "cd")
	_ = busy.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(busy), nil)
	if err != nil {
		t.Fatalf("the busy connection: %v, want its answer", err)
	}
	got, _ = io.ReadAll(resp.Body)
	if string(got) != "abcd" {
		t.Errorf("busy connection: body %q, want %q", got, "abcd")
	}
}

func TestServerLimitFlags(t *testing.T) {
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	l := ServerLimitFlags(fs)
	want := ServerLimits{5 * time.Second, 30 * time.Second, 60 * time.Second, 120 * time.Second, 16 << 10, DefaultMaxConns()}
	if err := fs.Parse(nil); err != nil || *l != want || DefaultServerLimits() != want {
		t.Fatalf("defaults: %+v, %v; want %+v", *l, err, want)
	}
	if n := DefaultMaxConns(); n < 1 || n > DefaultMaxConnsCap || openFileLimit() > 0 && n > openFileLimit()/2 {
		t.Errorf("DefaultMaxConns() = %d, want 1..%d and at most half of %d", n, DefaultMaxConnsCap, openFileLimit())
	}
	err := fs.Parse([]string{"-read-header-timeout", "1s", "-read-timeout", "2s", "-write-timeout", "3s", "-idle-timeout", "4s", "-max-header-bytes", "5", "-max-conns", "6"})
	if want := (ServerLimits{time.Second, 2 * time.Second, 3 * time.Second, 4 * time.Second, 5, 6}); err != nil || *l != want {
		t.Errorf("set: %+v, %v; want %+v", *l, err, want)
	}
	if err := l.Check(); err != nil {
		t.Errorf("Check() = %v, want nil", err)
	}
	for _, tt := range []struct {
		set  func(*ServerLimits)
		want string
	}{
		{func(l *ServerLimits) { l.ReadHeaderTimeout = 0 }, "-read-header-timeout must be positive"},
		{func(l *ServerLimits) { l.ReadTimeout = -1 }, "-read-timeout must be positive"},
		{func(l *ServerLimits) { l.WriteTimeout = 0 }, "-write-timeout must be positive"},
		{func(l *ServerLimits) { l.IdleTimeout = 0 }, "-idle-timeout must be positive"},
		{func(l *ServerLimits) { l.MaxHeaderBytes = 0 }, "-max-header-bytes must be positive"},
		{func(l *ServerLimits) { l.MaxConns = 0 }, "-max-conns must be positive"},
	} {
		bad := *l
		tt.set(&bad)
		if err := bad.Check(); err == nil || err.Error() != tt.want {
			t.Errorf("Check() = %v, want %q", err, tt.want)
		}
		if _, err := bad.Listen("127.0.0.1:0"); err == nil || err.Error() != tt.want {
			t.Errorf("Listen: %v, want %q", err, tt.want)
		}
	}
}
