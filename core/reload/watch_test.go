package reload_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/reload"
)

// waitFor polls cond until it holds, failing after 10s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// watched starts a limiter on file, watched until the test ends.
func watched(t *testing.T, file string) *core.Limiter {
	t.Helper()
	cfg, err := core.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	store := memstore.New()
	t.Cleanup(func() { store.Close() })
	l := core.NewLimiter(cfg, core.WithStore(store), core.WithLogger(slog.New(slog.DiscardHandler)))
	ctx, cancel := context.WithCancel(context.Background())
	done, err := reload.Watch(ctx, l, file)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the watch did not stop within 10s of its context's end")
		}
	})
	return l
}

func limitOf(l *core.Limiter, rule string) string {
	r := l.Config().Rule(rule)
	if r == nil {
		return "(none)"
	}
	return r.Policy.Limits[0].String()
}

func TestWatch(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rl.yaml")
	writeFile(t, file, reloadA)
	l := watched(t, file)

	// Written in place.
	writeFile(t, file, reloadB)
	waitFor(t, "the reload of B", func() bool { return l.ReloadStats().Reloads == 1 })
	if got := limitOf(l, "flip"); got != "2000000/hour" {
		t.Errorf("after writing B: flip's limit %s, want 2000000/hour", got)
	}

	// The same content written again reloads nothing: after it (and
	// 500ms, long past the watch's 100ms wait for quiet), a changed file
	// is the second reload, not the third.
	writeFile(t, file, reloadB)
	time.Sleep(500 * time.Millisecond)
	writeFile(t, file, reloadB+"# changed\n")
	waitFor(t, "the reload of B changed", func() bool { return l.ReloadStats().Reloads >= 2 })
	time.Sleep(300 * time.Millisecond)
	if s := l.ReloadStats(); s.Reloads != 2 {
		t.Errorf("after rewriting B unchanged, then changed: %d reloads, want 2", s.Reloads)
	}

	// A bad file: reported once per content, the running configuration
	// stays.
	running := l.Config()
	bad := strings.Replace(reloadA, "1000000/hour", "1000000/fortnight", 1)
	writeFile(t, file, bad)
	waitFor(t, "the failure", func() bool { return l.ReloadStats().Failures == 1 })
	if l.Config() != running || l.ReloadStats().LastError == nil {
		t.Errorf("a bad file: configuration replaced or no LastError")
	}
	writeFile(t, file, bad)
	time.Sleep(500 * time.Millisecond)
	if s := l.ReloadStats(); s.Failures != 1 || s.Reloads != 2 {
		t.Errorf("the same bad file again: %+v, want 2 reloads, 1 failure", s)
	}

	// Renamed over the file, as editors save.
	tmp := filepath.Join(dir, ".rl.yaml.swp")
	writeFile(t, tmp, reloadA)
	if err := os.Rename(tmp, file); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload of A", func() bool { return l.ReloadStats().Reloads == 3 })
	if got, s := limitOf(l, "flip"), l.ReloadStats(); got != "1000000/hour" || s.LastError != nil || s.Failures != 1 {
		t.Errorf("after renaming A over: flip's limit %s, %+v; want 1000000/hour, no last error, 1 failure (the bad file once)", got, s)
	}
}

// TestWatchSymlinks switches a mounted Kubernetes ConfigMap's way:
// rl.yaml -> ..data/rl.yaml, ..data -> ..v1, then ..data swapped to ..v2.
func TestWatchSymlinks(t *testing.T) {
	dir := t.TempDir()
	for v, data := range map[string]string{"..v1": reloadA, "..v2": reloadB} {
		if err := os.Mkdir(filepath.Join(dir, v), 0o755); err != nil {
			t.Fatal(err)
		}
		writeFile(t, filepath.Join(dir, v, "rl.yaml"), data)
	}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink("..v1", filepath.Join(dir, "..data")))
	must(os.Symlink(filepath.Join("..data", "rl.yaml"), filepath.Join(dir, "rl.yaml")))
	l := watched(t, filepath.Join(dir, "rl.yaml"))

	must(os.Symlink("..v2", filepath.Join(dir, "..data_tmp")))
	must(os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")))
	waitFor(t, "the reload of ..v2", func() bool { return l.ReloadStats().Reloads == 1 })
	if got := limitOf(l, "flip"); got != "2000000/hour" {
		t.Errorf("after the swap: flip's limit %s, want 2000000/hour", got)
	}
}

func TestWatchErrors(t *testing.T) {
	l := core.NewLimiter(nil, core.WithStore(memstore.New()))
	if _, err := reload.Watch(t.Context(), l, filepath.Join(t.TempDir(), "no", "such", "rl.yaml")); err == nil ||
		!strings.HasPrefix(err.Error(), "rate-limit config: watch ") {
		t.Errorf("a missing directory: got %v, want the watch's error", err)
	}
}

// TestWatchBusyDirectory writes a log beside the file every 20ms:
// the directory is never quiet, yet a change is read within the bound.
func TestWatchBusyDirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rl.yaml")
	writeFile(t, file, reloadA)
	l := watched(t, file)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
				_ = os.WriteFile(filepath.Join(dir, "app.log"), []byte(strings.Repeat("x", i%100)), 0o644)
			}
		}
	}()
	defer func() { close(stop); <-done }()
	writeFile(t, file, reloadB)
	waitFor(t, "the reload of B", func() bool { return l.ReloadStats().Reloads == 1 })
}

// TestWatchRepointedLink: rl.yaml links into v1/, then into v2/;
// an edit of v2/rl.yaml in place is seen.
func TestWatchRepointedLink(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"etc", "v1", "v2"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	writeFile(t, filepath.Join(root, "v1", "rl.yaml"), reloadA)
	writeFile(t, filepath.Join(root, "v2", "rl.yaml"), reloadB)
	link := filepath.Join(root, "etc", "rl.yaml")
	if err := os.Symlink(filepath.Join(root, "v1", "rl.yaml"), link); err != nil {
		t.Fatal(err)
	}
	l := watched(t, link)
	tmp := filepath.Join(root, "etc", "rl.yaml.new")
	if err := os.Symlink(filepath.Join(root, "v2", "rl.yaml"), tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, link); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the reload of v2", func() bool { return l.ReloadStats().Reloads == 1 })
	writeFile(t, filepath.Join(root, "v2", "rl.yaml"), strings.Replace(reloadB, "2000000/hour", "3000000/hour", 1))
	waitFor(t, "the reload of v2 edited", func() bool { return l.ReloadStats().Reloads == 2 })
	if got := limitOf(l, "flip"); got != "3000000/hour" {
		t.Errorf("after editing v2: flip's limit %s, want 3000000/hour", got)
	}
}

// TestWatchStart: a file changed between its load and the watch's
// start is reloaded when the watch starts; an unchanged one is not.
func TestWatchStart(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "rl.yaml")
	writeFile(t, file, reloadA)
	cfg, err := core.LoadConfig(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, changed := range []bool{false, true} {
		if changed {
			writeFile(t, file, reloadB)
		}
		l := core.NewLimiter(cfg, core.WithStore(memstore.New()), core.WithLogger(slog.New(slog.DiscardHandler)))
		ctx, cancel := context.WithCancel(t.Context())
		done, err := reload.Watch(ctx, l, file)
		if err != nil {
			t.Fatal(err)
		}
		want := uint64(0)
		if changed {
			want = 1
		}
		if s := l.ReloadStats(); s.Reloads != want {
			t.Errorf("file changed %v: %d reloads when the watch started, want %d", changed, s.Reloads, want)
		}
		cancel()
		<-done
	}
}

const (
	reloadA = `rate_limit:
  enabled: true
  rules:
    - name: flip
      paths: ["/flip"]
      limit: "1000000/hour"
`
	reloadB = `rate_limit:
  enabled: true
  rules:
    - name: flip
      paths: ["/flip"]
      limit: "2000000/hour"
`
)

func writeFile(t *testing.T, path, data string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
