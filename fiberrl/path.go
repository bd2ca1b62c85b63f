package fiberrl

import (
	"bytes"
	"unsafe"
)

// requestPath is core.RequestPath for fasthttp's raw request path (the
// path as sent, before decoding): every %XX escape is decoded except an
// encoded slash, which stays "%2F" inside its segment, so that a client
// cannot move a request out of a '*' rule with "a%2Fb". An invalid escape
// is kept as it is. A path without escapes (the usual case) is returned
// without copying: the string lives as long as raw, and only
// core.Flow.Decide reads it, during the request.
func requestPath(raw []byte) string {
	i := bytes.IndexByte(raw, '%')
	if i < 0 {
		return unsafe.String(unsafe.SliceData(raw), len(raw))
	}
	b := make([]byte, i, len(raw))
	copy(b, raw)
	for ; i < len(raw); i++ {
		if raw[i] == '%' && i+2 < len(raw) {
			if hi, lo := unhex(raw[i+1]), unhex(raw[i+2]); hi >= 0 && lo >= 0 {
				if c := byte(hi<<4 | lo); c != '/' {
					b = append(b, c)
				} else {
					b = append(b, "%2F"...)
				}
				i += 2
				continue
			}
		}
		b = append(b, raw[i])
	}
	return unsafe.String(unsafe.SliceData(b), len(b))
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}
