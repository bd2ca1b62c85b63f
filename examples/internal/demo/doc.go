// Package demo holds what rlkit's example services share: the example
// configuration, its routes, the banner with curl lines that reach a
// limit, the running of a command until it is signalled, and the limits
// every example server puts on its clients' connections (ServerLimits,
// Listener).
//
// The configuration (ConfigYAML, bundled from ratelimit.yaml; LoadConfig
// reads another file instead) limits the endpoints in Routes, which the
// framework examples (gin, echo, fiber) all serve, answering OK and
// counting callers by their KeyHeader header, else their IP, so that one
// set of curl lines (PrintBanner) shows each kind of limit on any of them.
//
// An example's main calls Command (or Main), which runs its entry point
// until SIGINT or SIGTERM and turns its error into an exit status. The
// entry point reads its flags, configuration and listener with Setup, and
// serves with ServeHTTP (a net/http server) or Serve (any server with a
// serve and a shutdown function, such as Fiber's), which shut down
// gracefully when the context ends.
//
// A Listener keeps at most ServerLimits.MaxConns connections open,
// closing the one idle for longest to make room for a new one (503 when
// none is idle), and the http.Server it gives (Listener.HTTPServer) has
// the limits' timeouts and header limit, so that slow or idle clients
// cannot take a server's connections; ServerLimitFlags defines the flags
// that set them.
package demo
