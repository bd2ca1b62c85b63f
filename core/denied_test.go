package core

import (
	"context"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestSetLimitHeaders: the headers a denied handler's response starts
// with are the rate-limit headers and Retry-After, with the values of the
// default response, and nothing else (no status, no Content-Type).
func TestSetLimitHeaders(t *testing.T) {
	tests := []struct {
		style HeaderStyle
		name  string
		want  map[string]string
	}{
		{HeadersDraft, "denied", map[string]string{
			"Ratelimit-Policy": `"search";q=10;w=1`,
			"Ratelimit":        `"search";r=0;t=2`,
			"Retry-After":      "2",
		}},
		{HeadersDraft, "denied two limits", map[string]string{
			"Ratelimit-Policy": `"api-1s";q=10;w=1, "api-1h";q=500;w=3600`,
			"Ratelimit":        `"api-1s";r=4;t=1, "api-1h";r=0;t=1800`,
			"Retry-After":      "1800",
		}},
		{HeadersLegacy, "denied", map[string]string{
			"X-Ratelimit-Limit":     "10",
			"X-Ratelimit-Remaining": "0",
			"X-Ratelimit-Reset":     "2",
			"Retry-After":           "2",
		}},
		{HeadersNone, "denied", map[string]string{"Retry-After": "2"}},
		{HeadersDraft, "failed closed", map[string]string{"Retry-After": "1"}},
		{HeadersLegacy, "failed closed", map[string]string{"Retry-After": "1"}},
		// Allowed: SetHeaders, no Retry-After.
		{HeadersDraft, "allowed", map[string]string{
			"Ratelimit-Policy": `"search";q=10;w=1`,
			"Ratelimit":        `"search";r=9;t=1`,
		}},
		{HeadersDraft, "failed open", map[string]string{}},
	}
	for _, tt := range tests {
		d := decisions(t, tt.style)[tt.name]
		name := tt.style.String() + " " + tt.name
		rec := httptest.NewRecorder()
		d.SetLimitHeaders(rec.Header())
		if rec.Code != http.StatusOK || rec.Flushed || rec.Body.Len() != 0 {
			t.Errorf("%s: SetLimitHeaders wrote status %d, body %q: want only headers", name, rec.Code, rec.Body)
		}
		checkHeaders(t, name, rec.Header(), tt.want)
	}
}

// TestLimitHeadersAreWriteDenied: for every decision, SetLimitHeaders and
// LimitHeader give what WriteDenied (or SetHeaders) and Header give, but
// the default body's Content-Type and Content-Length; LimitHeader in
// Header's order.
func TestLimitHeadersAreWriteDenied(t *testing.T) {
	for _, style := range []HeaderStyle{HeadersDraft, HeadersLegacy, HeadersNone} {
		ds := decisions(t, style)
		for _, name := range slices.Sorted(maps.Keys(ds)) {
			d := ds[name]
			label := style.String() + " " + name
			rec := httptest.NewRecorder()
			if d.Allowed {
				d.SetHeaders(rec.Header())
			} else {
				d.WriteDenied(rec)
			}
			want := rec.Result().Header.Clone()
			delete(want, "Content-Type")
			delete(want, "Content-Length")
			got := http.Header{}
			d.SetLimitHeaders(got)
			if !maps.EqualFunc(got, want, slices.Equal) {
				t.Errorf("%s: SetLimitHeaders = %v, want %v", label, got, want)
			}
			var buf [128]byte
			each := http.Header{}
			var order, headerOrder []string
			for i := 0; ; i++ {
				name, value, ok := d.LimitHeader(i, buf[:0])
				if !ok {
					break
				}
				each[name] = append(each[name], string(value))
				order = append(order, name)
			}
			if !maps.EqualFunc(each, want, slices.Equal) {
				t.Errorf("%s: LimitHeader = %v, want %v", label, each, want)
			}
			for i := range order {
				name, _, _ := d.Header(i, buf[:0])
				headerOrder = append(headerOrder, name)
			}
			if !slices.Equal(order, headerOrder) {
				t.Errorf("%s: LimitHeader order %q, Header's %q", label, order, headerOrder)
			}
			if n := testing.AllocsPerRun(100, func() {
				for i := 0; ; i++ {
					if _, _, ok := d.LimitHeader(i, buf[:0]); !ok {
						break
					}
				}
			}); n != 0 {
				t.Errorf("%s: LimitHeader with a stack buffer: %v allocations, want 0", label, n)
			}
		}
	}
}

// TestSetLimitHeadersAllocs: a denied handler's headers cost what the
// default response's do: the RateLimit value, and a Retry-After other
// than 1.
func TestSetLimitHeadersAllocs(t *testing.T) {
	tests := []struct {
		name string
		want float64
	}{
		{"allowed", 1},
		{"denied", 2},        // RateLimit, Retry-After 2
		{"failed closed", 0}, // Retry-After 1 is shared
	}
	for _, tt := range tests {
		d := decisions(t, HeadersDraft)[tt.name]
		h := http.Header{}
		if n := testing.AllocsPerRun(100, func() { d.SetLimitHeaders(h) }); n != tt.want {
			t.Errorf("%s: SetLimitHeaders: %v allocations, want %v", tt.name, n, tt.want)
		}
	}
}

func TestDecisionContext(t *testing.T) {
	ctx := context.Background()
	if d, ok := FromContext(ctx); d != nil || ok {
		t.Errorf("FromContext(Background) = %v, %v; want nil, false", d, ok)
	}
	d := decisions(t, HeadersDraft)["allowed"]
	got, ok := FromContext(NewContext(ctx, &d))
	if got != &d || !ok {
		t.Errorf("FromContext(NewContext(ctx, &d)) = %p, %v; want %p, true", got, ok, &d)
	}
	// The innermost Decision wins; a nil one is none.
	inner := Decision{Allowed: true}
	if got, _ := FromContext(NewContext(NewContext(ctx, &d), &inner)); got != &inner {
		t.Errorf("FromContext of a context with two Decisions = %p, want the inner %p", got, &inner)
	}
	if got, ok := FromContext(NewContext(ctx, nil)); got != nil || ok {
		t.Errorf("FromContext(NewContext(ctx, nil)) = %v, %v; want nil, false", got, ok)
	}
}
