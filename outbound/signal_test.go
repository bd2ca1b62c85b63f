package outbound

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestReadSignal(t *testing.T) {
	now := t0
	unix := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).Unix(), 10) }
	unixMilli := func(d time.Duration) string { return strconv.FormatInt(now.Add(d).UnixMilli(), 10) }
	date := func(d time.Duration) string { return now.Add(d).Format(http.TimeFormat) }
	rem := func(n int64, reset time.Duration) Signal {
		return Signal{Remaining: n, HasRemaining: true, Reset: reset}
	}
	for _, tc := range []struct {
		name string
		h    map[string]string
		want Signal
	}{
		{"none", nil, Signal{}},
		{"x-ratelimit delta", map[string]string{"X-Ratelimit-Remaining": "3", "X-Ratelimit-Reset": "2"}, rem(3, 2*time.Second)},
		{"x-ratelimit unix seconds", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": unix(30 * time.Second)}, rem(0, 30*time.Second)},
		{"x-ratelimit unix seconds with a fraction", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": unix(2*time.Second) + ".5"}, rem(0, 2500*time.Millisecond)},
		{"x-ratelimit unix ms", map[string]string{"X-Ratelimit-Remaining": "7", "X-Ratelimit-Reset": unixMilli(1500 * time.Millisecond)}, rem(7, 1500*time.Millisecond)},
		{"x-ratelimit unix vs Date", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": unix(time.Hour + 20*time.Second), "Date": date(time.Hour)}, rem(0, 20*time.Second)},
		{"x-ratelimit unix past", map[string]string{"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": unix(-time.Minute)}, rem(0, 0)},
		{"x-ratelimit remaining only", map[string]string{"X-Ratelimit-Remaining": "9"}, rem(9, 0)},
		{"x-ratelimit fractional reset", map[string]string{"X-Ratelimit-Remaining": "1", "X-Ratelimit-Reset": "0.25"}, rem(1, 250*time.Millisecond)},
		{"ratelimit-remaining/-reset", map[string]string{"Ratelimit-Remaining": "4", "Ratelimit-Reset": "9"}, rem(4, 9*time.Second)},
		{"ietf structured (rlkit draft)", map[string]string{"Ratelimit": `"default";r=0;t=5`, "Ratelimit-Policy": `"default";q=10;w=5`}, rem(0, 5*time.Second)},
		{"ietf structured, several items", map[string]string{"Ratelimit": `"per-minute";r=10;t=60, "per-second";r=2;t=1`}, rem(2, time.Second)},
		{"ietf structured, equal counts: the later reset", map[string]string{"Ratelimit": `"a";r=0;t=1, "b";r=0;t=60`}, rem(0, time.Minute)},
		{"ietf structured, token name and spaces", map[string]string{"Ratelimit": `default ; r=3 ; t=4`}, rem(3, 4*time.Second)},
		{"ietf structured, quoted comma", map[string]string{"Ratelimit": `"a,b;r=0";r=3;t=2`}, rem(3, 2*time.Second)},
		{"ietf structured, parameters inside the name", map[string]string{"Ratelimit": `"a;t=9;b";r=3`}, rem(3, 0)},
		{"ietf draft-07 dictionary", map[string]string{"Ratelimit": `limit=10, remaining=4, reset=7`}, rem(4, 7*time.Second)},
		{"families disagree: the most restrictive", map[string]string{"Ratelimit": `"d";r=1;t=3`, "X-Ratelimit-Remaining": "5", "X-Ratelimit-Reset": "3"}, rem(1, 3*time.Second)},
		{"negative and junk ignored", map[string]string{"X-Ratelimit-Remaining": "-1", "Ratelimit-Remaining": "ten", "Ratelimit": `"a";r=-2;t=1`}, Signal{}},
		{"huge count capped", map[string]string{"X-Ratelimit-Remaining": "99999999999999999999999", "X-Ratelimit-Reset": "99999999"}, rem(math.MaxInt64, MaxHold)},
		{"retry-after seconds", map[string]string{"Retry-After": "120"}, Signal{RetryAfter: 2 * time.Minute}},
		{"retry-after huge", map[string]string{"Retry-After": "99999999999999999999"}, Signal{RetryAfter: MaxHold}},
		{"retry-after date vs Date", map[string]string{"Retry-After": date(time.Hour + 5*time.Second), "Date": date(time.Hour)}, Signal{RetryAfter: 5 * time.Second}},
		{"retry-after date vs now", map[string]string{"Retry-After": date(7 * time.Second)}, Signal{RetryAfter: 7 * time.Second}},
		{"retry-after date past", map[string]string{"Retry-After": date(-time.Hour)}, Signal{}},
		{"retry-after junk", map[string]string{"Retry-After": "soon"}, Signal{}},
		{"retry-after with remaining", map[string]string{"Retry-After": "3", "X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": "3"}, Signal{RetryAfter: 3 * time.Second, HasRemaining: true, Reset: 3 * time.Second}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := http.Header{}
			lower := map[string]string{}
			for k, v := range tc.h {
				h.Set(k, v)
				lower[strings.ToLower(k)] = v
			}
			if got := ReadSignal(h.Get, now); got != tc.want {
				t.Errorf("http.Header: got %+v, want %+v", got, tc.want)
			}
			// A getter that knows lower-case names only (gRPC metadata).
			if got := ReadSignal(func(k string) string { return lower[k] }, now); got != tc.want {
				t.Errorf("lower-case getter: got %+v, want %+v", got, tc.want)
			}
		})
	}
}

func FuzzReadSignal(f *testing.F) {
	f.Add(`"default";r=0;t=5`, "3", "1700000000", "120", "Mon, 02 Jan 2006 15:04:05 GMT")
	f.Add(`limit=10, remaining=4, reset=7`, "-1", "1700000000000", "Mon, 02 Jan 2006 15:04:05 GMT", "")
	f.Add(`"a\"b,";r=99999999999999999999;t=1.5, x;r`, "0", "0.000000001", "9999999999999999999999", "junk")
	f.Fuzz(func(t *testing.T, rl, remaining, reset, retry, date string) {
		h := map[string]string{
			"Ratelimit": rl, "Ratelimit-Remaining": remaining, "Ratelimit-Reset": reset,
			"X-Ratelimit-Remaining": remaining, "X-Ratelimit-Reset": reset,
			"Retry-After": retry, "Date": date,
		}
		s := ReadSignal(func(k string) string { return h[k] }, t0)
		if s.RetryAfter < 0 || s.RetryAfter > MaxHold || s.Reset < 0 || s.Reset > MaxHold || s.Remaining < 0 {
			t.Fatalf("out of range: %+v", s)
		}
		if !s.HasRemaining && (s.Remaining != 0 || s.Reset != 0) {
			t.Fatalf("a count without HasRemaining: %+v", s)
		}
	})
}
