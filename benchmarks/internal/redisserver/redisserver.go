// Package redisserver starts a throwaway redis-server on a free loopback port
// for the benchmarks and the report command: no persistence, bound to
// 127.0.0.1, stopped by Stop (and, on Linux, killed by the kernel if the
// process that started it dies).
//
// It is the benchmarks module's own copy of what rlkit's internal/redistest
// does for tests, without the testing dependency, so that cmd/report can use
// it as well.
package redisserver

import (
	"bufio"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// AddrEnv names the environment variable through which cmd/report hands the
// address ("127.0.0.1:port") of the redis-server it started to the
// benchmarks.
const AddrEnv = "RLKIT_BENCH_REDIS_ADDR"

const (
	// Ports are picked in [minPort, maxPort), and cluster buses land in
	// [minPort+busOffset, maxPort+busOffset): below 32768, where Linux
	// starts handing out ephemeral ports, so an outgoing connection is
	// unlikely to take a port between the check and redis-server's bind.
	minPort      = 12000
	maxPort      = 22700
	portAttempts = 10
	readyTimeout = 5 * time.Second
	stopTimeout  = 5 * time.Second
)

var errPortTaken = errors.New("port taken")

// ErrNotInstalled is returned by Start when redis-server is not in PATH.
var ErrNotInstalled = errors.New("redis-server is not in PATH (apt-get install redis-server)")

// Server is a running redis-server.
type Server struct {
	addr string
	dir  string
	cmd  *exec.Cmd
	done chan struct{}
}

// Available reports whether redis-server is in PATH.
func Available() bool {
	_, err := exec.LookPath("redis-server")
	return err == nil
}

// Version returns the first line of `redis-server --version`, or "" when it
// cannot be run.
func Version() string {
	out, err := exec.Command("redis-server", "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	return line
}

// Start starts redis-server on a free port of 127.0.0.1 with no persistence
// (--save ” --appendonly no) and waits until it answers PING. Its working
// directory and log live in a temporary directory that Stop removes.
func Start() (*Server, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, ErrNotInstalled
	}
	dir, err := os.MkdirTemp("", "rlkit-bench-redis-")
	if err != nil {
		return nil, err
	}
	return startOnFreePort(bin, dir, false, nil)
}

// startOnFreePort starts redis-server (with extra arguments) in dir on a
// free loopback port (and, for a cluster node, a free bus port 10000
// above it), trying another while the one chosen is taken meanwhile; dir
// is removed when none starts.
func startOnFreePort(bin, dir string, cluster bool, extra []string) (*Server, error) {
	for range portAttempts {
		port, err := freePort(cluster)
		if err != nil {
			break
		}
		// A failed attempt may have written a node ID for the old port.
		_ = os.Remove(filepath.Join(dir, "nodes.conf"))
		s, err := start(bin, dir, port, extra)
		if err == nil {
			return s, nil
		}
		if !errors.Is(err, errPortTaken) {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	os.RemoveAll(dir)
	return nil, fmt.Errorf("redis-server: no usable loopback port after %d attempts", portAttempts)
}

// start runs redis-server on port, its working directory and log in dir,
// with extra arguments after the common ones (cluster mode), and waits
// until it answers PING.
func start(bin, dir string, port int, extra []string) (*Server, error) {
	logPath := filepath.Join(dir, "redis.log")
	logf, err := os.OpenFile(logPath, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port),
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--daemonize", "no",
		"--loglevel", "warning",
		"--dir", dir,
	)
	cmd.Args = append(cmd.Args, extra...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	logf.Close()
	if err != nil {
		return nil, fmt.Errorf("start redis-server: %w", err)
	}
	s := &Server{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	deadline := time.Now().Add(readyTimeout)
	for {
		if err = ping(s.addr); err == nil {
			return s, nil
		}
		select {
		case <-s.done:
			log, _ := os.ReadFile(logPath)
			if strings.Contains(string(log), "Address already in use") {
				return nil, errPortTaken
			}
			return nil, fmt.Errorf("redis-server on %s exited: %s", s.addr, strings.TrimSpace(string(log)))
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.kill()
			return nil, fmt.Errorf("redis-server on %s did not answer PING within %v: %v", s.addr, readyTimeout, err)
		}
	}
}

// Addr returns "127.0.0.1:port".
func (s *Server) Addr() string { return s.addr }

// Pid returns the process ID of the server, for reading its CPU time.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// Stop sends SIGTERM, waits for the server to exit (SIGKILL after 5 s) and
// removes its directory.
func (s *Server) Stop() {
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(stopTimeout):
		s.kill()
	}
	os.RemoveAll(s.dir)
}

func (s *Server) kill() {
	_ = s.cmd.Process.Kill()
	<-s.done
}

// freePort returns a port of 127.0.0.1 in [minPort, maxPort) that nothing
// listens on right now, and whose cluster bus port (busOffset above it) is
// free too when bus is set.
func freePort(bus bool) (int, error) {
	for range 100 {
		port := minPort + rand.IntN(maxPort-minPort)
		if portFree(port) && (!bus || portFree(port+busOffset)) {
			return port, nil
		}
	}
	return 0, errors.New("no free port")
}

func portFree(port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// ping sends PING in RESP and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if strings.TrimSpace(line) != "+PONG" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}
