package algo

import (
	"strings"
	"testing"
	"time"
)

const day = 24 * time.Hour

func TestParseLimitUnits(t *testing.T) {
	units := []struct {
		spellings []string
		period    time.Duration
	}{
		{[]string{"s", "sec", "secs", "second", "seconds"}, time.Second},
		{[]string{"m", "min", "mins", "minute", "minutes"}, time.Minute},
		{[]string{"h", "hr", "hrs", "hour", "hours"}, time.Hour},
		{[]string{"d", "day", "days"}, day},
	}
	for _, u := range units {
		for _, sp := range u.spellings {
			for _, spelled := range []string{sp, strings.ToUpper(sp), strings.ToUpper(sp[:1]) + sp[1:]} {
				in := "7/" + spelled
				got, err := ParseLimit(in)
				if err != nil {
					t.Errorf("ParseLimit(%q): unexpected error %v", in, err)
					continue
				}
				if want := (Limit{Count: 7, Period: u.period}); got != want {
					t.Errorf("ParseLimit(%q) = %+v, want %+v", in, got, want)
				}
			}
		}
	}
}

func TestParseLimit(t *testing.T) {
	tests := []struct {
		in   string
		want Limit
	}{
		{"10/second", Limit{Count: 10, Period: time.Second}},
		{"500/hour", Limit{Count: 500, Period: time.Hour}},
		{"30/m", Limit{Count: 30, Period: time.Minute}},
		{"120/minute", Limit{Count: 120, Period: time.Minute}},
		{"1/d", Limit{Count: 1, Period: day}},
		{"2/MiNuTeS", Limit{Count: 2, Period: time.Minute}},
		{"10/SEC", Limit{Count: 10, Period: time.Second}},
		// Spaces around the parts.
		{" 10/second", Limit{Count: 10, Period: time.Second}},
		{"10/second ", Limit{Count: 10, Period: time.Second}},
		{"10 / second", Limit{Count: 10, Period: time.Second}},
		{"\t10\t/\tsecond\t", Limit{Count: 10, Period: time.Second}},
		// N/Kunit.
		{"100/5min", Limit{Count: 100, Period: 5 * time.Minute}},
		{"100/5 min", Limit{Count: 100, Period: 5 * time.Minute}},
		{"100 / 5min ", Limit{Count: 100, Period: 5 * time.Minute}},
		{"1/30s", Limit{Count: 1, Period: 30 * time.Second}},
		{"5/2h", Limit{Count: 5, Period: 2 * time.Hour}},
		{"5/7days", Limit{Count: 5, Period: 7 * day}},
		{"3/1second", Limit{Count: 3, Period: time.Second}},
		{"3/01s", Limit{Count: 3, Period: time.Second}},
		{"1/1048576s", Limit{Count: 1, Period: 1 << 20 * time.Second}},
		// Leading zeros and the largest count.
		{"007/second", Limit{Count: 7, Period: time.Second}},
		{"2147483647/day", Limit{Count: 2147483647, Period: day}},
	}
	for _, tt := range tests {
		got, err := ParseLimit(tt.in)
		if err != nil {
			t.Errorf("ParseLimit(%q): unexpected error %v", tt.in, err)
			continue
		}
		if got != tt.want {
			t.Errorf("ParseLimit(%q) = %+v, want %+v", tt.in, got, tt.want)
		}
		if got.Burst != 0 {
			t.Errorf("ParseLimit(%q).Burst = %d, want 0", tt.in, got.Burst)
		}
	}
}

func TestParseLimitErrors(t *testing.T) {
	const units = " (want second, minute, hour or day)"
	tests := []struct{ in, want string }{
		{"", `limit "": want "N/unit", e.g. "10/second"`},
		{"10", `limit "10": want "N/unit", e.g. "10/second"`},
		{"10 second", `limit "10 second": want "N/unit", e.g. "10/second"`},
		{"10/", `limit "10/": unknown unit ""` + units},
		{"10/ ", `limit "10/ ": unknown unit ""` + units},
		{"/second", `limit "/second": count "" is not a positive integer`},
		{"0/second", `limit "0/second": count "0" is not a positive integer`},
		{"-1/second", `limit "-1/second": count "-1" is not a positive integer`},
		{"abc/second", `limit "abc/second": count "abc" is not a positive integer`},
		{"1.5/second", `limit "1.5/second": count "1.5" is not a positive integer`},
		{"1 0/second", `limit "1 0/second": count "1 0" is not a positive integer`},
		{"99999999999999999999/second", `limit "99999999999999999999/second": count "99999999999999999999" is not a positive integer`},
		{"10/fortnight", `limit "10/fortnight": unknown unit "fortnight"` + units},
		{"10/Fortnight", `limit "10/Fortnight": unknown unit "fortnight"` + units},
		{"10/ms", `limit "10/ms": unknown unit "ms"` + units},
		{"10/week", `limit "10/week": unknown unit "week"` + units},
		{"10/5", `limit "10/5": unknown unit ""` + units},
		{"10/0s", `limit "10/0s": period multiplier "0" is not an integer in [1, 1048576]`},
		{"10/1048577s", `limit "10/1048577s": period multiplier "1048577" is not an integer in [1, 1048576]`},
		{"10/99999999999999999999s", `limit "10/99999999999999999999s": period multiplier "99999999999999999999" is not an integer in [1, 1048576]`},
		{"10/-1s", `limit "10/-1s": unknown unit "-1s"` + units},
		{"3000000000/second", `limit "3000000000/second": count 3000000000 out of range [1, 2147483647]`},
		{"2147483648/day", `limit "2147483648/day": count 2147483648 out of range [1, 2147483647]`},
		{"2000000000/second", `limit "2000000000/second": count 2000000000 per 1s is more than one per nanosecond`},
		{"1/106751d", `limit "1/106751d": burst 1 at 1 per 2562024h0m0s takes longer than 320255h58m24.606846976s to refill`},
		// Multipliers whose period does not fit in an int64 once wrapped
		// around to valid-looking periods ("1/213504d" read as 1 per 25m26s).
		{"1/106752d", `limit "1/106752d": period "106752d" is too long`},
		{"1/213504d", `limit "1/213504d": period "213504d" is too long`},
		{"1000/640512 days", `limit "1000/640512 days": period "640512 days" is too long`},
		{"1/1048576d", `limit "1/1048576d": period "1048576d" is too long`},
		{"10/second/extra", `limit "10/second/extra": unknown unit "second/extra"` + units},
		{"10//second", `limit "10//second": unknown unit "/second"` + units},
	}
	for _, tt := range tests {
		got, err := ParseLimit(tt.in)
		if err == nil {
			t.Errorf("ParseLimit(%q) = %+v, want error %q", tt.in, got, tt.want)
			continue
		}
		if err.Error() != tt.want {
			t.Errorf("ParseLimit(%q) error:\n got %q\nwant %q", tt.in, err.Error(), tt.want)
		}
		if got != (Limit{}) {
			t.Errorf("ParseLimit(%q) = %+v with an error, want the zero Limit", tt.in, got)
		}
	}
}

func TestLimitStringRoundTrip(t *testing.T) {
	tests := []struct {
		l    Limit
		want string
	}{
		{Limit{Count: 10, Period: time.Second}, "10/second"},
		{Limit{Count: 30, Period: time.Minute}, "30/minute"},
		{Limit{Count: 500, Period: time.Hour}, "500/hour"},
		{Limit{Count: 1000, Period: day}, "1000/day"},
	}
	for _, tt := range tests {
		if got := tt.l.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.l, got, tt.want)
		}
		back, err := ParseLimit(tt.l.String())
		if err != nil {
			t.Errorf("ParseLimit(%q): unexpected error %v", tt.l.String(), err)
			continue
		}
		if back != tt.l {
			t.Errorf("ParseLimit(%q) = %+v, want %+v", tt.l.String(), back, tt.l)
		}
	}
	// Periods with no unit name print as a Duration, which is not a limit
	// ParseLimit reads back.
	if got, want := (Limit{Count: 100, Period: 5 * time.Minute}).String(), "100/5m"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := (Limit{Count: 1, Period: time.Second, Burst: 5}).String(), "1/second burst 5"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestParseAlgorithm(t *testing.T) {
	tests := []struct {
		in   string
		want Algorithm
	}{
		{"fixed_window", FixedWindow},
		{"sliding_window", SlidingWindow},
		{"token_bucket", TokenBucket},
		{"gcra", GCRA},
	}
	for _, tt := range tests {
		got, err := ParseAlgorithm(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("ParseAlgorithm(%q) = %v, %v; want %v, nil", tt.in, got, err, tt.want)
		}
		if got.String() != tt.in {
			t.Errorf("%v.String() = %q, want %q", got, got.String(), tt.in)
		}
	}
	_, err := ParseAlgorithm("leaky_bucket")
	want := `unknown algorithm "leaky_bucket" (want fixed_window, sliding_window, token_bucket or gcra)`
	if err == nil || err.Error() != want {
		t.Errorf("ParseAlgorithm(%q) error = %v, want %q", "leaky_bucket", err, want)
	}
	if got := Algorithm(9).String(); got != "algorithm(9)" {
		t.Errorf("Algorithm(9).String() = %q, want %q", got, "algorithm(9)")
	}
}
