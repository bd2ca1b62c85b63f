//go:build unix

package core_test

import (
	"errors"
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
// ends), a directory or a larger file is refused at once, by name, and a
// reload of one keeps the running configuration.
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
		fifo: "rate-limit config: " + fifo + " is not a regular file (p---------)",
		zero: "rate-limit config: " + zero + " is not a regular file (Dc---------)",
		dir:  "rate-limit config: " + dir + " is not a regular file (d---------)",
		big:  "rate-limit config: " + big + " is larger than 4194304 bytes, the most a configuration file may hold",
	} {
		if _, err := core.ReadConfigFile(file); err == nil || err.Error() != want {
			t.Errorf("ReadConfigFile(%s): got %v, want %s", filepath.Base(file), err, want)
		}
		if err := l.ReloadFile(file); err == nil || l.Config() != cfg {
			t.Errorf("ReloadFile(%s): got %v and the configuration replaced; want the error, the running configuration", filepath.Base(file), err)
		}
	}
	if _, err := core.ReadConfigFile(filepath.Join(dir, "nope.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing file: got %v, want os.ErrNotExist", err)
	}
}
