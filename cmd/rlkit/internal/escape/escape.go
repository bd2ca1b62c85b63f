// Package escape writes text that rlkit's reports did not choose (a
// path, an identity, a log's field) so that a terminal shows it as it
// is: nothing of it moves the cursor, colours the screen or passes for
// other text.
package escape

import "unicode/utf8"

// Printable returns s as a text report writes what a log, a client or a
// command line chose (an identity, a path, a file name): printable UTF-8
// as it is, a backslash doubled, and each byte of a control character
// (C0, DEL, C1) or of invalid UTF-8 as \xNN, so that no such text writes
// terminal controls or passes for another.
func Printable(s string) string {
	i := 0
	for i < len(s) {
		c := s[i]
		if c >= ' ' && c < 0x7f && c != '\\' {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			break
		}
		r, n := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && n == 1 || r >= 0x80 && r < 0xa0 {
			break
		}
		i += n
	}
	if i == len(s) {
		return s
	}
	const hex = "0123456789abcdef"
	b := make([]byte, 0, len(s)+16)
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		switch {
		case c == '\\':
			b = append(b, '\\', '\\')
			i++
			continue
		case c >= ' ' && c < 0x7f:
			b = append(b, c)
			i++
			continue
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRuneInString(s[i:])
			if !(r == utf8.RuneError && n == 1 || r >= 0x80 && r < 0xa0) {
				b = append(b, s[i:i+n]...)
				i += n
				continue
			}
			for _, c := range []byte(s[i : i+n]) {
				b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
			}
			i += n
			continue
		}
		b = append(b, '\\', 'x', hex[c>>4], hex[c&15])
		i++
	}
	return string(b)
}
