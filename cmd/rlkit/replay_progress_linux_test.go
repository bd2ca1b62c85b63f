package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal: its master, to read what is written
// to the terminal, and its slave, the terminal a program writes to.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal: %v", err)
	}
	fd := int(m.Fd())
	if err := unix.IoctlSetPointerInt(fd, unix.TIOCSPTLCK, 0); err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	n, err := unix.IoctlGetInt(fd, unix.TIOCGPTN)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		m.Close()
		t.Skipf("no pseudo-terminal: %v", err)
	}
	unix.IoctlSetWinsize(int(s.Fd()), unix.TIOCSWINSZ, &unix.Winsize{Row: 24, Col: 100})
	return m, s
}

// TestReplayStdinProgress: a large log on standard input, from a pipe
// (no size known), shows a count of the bytes read on standard error
// when it is a terminal, and nothing when it is not.
func TestReplayStdinProgress(t *testing.T) {
	line := `203.0.113.7 - - [02/Jun/2026:07:15:01 +0000] "GET /api/search?q=a HTTP/1.1" 200 512 "-" "curl/8.5.0"` + "\n"
	n := (progressMin + 8<<20) / len(line)
	log := strings.Repeat(line, n)
	dir := files(t, "rules.yaml", replayRules)
	run := func(stderr io.Writer) string {
		cmd := exec.Command(binary, "replay", "--config", "rules.yaml")
		cmd.Dir = dir
		cmd.Stdin = strings.NewReader(log) // through a pipe
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("replay: %v", err)
		}
		return out.String()
	}
	want := fmt.Sprintf("Replayed %s requests", thousands(n))

	master, slave := openPTY(t)
	defer master.Close()
	var term bytes.Buffer
	read := make(chan struct{})
	go func() {
		io.Copy(&term, master) // until the terminal is closed on every side (EIO)
		close(read)
	}()
	out := run(slave)
	slave.Close()
	<-read
	if !strings.HasPrefix(out, want) {
		t.Errorf("stdout %q, want %q...", out[:min(len(out), 80)], want)
	}
	if s := term.String(); !strings.Contains(s, "replaying") || !strings.Contains(s, " MB") {
		t.Errorf("the terminal shows %q; want the bytes read", s)
	}

	var plain bytes.Buffer
	if out := run(&plain); !strings.HasPrefix(out, want) || plain.Len() != 0 {
		t.Errorf("stderr not a terminal: stdout %q, stderr %q; want no progress", out[:min(len(out), 80)], plain.String())
	}
}

// thousands writes n as the report does: 1,234,567.
func thousands(n int) string {
	s := fmt.Sprint(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
