package storetest

import (
	"time"
	_ "time/tzdata" // America/New_York, on machines without a zone database

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// calendar: limits per calendar day and month of America/New_York, 3 a
// day and 5 a month. In virtual time the day is 2025-03-09, which has 23
// hours (the clocks skip 02:00), and the counts, waits and resets are
// exact across its midnights; in real time, within the day it is (a
// minute at most is waited for when midnight is near), the counts are
// exact and each wait ends with the day, or the month.
func calendar(e *env) {
	p := e.calendarPolicy("calendar", "3/day", "5/month")
	ny := p.Location
	k := e.key("u")
	if !e.virtual() {
		calendarRealTime(e, p, k)
		return
	}
	h := time.Hour
	e.clock.Set(time.Date(2025, 3, 8, 23, 0, 0, 0, ny))
	r := e.expect(k, p, 2, true, 1)
	e.durations(r, h, 23*24*h) // to midnight; to April 1st, 23 days of wall clock and an hour, less the hour EDT skips
	r = e.expect(k, p, 2, false, 1)
	e.duration("RetryAfter", r.RetryAfter, h) // the day denies: until midnight
	if r.Limit != p.Limits[0] || r.Limits[1].Remaining != 3 {
		e.Fatalf("denied by %v with the month at %d, want the day and 3", r.Limit, r.Limits[1].Remaining)
	}
	e.sleep(h - 1)
	e.expect(k, p, 1, true, 0) // the day's last nanosecond
	e.sleep(1)
	// 2025-03-09: 23 hours.
	r = e.expect(k, p, 2, true, 0) // the month: 5 − 3 − 2
	e.durations(r, 23*h, 23*24*h-h)
	r = e.expect(k, p, 1, false, 0)
	e.duration("RetryAfter", r.RetryAfter, 23*24*h-h) // the month denies, with the longer wait
	if r.Limit != p.Limits[1] {
		e.Fatalf("denied by %v, want the month", r.Limit)
	}
	e.reset(k, p, true)
	r = e.expect(k, p, 1, true, 2)
	e.sleep(23*h - 1)
	e.expect(k, p, 2, true, 0) // still March 9, the day's last nanosecond
	e.sleep(1)
	r = e.expect(k, p, 1, true, 1) // March 10: a new day, the month holds 1
	e.durations(r, 24*h, 22*24*h)
	e.clock.Set(time.Date(2025, 4, 1, 0, 0, 0, 0, ny))
	e.expect(k, p, 3, true, 0) // April: both afresh
}

// calendarPolicy makes the policy named name of the given calendar
// limits (algo.ParseCalendarLimit) in America/New_York.
func (e *env) calendarPolicy(name string, limits ...string) *store.Policy {
	e.Helper()
	ny, err := time.LoadLocation("America/New_York")
	if err != nil {
		e.Fatal(err)
	}
	return e.parsed(&store.Policy{Name: e.prefix + name, Location: ny}, algo.ParseCalendarLimit, limits)
}

// durations checks the ResetAfter of r's two limits: exactly day and
// month in virtual time.
func (e *env) durations(r store.Result, day, month time.Duration) {
	e.Helper()
	e.duration("the day's ResetAfter", r.Limits[0].ResetAfter, day)
	e.duration("the month's ResetAfter", r.Limits[1].ResetAfter, month)
}

func calendarRealTime(e *env, p *store.Policy, k string) {
	loc := p.Location
	ps := algo.CalendarDay.Periods(time.Now().UnixNano(), loc)
	if left := time.Until(time.Unix(0, ps.End)); left < 10*time.Second {
		time.Sleep(left + 20*time.Millisecond)
	}
	// within checks a wait d, measured by the store after before, against
	// the end of the period: at most the time from before (and a
	// millisecond for a server clock counted in microseconds), at least
	// that less 5s, however slow the machine.
	within := func(what string, d time.Duration, before time.Time, end int64) {
		e.Helper()
		want := time.Unix(0, end).Sub(before)
		if d > want+time.Millisecond || d < want-5*time.Second {
			e.Fatalf("%s: got %v, want about %v (to %v)", what, d, want, time.Unix(0, end).In(loc))
		}
	}
	now := time.Now()
	day := algo.CalendarDay.Periods(now.UnixNano(), loc)
	month := algo.CalendarMonth.Periods(now.UnixNano(), loc)
	before := time.Now()
	r := e.expect(k, p, 2, true, 1)
	within("the day's ResetAfter", r.Limits[0].ResetAfter, before, day.End)
	within("the month's ResetAfter", r.Limits[1].ResetAfter, before, month.End)
	before = time.Now()
	r = e.expect(k, p, 2, false, 1)
	within("RetryAfter", r.RetryAfter, before, day.End)
	if pr := e.peekAt(k, p, 1); !pr.Allowed || pr.Remaining != 0 {
		e.Fatalf("Peek at cost 1: %+v, want admitted with nothing left", pr)
	}
	e.expect(k, p, 1, true, 0)
	e.reset(k, p, true)
	r = e.expect(k, p, 3, true, 0)
	if r.Limits[1].Remaining != 2 {
		e.Fatalf("after Reset, the month has %d left, want 2", r.Limits[1].Remaining)
	}
	e.reset(k, p, true)
	e.reset(k, p, false)
}
