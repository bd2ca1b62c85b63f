package core

import (
	"bytes"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// checkHeaders asserts that h holds exactly the headers in want, one value
// each.
func checkHeaders(t *testing.T, name string, h http.Header, want map[string]string) {
	t.Helper()
	for k, v := range want {
		if got := h[k]; len(got) != 1 || got[0] != v {
			t.Errorf("%s: header %s = %q, want [%q]", name, k, got, v)
		}
	}
	for k, v := range h {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: unexpected header %s: %q", name, k, v)
		}
	}
}

// headersConfig has one-limit rules "search" and "slow", a two-limit rule
// "api" and a four-limit rule "tiers".
func headersConfig(t testing.TB) *Config {
	return mustParse(t, yamlLines(
		"rate_limit:",
		"  enabled: true",
		"  rules:",
		"    - name: search",
		"      paths: [/api/search]",
		"      limit: 10/second",
		"    - name: api",
		"      paths: [/api/*]",
		`      limit: ["10/second", "500/hour"]`,
		"    - name: slow",
		"      paths: [/slow]",
		"      limit: 100/5min",
		"    - name: tiers",
		"      paths: [/tiers]",
		`      limit: ["10/second", "100/minute", "1000/hour", "10000/day"]`,
	))
}

func rule(t testing.TB, c *Config, name string) *Rule {
	for _, r := range c.Rules() {
		if r.Name == name {
			return r
		}
	}
	t.Fatalf("no rule %q", name)
	return nil
}

// decisions returns named decisions in every state a response can be in,
// for the given header style.
func decisions(t testing.TB, style HeaderStyle) map[string]Decision {
	c := headersConfig(t)
	search, api, slow, tiers := rule(t, c, "search"), rule(t, c, "api"), rule(t, c, "slow"), rule(t, c, "tiers")
	sec, hour := algo.Limit{Count: 10, Period: time.Second}, algo.Limit{Count: 500, Period: time.Hour}
	d := map[string]Decision{
		"allowed": {Allowed: true, Rule: search, Cost: 1, style: style, Result: store.Result{
			Allowed: true, Limit: sec, Remaining: 9, ResetAfter: 400 * time.Millisecond,
			Limits: [store.MaxLimits]store.LimitState{{Remaining: 9, ResetAfter: 400 * time.Millisecond}},
		}},
		"allowed two limits": {Allowed: true, Rule: api, Cost: 1, style: style, Result: store.Result{
			Allowed: true, Limit: hour, Remaining: 3, ResetAfter: 3599 * time.Second,
			Limits: [store.MaxLimits]store.LimitState{{Remaining: 9, ResetAfter: time.Second}, {Remaining: 3, ResetAfter: 3599 * time.Second}},
		}},
		"allowed 5min": {Allowed: true, Rule: slow, Cost: 1, style: style, Result: store.Result{
			Allowed: true, Limit: algo.Limit{Count: 100, Period: 5 * time.Minute}, Remaining: 0, ResetAfter: 299500 * time.Millisecond,
			Limits: [store.MaxLimits]store.LimitState{{Remaining: 0, ResetAfter: 299500 * time.Millisecond}},
		}},
		"denied": {Allowed: false, Rule: search, Cost: 1, style: style, Result: store.Result{
			Allowed: false, Limit: sec, Remaining: 0, ResetAfter: 1001 * time.Millisecond, RetryAfter: 1001 * time.Millisecond,
			Limits: [store.MaxLimits]store.LimitState{{Remaining: 0, ResetAfter: 1001 * time.Millisecond}},
		}},
		"denied two limits": {Allowed: false, Rule: api, Cost: 1, style: style, Result: store.Result{
			Allowed: false, Limit: hour, Remaining: 0, ResetAfter: 1800 * time.Second, RetryAfter: 1800 * time.Second,
			Limits: [store.MaxLimits]store.LimitState{{Remaining: 4, ResetAfter: 500 * time.Millisecond}, {Remaining: 0, ResetAfter: 1800 * time.Second}},
		}},
		"allowed four limits": {Allowed: true, Rule: tiers, Cost: 1, style: style, Result: store.Result{
			Allowed: true, Limit: sec, Remaining: 9, ResetAfter: 400 * time.Millisecond,
			Limits: [store.MaxLimits]store.LimitState{
				{Remaining: 9, ResetAfter: 400 * time.Millisecond}, {Remaining: 99, ResetAfter: 59 * time.Second},
				{Remaining: 999, ResetAfter: 3599 * time.Second}, {Remaining: 9999, ResetAfter: 86399 * time.Second},
			},
		}},
		"denied four limits": {Allowed: false, Rule: tiers, Cost: 1, style: style, Result: store.Result{
			Allowed: false, Limit: algo.Limit{Count: 1000, Period: time.Hour}, Remaining: 0, ResetAfter: 1800 * time.Second, RetryAfter: 1800 * time.Second,
			Limits: [store.MaxLimits]store.LimitState{
				{Remaining: 4, ResetAfter: 500 * time.Millisecond}, {Remaining: 50, ResetAfter: 30 * time.Second},
				{Remaining: 0, ResetAfter: 1800 * time.Second}, {Remaining: 9000, ResetAfter: 43200 * time.Second},
			},
		}},
		"failed open":   {Allowed: true, Rule: search, Cost: 1, style: style, Err: errStoreDown},
		"failed closed": {Allowed: false, Rule: search, Cost: 1, style: style, Err: errStoreDown},
	}
	return d
}

func TestHeadersAllowed(t *testing.T) {
	tests := []struct {
		style HeaderStyle
		name  string
		want  map[string]string
	}{
		{HeadersDraft, "allowed", map[string]string{
			"Ratelimit-Policy": `"search";q=10;w=1`,
			"Ratelimit":        `"search";r=9;t=1`,
		}},
		// Each limit of a rule with several has a name of its own.
		{HeadersDraft, "allowed two limits", map[string]string{
			"Ratelimit-Policy": `"api-1s";q=10;w=1, "api-1h";q=500;w=3600`,
			"Ratelimit":        `"api-1s";r=9;t=1, "api-1h";r=3;t=3599`,
		}},
		{HeadersDraft, "allowed four limits", map[string]string{
			"Ratelimit-Policy": `"tiers-1s";q=10;w=1, "tiers-1m";q=100;w=60, "tiers-1h";q=1000;w=3600, "tiers-1d";q=10000;w=86400`,
			"Ratelimit":        `"tiers-1s";r=9;t=1, "tiers-1m";r=99;t=59, "tiers-1h";r=999;t=3599, "tiers-1d";r=9999;t=86399`,
		}},
		{HeadersDraft, "allowed 5min", map[string]string{
			"Ratelimit-Policy": `"slow";q=100;w=300`,
			"Ratelimit":        `"slow";r=0;t=300`,
		}},
		{HeadersLegacy, "allowed", map[string]string{
			"X-Ratelimit-Limit":     "10",
			"X-Ratelimit-Remaining": "9",
			"X-Ratelimit-Reset":     "1",
		}},
		{HeadersLegacy, "allowed two limits", map[string]string{
			"X-Ratelimit-Limit":     "500",
			"X-Ratelimit-Remaining": "3",
			"X-Ratelimit-Reset":     "3599",
		}},
		{HeadersLegacy, "allowed four limits", map[string]string{
			"X-Ratelimit-Limit":     "10",
			"X-Ratelimit-Remaining": "9",
			"X-Ratelimit-Reset":     "1",
		}},
		{HeadersLegacy, "allowed 5min", map[string]string{
			"X-Ratelimit-Limit":     "100",
			"X-Ratelimit-Remaining": "0",
			"X-Ratelimit-Reset":     "300",
		}},
		{HeadersNone, "allowed", map[string]string{}},
		{HeadersNone, "allowed two limits", map[string]string{}},
		{HeadersDraft, "failed open", map[string]string{}},
		{HeadersLegacy, "failed open", map[string]string{}},
	}
	for _, tt := range tests {
		d := decisions(t, tt.style)[tt.name]
		name := tt.style.String() + " " + tt.name
		rec := httptest.NewRecorder()
		d.SetHeaders(rec.Header())
		rec.WriteHeader(http.StatusOK)
		checkHeaders(t, name, rec.Result().Header, tt.want)
		if got := d.Status(); got != 200 {
			t.Errorf("%s: Status() = %d, want 200", name, got)
		}
	}
}

func TestHeadersDenied(t *testing.T) {
	tests := []struct {
		style HeaderStyle
		name  string
		want  map[string]string
		body  string
	}{
		{HeadersDraft, "denied", map[string]string{
			"Ratelimit-Policy": `"search";q=10;w=1`,
			"Ratelimit":        `"search";r=0;t=2`,
			"Retry-After":      "2",
		}, `{"detail": "Rate limit exceeded for 'search' requests"}`},
		{HeadersDraft, "denied two limits", map[string]string{
			"Ratelimit-Policy": `"api-1s";q=10;w=1, "api-1h";q=500;w=3600`,
			"Ratelimit":        `"api-1s";r=4;t=1, "api-1h";r=0;t=1800`,
			"Retry-After":      "1800",
		}, `{"detail": "Rate limit exceeded for 'api' requests"}`},
		{HeadersDraft, "denied four limits", map[string]string{
			"Ratelimit-Policy": `"tiers-1s";q=10;w=1, "tiers-1m";q=100;w=60, "tiers-1h";q=1000;w=3600, "tiers-1d";q=10000;w=86400`,
			"Ratelimit":        `"tiers-1s";r=4;t=1, "tiers-1m";r=50;t=30, "tiers-1h";r=0;t=1800, "tiers-1d";r=9000;t=43200`,
			"Retry-After":      "1800",
		}, `{"detail": "Rate limit exceeded for 'tiers' requests"}`},
		{HeadersLegacy, "denied", map[string]string{
			"X-Ratelimit-Limit":     "10",
			"X-Ratelimit-Remaining": "0",
			"X-Ratelimit-Reset":     "2",
			"Retry-After":           "2",
		}, `{"detail": "Rate limit exceeded for 'search' requests"}`},
		{HeadersLegacy, "denied two limits", map[string]string{
			"X-Ratelimit-Limit":     "500",
			"X-Ratelimit-Remaining": "0",
			"X-Ratelimit-Reset":     "1800",
			"Retry-After":           "1800",
		}, `{"detail": "Rate limit exceeded for 'api' requests"}`},
		{HeadersLegacy, "denied four limits", map[string]string{
			"X-Ratelimit-Limit":     "1000",
			"X-Ratelimit-Remaining": "0",
			"X-Ratelimit-Reset":     "1800",
			"Retry-After":           "1800",
		}, `{"detail": "Rate limit exceeded for 'tiers' requests"}`},
		{HeadersNone, "denied", map[string]string{
			"Retry-After": "2",
		}, `{"detail": "Rate limit exceeded for 'search' requests"}`},
	}
	for _, tt := range tests {
		d := decisions(t, tt.style)[tt.name]
		name := tt.style.String() + " " + tt.name
		rec := httptest.NewRecorder()
		d.WriteDenied(rec)
		res := rec.Result()
		if res.StatusCode != http.StatusTooManyRequests {
			t.Errorf("%s: status %d, want 429", name, res.StatusCode)
		}
		if got := d.Status(); got != http.StatusTooManyRequests {
			t.Errorf("%s: Status() = %d, want 429", name, got)
		}
		tt.want["Content-Type"] = "application/json"
		tt.want["Content-Length"] = strconv.Itoa(len(tt.body))
		checkHeaders(t, name, res.Header, tt.want)
		if got := rec.Body.String(); got != tt.body {
			t.Errorf("%s: body %q, want %q", name, got, tt.body)
		}
		if got := string(d.Body()); got != tt.body {
			t.Errorf("%s: Body() = %q, want %q", name, got, tt.body)
		}
	}
}

func TestRetryAfter(t *testing.T) {
	tests := []struct {
		d    time.Duration
		want int64
	}{
		{0, 1},
		{-time.Second, 1},
		{1, 1},
		{time.Second - 1, 1},
		{time.Second, 1},
		{time.Second + 1, 2},
		{1001 * time.Millisecond, 2},
		{2 * time.Second, 2},
		{59500 * time.Millisecond, 60},
		{time.Minute, 60},
		{time.Hour + 1, 3601},
	}
	search := rule(t, headersConfig(t), "search")
	for _, tt := range tests {
		if got := retryAfterSeconds(tt.d); got != tt.want {
			t.Errorf("retryAfterSeconds(%v) = %d, want %d", tt.d, got, tt.want)
		}
		d := Decision{Rule: search, Cost: 1, Result: store.Result{Limit: algo.Limit{Count: 10, Period: time.Second}, RetryAfter: tt.d, ResetAfter: tt.d}}
		rec := httptest.NewRecorder()
		d.WriteDenied(rec)
		if got, want := rec.Result().Header.Get("Retry-After"), strconv.FormatInt(tt.want, 10); got != want {
			t.Errorf("RetryAfter %v: Retry-After = %q, want %q", tt.d, got, want)
		}
	}
}

// eachHeaders collects what Header yields, copying the values.
func eachHeaders(d *Decision, buf []byte) (http.Header, []string, []byte) {
	h := http.Header{}
	var order []string
	for i := 0; ; i++ {
		name, value, ok := d.Header(i, buf)
		if !ok {
			break
		}
		h[name] = append(h[name], string(value))
		order = append(order, name)
	}
	return h, order, buf
}

func TestHeaderMatchesSetHeaders(t *testing.T) {
	var buf []byte
	for _, style := range []HeaderStyle{HeadersDraft, HeadersLegacy, HeadersNone} {
		ds := decisions(t, style)
		for _, name := range slices.Sorted(maps.Keys(ds)) {
			d := ds[name]
			label := style.String() + " " + name
			rec := httptest.NewRecorder()
			if d.Allowed {
				d.SetHeaders(rec.Header())
				rec.WriteHeader(d.Status())
			} else {
				d.WriteDenied(rec)
			}
			want := rec.Result().Header
			var got http.Header
			var order []string
			got, order, buf = eachHeaders(&d, buf)
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s: Header = %v, want %v (SetHeaders/WriteDenied)", label, got, want)
			}
			// The documented order: rate-limit headers, then Retry-After,
			// Content-Type and Content-Length.
			var wantOrder []string
			if d.Err == nil {
				switch style {
				case HeadersDraft:
					wantOrder = append(wantOrder, "Ratelimit-Policy", "Ratelimit")
				case HeadersLegacy:
					wantOrder = append(wantOrder, "X-Ratelimit-Limit", "X-Ratelimit-Remaining", "X-Ratelimit-Reset")
				}
			}
			if !d.Allowed {
				wantOrder = append(wantOrder, "Retry-After", "Content-Type", "Content-Length")
			}
			if !slices.Equal(order, wantOrder) {
				t.Errorf("%s: Header order %q, want %q", label, order, wantOrder)
			}
			if rec.Code != d.Status() {
				t.Errorf("%s: status %d, want %d", label, rec.Code, d.Status())
			}
		}
	}
}

func TestHeaderUsesBuffer(t *testing.T) {
	for _, style := range []HeaderStyle{HeadersDraft, HeadersLegacy} {
		d := decisions(t, style)["denied four limits"]
		var buf [128]byte
		for i := 0; ; i++ {
			name, value, ok := d.Header(i, buf[:0])
			if !ok {
				break
			}
			// A value is rendered into buf or is one of the shared constants.
			if len(value) > 0 && &value[0] != &buf[0] {
				switch name {
				case "Ratelimit-Policy", "X-Ratelimit-Limit", "Content-Type":
				default:
					t.Errorf("%v: %s: value %q is not in the buffer", style, name, value)
				}
			}
		}
		allocs := testing.AllocsPerRun(100, func() {
			for i := 0; ; i++ {
				if _, _, ok := d.Header(i, buf[:0]); !ok {
					break
				}
			}
		})
		if allocs != 0 {
			t.Errorf("%v: Header with a stack buffer: %v allocations, want 0", style, allocs)
		}
	}
}

func TestSetHeadersAllocs(t *testing.T) {
	for _, style := range []HeaderStyle{HeadersDraft, HeadersLegacy} {
		want := 1.0
		if style == HeadersLegacy {
			want = 2 // Remaining and Reset
		}
		for _, name := range []string{"allowed", "allowed two limits", "allowed four limits"} {
			d := decisions(t, style)[name]
			h := http.Header{}
			allocs := testing.AllocsPerRun(100, func() { d.SetHeaders(h) })
			if allocs != want {
				t.Errorf("%v %s: SetHeaders: %v allocations, want %v", style, name, allocs, want)
			}
		}
	}
}

// TestHeaderValuesOwnMemory: every response gets values of its own, and a
// value too long for a smallValue is still whole.
func TestHeaderValuesOwnMemory(t *testing.T) {
	var hs []http.Header
	var want []string
	for i := range 100 {
		b := strconv.AppendInt([]byte("v="), int64(i), 10)
		hs = append(hs, http.Header{"V": headerValue(b)})
		want = append(want, string(b))
		clear(b) // the caller's buffer is reused
	}
	for i, h := range hs {
		if got := h["V"]; len(got) != 1 || got[0] != want[i] || cap(got) != 1 {
			t.Fatalf("value %d: got %q (cap %d), want [%q] (cap 1)", i, got, cap(got), want[i])
		}
	}
	hs[0].Add("V", "extra")
	if got := hs[1]["V"]; len(got) != 1 || got[0] != "v=1" {
		t.Errorf("after Add on another response: %q, want [\"v=1\"]", got)
	}
	for _, n := range []int{0, 32, 33, 112, 113, 500} {
		long := strings.Repeat("x", n)
		if got := headerValue([]byte(long)); len(got) != 1 || got[0] != long || cap(got) != 1 {
			t.Errorf("headerValue of %d bytes: %q (cap %d), want [%q] (cap 1)", n, got, cap(got), long)
		}
	}
}

func TestSetHeadersSharedValues(t *testing.T) {
	// Shared header values must not be corrupted by a caller appending to
	// them.
	d := decisions(t, HeadersDraft)["allowed"]
	h1, h2 := http.Header{}, http.Header{}
	d.SetHeaders(h1)
	h1.Add("Ratelimit-Policy", "extra")
	d.SetHeaders(h2)
	if got := h2["Ratelimit-Policy"]; len(got) != 1 || got[0] != `"search";q=10;w=1` {
		t.Errorf("after a caller appended to a shared value: %q, want [%q]", got, `"search";q=10;w=1`)
	}
	legacy := decisions(t, HeadersLegacy)["allowed"]
	legacy.SetHeaders(h1)
	h1.Add("X-Ratelimit-Limit", "extra")
	legacy.SetHeaders(h2)
	if got := h2["X-Ratelimit-Limit"]; len(got) != 1 || got[0] != "10" {
		t.Errorf("after a caller appended to a shared value: %q, want [%q]", got, "10")
	}
}

func TestDeniedThroughLimiter(t *testing.T) {
	// End to end: the example config, the fake store, the documented response.
	store := newFakeStore()
	l := NewLimiter(loadExample(t), WithStore(store))
	var d Decision
	for range 11 {
		d = l.Decide(t.Context(), "GET", "/api/search", "alice", false)
	}
	if d.Allowed {
		t.Fatalf("11th request under 10/second allowed")
	}
	rec := httptest.NewRecorder()
	d.WriteDenied(rec)
	const body = `{"detail": "Rate limit exceeded for 'search' requests"}`
	checkHeaders(t, "denied", rec.Result().Header, map[string]string{
		"Ratelimit-Policy": `"search";q=10;w=1`,
		"Ratelimit":        `"search";r=0;t=1`,
		"Retry-After":      "1",
		"Content-Type":     "application/json",
		"Content-Length":   strconv.Itoa(len(body)),
	})
	if rec.Code != 429 || rec.Body.String() != body {
		t.Errorf("response %d %q, want 429 %q", rec.Code, rec.Body.String(), body)
	}
	if d.Err != nil {
		t.Errorf("Err = %v, want nil", d.Err)
	}
}

// TestLimitNames: one limit keeps the rule's name; several are named
// "<rule>-<window>", the window in the largest unit that divides it.
func TestLimitNames(t *testing.T) {
	c := mustParse(t, yamlLines(
		"rate_limit:",
		"  enabled: true",
		"  rules:",
		"    - name: search",
		"      paths: [/search]",
		"      limit: 10/minute",
		"    - name: odd.rule_2",
		"      paths: [/odd]",
		`      limit: ["1/90s", "2/5min", "3/25hours", "4/2days"]`,
		`  default: ["5/second", "100/minute"]`,
	))
	tests := []struct {
		rule string
		want []string
	}{
		{"search", []string{"search"}},
		{"odd.rule_2", []string{"odd.rule_2-90s", "odd.rule_2-5m", "odd.rule_2-25h", "odd.rule_2-2d"}},
		{DefaultRuleName, []string{"default-1s", "default-1m"}},
	}
	for _, tt := range tests {
		r := c.def
		if tt.rule != DefaultRuleName {
			r = rule(t, c, tt.rule)
		}
		var items []string // each limit's item in the RateLimit header starts with its name
		for i, name := range tt.want {
			item := `"` + name + `";r=`
			if i > 0 {
				item = ", " + item
			}
			items = append(items, item)
		}
		if !slices.Equal(r.rateItems, items) {
			t.Errorf("rule %q: RateLimit items start %q, want %q", tt.rule, r.rateItems, items)
		}
	}
	if got, want := rule(t, c, "odd.rule_2").policyValue[0],
		`"odd.rule_2-90s";q=1;w=90, "odd.rule_2-5m";q=2;w=300, "odd.rule_2-25h";q=3;w=90000, "odd.rule_2-2d";q=4;w=172800`; got != want {
		t.Errorf("RateLimit-Policy %q, want %q", got, want)
	}
	// Periods a configuration cannot spell still get distinct names.
	lims := []algo.Limit{{Count: 1, Period: 1500 * time.Millisecond}, {Count: 1, Period: 2 * time.Microsecond}, {Count: 1, Period: 7}}
	for i, want := range []string{"x-1500ms", "x-2us", "x-7ns"} {
		if got := limitName("x", lims, i); got != want {
			t.Errorf("limitName(%v) = %q, want %q", lims[i].Period, got, want)
		}
	}
}

// TestAppendDecimal: the header values' numbers are written as
// strconv.AppendInt writes them, for every number of digits, either side
// of each power of ten, negative ones, and into a buffer with room to
// spare, exactly enough room, or too little.
func TestAppendDecimal(t *testing.T) {
	vals := []int64{0, 1, 9, 10, 11, 99, 100, 101, 3599, 86400, 1999999999, math.MaxInt64, -1, -10, math.MinInt64}
	for p := int64(1); p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, 10*p-1, 7*p+3)
	}
	for _, v := range vals {
		want := strconv.AppendInt([]byte("r="), v, 10)
		for _, room := range []int{0, len(want) - 3, len(want) - 2, len(want) - 1, 40} {
			buf := make([]byte, 2, 2+max(room, 0))
			copy(buf, "r=")
			if got := appendDecimal(buf, v); !bytes.Equal(got, want) {
				t.Errorf("appendDecimal(%d) with room for %d = %q, want %q", v, room, got, want)
			}
		}
	}
}

// TestRateLimitValue: the RateLimit value is what strconv writes, item by
// item, for one to four limits, numbers of every length (negative ones
// from a store that gives them, both ends of int64) and rule names short
// enough for the stack and too long for it (the heap fallback), whether
// it goes into a response's header (SetHeaders), after a prefix
// (appendRateLimit) or into an adapter's buffer (Header).
func TestRateLimitValue(t *testing.T) {
	limits := []string{"10/second", "100/minute", "1000/hour", "10000/day"}
	nums := []int64{0, 1, 9, 10, 99999999, 100000000, 1999999999, 12345678901234567, math.MaxInt64, -1, -100000000, math.MinInt64}
	resets := []time.Duration{0, 1, time.Second, time.Second + 1, 3599*time.Second + 5, 100000000 * time.Second, math.MaxInt64}
	for _, name := range []string{"s", "search", strings.Repeat("n", 40), strings.Repeat("L", 64)} {
		for n := 1; n <= len(limits); n++ {
			cfg, err := NewConfig(Spec{Enabled: true, Rules: []RuleSpec{{Name: name, Paths: []string{"/x"}, Limit: limits[:n]}}})
			if err != nil {
				t.Fatal(err)
			}
			r := rule(t, cfg, name)
			for k := range 40 {
				d := Decision{Allowed: true, Rule: r, Cost: 1, style: HeadersDraft}
				var want []byte
				for i := range n {
					rem, reset := nums[(k+3*i)%len(nums)], resets[(k+5*i)%len(resets)]
					d.Result.Limits[i] = store.LimitState{Remaining: rem, ResetAfter: reset}
					if i > 0 {
						want = append(want, ", "...)
					}
					want = append(want, '"')
					want = append(want, limitName(name, r.Policy.Limits, i)...)
					want = append(want, `";r=`...)
					want = strconv.AppendInt(want, rem, 10)
					want = append(want, ";t="...)
					want = strconv.AppendInt(want, ceilSeconds(reset), 10)
				}
				h := http.Header{}
				d.SetHeaders(h)
				if got := h.Get("RateLimit"); got != string(want) {
					t.Fatalf("%d limits of %q, case %d: SetHeaders wrote %q, want %q", n, name, k, got, want)
				}
				if got := d.appendRateLimit([]byte("x: ")); string(got) != "x: "+string(want) {
					t.Fatalf("%d limits of %q, case %d: appendRateLimit gave %q, want %q", n, name, k, got, "x: "+string(want))
				}
				var buf [128]byte
				if hn, v, ok := d.Header(1, buf[:0]); !ok || hn != "Ratelimit" || string(v) != string(want) {
					t.Fatalf("%d limits of %q, case %d: Header(1) = %q %q %v, want Ratelimit %q", n, name, k, hn, v, ok, want)
				}
			}
		}
	}
}

// TestAppendDecimalEdges: appendDecimal writes what strconv does at every
// bound of its four-digit steps and both ends of int64, after a prefix.
func TestAppendDecimalEdges(t *testing.T) {
	vals := []int64{math.MinInt64, math.MinInt64 + 1, -10000, -9999, -1, 0, math.MaxInt64, math.MaxInt64 - 1}
	for p := int64(1); p > 0 && p <= math.MaxInt64/10; p *= 10 {
		vals = append(vals, p-1, p, p+1, 10*p-1)
	}
	for _, v := range vals {
		for _, pre := range []string{"", "x;r="} {
			if got, want := string(appendDecimal([]byte(pre), v)), strconv.AppendInt([]byte(pre), v, 10); got != string(want) {
				t.Errorf("appendDecimal(%q, %d) = %q, want %q", pre, v, got, want)
			}
		}
	}
	for v := int64(-20000); v <= 200000; v++ {
		if got, want := string(appendDecimal(nil, v)), strconv.FormatInt(v, 10); got != want {
			t.Fatalf("appendDecimal(%d) = %q, want %q", v, got, want)
		}
	}
}
