package fiberrl

import (
	"bytes"
	"unsafe"

	"github.com/rlkit/rlkit/core"
)

// requestPath is core.RequestPath for fasthttp's raw request path (the
// path as sent, before decoding), through core.DecodePath. A path without
// escapes (the usual case) is returned without copying: the string lives as
// long as raw, and only core.Flow.Decide reads it, during the request; a
// path with escapes comes back in new memory.
func requestPath(raw []byte) string {
	if bytes.IndexByte(raw, '%') < 0 {
		return unsafe.String(unsafe.SliceData(raw), len(raw))
	}
	return core.DecodePath(unsafe.String(unsafe.SliceData(raw), len(raw)))
}
