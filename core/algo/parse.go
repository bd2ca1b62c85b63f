package algo

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core/internal/clip"
)

var units = map[string]time.Duration{
	"s": time.Second, "sec": time.Second, "secs": time.Second, "second": time.Second, "seconds": time.Second,
	"m": time.Minute, "min": time.Minute, "mins": time.Minute, "minute": time.Minute, "minutes": time.Minute,
	"h": time.Hour, "hr": time.Hour, "hrs": time.Hour, "hour": time.Hour, "hours": time.Hour,
	"d": 24 * time.Hour, "day": 24 * time.Hour, "days": 24 * time.Hour,
}

// ParseLimit parses "N/unit" or "N/Kunit": N requests per (K) seconds,
// minutes, hours or days. Units: s, sec, second(s); m, min, minute(s);
// h, hr, hour(s); d, day(s), in any case. Spaces around the parts are
// allowed. Examples: "10/second", "500/hour", "30/m", "100/5min".
// The error names the whole value and what is wrong with it. A limit per
// month or year is a calendar limit, which ParseCalendarLimit reads.
func ParseLimit(s string) (Limit, error) {
	bad := func(format string, args ...any) (Limit, error) {
		return Limit{}, fmt.Errorf("limit %q: %s", clip.String(s), fmt.Sprintf(format, args...))
	}
	count, per, ok := strings.Cut(s, "/")
	if !ok {
		return bad(`want "N/unit", e.g. "10/second"`)
	}
	count = strings.TrimSpace(count)
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil || n < 1 {
		return bad("count %q is not a positive integer", clip.String(count))
	}
	period, err := ParsePeriod(per)
	if err != nil {
		if c, cerr := ParseCalendarLimit(s); cerr == nil && c.Calendar != CalendarDay {
			return bad("a %v is a calendar period, not a duration: count it with ParseCalendarLimit", c.Calendar)
		}
		return bad("%v", err)
	}
	l := Limit{Count: n, Period: period}
	if err := l.Validate(); err != nil {
		return bad("%v", err)
	}
	return l, nil
}

// ParsePeriod parses the period of a limit, which is also how rlkit's
// configuration writes a duration (a penalty's within and ban): "unit" or
// "Kunit", K an integer in [1, 2^20], the units of ParseLimit in any case,
// spaces around allowed: "second", "90s", "5min", "15m", "1h", "2days".
func ParsePeriod(per string) (time.Duration, error) {
	per = strings.ToLower(strings.TrimSpace(per))
	digits := 0
	for digits < len(per) && per[digits] >= '0' && per[digits] <= '9' {
		digits++
	}
	mult := int64(1)
	if digits > 0 {
		var err error
		mult, err = strconv.ParseInt(per[:digits], 10, 64)
		if err != nil || mult < 1 || mult > 1<<20 {
			return 0, fmt.Errorf("period multiplier %q is not an integer in [1, %d]", clip.String(per[:digits]), 1<<20)
		}
	}
	unit, ok := units[strings.TrimSpace(per[digits:])]
	if !ok {
		return 0, fmt.Errorf("unknown unit %q (want second, minute, hour or day)", clip.String(per[digits:]))
	}
	if mult > math.MaxInt64/int64(unit) {
		// mult×unit would wrap around int64, possibly to a valid period.
		return 0, fmt.Errorf("period %q is too long", clip.String(per))
	}
	return time.Duration(mult) * unit, nil
}
