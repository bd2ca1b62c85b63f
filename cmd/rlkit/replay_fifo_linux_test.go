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

// pipeWrite is what a test writes into one named pipe of dir.
type pipeWrite struct{ name, text string }

// replayPipes makes the named pipes of writes in dir and runs rlkit with
// args there while one writer fills them in turn, opening each to write
// when its turn comes (which waits for a reader). The test fails when the
// replay does not end within 30s. It returns the replay's stdout, stderr
// and error, and what the writer met.
func replayPipes(t *testing.T, dir string, args []string, writes ...pipeWrite) (stdout, stderr string, err, writeErr error) {
	t.Helper()
	for _, w := range writes {
		if err := syscall.Mkfifo(filepath.Join(dir, w.name), 0o600); err != nil {
			t.Skipf("no named pipe: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	written := make(chan error, 1)
	go func() {
		var err error
		for _, w := range writes {
			var f *os.File
			if f, err = os.OpenFile(filepath.Join(dir, w.name), os.O_WRONLY, 0); err != nil {
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
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		for _, w := range writes { // free the writer, if it still waits for a reader
			if r, err := os.OpenFile(filepath.Join(dir, w.name), os.O_RDONLY|syscall.O_NONBLOCK, 0); err == nil {
				r.Close()
			}
		}
		t.Fatalf("rlkit %q did not end within 30s; stderr %q", args, errOut.String())
	}
	select {
	case writeErr = <-written:
	case <-ctx.Done():
		writeErr = ctx.Err()
	}
	return out.String(), errOut.String(), err, writeErr
}

// TestReplayFIFO: a log that is a named pipe is opened once and read from
// that handle: the replay reads what its writer writes, and the writer's
// writes all succeed.
func TestReplayFIFO(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules, "first.log", replayLog)
	out, errOut, err, writeErr := replayPipes(t, dir, []string{"replay", "--config", "rules.yaml", "first.log", "access.fifo"}, pipeWrite{"access.fifo", replayLog})
	if err != nil || !strings.HasPrefix(out, "Replayed 16 requests (20 lines, 2 malformed, 2 with no request)") || !strings.Contains(out, "malformed: access.fifo:10:") {
		t.Errorf("replay first.log access.fifo: %v, stderr %q, stdout\n%s", err, errOut, out)
	}
	if writeErr != nil {
		t.Errorf("the pipe's writer: %v", writeErr)
	}
}

// TestReplayFIFOsInTurn: two named pipes that one writer fills in turn,
// the first with more than a pipe holds, are each opened when their turn
// comes: the replay reads the first while the writer writes it, then the
// second, and neither waits for the other.
func TestReplayFIFOsInTurn(t *testing.T) {
	dir := files(t, "rules.yaml", replayRules)
	out, errOut, err, writeErr := replayPipes(t, dir, []string{"replay", "--config", "rules.yaml", "a.fifo", "b.fifo"},
		pipeWrite{"a.fifo", strings.Repeat(replayLog, 1000)}, pipeWrite{"b.fifo", replayLog})
	if err != nil || !strings.HasPrefix(out, "Replayed 8,008 requests (10,010 lines, 1,001 malformed, 1,001 with no request)") {
		t.Errorf("replay a.fifo b.fifo: %v, stderr %q, stdout\n%s", err, errOut, out)
	}
	if writeErr != nil {
		t.Errorf("the pipes' writer: %v", writeErr)
	}
}
