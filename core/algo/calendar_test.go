package algo

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones below, on machines without a zone database
)

func zone(t *testing.T, name string) *time.Location {
	t.Helper()
	loc, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return loc
}

// at is the instant of local time s ("2006-01-02 15:04") in loc, in Unix
// nanoseconds.
func at(t *testing.T, loc *time.Location, s string) int64 {
	t.Helper()
	tm, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixNano()
}

// utc is the instant of s ("2006-01-02 15:04:05", UTC), in Unix ns.
func utc(t *testing.T, s string) int64 {
	t.Helper()
	tm, err := time.Parse("2006-01-02 15:04:05", s)
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixNano()
}

func TestCalendarPeriods(t *testing.T) {
	ny, berlin, havana := zone(t, "America/New_York"), zone(t, "Europe/Berlin"), zone(t, "America/Havana")
	h := int64(time.Hour)
	tests := []struct {
		name  string
		c     Calendar
		loc   *time.Location
		now   int64
		want  [4]int64 // Prev, Start, End, Next
		hours [3]int64 // the three periods' lengths
	}{
		{"UTC day", CalendarDay, nil, utc(t, "2025-06-15 13:00:00"),
			[4]int64{utc(t, "2025-06-14 00:00:00"), utc(t, "2025-06-15 00:00:00"), utc(t, "2025-06-16 00:00:00"), utc(t, "2025-06-17 00:00:00")}, [3]int64{24, 24, 24}},
		{"UTC day, its first instant", CalendarDay, time.UTC, utc(t, "2025-06-15 00:00:00"),
			[4]int64{utc(t, "2025-06-14 00:00:00"), utc(t, "2025-06-15 00:00:00"), utc(t, "2025-06-16 00:00:00"), utc(t, "2025-06-17 00:00:00")}, [3]int64{24, 24, 24}},
		{"UTC day, its last nanosecond", CalendarDay, time.UTC, utc(t, "2025-06-16 00:00:00") - 1,
			[4]int64{utc(t, "2025-06-14 00:00:00"), utc(t, "2025-06-15 00:00:00"), utc(t, "2025-06-16 00:00:00"), utc(t, "2025-06-17 00:00:00")}, [3]int64{24, 24, 24}},
		{"New York, spring forward (23 h)", CalendarDay, ny, at(t, ny, "2025-03-09 12:00"),
			[4]int64{at(t, ny, "2025-03-08 00:00"), at(t, ny, "2025-03-09 00:00"), at(t, ny, "2025-03-10 00:00"), at(t, ny, "2025-03-11 00:00")}, [3]int64{24, 23, 24}},
		{"New York, fall back (25 h)", CalendarDay, ny, at(t, ny, "2025-11-02 23:30"),
			[4]int64{at(t, ny, "2025-11-01 00:00"), at(t, ny, "2025-11-02 00:00"), at(t, ny, "2025-11-03 00:00"), at(t, ny, "2025-11-04 00:00")}, [3]int64{24, 25, 24}},
		{"New York, the day before spring forward", CalendarDay, ny, at(t, ny, "2025-03-08 23:59"),
			[4]int64{at(t, ny, "2025-03-07 00:00"), at(t, ny, "2025-03-08 00:00"), at(t, ny, "2025-03-09 00:00"), at(t, ny, "2025-03-10 00:00")}, [3]int64{24, 24, 23}},
		{"Havana skips midnight", CalendarDay, havana, utc(t, "2025-03-09 05:00:00"),
			// 2025-03-09 starts at 01:00 CDT (05:00 UTC), when the clocks jump from 00:00 CST.
			[4]int64{utc(t, "2025-03-08 05:00:00"), utc(t, "2025-03-09 05:00:00"), utc(t, "2025-03-10 04:00:00"), utc(t, "2025-03-11 04:00:00")}, [3]int64{24, 23, 24}},
		{"Havana, the last instant before the gap", CalendarDay, havana, utc(t, "2025-03-09 05:00:00") - 1,
			[4]int64{utc(t, "2025-03-07 05:00:00"), utc(t, "2025-03-08 05:00:00"), utc(t, "2025-03-09 05:00:00"), utc(t, "2025-03-10 04:00:00")}, [3]int64{24, 24, 23}},
		{"UTC month end, Jan 31", CalendarMonth, nil, utc(t, "2025-01-31 23:59:59"),
			[4]int64{utc(t, "2024-12-01 00:00:00"), utc(t, "2025-01-01 00:00:00"), utc(t, "2025-02-01 00:00:00"), utc(t, "2025-03-01 00:00:00")}, [3]int64{31 * 24, 31 * 24, 28 * 24}},
		{"UTC Feb 1", CalendarMonth, nil, utc(t, "2025-02-01 00:00:00"),
			[4]int64{utc(t, "2025-01-01 00:00:00"), utc(t, "2025-02-01 00:00:00"), utc(t, "2025-03-01 00:00:00"), utc(t, "2025-04-01 00:00:00")}, [3]int64{31 * 24, 28 * 24, 31 * 24}},
		{"leap year, Feb 29", CalendarMonth, nil, utc(t, "2024-02-29 12:00:00"),
			[4]int64{utc(t, "2024-01-01 00:00:00"), utc(t, "2024-02-01 00:00:00"), utc(t, "2024-03-01 00:00:00"), utc(t, "2024-04-01 00:00:00")}, [3]int64{31 * 24, 29 * 24, 31 * 24}},
		{"leap day", CalendarDay, nil, utc(t, "2024-02-29 12:00:00"),
			[4]int64{utc(t, "2024-02-28 00:00:00"), utc(t, "2024-02-29 00:00:00"), utc(t, "2024-03-01 00:00:00"), utc(t, "2024-03-02 00:00:00")}, [3]int64{24, 24, 24}},
		{"Berlin month with a DST change", CalendarMonth, berlin, at(t, berlin, "2025-03-31 23:59"),
			[4]int64{at(t, berlin, "2025-02-01 00:00"), at(t, berlin, "2025-03-01 00:00"), at(t, berlin, "2025-04-01 00:00"), at(t, berlin, "2025-05-01 00:00")}, [3]int64{28 * 24, 31*24 - 1, 30 * 24}},
		{"UTC year end", CalendarYear, nil, utc(t, "2024-12-31 23:59:59"),
			[4]int64{utc(t, "2023-01-01 00:00:00"), utc(t, "2024-01-01 00:00:00"), utc(t, "2025-01-01 00:00:00"), utc(t, "2026-01-01 00:00:00")}, [3]int64{365 * 24, 366 * 24, 365 * 24}},
		{"New York new year", CalendarYear, ny, at(t, ny, "2025-01-01 00:00"),
			[4]int64{at(t, ny, "2024-01-01 00:00"), at(t, ny, "2025-01-01 00:00"), at(t, ny, "2026-01-01 00:00"), at(t, ny, "2027-01-01 00:00")}, [3]int64{366 * 24, 365 * 24, 365 * 24}},
	}
	for _, tt := range tests {
		got := tt.c.Periods(tt.now, tt.loc)
		if want := (Periods{tt.want[0], tt.want[1], tt.want[2], tt.want[3]}); got != want {
			t.Errorf("%s: %v.Periods = %s, want %s", tt.name, tt.c, fmtPeriods(got), fmtPeriods(want))
			continue
		}
		if !got.Contains(tt.now) || got.Contains(got.End) || got.Contains(got.Start-1) {
			t.Errorf("%s: Contains is wrong for %s", tt.name, fmtPeriods(got))
		}
		if lens := [3]int64{(got.Start - got.Prev) / h, (got.End - got.Start) / h, (got.Next - got.End) / h}; lens != tt.hours {
			t.Errorf("%s: period lengths %v hours, want %v", tt.name, lens, tt.hours)
		}
	}
}

func fmtPeriods(p Periods) string {
	f := func(ns int64) string { return time.Unix(0, ns).UTC().Format("2006-01-02T15:04:05.999999999Z") }
	return "{" + f(p.Prev) + " " + f(p.Start) + " " + f(p.End) + " " + f(p.Next) + "}"
}

// TestCalendarPeriodsTile walks a year of days in zones that change their
// clocks (one of them at midnight) and requires the periods to tile time:
// each day's end is the next day's start, and every instant an hour apart
// falls in the period Periods gives for it.
func TestCalendarPeriodsTile(t *testing.T) {
	for _, name := range []string{"UTC", "America/New_York", "Europe/Berlin", "America/Havana", "America/Santiago", "Australia/Lord_Howe"} {
		loc := zone(t, name)
		for _, c := range []Calendar{CalendarDay, CalendarMonth} {
			now := at(t, loc, "2025-01-01 00:00")
			p := c.Periods(now, loc)
			for range 366 * 24 * 2 {
				q := c.Periods(now, loc)
				if !q.Contains(now) || q.Prev >= q.Start || q.End >= q.Next {
					t.Fatalf("%s %v at %v: %s", name, c, time.Unix(0, now).In(loc), fmtPeriods(q))
				}
				if q != p {
					if q.Prev != p.Start || q.Start != p.End || q.End != p.Next {
						t.Fatalf("%s %v: %s follows %s", name, c, fmtPeriods(q), fmtPeriods(p))
					}
					if d := time.Duration(q.End - q.Start); c == CalendarDay && (d < 22*time.Hour || d > 26*time.Hour) {
						t.Fatalf("%s: a day of %v: %s", name, d, fmtPeriods(q))
					}
					p = q
				}
				now += int64(30 * time.Minute)
			}
		}
	}
}

// calendarStep is one request under a calendar limit: at an instant
// (Unix ns), its cost and what it must get.
type calendarStep struct {
	now       int64
	cost      int64
	allowed   bool
	remaining int64
	retry     int64 // RetryAfter; ResetAfter too when denied
	reset     int64
}

func runCalendar(t *testing.T, name string, l Limit, loc *time.Location, steps []calendarStep) {
	t.Helper()
	var st State
	for i, s := range steps {
		ps := l.Calendar.Periods(s.now, loc)
		prev := st
		var o Outcome
		ApplyCalendar(&st, &l, &ps, s.now, s.cost, &o)
		if o.Allowed != s.allowed || o.Remaining != s.remaining || o.RetryAfter != s.retry || o.ResetAfter != s.reset {
			t.Fatalf("%s step %d (%v, cost %d): got allowed=%v remaining=%d retry=%v reset=%v, want %v %d %v %v", name, i,
				time.Unix(0, s.now).In(loc), s.cost, o.Allowed, o.Remaining, time.Duration(o.RetryAfter), time.Duration(o.ResetAfter),
				s.allowed, s.remaining, time.Duration(s.retry), time.Duration(s.reset))
		}
		if !o.Allowed && st != prev {
			t.Fatalf("%s step %d: a denial changed the state from %+v to %+v", name, i, prev, st)
		}
		if o.ExpireAt != ps.End && st.A == ps.Start {
			t.Fatalf("%s step %d: ExpireAt %d, want the period's end %d", name, i, o.ExpireAt, ps.End)
		}
	}
}

func TestApplyCalendarDays(t *testing.T) {
	ny := zone(t, "America/New_York")
	h, m := int64(time.Hour), int64(time.Minute)
	day := Limit{Count: 3, Period: CalendarDay.Nominal(), Calendar: CalendarDay}
	t.Run("UTC", func(t *testing.T) {
		n := utc(t, "2025-06-15 22:00:00")
		runCalendar(t, "UTC", day, time.UTC, []calendarStep{
			{n, 1, true, 2, 0, 2 * h},
			{n + h, 2, true, 0, 0, h},
			{n + h + 30*m, 1, false, 0, 30 * m, 30 * m}, // Retry-After: to midnight
			{n + 2*h - 1, 1, false, 0, 1, 1},
			{n + 2*h, 3, true, 0, 0, 24 * h}, // midnight: a new day
			{n + 2*h + m, 1, false, 0, 24*h - m, 24*h - m},
		})
	})
	t.Run("NewYorkSpringForward", func(t *testing.T) {
		// 2025-03-09 has 23 hours: it ends at 2025-03-10 00:00 EDT, 04:00 UTC.
		runCalendar(t, "spring", day, ny, []calendarStep{
			{at(t, ny, "2025-03-08 23:00"), 3, true, 0, 0, h},
			{at(t, ny, "2025-03-08 23:59"), 1, false, 0, m, m},
			{at(t, ny, "2025-03-09 00:00"), 2, true, 1, 0, 23 * h},
			{at(t, ny, "2025-03-09 01:59"), 1, true, 0, 0, 21*h + m},
			{at(t, ny, "2025-03-09 03:00"), 1, false, 0, 21 * h, 21 * h}, // 02:00 never happened
			{utc(t, "2025-03-10 03:59:59"), 1, false, 0, int64(time.Second), int64(time.Second)},
			{utc(t, "2025-03-10 04:00:00"), 3, true, 0, 0, 24 * h},
		})
	})
	t.Run("NewYorkFallBack", func(t *testing.T) {
		// 2025-11-02 has 25 hours: 01:00 to 02:00 happens twice.
		first := utc(t, "2025-11-02 05:30:00")  // 01:30 EDT
		second := utc(t, "2025-11-02 06:30:00") // 01:30 EST
		runCalendar(t, "fall", day, ny, []calendarStep{
			{at(t, ny, "2025-11-02 00:00"), 1, true, 2, 0, 25 * h},
			{first, 1, true, 1, 0, 23*h + 30*m},
			{second, 1, true, 0, 0, 22*h + 30*m},
			{second + h, 1, false, 0, 21*h + 30*m, 21*h + 30*m},
			{at(t, ny, "2025-11-03 00:00") - 1, 1, false, 0, 1, 1},
			{at(t, ny, "2025-11-03 00:00"), 1, true, 2, 0, 24 * h},
		})
	})
}

func TestApplyCalendarMonthsAndYears(t *testing.T) {
	h := int64(time.Hour)
	month := Limit{Count: 2, Period: CalendarMonth.Nominal(), Calendar: CalendarMonth}
	year := Limit{Count: 2, Period: CalendarYear.Nominal(), Calendar: CalendarYear}
	runCalendar(t, "Jan 31 to Feb 1", month, time.UTC, []calendarStep{
		{utc(t, "2025-01-01 00:00:00"), 2, true, 0, 0, 31 * 24 * h},
		{utc(t, "2025-01-31 23:00:00"), 1, false, 0, h, h},
		{utc(t, "2025-02-01 00:00:00"), 1, true, 1, 0, 28 * 24 * h},
		{utc(t, "2025-02-28 12:00:00"), 1, true, 0, 0, 12 * h},
		{utc(t, "2025-02-28 12:00:00"), 1, false, 0, 12 * h, 12 * h},
		{utc(t, "2025-03-01 00:00:00"), 1, true, 1, 0, 31 * 24 * h},
	})
	runCalendar(t, "leap year", month, time.UTC, []calendarStep{
		{utc(t, "2024-02-28 12:00:00"), 2, true, 0, 0, 36 * h},
		{utc(t, "2024-02-29 12:00:00"), 1, false, 0, 12 * h, 12 * h}, // Feb 29 is February's
		{utc(t, "2024-03-01 00:00:00"), 1, true, 1, 0, 31 * 24 * h},
	})
	runCalendar(t, "year end", year, time.UTC, []calendarStep{
		{utc(t, "2024-06-01 00:00:00"), 2, true, 0, 0, (30 + 31 + 31 + 30 + 31 + 30 + 31) * 24 * h},
		{utc(t, "2024-12-31 23:00:00"), 1, false, 0, h, h},
		{utc(t, "2025-01-01 00:00:00"), 1, true, 1, 0, 365 * 24 * h},
	})
}

func TestApplyCalendarEdges(t *testing.T) {
	day := Limit{Count: 2, Period: CalendarDay.Nominal(), Calendar: CalendarDay}
	n := utc(t, "2025-06-15 23:00:00")
	ps := CalendarDay.Periods(n, nil)
	h := int64(time.Hour)
	var st State
	var o Outcome
	ApplyCalendar(&st, &day, &ps, n, 2, &o)

	// A cost above the count is never admitted: a hint of the longer of
	// the wait and the period.
	s2 := st
	ApplyCalendar(&s2, &day, &ps, n, 3, &o)
	if o.Allowed || o.RetryAfter != 24*h || o.ResetAfter != h || o.Remaining != 0 || s2 != st {
		t.Errorf("cost above the count: %+v, state %+v", o, s2)
	}
	// Cost 0 and a negative cost read.
	ApplyCalendar(&s2, &day, &ps, n, -1, &o)
	if !o.Allowed || o.Remaining != 0 || s2 != st {
		t.Errorf("negative cost: %+v, state %+v", o, s2)
	}

	// A clock that goes back over midnight keeps the next day's count.
	next := CalendarDay.Periods(n+2*h, nil)
	s3 := State{}
	ApplyCalendar(&s3, &day, &next, n+2*h, 2, &o)
	ApplyCalendar(&s3, &day, &ps, n, 1, &o)
	if o.Allowed || o.RetryAfter != 24*h {
		t.Errorf("a clock stepped back over midnight: %+v, want a denial until the end of the day counted in", o)
	}
	// A state of another period (two days back) is fresh.
	old := State{A: ps.Prev, B: 2}
	ApplyCalendar(&old, &day, &ps, n, 2, &o)
	if !o.Allowed || old != (State{A: ps.Start, B: 2}) {
		t.Errorf("a state of the day before: %+v, state %+v", o, old)
	}
}

func TestParseCalendarLimit(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want Limit
	}{
		{"1000/day", Limit{Count: 1000, Period: 24 * time.Hour, Calendar: CalendarDay}},
		{"1000/d", Limit{Count: 1000, Period: 24 * time.Hour, Calendar: CalendarDay}},
		{"1000/1d", Limit{Count: 1000, Period: 24 * time.Hour, Calendar: CalendarDay}},
		{" 5 / Days ", Limit{Count: 5, Period: 24 * time.Hour, Calendar: CalendarDay}},
		{"20000/month", Limit{Count: 20000, Period: 30 * 24 * time.Hour, Calendar: CalendarMonth}},
		{"3/MO", Limit{Count: 3, Period: 30 * 24 * time.Hour, Calendar: CalendarMonth}},
		{"3/mon", Limit{Count: 3, Period: 30 * 24 * time.Hour, Calendar: CalendarMonth}},
		{"3/01months", Limit{Count: 3, Period: 30 * 24 * time.Hour, Calendar: CalendarMonth}},
		{"1/year", Limit{Count: 1, Period: 365 * 24 * time.Hour, Calendar: CalendarYear}},
		{"1/yr", Limit{Count: 1, Period: 365 * 24 * time.Hour, Calendar: CalendarYear}},
		{"1/y", Limit{Count: 1, Period: 365 * 24 * time.Hour, Calendar: CalendarYear}},
		{"2147483647/years", Limit{Count: 2147483647, Period: 365 * 24 * time.Hour, Calendar: CalendarYear}},
	} {
		got, err := ParseCalendarLimit(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseCalendarLimit(%q) = %+v, %v; want %+v", tt.in, got, err, tt.want)
			continue
		}
		if back, err := ParseCalendarLimit(got.String()); err != nil || back != got {
			t.Errorf("ParseCalendarLimit(%q) = %+v, %v; want %+v", got.String(), back, err, got)
		}
	}
	const per = "a calendar window counts per day, month or year, not per "
	for _, tt := range []struct{ in, want string }{
		{"10/minute", `limit "10/minute": ` + per + `"minute"`},
		{"10/hour", `limit "10/hour": ` + per + `"hour"`},
		{"10/2days", `limit "10/2days": ` + per + `"2days"`},
		{"10/0d", `limit "10/0d": ` + per + `"0d"`},
		{"10/12months", `limit "10/12months": ` + per + `"12months"`},
		{"10/week", `limit "10/week": ` + per + `"week"`},
		{"10/", `limit "10/": ` + per + `""`},
		{"10", `limit "10": want "N/day", "N/month" or "N/year"`},
		{"0/day", `limit "0/day": count "0" is not a positive integer`},
		{"x/day", `limit "x/day": count "x" is not a positive integer`},
		{"2147483648/day", `limit "2147483648/day": count 2147483648 out of range [1, 2147483647]`},
	} {
		got, err := ParseCalendarLimit(tt.in)
		if err == nil || err.Error() != tt.want || got != (Limit{}) {
			t.Errorf("ParseCalendarLimit(%q) = %+v, %v; want error %q", tt.in, got, err, tt.want)
		}
	}
}

func TestParseLimitRefersMonthsToCalendar(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"10/month", `limit "10/month": a month is a calendar period, not a duration: count it with ParseCalendarLimit`},
		{"10/Years", `limit "10/Years": a year is a calendar period, not a duration: count it with ParseCalendarLimit`},
		{"10/2months", `limit "10/2months": unknown unit "months" (want second, minute, hour or day)`},
	} {
		if _, err := ParseLimit(tt.in); err == nil || err.Error() != tt.want {
			t.Errorf("ParseLimit(%q) error %v, want %q", tt.in, err, tt.want)
		}
	}
	// A rolling day is no calendar day.
	if l, err := ParseLimit("10/day"); err != nil || l.Calendar != 0 {
		t.Errorf("ParseLimit(10/day) = %+v, %v", l, err)
	}
}

func TestCalendarLimitValidate(t *testing.T) {
	for _, tt := range []struct {
		l    Limit
		want string
	}{
		{Limit{Count: 1, Period: time.Hour, Calendar: CalendarDay}, "a limit per calendar day has Period 24h0m0s (Calendar.Nominal), not 1h0m0s"},
		{Limit{Count: 1, Calendar: CalendarMonth}, "a limit per calendar month has Period 720h0m0s (Calendar.Nominal), not 0s"},
		{Limit{Count: 1, Period: time.Hour, Calendar: 4}, "unknown calendar(4)"},
	} {
		if err := tt.l.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("%+v.Validate() = %v, want %q", tt.l, err, tt.want)
		}
	}
	if s := (Limit{Count: 7, Period: 365 * 24 * time.Hour, Calendar: CalendarYear}).String(); s != "7/year" {
		t.Errorf("String() = %q", s)
	}
	if Calendar(0).String() != "" || CalendarMonth.String() != "month" {
		t.Errorf("String: %q, %q", Calendar(0).String(), CalendarMonth.String())
	}
}

func FuzzApplyCalendar(f *testing.F) {
	f.Add(uint8(0), uint8(1), int64(1_741_500_000_000_000_000), int64(0), int64(0), int64(1), int64(3))
	f.Add(uint8(2), uint8(2), int64(1_762_063_200_000_000_000), int64(1_761_955_200_000_000_000), int64(7), int64(2), int64(10))
	f.Add(uint8(3), uint8(3), int64(1_735_689_599_999_999_999), int64(-1), int64(-5), int64(-1), int64(1))
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "America/Havana", "Australia/Lord_Howe"}
	locs := make([]*time.Location, len(zones))
	for i, z := range zones {
		var err error
		if locs[i], err = time.LoadLocation(z); err != nil {
			f.Fatal(err)
		}
	}
	f.Fuzz(func(t *testing.T, z, c uint8, now, stA, stB, cost, count int64) {
		l := Limit{Count: count, Calendar: Calendar(c%3 + 1)}
		l.Period = l.Calendar.Nominal()
		// Instants from 1900 to 2200: time.Time's nanoseconds fit.
		if l.Validate() != nil || now < -2_208_988_800*s1 || now > 7_258_118_400*s1 {
			return
		}
		loc := locs[int(z)%len(locs)]
		ps := l.Calendar.Periods(now, loc)
		if !(ps.Prev < ps.Start && ps.Start <= now && now < ps.End && ps.End < ps.Next) {
			t.Fatalf("Periods(%d, %v) = %s", now, loc, fmtPeriods(ps))
		}
		st := State{A: stA, B: stB}
		before := st
		var o Outcome
		ApplyCalendar(&st, &l, &ps, now, cost, &o)
		if o.Remaining < 0 || o.RetryAfter < 0 || o.ResetAfter <= 0 || o.Allowed != (o.RetryAfter == 0) {
			t.Fatalf("outcome %+v", o)
		}
		if !o.Allowed && st != before {
			t.Fatalf("a denial changed the state")
		}
		if o.Allowed && (st.A != ps.Start && st.A != ps.End || st.B > l.Count) {
			t.Fatalf("state %+v after an admission in %s", st, fmtPeriods(ps))
		}
	})
}
