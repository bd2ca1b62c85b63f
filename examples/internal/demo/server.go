package demo

import (
	"container/list"
	"errors"
	"flag"
	"net"
	"net/http"
	"sync"
	"time"
)

// ServerLimits bound what one client connection can hold of an example
// server: time to send a request header, a whole request, to take a
// response, to sit idle between requests; header bytes; and how many
// connections are open at once. Every example server applies them, from
// the flags ServerLimitFlags defines.
type ServerLimits struct {
	ReadHeaderTimeout time.Duration // a request's header, from the first byte (net/http: from the connection's start or its last request)
	ReadTimeout       time.Duration // a whole request, header and body
	WriteTimeout      time.Duration // from the end of the request header to the end of the response
	IdleTimeout       time.Duration // a keep-alive connection between two requests
	MaxHeaderBytes    int           // a request's header, request line included
	MaxConns          int           // connections open at once; see Listener
}

// The default limits. A connection that sends no request, or no whole
// header, is closed after ReadHeaderTimeout; one whose body trickles,
// after ReadTimeout; an idle keep-alive connection after IdleTimeout.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 60 * time.Second // at least ReadTimeout: it runs while the body is read
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 16 << 10
	// DefaultMaxConnsCap bounds DefaultMaxConns, which is otherwise half
	// the process's file descriptor limit.
	DefaultMaxConnsCap = 10_000
)

// DefaultMaxConns is half the process's limit on open files (Go raises
// the soft limit to the hard one at start), at most DefaultMaxConnsCap:
// the other half is left for the store, its Redis connections and the
// rest of the process. 1,024 where the limit cannot be read.
func DefaultMaxConns() int {
	n := openFileLimit() / 2
	if n <= 0 {
		return 1024
	}
	return min(n, DefaultMaxConnsCap)
}

// DefaultServerLimits returns the default limits.
func DefaultServerLimits() ServerLimits {
	return ServerLimits{DefaultReadHeaderTimeout, DefaultReadTimeout, DefaultWriteTimeout, DefaultIdleTimeout, DefaultMaxHeaderBytes, DefaultMaxConns()}
}

// ServerLimitFlags defines the flags of the limits on fs, with the
// defaults (DefaultServerLimits), and returns the limits they set when fs
// is parsed: -read-header-timeout, -read-timeout, -write-timeout,
// -idle-timeout, -max-header-bytes and -max-conns.
func ServerLimitFlags(fs *flag.FlagSet) *ServerLimits {
	d := DefaultServerLimits()
	l := new(ServerLimits)
	fs.DurationVar(&l.ReadHeaderTimeout, "read-header-timeout", d.ReadHeaderTimeout, "close a connection whose request header has not arrived within this `time`")
	fs.DurationVar(&l.ReadTimeout, "read-timeout", d.ReadTimeout, "close a connection whose whole request, header and body, has not arrived within this `time`")
	fs.DurationVar(&l.WriteTimeout, "write-timeout", d.WriteTimeout, "close a connection whose response is not written within this `time` of its request header")
	fs.DurationVar(&l.IdleTimeout, "idle-timeout", d.IdleTimeout, "close a keep-alive connection idle for this `time`")
	fs.IntVar(&l.MaxHeaderBytes, "max-header-bytes", d.MaxHeaderBytes, "largest request header, in `bytes`")
	fs.IntVar(&l.MaxConns, "max-conns", d.MaxConns, "most connections open at once: past `n`, a new connection closes the longest idle one (503 when none is idle)")
	return l
}

// HTTPServer returns an http.Server for h with l's five timeouts and
// header limit. Listener.HTTPServer adds the connection limit.
func (l ServerLimits) HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: l.ReadHeaderTimeout,
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    l.MaxHeaderBytes,
	}
}

// Check reports a limit that is not positive.
func (l *ServerLimits) Check() error {
	switch {
	case l.ReadHeaderTimeout <= 0:
		return errors.New("-read-header-timeout must be positive")
	case l.ReadTimeout <= 0:
		return errors.New("-read-timeout must be positive")
	case l.WriteTimeout <= 0:
		return errors.New("-write-timeout must be positive")
	case l.IdleTimeout <= 0:
		return errors.New("-idle-timeout must be positive")
	case l.MaxHeaderBytes <= 0:
		return errors.New("-max-header-bytes must be positive")
	case l.MaxConns <= 0:
		return errors.New("-max-conns must be positive")
	}
	return nil
}

// Listen listens on the TCP address addr, keeping at most l.MaxConns
// connections open.
func (l *ServerLimits) Listen(addr string) (*Listener, error) {
	if err := l.Check(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	return &Listener{Listener: ln, Limits: *l, idle: list.New()}, nil
}

// Listener is a net.Listener that keeps at most Limits.MaxConns
// connections open. Timeouts alone do not bound them: a client can open
// connections faster than the header timeout closes them, and a process
// out of file descriptors stops accepting, health checks included.
//
// A connection is idle from its accept until the server starts on a
// request (net/http: once the request header is read; see ConnState and
// Busy), and again from the end of its response until its next request.
// At the limit, a new connection closes the connection idle for longest,
// so that a flood of idle or half-sent connections cannot keep a health
// check out: it costs the flood one of its own. When no connection is
// idle, the new one gets 503 with Retry-After: 1 and is closed; every
// busy connection ends within the read and write timeouts.
type Listener struct {
	net.Listener
	Limits ServerLimits

	mu   sync.Mutex
	open int
	idle *list.List // of *conn, longest idle first
}

// conn is a connection of a Listener.
type conn struct {
	net.Conn
	l    *Listener
	elem *list.Element // in l.idle; nil while busy or closed
	done bool          // closed: no longer counted
}

var overloaded = []byte("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")

// Accept waits for a connection, making room for it as Listener says.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		l.mu.Lock()
		var victim *conn
		if l.open >= l.Limits.MaxConns {
			if front := l.idle.Front(); front != nil {
				victim = front.Value.(*conn)
				l.forget(victim)
			}
		}
		if l.open >= l.Limits.MaxConns && victim == nil {
			l.mu.Unlock()
			// A fresh socket's send buffer is empty: this write does not wait.
			_ = c.SetWriteDeadline(time.Now().Add(10 * time.Millisecond))
			_, _ = c.Write(overloaded)
			_ = c.Close()
			continue
		}
		wc := &conn{Conn: c, l: l}
		wc.elem = l.idle.PushBack(wc)
		l.open++
		l.mu.Unlock()
		if victim != nil {
			_ = victim.Conn.Close()
		}
		return wc, nil
	}
}

// forget stops counting c; l.mu is held.
func (l *Listener) forget(c *conn) {
	if c.done {
		return
	}
	c.done = true
	l.open--
	if c.elem != nil {
		l.idle.Remove(c.elem)
		c.elem = nil
	}
}

// Open returns the number of connections open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

// Busy marks a connection of l busy with a request (true), which keeps
// it open at the limit, or idle (false), which makes it the newest idle
// one. Other connections are ignored.
func (l *Listener) Busy(c net.Conn, busy bool) {
	wc, ok := c.(*conn)
	if !ok || wc.l != l {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if wc.done {
		return
	}
	if wc.elem != nil {
		l.idle.Remove(wc.elem)
		wc.elem = nil
	}
	if !busy {
		wc.elem = l.idle.PushBack(wc)
	}
}

// ConnState is an http.Server's ConnState hook for l: a connection is busy
// from the moment its request header is read (StateActive) until its
// response is written (StateIdle). A hijacked connection is no longer
// counted.
func (l *Listener) ConnState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateActive:
		l.Busy(c, true)
	case http.StateIdle:
		l.Busy(c, false)
	case http.StateHijacked:
		if wc, ok := c.(*conn); ok && wc.l == l {
			l.mu.Lock()
			l.forget(wc)
			l.mu.Unlock()
		}
	}
}

// Close closes the connection and stops counting it.
func (c *conn) Close() error {
	c.l.mu.Lock()
	c.l.forget(c)
	c.l.mu.Unlock()
	return c.Conn.Close()
}

// HTTPServer returns an http.Server for h with l's limits: the timeouts
// and header limit of ServerLimits.HTTPServer, and ConnState telling l
// which connections are busy. Serve it on l.
func (l *Listener) HTTPServer(h http.Handler) *http.Server {
	srv := l.Limits.HTTPServer(h)
	srv.ConnState = l.ConnState
	return srv
}
