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
