package algo

import (
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/internal/clip"
)

// refUnits is the unit table of ParseLimit, written out again.
var refUnits = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// refPeriod reads the period of a limit that ParseLimit accepted, in
// arbitrary precision: multiplier × unit.
func refPeriod(s string) (*big.Int, bool) {
	_, per, _ := strings.Cut(s, "/")
	per = strings.ToLower(strings.TrimSpace(per))
	i := 0
	for i < len(per) && per[i] >= '0' && per[i] <= '9' {
		i++
	}
	mult := big.NewInt(1)
	if i > 0 {
		if _, ok := mult.SetString(per[:i], 10); !ok {
			return nil, false
		}
	}
	unit, ok := refUnits[strings.TrimSpace(per[i:])]
	if !ok {
		return nil, false
	}
	return mult.Mul(mult, big.NewInt(int64(unit))), true
}

func FuzzParseLimit(f *testing.F) {
	for _, s := range []string{
		"10/second", "500/hour", "30/m", "120/minute", "1/d", "100/5min", " 10 / Second ",
		"2/MiNuTeS", "7/Days", "1/1048576s", "2147483647/day", "3/01s",
		"", "10", "10/", "/second", "0/second", "-1/second", "abc/second", "10/fortnight",
		"10/0s", "3000000000/second", "10/second/extra", "+5/s", "1/213504d", "1/106752d",
		"1000/640512d", "99999999999999999999/s", "10/99999999999999999999s", "1/\u212a",
		"1/ſ", "1/\x00s", "١/s", "1/٥s", "10/5 5s", "10/s\n", "\xff/\xfe",
		"1000/month", "20000/Months", "5/year", "1/yr", "3/mo", "7/1d", "7/01MON", "10/2days", "10/0y",
		"10/12 months", "1/ y", "2147483647/year", "2147483648/month",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		checkCalendar(t, s)
		l, err := ParseLimit(s)
		if err != nil {
			if l != (Limit{}) {
				t.Errorf("ParseLimit(%q) = %+v with error %v, want the zero Limit", s, l, err)
			}
			if prefix := "limit " + strconv.Quote(clip.String(s)) + ": "; !strings.HasPrefix(err.Error(), prefix) {
				t.Errorf("ParseLimit(%q) error %q does not start with %q", s, err.Error(), prefix)
			}
			return
		}
		if err := l.Validate(); err != nil {
			t.Errorf("ParseLimit(%q) = %+v, which does not validate: %v", s, l, err)
		}
		if l.Count < 1 || l.Burst != 0 || l.Period < time.Second {
			t.Errorf("ParseLimit(%q) = %+v, want Count >= 1, Burst 0, Period >= 1s", s, l)
		}
		before, _, _ := strings.Cut(s, "/")
		if n, err := strconv.ParseInt(strings.TrimSpace(before), 10, 64); err != nil || n != l.Count {
			t.Errorf("ParseLimit(%q).Count = %d, want %q read as an integer", s, l.Count, before)
		}
		want, ok := refPeriod(s)
		if !ok || want.Cmp(big.NewInt(int64(l.Period))) != 0 {
			t.Errorf("ParseLimit(%q).Period = %d ns, want %v ns", s, int64(l.Period), want)
		}
		// What String prints for the named units reads back the same.
		switch l.Period {
		case time.Second, time.Minute, time.Hour, 24 * time.Hour:
			if back, err := ParseLimit(l.String()); err != nil || back != l {
				t.Errorf("ParseLimit(%q) = %+v, %v; want %+v", l.String(), back, err, l)
			}
		}
	})
}

// checkCalendar checks ParseCalendarLimit on s: an error names s and comes
// with the zero Limit; a limit validates, counts per calendar period and
// prints as a form read back the same.
func checkCalendar(t *testing.T, s string) {
	c, err := ParseCalendarLimit(s)
	if err != nil {
		if c != (Limit{}) {
			t.Errorf("ParseCalendarLimit(%q) = %+v with error %v, want the zero Limit", s, c, err)
		}
		if prefix := "limit " + strconv.Quote(clip.String(s)) + ": "; !strings.HasPrefix(err.Error(), prefix) {
			t.Errorf("ParseCalendarLimit(%q) error %q does not start with %q", s, err.Error(), prefix)
		}
		return
	}
	if err := c.Validate(); err != nil || c.Calendar == 0 || c.Period != c.Calendar.Nominal() || c.Burst != 0 {
		t.Errorf("ParseCalendarLimit(%q) = %+v (%v), want a valid calendar limit", s, c, err)
	}
	if back, err := ParseCalendarLimit(c.String()); err != nil || back != c {
		t.Errorf("ParseCalendarLimit(%q) = %+v, %v; want %+v", c.String(), back, err, c)
	}
	if l, err := ParseLimit(s); err == nil && (c.Calendar != CalendarDay || l.Period != c.Period) {
		t.Errorf("ParseLimit(%q) = %+v and ParseCalendarLimit = %+v: only a day is both", s, l, c)
	}
}
