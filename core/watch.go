package core

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchSettle is how long a watched file must stay unchanged before it is
// read: editors and deploy tools write a file in several steps.
const watchSettle = 100 * time.Millisecond

// WatchConfig reloads l from file whenever the file's content changes,
// until ctx is done. It returns once the watch is set up, or with the
// error that prevents it (the file's directory cannot be watched); done
// is closed when the watch has stopped.
//
// It watches the file's directory (and, when file is a symbolic link, the
// directory of its target) rather than the file, so that every way of
// replacing it is seen: written in place, renamed over it (as editors
// save), or a symbolic link switched (as Kubernetes updates a mounted
// ConfigMap). A change is read once the directory has been quiet for
// 100ms, and reloaded only when the content differs from the last one
// read (at first, the content when the watch started): a new
// configuration is swapped in as SetConfig does; a file that does not
// load is reported once per content (logged and counted in ReloadStats,
// as ReloadFile does) and the running configuration stays. A file that
// disappears is reported the same way when it is read.
func (l *Limiter) WatchConfig(ctx context.Context, file string) (done <-chan struct{}, err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("rate-limit config: watch %s: %w", file, err)
	}
	dirs := []string{filepath.Dir(file)}
	if target, err := filepath.EvalSymlinks(file); err == nil && filepath.Dir(target) != dirs[0] {
		dirs = append(dirs, filepath.Dir(target))
	}
	for _, d := range dirs {
		if err := w.Add(d); err != nil {
			w.Close()
			return nil, fmt.Errorf("rate-limit config: watch %s: %w", file, err)
		}
	}
	// What the limiter is assumed to run: the file as it is now.
	last, err := os.ReadFile(file)
	readable := err == nil
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer w.Close()
		settle := time.NewTimer(watchSettle)
		settle.Stop()
		for {
			select {
			case <-ctx.Done():
				settle.Stop()
				return
			case _, ok := <-w.Events:
				if !ok {
					return
				}
				settle.Reset(watchSettle)
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				l.log.Warn("rlkit: rate-limit config watch", slog.String("file", file), slog.String("error", err.Error()))
			case <-settle.C:
				data, err := os.ReadFile(file)
				switch {
				case err != nil && !readable:
					continue // still unreadable: reported already
				case err != nil:
					readable = false
					err = fmt.Errorf("rate-limit config: %w", err)
				case readable && bytes.Equal(data, last):
					continue
				default:
					readable, last = true, data
				}
				_ = l.reloadData(data, err, file)
			}
		}
	}()
	return ch, nil
}
