// Package outbound paces the requests a program sends to other APIs: a
// Limiter that waits (it never fails for being over a limit) until a
// request may start, and an http.RoundTripper, Transport, that waits on it
// and adapts to the rate-limit headers the upstream answers with.
package outbound
