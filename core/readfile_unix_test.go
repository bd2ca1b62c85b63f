//go:build unix

package core_test

import (
	"errors"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
)

// TestReadConfigFile: a configuration is a regular file of at most
// 4 MiB; a FIFO (which would block), /dev/zero (which never
// ends), a directory or a larger file is refused at once, by name and
// what it is, as an *fs.PathError, and a reload of one keeps the running
// configuration.
func TestReadConfigFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo.yaml")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	zero := filepath.Join(dir, "zero.yaml")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.yaml")
	writeFile(t, big, reloadA+strings.Repeat("#\n", (4<<20)/2))
	good := filepath.Join(dir, "good.yaml")
	writeFile(t, good, reloadA)
	cfg, err := core.LoadConfig(good)
	if err != nil {
		t.Fatal(err)
	}
	l := core.NewLimiter(cfg, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.DiscardHandler)))
	for file, want := range map[string]string{
		fifo: "rate-limit config: open " + fifo + ": is a named pipe (FIFO), not a regular file",
		zero: "rate-limit config: open " + zero + ": is a character device, not a regular file",
		dir:  "rate-limit config: open " + dir + ": is a directory, not a regular file",
		big:  "rate-limit config: read " + big + ": is larger than 4194304 bytes, the most a configuration file may hold",
	} {
		_, err := core.ReadConfigFile(file)
		if err == nil || err.Error() != want {
			t.Errorf("ReadConfigFile(%s): got %v, want %s", filepath.Base(file), err, want)
		}
		if pe := (*fs.PathError)(nil); !errors.As(err, &pe) || pe.Path != file {
			t.Errorf("ReadConfigFile(%s): %v; want an *fs.PathError of the file", filepath.Base(file), err)
		}
		if err := l.ReloadFile(file); err == nil || l.Config() != cfg {
			t.Errorf("ReloadFile(%s): got %v and the configuration replaced; want the error, the running configuration", filepath.Base(file), err)
		}
	}
	if _, err := core.ReadConfigFile(filepath.Join(dir, "nope.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: got %v, want os.ErrNotExist", err)
	}
}
