package nethttp

import (
	"bufio"
	"io"
	"net"
	"net/http"
)

// statusWriter records the status a handler answers with, for a request
// counted by outcome (core.Decision.Deferred): only such requests get one.
// It passes everything on; http.ResponseController reaches the writer it
// wraps through Unwrap, and Flush and Hijack are there for handlers that
// assert http.Flusher or http.Hijacker themselves.
type statusWriter struct {
	http.ResponseWriter
	code int // the first final status written; 0 before
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 && code >= 200 { // 1xx are informational: the final status follows
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK // net/http writes 200 first
	}
	return w.ResponseWriter.Write(b)
}

// ReadFrom keeps the wrapped writer's io.ReaderFrom (sendfile) in use.
func (w *statusWriter) ReadFrom(r io.Reader) (int64, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return io.Copy(w.ResponseWriter, r)
}

func (w *statusWriter) Flush() {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap returns the wrapped writer, for http.ResponseController.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// status is the status the client gets: 200 when the handler wrote
// nothing (net/http then answers 200).
func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}
