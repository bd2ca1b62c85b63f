package algo

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core/internal/clip"
)

// Calendar is the calendar period a limit counts in: a day, a month or a
// year of a time zone, from its first local midnight to the next period's.
// A calendar day lasts 23 or 25 hours on the days a zone changes to or
// from daylight saving time, a month 28 to 31 days, a year 365 or 366.
// The zero value is no calendar: the limit counts in windows of its
// Period, aligned on the Unix epoch.
type Calendar uint8

const (
	CalendarDay Calendar = iota + 1
	CalendarMonth
	CalendarYear
)

var calendarNames = [...]string{CalendarDay: "day", CalendarMonth: "month", CalendarYear: "year"}

// String returns "day", "month" or "year" ("" for the zero Calendar).
func (c Calendar) String() string {
	if int(c) < len(calendarNames) {
		return calendarNames[c]
	}
	return fmt.Sprintf("calendar(%d)", uint8(c))
}

// Nominal is the Period of a limit that counts per c: 24 hours for a day,
// 30 days for a month, 365 days for a year. It is what a calendar limit's
// Period must hold, so that code comparing limits by their Period (rates,
// the distinct periods of a policy) reads a period of about the right
// length; counting never uses it. 0 for the zero Calendar.
func (c Calendar) Nominal() time.Duration {
	switch c {
	case CalendarDay:
		return 24 * time.Hour
	case CalendarMonth:
		return 30 * 24 * time.Hour
	case CalendarYear:
		return 365 * 24 * time.Hour
	}
	return 0
}

// Periods is the calendar period holding an instant, [Start, End), with
// the one before it, [Prev, Start), and the one after it, [End, Next), in
// Unix nanoseconds.
type Periods struct{ Prev, Start, End, Next int64 }

// Contains reports whether now falls in [Start, End).
func (p *Periods) Contains(now int64) bool { return now >= p.Start && now < p.End }

// Periods returns the period of c that holds the instant now (Unix
// nanoseconds) in loc (nil means UTC), and its neighbours. A period starts
// at the first instant of its first local date: local midnight, or the
// end of the daylight-saving gap that skips it in the zones that change
// their clocks at midnight. c must not be the zero Calendar.
func (c Calendar) Periods(now int64, loc *time.Location) Periods {
	if loc == nil {
		loc = time.UTC
	}
	y, m, d := time.Unix(0, now).In(loc).Date()
	k := 0 // the period holding now is period k after the one of now's date
	start := c.start(y, m, d, 0, loc)
	for start > now { // a clock set back over midnight shows the date before again
		k--
		start = c.start(y, m, d, k, loc)
	}
	end := c.start(y, m, d, k+1, loc)
	for end <= now {
		k++
		start, end = end, c.start(y, m, d, k+1, loc)
	}
	return Periods{Prev: c.start(y, m, d, k-1, loc), Start: start, End: end, Next: c.start(y, m, d, k+2, loc)}
}

// start returns the first instant of the k-th period of c after the one
// holding the date y-m-d (k < 0: before it), in loc.
func (c Calendar) start(y int, m time.Month, d, k int, loc *time.Location) int64 {
	switch c {
	case CalendarDay:
		d += k
	case CalendarMonth:
		m, d = m+time.Month(k), 1
	default:
		y, m, d = y+k, time.January, 1
	}
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date() // normalized
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
		// Where the clocks skip midnight, time.Date may answer an instant
		// of the day before, ahead of the gap: the date starts where the
		// gap ends.
		if _, end := t.ZoneBounds(); !end.IsZero() {
			t = end
		}
	}
	return t.UnixNano()
}

// ApplyCalendar is Apply for a limit that counts per calendar period
// (FixedWindow over the periods ps, those of l.Calendar holding now): at
// most Count in each period. The State holds the period's Start (A) and
// the count in it (B). A state of the period after ps.Start's (a clock
// that went back over a boundary) keeps counting in that period, so a
// backwards step never resets a count; a state of any other period is
// fresh. A denied request, and a cost above Count (never admitted; its
// RetryAfter is max(ResetAfter, the period's length), a hint only),
// change nothing.
func ApplyCalendar(s *State, l *Limit, ps *Periods, now, cost int64, o *Outcome) {
	start, end := ps.Start, ps.End
	count := max(s.B, 0)
	switch s.A {
	case start:
	case end:
		start, end, now = end, ps.Next, end
	default:
		count = 0
	}
	cost = max(cost, 0)
	reset := end - now
	switch {
	case cost > l.Count:
		*o = Outcome{Remaining: max(l.Count-count, 0), ResetAfter: reset, RetryAfter: max(reset, end-start), ExpireAt: end}
	case count+cost <= l.Count:
		count += cost
		*o = Outcome{Allowed: true, Remaining: l.Count - count, ResetAfter: reset, ExpireAt: end}
		*s = State{A: start, B: count}
	default:
		*o = Outcome{Remaining: max(l.Count-count, 0), ResetAfter: reset, RetryAfter: reset, ExpireAt: end}
	}
}

// calendarUnits are the spellings of the units ParseCalendarLimit reads.
var calendarUnits = map[string]Calendar{
	"d": CalendarDay, "day": CalendarDay, "days": CalendarDay,
	"mo": CalendarMonth, "mon": CalendarMonth, "month": CalendarMonth, "months": CalendarMonth,
	"y": CalendarYear, "yr": CalendarYear, "year": CalendarYear, "years": CalendarYear,
}

// ParseCalendarLimit parses a limit per calendar period: "N/day",
// "N/month" or "N/year" (also d, days; mo, mon, months; y, yr, years; in
// any case, optionally with the multiplier 1: "N/1d"). The Limit it
// returns has Calendar set and Period its Nominal length. A period of
// another unit, or of several days, months or years, is an error that
// names it.
func ParseCalendarLimit(s string) (Limit, error) {
	bad := func(format string, args ...any) (Limit, error) {
		return Limit{}, fmt.Errorf("limit %q: %s", clip.String(s), fmt.Sprintf(format, args...))
	}
	count, per, ok := strings.Cut(s, "/")
	if !ok {
		return bad(`want "N/day", "N/month" or "N/year"`)
	}
	count = strings.TrimSpace(count)
	n, err := strconv.ParseInt(count, 10, 64)
	if err != nil || n < 1 {
		return bad("count %q is not a positive integer", clip.String(count))
	}
	per = strings.ToLower(strings.TrimSpace(per))
	digits := 0
	for digits < len(per) && per[digits] >= '0' && per[digits] <= '9' {
		digits++
	}
	unit := strings.TrimSpace(per[digits:])
	c, ok := calendarUnits[unit]
	if mult := strings.TrimLeft(per[:digits], "0"); !ok || mult != "" && mult != "1" || digits > 0 && mult == "" {
		return bad("a calendar window counts per day, month or year, not per %q", clip.String(per))
	}
	l := Limit{Count: n, Period: c.Nominal(), Calendar: c}
	if err := l.Validate(); err != nil {
		return bad("%v", err)
	}
	return l, nil
}
