package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The fault suite runs examples/server as the real program in its own
// process: the test binary re-executed as main (see mainProcess), so that
// signals, file limits and stderr are the program's own.

// nofileEnv, in the environment of the program run by startServerProcess,
// sets its limit on open files (soft and hard) before main starts, as an
// operator's ulimit -n would.
const nofileEnv = "RLKIT_SERVER_TEST_NOFILE"

func init() {
	if v := os.Getenv(nofileEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err == nil {
			err = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &syscall.Rlimit{Cur: n, Max: n})
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "%s=%s: %v\n", nofileEnv, v, err)
			os.Exit(3)
		}
	}
}

// serverProcess is examples/server running as its own process.
type serverProcess struct {
	cmd    *exec.Cmd
	addr   string // host:port
	base   string // "http://" + addr
	stderr *syncBuffer
	stdout *syncBuffer // its lines, as read
	done   chan error
}

// pid returns the process id.
func (p *serverProcess) pid() int { return p.cmd.Process.Pid }

// syncBuffer is a buffer safe to read while the process writes to it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *syncBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *syncBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// startServerProcess runs the program on a free loopback port with args,
// with at most nofile open files unless nofile is 0, and waits for the
// banner's listening line; it stops the server with SIGTERM when the test
// ends (and shows its stderr if the test failed).
func startServerProcess(t *testing.T, nofile int, args ...string) *serverProcess {
	t.Helper()
	p := &serverProcess{stderr: new(syncBuffer), stdout: new(syncBuffer), done: make(chan error, 1)}
	p.cmd, _ = mainProcess(t, append([]string{"-addr", "127.0.0.1:0", "-jwt-secret", testSecret}, args...)...)
	p.cmd.Stderr = p.stderr
	if nofile > 0 {
		p.cmd.Env = append(p.cmd.Env, nofileEnv+"="+strconv.Itoa(nofile))
	}
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	addr := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			_, _ = p.stdout.Write(append(sc.Bytes(), '\n'))
			if m := listeningRE.FindStringSubmatch(sc.Text()); m != nil {
				addr <- m[1]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		p.done <- p.cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
			t.Errorf("the server did not stop within 10s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("server stderr:\n%s", p.stderr)
		}
	})
	select {
	case p.addr = <-addr:
		p.base = "http://" + p.addr
	case <-time.After(30 * time.Second):
		t.Fatalf("no listening line within 30s; stderr:\n%s", p.stderr)
	}
	return p
}
