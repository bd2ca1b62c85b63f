package outbound

import "time"

// Signal is what an upstream said about its limit in one response (any
// status).
type Signal struct {
	// RetryAfter is from Retry-After (seconds, or an HTTP-date measured
	// from the response's Date); 0: none.
	RetryAfter time.Duration
	// Remaining is the units left in the current window, when
	// HasRemaining.
	Remaining    int64
	HasRemaining bool
	// Reset is the time until that window resets; 0: unknown.
	Reset time.Duration
}

// ReadSignal reads a Signal from response headers given as a getter
// (canonical or lower-case names both work: http.Header.Get, or a lookup
// in gRPC metadata). TODO: filled in after the API commit.
func ReadSignal(get func(name string) string, now time.Time) Signal {
	return Signal{}
}

// retryAfter parses Retry-After: seconds, or an HTTP-date measured from
// the Date header when valid, else from now; at most MaxHold. A date in the
// past is 0 (and valid). false when missing or invalid.
func retryAfter(get func(string) string, now time.Time) (time.Duration, bool) {
	return 0, false
}
