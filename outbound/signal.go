package outbound

import (
	"math"
	"net/http"
	"strings"
	"time"
)

// Signal is what an upstream said about its limit in one response (any
// status). The zero Signal says nothing.
type Signal struct {
	// RetryAfter is from Retry-After (seconds, or an HTTP-date measured
	// from the response's Date); 0: none. At most MaxHold.
	RetryAfter time.Duration
	// Remaining is the units left in the current window, when
	// HasRemaining; never negative.
	Remaining    int64
	HasRemaining bool
	// Reset is the time until that window resets; 0: unknown. At most
	// MaxHold.
	Reset time.Duration
}

// ReadSignal reads a Signal from response headers given as a getter: each
// name is asked in its canonical form ("Ratelimit-Remaining") and, when
// that gives nothing, in lower case ("ratelimit-remaining"), so that
// http.Header.Get, a plain map of either form, and gRPC metadata all work.
// now is the local time the response arrived.
//
// It reads every family of rate-limit headers in use:
//
//   - Retry-After: seconds, or an HTTP-date measured from the response's
//     Date header when it has a valid one (so that a skewed local clock
//     does not matter), else from now; on any status.
//   - RateLimit as the IETF httpapi drafts (08 and later) write it, a
//     structured-field list of items `"name";r=R;t=T` (R units remaining,
//     T seconds to the reset; rlkit's own servers write it so), and as
//     draft 07 writes it, a dictionary `limit=L, remaining=R, reset=T`.
//     RateLimit-Policy (`"name";q=Q;w=W`) says what the quota is, not how
//     much is left, so it changes nothing here.
//   - RateLimit-Remaining and RateLimit-Reset (the drafts up to 06).
//   - X-RateLimit-Remaining and X-RateLimit-Reset (GitHub, rlkit's legacy
//     style and most APIs).
//
// A reset is a number of seconds (a fraction allowed) to wait; in
// RateLimit-Reset and X-RateLimit-Reset a number of at least 10^9 is a
// Unix time in seconds, and of at least 10^12 one in milliseconds,
// measured like an HTTP-date of Retry-After (a time already past is an
// unknown reset).
//
// When several families or several items say how much remains, the most
// restrictive wins: the lowest remaining count, and among equal counts the
// latest reset. Values that do not parse (or are negative) are ignored, as
// if absent. Durations are capped at MaxHold and counts at math.MaxInt64.
// ReadSignal never panics, whatever the headers hold.
func ReadSignal(get func(name string) string, now time.Time) Signal {
	h := headers{get: get}
	var s Signal
	if d, ok := retryAfter(h.get, now); ok {
		s.RetryAfter = d
	}
	var best remaining
	readRateLimit(h.value("Ratelimit", "ratelimit"), &best)
	best.offer(parseCount(h.value("Ratelimit-Remaining", "ratelimit-remaining")), h.reset("Ratelimit-Reset", "ratelimit-reset", now))
	best.offer(parseCount(h.value("X-Ratelimit-Remaining", "x-ratelimit-remaining")), h.reset("X-Ratelimit-Reset", "x-ratelimit-reset", now))
	if best.ok {
		s.Remaining, s.HasRemaining, s.Reset = best.n, true, best.reset
	}
	return s
}

// headers asks a getter for a name in canonical form, then in lower case.
type headers struct{ get func(string) string }

// value asks for the canonical name, then (when that gives nothing) for
// lower, the same in lower case.
func (h headers) value(name, lower string) string {
	if v := h.get(name); v != "" {
		return v
	}
	return h.get(lower)
}

// date returns the response's Date when it has a valid one, else now.
func (h headers) date(now time.Time) time.Time {
	if v := h.value("Date", "date"); v != "" {
		if date, err := http.ParseTime(v); err == nil {
			return date
		}
	}
	return now
}

// reset reads the reset header name: delta seconds, or a Unix time.
func (h headers) reset(name, lower string, now time.Time) time.Duration {
	v := strings.TrimSpace(h.value(name, lower))
	secs, frac, ok := parseNumber(v)
	if !ok {
		return 0
	}
	var at time.Time
	switch {
	case secs >= 1e12:
		at = time.UnixMilli(min(secs, math.MaxInt64/int64(time.Millisecond)))
	case secs >= 1e9:
		at = time.Unix(secs, frac)
	default:
		return seconds(secs, frac)
	}
	now = h.date(now)
	return min(max(at.Sub(now), 0), MaxHold)
}

// remaining is the most restrictive remaining count seen so far.
type remaining struct {
	n     int64
	reset time.Duration
	ok    bool
}

// offer considers a count n (negative: none) with its reset.
func (r *remaining) offer(n int64, reset time.Duration) {
	if n < 0 {
		return
	}
	if !r.ok || n < r.n || (n == r.n && reset > r.reset) {
		r.n, r.reset, r.ok = n, reset, true
	}
}

// readRateLimit reads a RateLimit header, in either draft's form, into r.
func readRateLimit(v string, r *remaining) {
	dictN, dictReset := int64(-1), time.Duration(0)
	for len(v) > 0 {
		var member string
		member, v = nextMember(v)
		member = strings.TrimSpace(member)
		if member == "" {
			continue
		}
		params := ""
		if member[0] == '"' {
			params = member[quotedEnd(member):]
		} else {
			i := strings.IndexAny(member, ";=")
			if i >= 0 && member[i] == '=' { // draft 07: key=value[;params]
				key := strings.TrimSpace(member[:i])
				val, _, _ := strings.Cut(member[i+1:], ";")
				switch strings.ToLower(key) {
				case "remaining":
					dictN = parseCount(val)
				case "reset":
					if secs, frac, ok := parseNumber(strings.TrimSpace(val)); ok {
						dictReset = seconds(secs, frac)
					}
				}
				continue
			}
			if i >= 0 {
				params = member[i:]
			}
		}
		n, reset := int64(-1), time.Duration(0)
		for params != "" {
			var p string
			p, params, _ = strings.Cut(params, ";")
			key, val, ok := strings.Cut(p, "=")
			if !ok {
				continue
			}
			switch strings.TrimSpace(key) {
			case "r":
				n = parseCount(val)
			case "t":
				if secs, frac, ok := parseNumber(strings.TrimSpace(val)); ok {
					reset = seconds(secs, frac)
				}
			}
		}
		r.offer(n, reset)
	}
	r.offer(dictN, dictReset)
}

// nextMember splits off the first member of a list at a comma outside a
// quoted string.
func nextMember(v string) (member, rest string) {
	quoted := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '\\' && quoted:
			i++
		case c == '"':
			quoted = !quoted
		case c == ',' && !quoted:
			return v[:i], v[i+1:]
		}
	}
	return v, ""
}

// quotedEnd returns the index just past the quoted string m starts with
// (len(m) when it is not closed).
func quotedEnd(m string) int {
	for i := 1; i < len(m); i++ {
		switch m[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(m)
}

// parseCount parses a count: decimal digits, surrounding spaces allowed;
// one too large for an int64 is math.MaxInt64. -1 when v is not a count.
func parseCount(v string) int64 {
	n, frac, ok := parseNumber(strings.TrimSpace(v))
	if !ok || frac != 0 {
		return -1
	}
	return n
}

// parseNumber parses a non-negative decimal number "D[.F]": its whole part
// (capped at math.MaxInt64) and its fraction in nanoseconds of a unit.
func parseNumber(v string) (whole int64, frac int64, ok bool) {
	i := 0
	for ; i < len(v) && v[i] >= '0' && v[i] <= '9'; i++ {
		d := int64(v[i] - '0')
		if whole > (math.MaxInt64-d)/10 {
			whole = math.MaxInt64
		} else if whole != math.MaxInt64 {
			whole = whole*10 + d
		}
	}
	if i == 0 {
		return 0, 0, false
	}
	if i < len(v) && v[i] == '.' {
		j, scale := i+1, int64(1e8)
		for ; j < len(v) && v[j] >= '0' && v[j] <= '9'; j++ {
			frac += int64(v[j]-'0') * scale
			scale /= 10
		}
		if j == i+1 {
			return 0, 0, false
		}
		i = j
	}
	return whole, frac, i == len(v)
}

// seconds is secs seconds and frac nanoseconds, at most MaxHold.
func seconds(secs, frac int64) time.Duration {
	if secs >= int64(MaxHold/time.Second) {
		return MaxHold
	}
	return min(time.Duration(secs)*time.Second+time.Duration(frac), MaxHold)
}

// retryAfter parses Retry-After: a number of seconds, or an HTTP-date
// measured from the Date header when it has a valid one, else from now;
// at most MaxHold. A date in the past is 0 (and valid). It returns false
// when the header is missing or invalid.
func retryAfter(get func(string) string, now time.Time) (time.Duration, bool) {
	h := headers{get: get}
	v := strings.TrimSpace(h.value("Retry-After", "retry-after"))
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs := parseCount(v)
		if secs < 0 {
			return 0, false
		}
		return seconds(secs, 0), true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	now = h.date(now)
	return min(max(at.Sub(now), 0), MaxHold), true
}
