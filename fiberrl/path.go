package fiberrl

import (
	"unsafe"

	"github.com/rlkit/rlkit/core"
)

// requestPath is the request path as Fiber routes it: fasthttp's raw path,
// as sent (escaped, without the query), from which core works out every
// spelling. It is not copied: the string lives as long as raw, and only
// core.Flow.Decide reads it, during the request.
func requestPath(raw []byte) core.Path {
	return core.Path(unsafe.String(unsafe.SliceData(raw), len(raw)))
}
