package termtext

import "testing"

// TestPrintable: printable UTF-8 stays as it is, a backslash is doubled,
// and each byte of a control character (C0, DEL, C1: U+009B is a CSI),
// of a format or separator character (U+202E reverses what follows,
// U+2028 breaks the line, U+200B and U+FEFF are unseen, U+00A0 passes for
// a space) or of invalid UTF-8 is written \xNN.
func TestPrintable(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"", ""},
		{"/api/search", "/api/search"},
		{"é日本 ~", "é日本 ~"},
		{"\u00a0nbsp", `\xc2\xa0nbsp`},
		{"user\u202efdp.exe", `user\xe2\x80\xaefdp.exe`},
		{"a\u2028b\u200bc\ufeff", `a\xe2\x80\xa8b\xe2\x80\x8bc\xef\xbb\xbf`},
		{"\U0001F600", "\U0001F600"},
		{`a\x1b`, `a\\x1b`},
		{"a\x1b[2Jb", `a\x1b[2Jb`},
		{"\x00\t\n\r\x7f", `\x00\x09\x0a\x0d\x7f`},
		{"a\u009bb", `a\xc2\x9bb`},
		{"/api/\xff", `/api/\xff`},
		{"\xe6\x97", `\xe6\x97`},
		{"é\xffé", `é\xffé`},
	} {
		if got := Printable(c.in); got != c.want {
			t.Errorf("Printable(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// TestCounted: counts with thousands separators, a noun plural but for 1.
func TestCounted(t *testing.T) {
	for _, c := range []struct {
		n    int64
		want string
	}{{0, "0 keys"}, {1, "1 key"}, {2, "2 keys"}, {999, "999 keys"}, {1000, "1,000 keys"}, {1234567, "1,234,567 keys"}, {-1234, "-1,234 keys"}} {
		if got := Counted(c.n, "key"); got != c.want {
			t.Errorf("Counted(%d) = %q, want %q", c.n, got, c.want)
		}
	}
}
