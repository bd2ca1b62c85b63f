package core

import (
	"encoding/json"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// Canonical header names, as net/http stores them.
const (
	hdrPolicy     = "Ratelimit-Policy"
	hdrRateLimit  = "Ratelimit"
	hdrLimit      = "X-Ratelimit-Limit"
	hdrRemaining  = "X-Ratelimit-Remaining"
	hdrReset      = "X-Ratelimit-Reset"
	hdrRetryAfter = "Retry-After"
	hdrType       = "Content-Type"
	hdrLength     = "Content-Length"
)

var (
	jsonType          = []string{"application/json"}
	unavailableBody   = []byte(`{"detail": "Rate limiter unavailable"}`)
	unavailableLength = []string{strconv.Itoa(len(unavailableBody))}
	oneSecond         = []string{"1"}
)

// prepare renders what never changes for a rule: the start of each limit's
// item in the draft RateLimit header (its name and ";r="), the RateLimit-Policy and X-RateLimit-Limit values and
// the 429 body.
func (r *Rule) prepare() {
	r.rateItems = r.rateItems[:0]
	r.limitValue = r.limitValue[:0]
	var windows [store.MaxLimits]time.Duration
	for i, l := range r.Policy.Limits {
		item := `"` + limitName(r.Name, r.Policy.Limits, i) + `";r=`
		if i > 0 {
			item = ", " + item
		}
		r.rateItems = append(r.rateItems, item)
		r.limitValue = append(r.limitValue, strconv.FormatInt(l.Count, 10))
		windows[i&(store.MaxLimits-1)] = l.Period // a calendar limit's nominal length
	}
	r.policyValue = r.renderPolicy(&windows)
	r.calendar = nil
	if r.Policy.Calendar() {
		r.calendar = new(calendarPolicy)
	}
	msg, _ := json.Marshal("Rate limit exceeded for '" + r.Name + "' requests")
	r.body = append(append([]byte(`{"detail": `), msg...), '}')
	r.bodyLength = []string{strconv.Itoa(len(r.body))}[:1:1]
}

// renderPolicy renders the RateLimit-Policy value of r, windows[i] being
// the window of limit i.
func (r *Rule) renderPolicy(windows *[store.MaxLimits]time.Duration) []string {
	var b []byte
	for i, l := range r.Policy.Limits {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = append(b, '"')
		b = append(b, limitName(r.Name, r.Policy.Limits, i)...)
		b = append(b, `";q=`...)
		b = strconv.AppendInt(b, l.Count, 10)
		b = append(b, ";w="...)
		b = strconv.AppendInt(b, ceilSeconds(windows[i&(store.MaxLimits-1)]), 10)
	}
	// Shared slices must never be appended to in place: cap = len.
	return []string{string(b)}[:1:1]
}

// calendarPolicy keeps the RateLimit-Policy value of a calendar rule for
// the periods its policy last counted in: w is the length of each
// limit's period, 82800 for a day of 23 hours, 2678400 for a month of 31
// days.
type calendarPolicy struct{ v atomic.Pointer[calendarValue] }

// calendarValue is a calendar rule's RateLimit-Policy value while its
// limits count in the periods starting at starts.
type calendarValue struct {
	starts [store.MaxLimits]int64
	value  []string
}

// policyHeader returns the RateLimit-Policy value of r's responses: its
// prepared one, or for a calendar rule the one of the periods its policy
// counted in last (store.Policy.LastPeriods), rendered once per period;
// before any decision, the nominal lengths (a day of 86400 s, a month of
// 30 days, a year of 365).
func (r *Rule) policyHeader() []string {
	if r.calendar == nil {
		return r.policyValue
	}
	return r.calendarPolicyHeader()
}

// calendarPolicyHeader is policyHeader for a calendar rule; policyHeader,
// the nil check, inlines.
func (r *Rule) calendarPolicyHeader() []string {
	var (
		ps     [store.MaxLimits]algo.Periods
		starts [store.MaxLimits]int64
	)
	for i := range r.Policy.Limits {
		j := i & (store.MaxLimits - 1)
		ps[j], _ = r.Policy.LastPeriods(i)
		starts[j] = ps[j].Start
	}
	if v := r.calendar.v.Load(); v != nil && v.starts == starts {
		return v.value
	}
	var windows [store.MaxLimits]time.Duration
	for i, l := range r.Policy.Limits {
		j := i & (store.MaxLimits - 1)
		windows[j] = l.Period // none counted yet: the nominal length
		if ps[j].End > ps[j].Start {
			windows[j] = time.Duration(ps[j].End - ps[j].Start)
		}
	}
	v := &calendarValue{starts: starts, value: r.renderPolicy(&windows)}
	r.calendar.v.Store(v)
	return v.value
}

// limitName is the name of limits[i] of the rule named rule in the draft
// RateLimit-Policy and RateLimit headers, whose list items are told apart
// by name: the rule's name when it has one limit ("search"), and
// "<rule>-<window>" when it has several, the window in the largest unit
// that divides it exactly ("api-1s", "api-90s", "api-5m", "api-1h",
// "api-2d"), or the calendar period ("llm-day", "llm-month",
// "llm-year"). The limits of one rule have distinct periods, so their
// names are distinct.
func limitName(rule string, limits []algo.Limit, i int) string {
	if len(limits) == 1 {
		return rule
	}
	if c := limits[i].Calendar; c != 0 {
		return rule + "-" + c.String() // "llm-day", "llm-month", "llm-year"
	}
	return string(appendWindow(append([]byte(rule), '-'), limits[i].Period))
}

// windowUnits are the units of a window's name, largest first.
var windowUnits = [...]struct {
	d      time.Duration
	suffix string
}{
	{24 * time.Hour, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"},
	{time.Millisecond, "ms"}, {time.Microsecond, "us"}, {time.Nanosecond, "ns"},
}

// appendWindow appends d as a count of the largest unit that divides it
// exactly: 1s, 90s, 5m, 1h, 2d. Distinct positive durations get distinct
// names.
func appendWindow(b []byte, d time.Duration) []byte {
	for _, u := range windowUnits {
		if d%u.d == 0 {
			return append(strconv.AppendInt(b, int64(d/u.d), 10), u.suffix...)
		}
	}
	return b // unreachable: every duration is a whole number of ns
}

// ceilSeconds rounds d up to whole seconds.
func ceilSeconds(d time.Duration) int64 {
	s := int64(d / time.Second)
	if d%time.Second > 0 {
		s++
	}
	return s
}

// retryAfterSeconds is the Retry-After value for a wait d: whole seconds,
// rounded up, at least 1, so a client that waits that long is never
// early.
func retryAfterSeconds(d time.Duration) int64 { return max(ceilSeconds(d), 1) }

// appendRateLimit appends the RateLimit header value: one item per limit,
// each its prepared start (Rule.rateItems: the limit's name and ";r="),
// the units remaining, ";t=" and the seconds until the limit resets.
// A request counted under stacked rules (RuleSpec.Stack) lists every
// rule's items, in order, each rule's from its entry in d.stack.
func (d *Decision) appendRateLimit(b []byte) []byte {
	items, ls := d.Rule.rateItems, &d.Result.Limits
	var more []stackRecord // the rules after items'
	if d.stack != nil {
		more = d.stack.entries()
		items, ls, more = more[0].rule.rateItems, &more[0].limits, more[1:]
	}
	for {
		for i, item := range items {
			l := &ls[i&(store.MaxLimits-1)] // a policy has at most MaxLimits limits
			b = append(b, item...)
			b = appendDecimal(b, l.Remaining)
			b = append(b, ";t="...)
			b = appendDecimal(b, ceilSeconds(l.ResetAfter))
		}
		if len(more) == 0 {
			return b
		}
		b = append(b, ", "...)
		items, ls, more = more[0].rule.rateItems, &more[0].limits, more[1:]
	}
}

// appendRateLimit indexes Result.Limits by i&(MaxLimits-1): MaxLimits must
// be a power of two (this does not compile otherwise).
const _ uint = -(store.MaxLimits & (store.MaxLimits - 1))

// appendDecimal appends v in decimal, as strconv.AppendInt(b, v, 10) does,
// for a non-negative v four digits at a time, from tables no index can
// fall out of.
func appendDecimal(b []byte, v int64) []byte {
	if v < 0 {
		return strconv.AppendInt(b, v, 10)
	}
	var t [32]byte // 20 digits at most
	i := uint(len(t))
	u := uint64(v)
	for u >= 10000 {
		q := u / 10000
		r := uint32(u - q*10000)
		hi, lo := r/100, r%100
		i -= 4
		t[i&31], t[(i+1)&31] = decimalTens[hi%100], decimalOnes[hi%100]
		t[(i+2)&31], t[(i+3)&31] = decimalTens[lo], decimalOnes[lo]
		u = q
	}
	r := uint32(u) // below 10000
	if r >= 100 {
		lo := r % 100
		i -= 2
		t[i&31], t[(i+1)&31] = decimalTens[lo], decimalOnes[lo]
		r /= 100
	}
	if r >= 10 {
		i -= 2
		t[i&31], t[(i+1)&31] = decimalTens[r%100], decimalOnes[r%100]
	} else {
		i--
		t[i&31] = byte('0' + r)
	}
	return append(b, t[i&31:]...)
}

// decimalTens and decimalOnes hold the two digits of each number below
// 100.
var decimalTens, decimalOnes = func() (tens, ones [100]byte) {
	for i := range 100 {
		tens[i], ones[i] = byte('0'+i/10), byte('0'+i%10)
	}
	return tens, ones
}()

// decidingIndex is the index of the limit Result.Limit refers to.
func (d *Decision) decidingIndex() int {
	for i, l := range d.Rule.Policy.Limits {
		if l.Period == d.Result.Limit.Period {
			return i
		}
	}
	return 0
}

// smallValue holds a header value of up to 32 bytes and the one-element
// slice http.Header keeps it in: one allocation of the 48-byte size class.
type smallValue struct {
	v [1]string
	b [32]byte
}

// largeValue is a smallValue for up to 112 bytes (the 128-byte size class):
// the RateLimit value of a rule with several limits, such as
// "api-1s";r=9;t=1, "api-1m";r=99;t=60, "api-1h";r=999;t=3600, "api-1d";r=9999;t=86400.
type largeValue struct {
	v [1]string
	b [112]byte
}

// hugeValue is a smallValue for up to 240 bytes (the 256-byte size
// class): the RateLimit value of a request counted under stacked rules.
type hugeValue struct {
	v [1]string
	b [240]byte
}

// headerValue returns b as a header value in memory of its own: a slice of
// capacity 1, so a handler that Adds to the header appends to a copy. A
// value of up to 240 bytes costs one allocation.
func headerValue(b []byte) []string {
	switch {
	case len(b) <= len(smallValue{}.b):
		v := new(smallValue)
		return fillValue(&v.v, v.b[:], b)
	case len(b) <= len(largeValue{}.b):
		v := new(largeValue)
		return fillValue(&v.v, v.b[:], b)
	case len(b) <= len(hugeValue{}.b):
		v := new(hugeValue)
		return fillValue(&v.v, v.b[:], b)
	}
	return []string{string(b)} // long rule names and counts: rare
}

// fillValue copies b into mem and makes v[0] the string over it.
func fillValue(v *[1]string, mem, b []byte) []string {
	n := copy(mem, b)
	v[0] = unsafe.String(&mem[0], n)
	return v[:1:1]
}

// hasHeaders reports whether rate-limit headers go on the response.
func (d *Decision) hasHeaders() bool {
	return d.Rule != nil && d.Err == nil && d.style != HeadersNone
}

// SetHeaders writes the rate-limit headers of d into h (net/http, Gin and
// Echo responses): nothing for a request that was not counted. Values that
// never change (RateLimit-Policy, X-RateLimit-Limit) are slices shared by
// every response, so an allowed request costs one allocation (two in the
// legacy style). A handler may replace or Add to any of these slices
// (their capacity equals their length) but must not assign to their
// elements in place.
func (d *Decision) SetHeaders(h http.Header) {
	if !d.hasHeaders() {
		return
	}
	if d.style == HeadersLegacy {
		i := d.decidingIndex()
		h[hdrLimit] = d.Rule.limitValue[i : i+1 : i+1]
		var tmp [20]byte
		h[hdrRemaining] = headerValue(appendDecimal(tmp[:0], d.Result.Remaining))
		h[hdrReset] = headerValue(appendDecimal(tmp[:0], ceilSeconds(d.Result.ResetAfter)))
		return
	}
	if d.stack != nil {
		d.setStackHeaders(h)
		return
	}
	var tmp [len(largeValue{}.b)]byte
	h[hdrPolicy] = d.Rule.policyHeader()
	h[hdrRateLimit] = headerValue(d.appendRateLimit(tmp[:0]))
}

// Header returns the i-th header (counting from 0) that d puts on its
// response, and ok false past the last one. The order is fixed: the
// rate-limit headers, then, when denied, Retry-After (not for Banned),
// Content-Type and Content-Length; a request that was not counted has no
// rate-limit headers. Names are canonical (as net/http and fasthttp store
// them). A value is either appended to buf[:0] or, when it never changes
// (RateLimit-Policy, X-RateLimit-Limit, Content-Type), points into memory
// shared by every response: read it, copy it, never write to it.
//
// It serves adapters whose framework has no http.Header (Fiber); with a
// buffer on the caller's stack it allocates nothing:
//
//	var buf [128]byte
//	for i := 0; ; i++ {
//		name, value, ok := d.Header(i, buf[:0])
//		if !ok {
//			break
//		}
//		// set name: value
//	}
func (d *Decision) Header(i int, buf []byte) (name string, value []byte, ok bool) {
	n := d.limitHeaders()
	if i < n {
		return d.LimitHeader(i, buf)
	}
	if d.Allowed {
		return "", nil, false
	}
	switch i - n {
	case 0:
		return hdrType, readOnly(jsonType[0]), true
	case 1:
		return hdrLength, strconv.AppendInt(buf[:0], int64(len(d.Body())), 10), true
	}
	return "", nil, false
}

// readOnly returns the bytes of s without copying them. They must not be
// written to.
func readOnly(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// unavailable reports whether d decided nothing it can explain: the store
// failed (fail-closed), or d is a zero Decision. Such a denial is a 503.
func (d *Decision) unavailable() bool { return d.Err != nil || d.Rule == nil }

// RetryAfterSeconds is the Retry-After value of a refused d's response
// (SetLimitHeaders writes it): whole seconds of Result.RetryAfter, rounded
// up, at least 1, so a client that waits that long is never early; 1 when
// the store failed. It is 0 for an allowed d and for a banned one
// (Banned), whose 403 has no Retry-After: waiting lifts no ban. A denied
// handler that writes the wait into its body takes it from here.
func (d *Decision) RetryAfterSeconds() int64 {
	switch {
	case d.Allowed || d.Banned:
		return 0
	case d.unavailable():
		return 1
	}
	return retryAfterSeconds(d.Result.RetryAfter)
}

// Status is the HTTP status of a denied request: 429 when over the limit
// (or under a penalty), 503 when the store failed and the policy is
// fail-closed, 403 from a banned network (Banned). 200 when allowed.
func (d *Decision) Status() int {
	switch {
	case d.Allowed:
		return http.StatusOK
	case d.Banned:
		return http.StatusForbidden
	case d.unavailable():
		return http.StatusServiceUnavailable
	}
	return http.StatusTooManyRequests
}

// Body is the JSON body of a denied request:
// {"detail": "Rate limit exceeded for '<rule>' requests"}, or
// {"detail": "Rate limiter unavailable"} when the store failed closed, or
// {"detail": "Forbidden"} from a banned network.
func (d *Decision) Body() []byte {
	if d.Banned {
		return forbiddenBody
	}
	if d.unavailable() {
		return unavailableBody
	}
	return d.Rule.body
}

// WriteDenied writes the whole response of a denied request to w: the
// rate-limit headers, Retry-After, Content-Type, Content-Length, the status
// and the body. Every adapter that has an http.ResponseWriter uses it, so
// they all answer byte for byte the same.
func (d *Decision) WriteDenied(w http.ResponseWriter) {
	h := w.Header()
	d.SetLimitHeaders(h)
	switch {
	case d.Banned:
		h[hdrLength] = forbiddenLength
	case d.unavailable():
		h[hdrLength] = unavailableLength
	default:
		h[hdrLength] = d.Rule.bodyLength
	}
	h[hdrType] = jsonType
	w.WriteHeader(d.Status())
	_, _ = w.Write(d.Body())
}
