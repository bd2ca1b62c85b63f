// Package reload keeps a core.Limiter's configuration in step with its
// file while the limiter serves: Watch reloads the file whenever its
// content changes. It is a package of its own so that only programs that
// watch a file compile its file-notification dependency
// (github.com/fsnotify/fsnotify).
//
//	cfg, err := core.LoadConfig("ratelimit.yaml")
//	if err != nil { ... }
//	lim := core.NewLimiter(cfg, core.WithStore(store))
//	done, err := reload.Watch(ctx, lim, "ratelimit.yaml")
//	if err != nil { ... } // the file's directory cannot be watched
//	handler := nethttp.New(lim)(mux)
//
// Watch returns once the watch is set up; it stops when ctx is done, and
// then closes done. A reload is the limiter's own (core.Limiter.ReloadFile,
// as core.Limiter.SetConfig describes): each request is decided wholly
// under one configuration, a rule that keeps its name, algorithm and
// periods keeps what each caller spent under its new counts and bursts,
// and reloads from the watch, ReloadFile and SetConfig never overlap.
//
// # What is watched
//
// Watch first brings the limiter up to the file: when the limiter does not
// run the file's content as it is now (the file changed since it was
// loaded, or the configuration came from elsewhere), the file is reloaded
// before Watch returns.
//
// It then watches the file's directory rather than the file, and, when the
// file is a symbolic link into another directory, that directory too
// (followed when the link changes), so that every way of replacing the
// file is seen: written in place, renamed over it (as editors save), or a
// symbolic link switched (as Kubernetes updates a mounted ConfigMap).
//
// # Changes
//
// Editors and deploy tools write a file in several steps, so a change is
// read once the directory has been quiet for 100ms, and at most 1s after
// the first change of a burst, should the directory never be quiet (a log
// written beside the file). The file is reloaded only when its content
// differs from the last one read: a burst of events that are not about the
// file costs one read of it and no reload, and a directory that is never
// quiet costs one read a second.
//
// # Failures
//
// A file that does not load (bad YAML, an invalid rule) is reported once
// per content, logged on the limiter's logger and counted in
// core.Limiter.ReloadStats as ReloadFile does, and the running
// configuration stays until the file holds one that loads. A file that
// disappears is reported the same way when it is read, and reloaded when
// it comes back.
//
// When the file's directory itself is removed or renamed, the watch logs
// an error saying that changes are no longer seen, and sees none from then
// on, even when a directory of that name is created again; the limiter
// keeps its configuration. To see changes again, a program ends that
// watch (its ctx) and starts another once the directory is back.
package reload
