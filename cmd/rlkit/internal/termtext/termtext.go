package termtext

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Printable returns s as a text report writes what a log, a client or a
// command line chose (an identity, a path, a file name): printable UTF-8
// (strconv.IsPrint's, and the ASCII space) as it is, a backslash doubled,
// and each byte of any other character (a control character: C0, DEL,
// C1; a format character such as U+202E, which reverses the text after
// it; a separator other than the space, such as U+2028 or U+00A0; one
// not assigned) or of invalid UTF-8 as \xNN, so that no such text writes
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
		if !printable(r, n) {
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
			if printable(r, n) {
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

// printable reports whether the rune r, n bytes of UTF-8 from 0x80 on, is
// written as it is: valid and printable.
func printable(r rune, n int) bool {
	return !(r == utf8.RuneError && n == 1) && strconv.IsPrint(r)
}

// Count writes n with thousands separators: 1,234,567.
func Count[N int | int64](n N) string {
	s := strconv.FormatInt(int64(n), 10)
	neg := n < 0
	if neg {
		s = s[1:]
	}
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// Counted is n, with thousands separators, and the noun, plural but for
// 1: "1 key", "1,024 keys".
func Counted[N int | int64](n N, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return Count(n) + " " + noun + "s"
}
