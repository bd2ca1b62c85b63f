package store_test

import (
	"testing"
	"time"
	_ "time/tzdata" // the zones below, on machines without a zone database

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

func calendarLimit(t *testing.T, s string) algo.Limit {
	t.Helper()
	l, err := algo.ParseCalendarLimit(s)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestCalendarPolicyValidate(t *testing.T) {
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	day, month := calendarLimit(t, "1000/day"), calendarLimit(t, "20000/month")
	hour := algo.Limit{Count: 10, Period: time.Hour}
	ok := &store.Policy{Name: "llm", Limits: []algo.Limit{day, month}, Location: berlin}
	if err := ok.Validate(); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, tt := range []struct {
		p    *store.Policy
		want string
	}{
		{&store.Policy{Name: "llm", Algorithm: algo.SlidingWindow, Limits: []algo.Limit{day}}, `policy "llm": calendar limits count with fixed_window, not sliding_window`},
		{&store.Policy{Name: "llm", Algorithm: algo.GCRA, Limits: []algo.Limit{day}}, `policy "llm": calendar limits count with fixed_window, not gcra`},
		{&store.Policy{Name: "llm", Limits: []algo.Limit{day, hour}}, `policy "llm": 1000/day and 10/hour: a policy's limits are all calendar periods or none`},
		{&store.Policy{Name: "llm", Limits: []algo.Limit{hour, day}}, `policy "llm": time zone Europe/Berlin applies to calendar limits only`},
		{&store.Policy{Name: "llm", Limits: []algo.Limit{day, day}}, `policy "llm": two limits per 24h0m0s (1000/day and 1000/day)`},
	} {
		if tt.want == `policy "llm": time zone Europe/Berlin applies to calendar limits only` {
			tt.p.Location = berlin
		}
		if err := tt.p.Validate(); err == nil || err.Error() != tt.want {
			t.Errorf("Validate(%+v) = %v, want %q", tt.p.Limits, err, tt.want)
		}
	}
}

// TestCalendarFingerprint requires calendar limits and their time zone to
// tell counters apart: a rolling day is not a calendar day, and Berlin's
// days are not New York's.
func TestCalendarFingerprint(t *testing.T) {
	berlin, _ := time.LoadLocation("Europe/Berlin")
	ny, _ := time.LoadLocation("America/New_York")
	day := calendarLimit(t, "10/day")
	rolling := algo.Limit{Count: 10, Period: 24 * time.Hour}
	ps := []*store.Policy{
		{Name: "p", Limits: []algo.Limit{rolling}},
		{Name: "p", Limits: []algo.Limit{day}},
		{Name: "p", Limits: []algo.Limit{day}, Location: berlin},
		{Name: "p", Limits: []algo.Limit{day}, Location: ny},
	}
	seen := map[uint64]int{}
	for i, p := range ps {
		if j, dup := seen[p.Fingerprint()]; dup {
			t.Errorf("policies %d and %d share a fingerprint", j, i)
		}
		seen[p.Fingerprint()] = i
	}
	// nil is UTC, as is time.UTC: the same counters.
	a := &store.Policy{Name: "p", Limits: []algo.Limit{day}}
	b := &store.Policy{Name: "p", Limits: []algo.Limit{day}, Location: time.UTC}
	if a.Fingerprint() != b.Fingerprint() {
		t.Errorf("nil and time.UTC fingerprints differ")
	}
}

// TestPoliciesPeriodsCached requires Periods to answer from the period it
// keeps, without allocating, until now leaves it.
func TestPoliciesPeriodsCached(t *testing.T) {
	ny, _ := time.LoadLocation("America/New_York")
	p := &store.Policy{Name: "p", Limits: []algo.Limit{calendarLimit(t, "10/day"), calendarLimit(t, "100/month")}, Location: ny}
	now := time.Date(2025, 3, 9, 12, 0, 0, 0, ny).UnixNano()
	want := algo.CalendarDay.Periods(now, ny)
	if got := p.Periods(0, now); got != want {
		t.Fatalf("Periods(0) = %+v, want %+v", got, want)
	}
	if got, want := p.Periods(1, now), algo.CalendarMonth.Periods(now, ny); got != want {
		t.Fatalf("Periods(1) = %+v, want %+v", got, want)
	}
	if n := testing.AllocsPerRun(100, func() { p.Periods(0, now+int64(time.Hour)) }); n != 0 {
		t.Errorf("Periods within the kept period: %v allocs, want 0", n)
	}
	next := time.Date(2025, 3, 10, 0, 0, 0, 0, ny).UnixNano()
	if got := p.Periods(0, next); got.Start != next || got.Prev != want.Start {
		t.Errorf("Periods at the next midnight = %+v, want it to start there", got)
	}
	if got := p.Periods(0, now); got != want { // a clock that went back
		t.Errorf("Periods back in the day before = %+v, want %+v", got, want)
	}
}

// TestEvaluateCalendar counts a day and a month together across a month
// end, through Evaluate.
func TestEvaluateCalendar(t *testing.T) {
	p := &store.Policy{Name: "p", Limits: []algo.Limit{calendarLimit(t, "2/day"), calendarLimit(t, "3/month")}}
	var states [store.MaxLimits]algo.State
	var exp [store.MaxLimits]int64
	at := func(s string) int64 {
		tm, _ := time.Parse(time.DateTime, s)
		return tm.UnixNano()
	}
	h := time.Hour
	for i, s := range []struct {
		now       string
		allowed   bool
		remaining int64 // the deciding limit's
		retry     time.Duration
		day       time.Duration // the day's ResetAfter
	}{
		{"2025-01-30 12:00:00", true, 1, 0, 12 * h},
		{"2025-01-30 13:00:00", true, 0, 0, 11 * h},
		{"2025-01-30 14:00:00", false, 0, 10 * h, 10 * h}, // the day is spent
		{"2025-01-31 00:00:00", true, 0, 0, 24 * h},       // the month is spent now
		{"2025-01-31 01:00:00", false, 0, 23 * h, 23 * h}, // the month, with the longest wait, decides
		{"2025-02-01 00:00:00", true, 1, 0, 24 * h},
	} {
		r := store.Evaluate(p, &states, &exp, at(s.now), 1)
		if r.Allowed != s.allowed || r.Remaining != s.remaining || r.RetryAfter != s.retry || r.Limits[0].ResetAfter != s.day {
			t.Fatalf("step %d at %s: %+v", i, s.now, r)
		}
		if r.Allowed && exp[0] != p.Periods(0, at(s.now)).End {
			t.Fatalf("step %d: expiry %d, want the day's end", i, exp[0])
		}
	}
}
