package core

import (
	"net/http"
	"strconv"
)

// What a response of a decision carries whoever writes its body: the
// adapters' default denied response (WriteDenied, Header) and an
// application's own denied handler (each adapter's WithDeniedHandler) get
// the same rate-limit headers and Retry-After from here.

// SetLimitHeaders writes into h the headers every response of d carries,
// whoever writes its body: the rate-limit headers (as SetHeaders writes
// them) and, when d is not Allowed nor Banned, Retry-After (whole seconds, rounded
// up, at least 1; 1 when the store failed). It writes no Content-Type,
// Content-Length or status: an adapter calls it before a denied handler
// of the application's, which writes those and the body, and may change
// or remove any of these headers. WriteDenied uses it, so a custom body
// keeps the headers of the default one. For an allowed d it is SetHeaders.
func (d *Decision) SetLimitHeaders(h http.Header) {
	d.SetHeaders(h)
	if d.Allowed || d.Banned {
		return // waiting lifts no ban: no Retry-After
	}
	if s := d.RetryAfterSeconds(); s == 1 {
		h[hdrRetryAfter] = oneSecond // shared, capacity 1: see SetHeaders
	} else {
		h[hdrRetryAfter] = []string{strconv.FormatInt(s, 10)}
	}
}

// LimitHeader returns the i-th header (counting from 0) that
// SetLimitHeaders writes, in the order Header gives them (the rate-limit
// headers, then, when denied but not Banned, Retry-After), and ok false past the last
// one. Values are as Header's: appended to buf[:0] or shared and
// read-only. It serves adapters whose framework has no http.Header (Fiber)
// before a denied handler of the application's; Header gives these and
// then the default body's Content-Type and Content-Length.
func (d *Decision) LimitHeader(i int, buf []byte) (name string, value []byte, ok bool) {
	if d.hasHeaders() {
		if d.style == HeadersLegacy {
			switch i {
			case 0:
				return hdrLimit, readOnly(d.Rule.limitValue[d.decidingIndex()]), true
			case 1:
				return hdrRemaining, appendDecimal(buf[:0], d.Result.Remaining), true
			case 2:
				return hdrReset, appendDecimal(buf[:0], ceilSeconds(d.Result.ResetAfter)), true
			}
		} else {
			switch i {
			case 0:
				if d.stack != nil {
					return hdrPolicy, readOnly(d.stack.policyHeader()[0]), true
				}
				return hdrPolicy, readOnly(d.Rule.policyHeader()[0]), true
			case 1:
				return hdrRateLimit, d.appendRateLimit(buf[:0]), true
			}
		}
	}
	if !d.Allowed && !d.Banned && i == d.rateHeaders() {
		return hdrRetryAfter, strconv.AppendInt(buf[:0], d.RetryAfterSeconds(), 10), true
	}
	return "", nil, false
}

// rateHeaders is the number of rate-limit headers on d's response.
func (d *Decision) rateHeaders() int {
	switch {
	case !d.hasHeaders():
		return 0
	case d.style == HeadersLegacy:
		return 3
	}
	return 2
}

// limitHeaders is the number of headers LimitHeader gives.
func (d *Decision) limitHeaders() int {
	if d.Allowed || d.Banned {
		return d.rateHeaders()
	}
	return d.rateHeaders() + 1
}
