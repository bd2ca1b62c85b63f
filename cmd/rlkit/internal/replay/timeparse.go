package replay

import (
	"bytes"
	"math"
)

// The time stamps of logs, read without the time package's layouts (which
// cost a few hundred nanoseconds a line): each parser keeps the second it
// read last, and a line of the same second (most lines, at a few requests
// a second or more) costs a comparison of bytes.

// timeCache remembers the last time stamp's text up to its seconds (and
// its zone) and the second it stands for.
type timeCache struct {
	key [40]byte
	n   int
	sec int64 // Unix seconds
}

// lookup returns the cached second for key, if it is the last one read.
func (c *timeCache) lookup(key []byte) (int64, bool) {
	if c.n == 0 || len(key) != c.n || !bytes.Equal(key, c.key[:c.n]) {
		return 0, false
	}
	return c.sec, true
}

func (c *timeCache) store(key []byte, sec int64) {
	if len(key) > len(c.key) {
		c.n = 0
		return
	}
	c.n = copy(c.key[:], key)
	c.sec = sec
}

// daysFromCivil returns the days from 1970-01-01 to y-m-d of the proleptic
// Gregorian calendar (Howard Hinnant's algorithm).
func daysFromCivil(y, m, d int64) int64 {
	if m <= 2 {
		y--
	}
	era := y / 400
	if y < 0 && y%400 != 0 {
		era--
	}
	yoe := y - era*400
	mp := (m + 9) % 12
	doy := (153*mp+2)/5 + d - 1
	doe := yoe*365 + yoe/4 - yoe/100 + doy
	return era*146097 + doe - 719468
}

// digits reads the decimal number of b, all digits, at most 19 of them (a
// Unix time in nanoseconds has 19); ok is false otherwise, when b is
// empty, or when the number is past math.MaxInt64.
func digits(b []byte) (n int64, ok bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var u uint64 // 19 digits stay below 10^19 < 2^64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		u = u*10 + uint64(c-'0')
	}
	if u > math.MaxInt64 {
		return 0, false
	}
	return int64(u), true
}

// civil returns the Unix second of a date and time of day, checking the
// fields' ranges (a 60th second, a leap second, is taken as the next
// second's start).
func civil(y, mo, d, h, mi, s int64) (int64, bool) {
	if y < 1970 || y > 2200 || mo < 1 || mo > 12 || d < 1 || d > daysIn(y, mo) || h > 23 || mi > 59 || s > 60 {
		return 0, false
	}
	return daysFromCivil(y, mo, d)*86400 + h*3600 + mi*60 + s, true
}

func daysIn(y, m int64) int64 {
	switch m {
	case 2:
		if y%4 == 0 && (y%100 != 0 || y%400 == 0) {
			return 29
		}
		return 28
	case 4, 6, 9, 11:
		return 30
	}
	return 31
}

// month returns the number of an English month's three-letter
// abbreviation ("Jan" is 1), 0 for anything else.
func month(b []byte) int64 {
	if len(b) != 3 {
		return 0
	}
	switch string(b) { // compiled to comparisons: no allocation
	case "Jan":
		return 1
	case "Feb":
		return 2
	case "Mar":
		return 3
	case "Apr":
		return 4
	case "May":
		return 5
	case "Jun":
		return 6
	case "Jul":
		return 7
	case "Aug":
		return 8
	case "Sep":
		return 9
	case "Oct":
		return 10
	case "Nov":
		return 11
	case "Dec":
		return 12
	}
	return 0
}

// zone reads a UTC offset "+hhmm", "-hhmm", "+hh:mm" or "Z" and returns
// it in seconds east of UTC.
func zone(b []byte) (int64, bool) {
	if len(b) == 1 && (b[0] == 'Z' || b[0] == 'z') {
		return 0, true
	}
	if len(b) != 5 && len(b) != 6 || b[0] != '+' && b[0] != '-' {
		return 0, false
	}
	hh, ok1 := digits(b[1:3])
	mmText := b[3:]
	if len(b) == 6 {
		if b[3] != ':' {
			return 0, false
		}
		mmText = b[4:]
	}
	mm, ok2 := digits(mmText)
	if !ok1 || !ok2 || hh > 23 || mm > 59 {
		return 0, false
	}
	off := hh*3600 + mm*60
	if b[0] == '-' {
		off = -off
	}
	return off, true
}

// clfTime reads a Common Log Format time stamp, "10/Oct/2000:13:55:36
// -0700", into Unix nanoseconds.
func (c *timeCache) clfTime(b []byte) (int64, bool) {
	if sec, ok := c.lookup(b); ok {
		return sec * 1e9, true
	}
	if len(b) != 26 || b[2] != '/' || b[6] != '/' || b[11] != ':' || b[14] != ':' || b[17] != ':' || b[20] != ' ' {
		return 0, false
	}
	d, ok1 := digits(b[0:2])
	mo := month(b[3:6])
	y, ok2 := digits(b[7:11])
	h, ok3 := digits(b[12:14])
	mi, ok4 := digits(b[15:17])
	s, ok5 := digits(b[18:20])
	off, ok6 := zone(b[21:26])
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || mo == 0 {
		return 0, false
	}
	sec, ok := civil(y, mo, d, h, mi, s)
	if !ok {
		return 0, false
	}
	sec -= off
	c.store(b, sec)
	return sec * 1e9, true
}

// rfc3339 reads an RFC 3339 time stamp, "2026-06-02T13:55:36Z",
// "2026-06-02T13:55:36.310+02:00" (a space for the T, and up to nine
// digits of fraction, are allowed), into Unix nanoseconds.
func (c *timeCache) rfc3339(b []byte) (int64, bool) {
	if len(b) < 20 || b[4] != '-' || b[7] != '-' || (b[10] != 'T' && b[10] != 't' && b[10] != ' ') || b[13] != ':' || b[16] != ':' {
		return 0, false
	}
	rest := b[19:]
	var frac, scale int64 = 0, 1e9
	if rest[0] == '.' || rest[0] == ',' {
		i := 1
		for i < len(rest) && rest[i] >= '0' && rest[i] <= '9' {
			if scale > 1 {
				frac = frac*10 + int64(rest[i]-'0')
				scale /= 10
			}
			i++
		}
		if i == 1 {
			return 0, false
		}
		rest = rest[i:]
	}
	frac *= scale
	// The second and its zone make the cache's key.
	var key [40]byte
	k := append(append(key[:0], b[:19]...), rest...)
	if len(rest) > 6 {
		return 0, false
	}
	if sec, ok := c.lookup(k); ok {
		return sec*1e9 + frac, true
	}
	y, ok1 := digits(b[0:4])
	mo, ok2 := digits(b[5:7])
	d, ok3 := digits(b[8:10])
	h, ok4 := digits(b[11:13])
	mi, ok5 := digits(b[14:16])
	s, ok6 := digits(b[17:19])
	off, ok7 := zone(rest)
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 || !ok7 {
		return 0, false
	}
	sec, ok := civil(y, mo, d, h, mi, s)
	if !ok {
		return 0, false
	}
	sec -= off
	c.store(k, sec)
	return sec*1e9 + frac, true
}

// epoch reads a Unix time as a decimal number, "1760000000",
// "1760000000.123456" (seconds), "1760000000123" (milliseconds),
// "1760000000123456789" (nanoseconds, 19 digits), and returns it in
// nanoseconds. The unit is told by the size of the whole part: below
// 10^11 seconds (until the year 5138), below 10^14 milliseconds, below
// 10^17 microseconds, else nanoseconds. A time past 2^62 nanoseconds (the
// year 2116) is refused.
func epoch(b []byte) (int64, bool) {
	whole, fracText, _ := bytes.Cut(b, []byte{'.'})
	w, ok := digits(whole)
	if !ok {
		return 0, false
	}
	var unit int64
	switch {
	case w < 1e11:
		unit = 1e9
	case w < 1e14:
		unit = 1e6
	case w < 1e17:
		unit = 1e3
	default:
		unit = 1
	}
	var frac int64
	scale := unit
	for _, ch := range fracText {
		if ch < '0' || ch > '9' {
			return 0, false
		}
		if scale > 1 {
			scale /= 10
			frac += int64(ch-'0') * scale
		}
	}
	if w > (1<<62)/unit {
		return 0, false
	}
	return w*unit + frac, true
}
