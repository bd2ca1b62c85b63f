package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestReplayFIFO: a log that is a named pipe is opened once and read from
// that handle: the replay reads what its writer writes, and the writer's
// writes all succeed.
func TestReplayFIFO(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules, "first.log", replayLog)
	fifo := filepath.Join(dir, "access.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skipf("no named pipe: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	written := make(chan error, 1)
	go func() {
		// Opening a FIFO to write waits for a reader; the test's
		// deadline ends the wait if none comes.
		f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
		if err != nil {
			written <- err
			return
		}
		_, err = f.WriteString(replayLog)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		written <- err
	}()
	cmd := exec.CommandContext(ctx, binary, "replay", "--config", "rules.yaml", "first.log", "access.fifo")
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		// Free the writer, if it still waits for a reader.
		if r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
			r.Close()
		}
		t.Fatalf("replay of a named pipe did not end within 30s; stderr %q", errOut.String())
	}
	if err != nil || !strings.HasPrefix(out.String(), "Replayed 16 requests (20 lines, 2 malformed, 2 with no request)") || !strings.Contains(out.String(), "malformed: access.fifo:10:") {
		t.Errorf("replay first.log access.fifo: %v, stderr %q, stdout\n%s", err, errOut.String(), out.String())
	}
	select {
	case err := <-written:
		if err != nil {
			t.Errorf("the pipe's writer: %v", err)
		}
	case <-ctx.Done():
		t.Error("the pipe's writer did not finish")
	}
}

// TestReplayFIFOsInTurn: two named pipes that one writer fills in turn,
// the first with more than a pipe holds, are each opened when their turn
// comes: the replay reads the first while the writer writes it, then the
// second, and neither waits for the other.
func TestReplayFIFOsInTurn(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules)
	first, second := filepath.Join(dir, "a.fifo"), filepath.Join(dir, "b.fifo")
	for _, p := range []string{first, second} {
		if err := syscall.Mkfifo(p, 0o600); err != nil {
			t.Skipf("no named pipe: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	written := make(chan error, 1)
	go func() {
		var err error
		for _, w := range []struct{ path, text string }{{first, strings.Repeat(replayLog, 1000)}, {second, replayLog}} {
			var f *os.File
			if f, err = os.OpenFile(w.path, os.O_WRONLY, 0); err != nil {
				break
			}
			_, err = f.WriteString(w.text)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				break
			}
		}
		written <- err
	}()
	cmd := exec.CommandContext(ctx, binary, "replay", "--config", "rules.yaml", "a.fifo", "b.fifo")
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		for _, p := range []string{first, second} { // free the writer
			if r, err := os.OpenFile(p, os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				r.Close()
			}
		}
		t.Fatalf("replay of two named pipes did not end within 30s; stderr %q", errOut.String())
	}
	if err != nil || !strings.HasPrefix(out.String(), "Replayed 8,008 requests (10,010 lines, 1,001 malformed, 1,001 with no request)") {
		t.Errorf("replay a.fifo b.fifo: %v, stderr %q, stdout\n%s", err, errOut.String(), out.String())
	}
	if err := <-written; err != nil {
		t.Errorf("the pipes' writer: %v", err)
	}
}
