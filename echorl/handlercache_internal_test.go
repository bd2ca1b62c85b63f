package echorl

import (
	"runtime"
	"testing"

	"github.com/labstack/echo/v4"
)

// TestHandlerCacheFreshNexts: nexts made anew, each asked for two or three
// times (so that it gets an entry), dropped and collected while thousands
// more are made (so that new ones may take a freed closure's address):
// the handler the cache returns always calls its own next, never one kept
// for another function at the same address.
func TestHandlerCacheFreshNexts(t *testing.T) {
	var hc handlerCache
	build := func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error { return next(c) }
	}
	called := -1
	for round := range 20 {
		for i := range 500 {
			id := round*1000 + i
			next := func(echo.Context) error { called = id; return nil }
			for k := range 2 + i%2 {
				called = -1
				_ = hc.get(next, build)(nil)
				if called != id {
					t.Fatalf("round %d next %d (ask %d): the handler called next %d", round, id, k, called)
				}
			}
		}
		runtime.GC()
	}
}
