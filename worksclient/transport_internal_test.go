package worksclient

import (
	"net/http"
	"testing"
	"time"
)

func TestRetryAfterParse(t *testing.T) {
	now := time.Date(2026, 6, 9, 12, 0, 0, 0, time.UTC)
	date := func(t time.Time) string { return t.Format(http.TimeFormat) }
	tests := []struct {
		ra, date string
		want     time.Duration
		ok       bool
	}{
		{"", "", 0, false},
		{"0", "", 0, true},
		{"120", "", 2 * time.Minute, true},
		{" 7 ", "", 7 * time.Second, true},
		{"99999999999999999999999", "", time.Duration(maxRetrySeconds) * time.Second, true},
		{"-1", "", 0, false},
		{"1.5", "", 0, false},
		{"12abc", "", 0, false},
		{"soon", "", 0, false},
		{date(now.Add(30 * time.Second)), "", 30 * time.Second, true},
		{date(now.Add(-30 * time.Second)), "", 0, true},
		{now.Add(time.Minute).Format(time.RFC850), "", time.Minute, true},
		{now.Add(time.Minute).Format(time.ANSIC), "", time.Minute, true},
		// Measured from the response's Date, not the local clock.
		{date(now.Add(-time.Hour + 10*time.Second)), date(now.Add(-time.Hour)), 10 * time.Second, true},
		{date(now.Add(10 * time.Second)), "garbage", 10 * time.Second, true},
	}
	for _, tt := range tests {
		h := http.Header{}
		if tt.ra != "" {
			h.Set("Retry-After", tt.ra)
		}
		if tt.date != "" {
			h.Set("Date", tt.date)
		}
		got, ok := retryAfter(h, now)
		if got != tt.want || ok != tt.ok {
			t.Errorf("retryAfter(%q, Date %q) = %v, %v; want %v, %v", tt.ra, tt.date, got, ok, tt.want, tt.ok)
		}
	}
}
