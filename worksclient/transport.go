package worksclient

import (
	"context"
	"errors"
	"io"
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// MaxRetryAfter caps the Retry-After a Transport honours: a longer one (a
// day, a date years ahead, a number too large for a time.Duration) holds
// the key back, and delays a retry, for MaxRetryAfter only, so that a
// bogus header cannot block a key for good.
const MaxRetryAfter = 10 * time.Minute

// maxDrain is how much of a response being retried is read to let its
// connection be reused.
const maxDrain = 4 << 10

// TransportOption configures a Transport.
type TransportOption func(*Transport)

// WithRetry makes the Transport retry a request that got 429 or 503 with a
// valid Retry-After, up to maxAttempts attempts in all (the first
// included) and only while the next attempt can start within budget of
// the first attempt's start. A request is retried when its body can be
// sent again (no body, or Request.GetBody set, as http.NewRequest sets it
// for in-memory bodies) and it is idempotent: GET, HEAD, OPTIONS, TRACE,
// PUT, DELETE, or any method with an Idempotency-Key or X-Idempotency-Key
// header, as net/http decides. This holds after a 429 as after a 503: a
// POST or PATCH without such a key is returned as it is (its Retry-After
// still holds the key back).
//
// The retry waits until Retry-After has passed (through the limiter, which
// the response pushed back, or on its own when the limiter is nil or no
// Delayer) and for its turn in the limiter; when that wait would end past
// the budget, or the request's context is done, the Transport returns the
// last response as it is, unread. maxAttempts ≤ 1 turns retries off.
// Default: off.
func WithRetry(maxAttempts int, budget time.Duration) TransportOption {
	return func(t *Transport) { t.maxAttempts, t.budget = maxAttempts, max(budget, 0) }
}

// WithKeyFunc sets how a request's rate-limit key is made from its method
// and escaped path. Default: APIKey.
func WithKeyFunc(f func(method, path string) string) TransportOption {
	return func(t *Transport) {
		if f != nil {
			t.keyFunc = f
		}
	}
}

// WithTemplates gives path templates that win over the key function: a
// request whose path matches one is keyed by it, with each "{name}"
// parameter written "{id}". A template is a path, optionally preceded by a
// method and a space ("PATCH /v1.0/users/{userId}"); without a method it
// applies to every method. A parameter matches any one segment, a literal
// segment only itself (after percent-decoding, case-sensitively); empty
// segments and a query are ignored. When several match, the one with the
// most literal segments wins, then the first given. For example, with
// "/v1.0/users/{userId}" the word-like id in "GET /v1.0/users/alice" is
// keyed "GET /v1.0/users/{id}", which APIKey alone would keep as "alice".
// Default: none.
func WithTemplates(templates ...string) TransportOption {
	return func(t *Transport) { t.templates = append(t.templates, parseTemplates(templates)...) }
}

// Transport is an http.RoundTripper that paces requests through a
// RateLimiter, per rate-limit key (by default APIKey of the method and
// path), and honours Retry-After.
//
// For each request it waits on the limiter, then sends the request through
// the base transport. When the limiter fails (the request's context done,
// or Redis down under a worksredis.Pacer), RoundTrip closes the request body and
// returns the error, without sending. A response 429 or 503 with a valid
// Retry-After, in seconds or as an HTTP-date (measured from the
// response's Date header when it has one, so a skewed local clock does not
// matter) and capped at MaxRetryAfter, holds the key back until then when
// the limiter is a Delayer:
// no request under that key starts earlier, from this process or (with a
// worksredis.Pacer) any other. With WithRetry the request is then retried.
//
// A Transport never modifies the request (a retry sends a clone), returns
// an error only when it has no response, and is safe for concurrent use.
// A nil limiter paces nothing.
type Transport struct {
	base        http.RoundTripper
	limiter     RateLimiter
	keyFunc     func(method, path string) string
	templates   templates
	maxAttempts int
	budget      time.Duration
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that sends through base
// (http.DefaultTransport when nil) and paces with limiter (nothing when
// nil).
func NewTransport(base http.RoundTripper, limiter RateLimiter, opts ...TransportOption) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, limiter: limiter, keyFunc: APIKey, maxAttempts: 1}
	for _, o := range opts {
		o(t)
	}
	return t
}

// Key returns the rate-limit key of req: by its templates, else by its key
// function, of req.Method and req.URL.EscapedPath().
func (t *Transport) Key(req *http.Request) string {
	path := ""
	if req.URL != nil {
		path = req.URL.EscapedPath()
	}
	if k, ok := t.templates.key(req.Method, path); ok {
		return k
	}
	return t.keyFunc(req.Method, path)
}

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.limiter == nil && t.maxAttempts <= 1 {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	key := t.Key(req)
	if t.limiter != nil {
		if err := t.limiter.Wait(ctx, key); err != nil {
			closeBody(req.Body)
			return nil, err
		}
	}
	deadline := time.Now().Add(t.budget)
	resp, err := t.base.RoundTrip(req)
	for attempt := 1; ; attempt++ {
		if err != nil {
			return nil, err
		}
		d, ok := throttled(resp)
		if !ok {
			return resp, nil
		}
		wait := t.hold(ctx, key, d)
		if attempt >= t.maxAttempts || !replayable(req) || time.Now().Add(d).After(deadline) {
			return resp, nil
		}
		retry, ok := rewind(req)
		if !ok {
			return resp, nil
		}
		if !t.await(ctx, key, wait, deadline) {
			closeBody(retry.Body)
			return resp, nil
		}
		drain(resp)
		resp, err = t.base.RoundTrip(retry)
	}
}

// hold asks the limiter to hold key back for d and returns how long the
// Transport must wait on its own before a retry: 0 when the limiter holds
// the key, d when it cannot.
func (t *Transport) hold(ctx context.Context, key string, d time.Duration) time.Duration {
	if dl, ok := t.limiter.(Delayer); ok && dl.Delay(ctx, key, d) == nil {
		return 0
	}
	return d
}

// await waits wait, then for the limiter, both within the deadline and
// ctx, and reports whether the retry may start.
func (t *Transport) await(ctx context.Context, key string, wait time.Duration, deadline time.Time) bool {
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	if sleep(ctx, SystemClock, wait) != nil {
		return false
	}
	return t.limiter == nil || t.limiter.Wait(ctx, key) == nil
}

// CloseIdleConnections closes the idle connections of the base transport,
// when it has such a method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// throttled returns the Retry-After of a 429 or 503 response, at most
// MaxRetryAfter, and false for any other response or one without a valid
// Retry-After.
func throttled(resp *http.Response) (time.Duration, bool) {
	if resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable {
		return 0, false
	}
	d, ok := retryAfter(resp.Header, time.Now())
	return min(d, MaxRetryAfter), ok
}

// maxRetrySeconds keeps a Retry-After in seconds within a time.Duration.
const maxRetrySeconds = math.MaxInt64 / int64(time.Second)

// retryAfter parses the Retry-After header of h: a number of seconds, or an
// HTTP-date, measured from h's Date when it has a valid one, else from now.
// A date in the past is 0. It returns false when the header is missing or
// invalid.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if v[0] >= '0' && v[0] <= '9' {
		secs, err := strconv.ParseInt(v, 10, 64)
		switch {
		case errors.Is(err, strconv.ErrRange) && strings.Trim(v, "0123456789") == "":
			secs = maxRetrySeconds
		case err != nil:
			return 0, false
		}
		return time.Duration(min(secs, maxRetrySeconds)) * time.Second, true
	}
	at, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	if date, err := http.ParseTime(h.Get("Date")); err == nil {
		now = date
	}
	return max(at.Sub(now), 0), true
}

// replayable reports whether req may be sent again after a 429 or 503: when
// it is idempotent (by its method, or an idempotency key) and its body can
// be sent again.
func replayable(req *http.Request) bool {
	if req.Body != nil && req.Body != http.NoBody && req.GetBody == nil {
		return false
	}
	switch req.Method {
	case "", http.MethodGet, http.MethodHead, http.MethodOptions, http.MethodTrace, http.MethodPut, http.MethodDelete:
		return true
	}
	_, ok := req.Header["Idempotency-Key"]
	if !ok {
		_, ok = req.Header["X-Idempotency-Key"]
	}
	return ok
}

// rewind returns a clone of req with a fresh body, and false when the body
// cannot be had again.
func rewind(req *http.Request) (*http.Request, bool) {
	r := req.Clone(req.Context())
	if req.Body == nil || req.Body == http.NoBody {
		return r, true
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, false
	}
	r.Body = body
	return r, true
}

func closeBody(b io.ReadCloser) {
	if b != nil {
		_ = b.Close()
	}
}

// drain reads a little of a response that is dropped, so that its
// connection can be reused, and closes it.
func drain(resp *http.Response) {
	if resp.Body == nil {
		return
	}
	_, _ = io.CopyN(io.Discard, resp.Body, maxDrain)
	_ = resp.Body.Close()
}
