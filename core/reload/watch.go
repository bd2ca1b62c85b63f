package reload

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"

	"github.com/rlkit/rlkit/core"
)

const (
	// watchSettle is how long a watched directory must stay quiet before
	// the file is read: editors and deploy tools write in several steps.
	watchSettle = 100 * time.Millisecond
	// watchMaxWait bounds the wait for quiet: a directory that never
	// stays quiet (a log written beside the file) delays a read by at
	// most this much.
	watchMaxWait = time.Second
)

// Watch reloads l from file whenever the file's content changes,
// until ctx is done. It returns once the watch is set up, or with the
// error that prevents it (the file's directory cannot be watched); done
// is closed when the watch has stopped.
//
// It first brings l up to the file: when l does not run the file's
// content as it is now (it changed since it was loaded, or l's
// configuration came from elsewhere), the file is reloaded at once. Then
// it watches the file's directory (and, when file is a symbolic link, the
// directory of its target, followed when the link changes) rather than
// the file, so that every way of replacing it is seen: written in place,
// renamed over it (as editors save), or a symbolic link switched (as
// Kubernetes updates a mounted ConfigMap). A change is read once the
// directory has been quiet for 100ms (at most 1s after the first change),
// and reloaded only when the content differs from the last one read: a
// new configuration is swapped in by l.ReloadFile, which reads the file
// again (so what is swapped in is never older than what was read); a file
// that does not load is reported once per content (logged and counted in
// l.ReloadStats, as ReloadFile does) and the running configuration stays.
// A file that disappears is reported the same way when it is read.
// Reloads, from the watch, ReloadFile or SetConfig, never overlap. Events
// that are not about the file itself (a log written beside it) cost one
// read of the file per burst (one a second in a directory never quiet).
func Watch(ctx context.Context, l *core.Limiter, file string) (done <-chan struct{}, err error) {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, fmt.Errorf("rate-limit config: watch %s: %w", file, err)
	}
	wf := &watchedFile{l: l, w: w, file: file, dir: filepath.Dir(file)}
	if err := w.Add(wf.dir); err != nil {
		w.Close()
		return nil, fmt.Errorf("rate-limit config: watch %s: %w", file, err)
	}
	wf.follow()
	wf.start()
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		defer w.Close()
		wf.run(ctx)
	}()
	return ch, nil
}

// watchedFile is the state of one Watch.
type watchedFile struct {
	l      *core.Limiter
	w      *fsnotify.Watcher
	file   string
	dir    string // the file's directory, always watched
	target string // the directory of the link's target, when watched too

	last     []byte // the content last read
	readable bool   // the last read succeeded
}

// follow watches the directory of file's target when file is a symbolic
// link into another directory, and stops watching the one it pointed
// into before.
func (wf *watchedFile) follow() {
	var dir string
	if t, err := filepath.EvalSymlinks(wf.file); err == nil && filepath.Dir(t) != wf.dir {
		dir = filepath.Dir(t)
	}
	if dir == wf.target {
		return
	}
	if wf.target != "" {
		_ = wf.w.Remove(wf.target)
	}
	wf.target = ""
	if dir != "" && wf.w.Add(dir) == nil {
		wf.target = dir
	}
}

// start reads the file and reloads it unless l runs its content already.
func (wf *watchedFile) start() {
	data, err := core.ReadConfigFile(wf.file)
	wf.last, wf.readable = data, err == nil
	if err == nil && wf.l.Config().Loaded(data) {
		return
	}
	_ = wf.l.ReloadFile(wf.file)
}

// run handles the watcher's events until ctx is done.
func (wf *watchedFile) run(ctx context.Context) {
	settle := time.NewTimer(time.Hour)
	settle.Stop()
	var first time.Time // of the first change not read yet; zero: none
	changed := func() {
		now := time.Now()
		if first.IsZero() {
			first = now
		}
		settle.Reset(min(watchSettle, first.Add(watchMaxWait).Sub(now)))
	}
	for {
		select {
		case <-ctx.Done():
			settle.Stop()
			return
		case ev, ok := <-wf.w.Events:
			if !ok {
				return
			}
			if ev.Name == wf.dir && ev.Has(fsnotify.Remove|fsnotify.Rename) {
				wf.l.Logger().Error("rlkit: rate-limit config watch: the directory was removed; changes are no longer seen",
					slog.String("file", wf.file), slog.String("dir", wf.dir))
			}
			changed()
		case err, ok := <-wf.w.Errors:
			if !ok {
				return
			}
			if errors.Is(err, fsnotify.ErrEventOverflow) {
				changed() // events were dropped: read the file anyway
				continue
			}
			wf.l.Logger().Warn("rlkit: rate-limit config watch", slog.String("file", wf.file), slog.String("error", err.Error()))
		case <-settle.C:
			first = time.Time{}
			wf.follow() // first: a change after the read is then seen
			wf.read()
		}
	}
}

// read reads the file and reloads it when its content changed.
func (wf *watchedFile) read() {
	data, err := core.ReadConfigFile(wf.file)
	switch {
	case err != nil && !wf.readable:
		return // still unreadable: reported already
	case err != nil:
		wf.readable = false
	case wf.readable && bytes.Equal(data, wf.last):
		return
	default:
		wf.readable, wf.last = true, data
	}
	if err := wf.l.ReloadFile(wf.file); err != nil && !errors.As(err, new(*core.ConfigError)) {
		// Not the content's fault (the second read failed: out of
		// file descriptors, say): the next change reads it again.
		wf.readable = false
	}
}
