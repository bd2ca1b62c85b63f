package core

import (
	"math"
	"strconv"
	"testing"
	"unsafe"
)

// TestClientIPPeerReusedBytes: a caller that hands ClientIP a string over
// bytes it reuses (a fasthttp-style buffer turned into a string without a
// copy, to spare an allocation) gets the answer for what the string holds
// now, never the host kept for what it held when the peer cache saw it:
// another client's length of host, a half address, a non-IPv4 peer
// passed off as a plain one.
func TestClientIPPeerReusedBytes(t *testing.T) {
	var zero ClientIPConfig
	buf := make([]byte, 12)
	s := unsafe.String(&buf[0], len(buf))
	for _, c := range []struct{ first, then string }{
		{"1.1.1.1:5555", "22.2.2.2:555"},
		{"22.2.2.2:555", "1.1.1.1:5555"},
		{"1.1.1.1:5555", "[::1]:655350"},
		{"1.1.1.1:5555", "10.0.0.99:80"},
	} {
		copy(buf, c.first)
		for range 3 { // seen, then kept
			if got, want := zero.ClientIP(s, nil), zero.ClientIP(string(buf), nil); got != want {
				t.Fatalf("ClientIP(%q) = %q, want %q", c.first, got, want)
			}
		}
		copy(buf, c.then)
		if got, want := zero.ClientIP(s, nil), zero.ClientIP(string(buf), nil); got != want {
			t.Errorf("after %q, ClientIP(%q) over the same bytes = %q, want %q", c.first, c.then, got, want)
		}
	}
}

// TestAppendDecimalEdges: appendDecimal writes what strconv does at every
// bound of its four-digit steps and both ends of int64, after a prefix.
func TestAppendDecimalEdges(t *testing.T) {
	vals := []int64{math.MinInt64, math.MinInt64 + 1, -10000, -9999, -1, 0, math.MaxInt64, math.MaxInt64 - 1}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, 10*p-1)
	}
	for _, v := range vals {
		for _, pre := range []string{"", "x;r="} {
			if got, want := string(appendDecimal([]byte(pre), v)), strconv.AppendInt([]byte(pre), v, 10); got != string(want) {
				t.Errorf("appendDecimal(%q, %d) = %q, want %q", pre, v, got, want)
			}
		}
	}
	for v := int64(-20000); v <= 200000; v++ {
		if got, want := string(appendDecimal(nil, v)), strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendDecimal(%d) = %q, want %q", v, got, want)
		}
	}
}
