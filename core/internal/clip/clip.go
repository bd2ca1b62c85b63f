package clip

import "unicode/utf8"

// Max is the most bytes of a value an error message quotes.
const Max = 64

// String is s cut to Max bytes (at a character boundary) and "…".
func String(s string) string {
	if len(s) <= Max {
		return s
	}
	n := Max
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
