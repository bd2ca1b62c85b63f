package worksclient

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/rlkit/rlkit/outbound"
)

// MaxRetryAfter caps the Retry-After a Transport honours: a longer one (a
// day, a date years ahead, a number too large for a time.Duration) holds
// the key back, and delays a retry, for MaxRetryAfter only, so that a
// bogus header cannot block a key for good. It is outbound.MaxHold.
const MaxRetryAfter = outbound.MaxHold

// maxDrain is how much of a response Client.Do reads after it is done with
// it, to let its connection be reused.
const maxDrain = 4 << 10

// TransportOption configures a Transport.
type TransportOption func(*Transport)

// WithRetry makes the Transport retry a request that got a rate-limit
// answer (it is outbound.WithRetry): a 429, 403 or 503 with a valid
// Retry-After, or a 429 or 403 with X-RateLimit-Remaining: 0 and a reset
// ahead (a 403 without these headers is returned as it is). It retries up
// to maxAttempts attempts in all (the first included) and only while the
// next attempt can start within budget of the first attempt's start. A
// request is retried when its body can be sent again (no body, or
// Request.GetBody set, as http.NewRequest sets it for in-memory bodies)
// and it is idempotent: GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or any
// method with an Idempotency-Key or X-Idempotency-Key header, as net/http
// decides. This holds after every rate-limit answer: a POST or PATCH
// without such a key is returned as it is (its wait still holds the key
// back).
//
// The retry waits until the answer's wait has passed (through the
// limiter, which the response pushed back, or on its own when the limiter
// is nil or no Delayer) and for its turn in the limiter; when that wait
// would end past the budget, or the request's context is done, the
// Transport returns the last response as it is, unread. maxAttempts ≤ 1
// turns retries off. Default: off.
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
// path), and honours Retry-After. It is an outbound.Transport keyed by
// Key, whose upstream signals are only its rate-limit answers: a 429, 403
// or 503's Retry-After, a 429 or 403's X-RateLimit-Remaining: 0 and reset
// (outbound.WithAdaptive(false)).
//
// For each request it waits on the limiter, then sends the request through
// the base transport. When the limiter fails (the request's context done,
// or Redis down under a worksredis.Pacer), RoundTrip closes the request
// body and returns the error, without sending. A response 429, 403 or 503
// with a valid Retry-After, in seconds or as an HTTP-date (measured from
// the response's Date header when it has one, so a skewed local clock does
// not matter), or a 429 or 403 with X-RateLimit-Remaining: 0 and its
// reset, capped at MaxRetryAfter, holds the key back until then when the
// limiter is a Delayer: no request under that key starts earlier, from
// this process or (with a worksredis.Pacer) any other. With WithRetry the
// request is then retried.
//
// A Transport never modifies the request (a retry sends a clone), returns
// an error only when it has no response, and is safe for concurrent use.
// A nil limiter paces nothing.
type Transport struct {
	keyFunc     func(method, path string) string
	templates   templates
	maxAttempts int
	budget      time.Duration
	rt          *outbound.Transport
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that sends through base
// (http.DefaultTransport when nil) and paces with limiter (nothing when
// nil).
func NewTransport(base http.RoundTripper, limiter RateLimiter, opts ...TransportOption) *Transport {
	t := &Transport{keyFunc: APIKey, maxAttempts: 1}
	for _, o := range opts {
		o(t)
	}
	t.rt = outbound.NewTransport(base, waiterOf(limiter),
		outbound.WithKey(t.Key), outbound.WithAdaptive(false), outbound.WithRetry(t.maxAttempts, t.budget))
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
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) { return t.rt.RoundTrip(req) }

// CloseIdleConnections closes the idle connections of the base transport,
// when it has such a method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() { t.rt.CloseIdleConnections() }

// waiterOf shows a RateLimiter to an outbound.Transport: as an
// outbound.Delayer too when it is a Delayer, so that a Retry-After holds
// its key back there, and otherwise only as a Waiter, so that the
// Transport waits out a Retry-After on its own before a retry.
func waiterOf(l RateLimiter) outbound.Waiter {
	if l == nil {
		return nil
	}
	if d, ok := l.(Delayer); ok {
		return delayingWaiter{waiter{l}, d}
	}
	return waiter{l}
}

// waiter is a RateLimiter as an outbound.Waiter: the key alone decides.
type waiter struct{ l RateLimiter }

func (w waiter) Wait(ctx context.Context, _, _, key string) error { return w.l.Wait(ctx, key) }

// delayingWaiter is a RateLimiter that is a Delayer, as an outbound.Waiter
// and outbound.Delayer.
type delayingWaiter struct {
	waiter
	Delayer
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
