package outbound

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// maxDrain is how much of a response being retried is read to let its
// connection be reused.
const maxDrain = 4 << 10

// TransportOption configures a Transport.
type TransportOption func(*Transport)

// WithKey sets how a request's rate-limit key is made: the host
// (KeyHost), a token, worksclient's "METHOD normalized-path", anything.
// Keys are bounded by the core limiter (store.BoundKey) before they reach a
// store; a key function fed by secrets should return
// core.SecretIdentity(label, secret) so that only a keyed hash is kept.
// Default: KeyHost.
func WithKey(f func(*http.Request) string) TransportOption {
	return func(t *Transport) {
		if f != nil {
			t.key = f
		}
	}
}

// WithRetry makes the Transport retry a request that got a rate-limit
// answer, up to maxAttempts attempts in all (the first included) and only
// while the next attempt can start within budget of the first attempt's
// start.
//
// A rate-limit answer is a 429, 403 or 503 with a valid Retry-After, or a
// 429 or 403 with X-RateLimit-Remaining: 0 (or a remaining count of 0 in
// any family ReadSignal reads) and a reset still ahead: GitHub answers so
// over its limits (its primary one: 403 or 429, X-RateLimit-Remaining: 0
// and X-RateLimit-Reset as a Unix time; its secondary ones: Retry-After).
// It asks for the later of Retry-After and the reset. A 403 with neither, or with a
// remaining count above 0 and no Retry-After, is an ordinary 403: returned
// as it is, never retried.
//
// A request is retried when its body can be sent again (no body, or
// Request.GetBody set, as http.NewRequest sets it for in-memory bodies)
// and it is idempotent: GET, HEAD, OPTIONS, TRACE, PUT, DELETE, or any
// method with an Idempotency-Key or X-Idempotency-Key header, as net/http
// decides. This holds after every rate-limit answer: a POST or PATCH
// without such a key is returned as it is (its wait still holds the key
// back).
//
// The retry waits until the answer's wait has passed (through the Waiter,
// which the response held back, or on its own when the Waiter is nil or
// not a Delayer) and for its turn in the Waiter; when that wait would end
// past the budget, or the request's context is done, the Transport returns
// the last response as it is, unread. maxAttempts ≤ 1 turns retries off.
// Default: off.
func WithRetry(maxAttempts int, budget time.Duration) TransportOption {
	return func(t *Transport) { t.maxAttempts, t.budget = maxAttempts, max(budget, 0) }
}

// WithAdaptive says whether the Transport tells the Waiter what each
// response said of the upstream's limit (ReadSignal, then Observe, or
// Delay with its Retry-After when the Waiter is only a Delayer). Off, only
// a rate-limit answer (see WithRetry: a 429, 403 or 503 with Retry-After,
// a 429 or 403 with a remaining count of 0) holds the key back, for the wait it
// asks for (worksclient's behaviour). Default: on.
func WithAdaptive(on bool) TransportOption { return func(t *Transport) { t.adaptive = on } }

// WithTransportClock sets the time of the Transport: the start of a retry
// budget, the "now" of the headers it reads, and its own waits before a
// retry (give the Limiter the same clock with WithClock). nil keeps the
// default. Default: SystemClock.
func WithTransportClock(c Clock) TransportOption {
	return func(t *Transport) {
		if c != nil {
			t.clock = c
		}
	}
}

// Transport is an http.RoundTripper that waits on a Waiter before each
// request, per rate-limit key, and tells it what the upstream answered.
//
// For each request it makes the key (WithKey), waits (Waiter.Wait with the
// method, escaped path and key), then sends the request through the base
// transport. When the wait fails (the request's context done, a store
// that fails closed), RoundTrip closes the request body and returns the
// error, without sending. Every response is read for the upstream's
// rate-limit headers (ReadSignal, capped at MaxHold) and, when the Waiter
// is an Observer (Limiter is), handed to Observe, which slows the key down
// before the upstream refuses it (see Limiter.Observe); when the Waiter is
// only a Delayer, a Retry-After on any status holds the key back through
// Delay. A request that got no response is observed with a zero Signal.
// A rate-limit answer (see WithRetry: a 429, 403 or 503 with Retry-After,
// a 429 or 403 with X-RateLimit-Remaining: 0 and a reset ahead) holds the key
// for the wait it asks for, the later of Retry-After and the reset: its
// Signal's RetryAfter is raised to that wait, so that a Waiter that is
// only a Delayer holds the key as long as Observe would. With WithRetry it
// is then retried; any other response, an ordinary 403 among them, is
// returned as it is.
//
// A Transport never modifies the request (a retry sends a clone), returns
// an error only when it has no response, and is safe for concurrent use.
// A nil Waiter paces nothing (a Retry-After then only delays retries).
type Transport struct {
	base        http.RoundTripper
	waiter      Waiter
	key         func(*http.Request) string
	adaptive    bool
	maxAttempts int
	budget      time.Duration
	clock       Clock
}

var _ http.RoundTripper = (*Transport)(nil)

// NewTransport returns a Transport that sends through base
// (http.DefaultTransport when nil) and waits on w (nothing when nil).
func NewTransport(base http.RoundTripper, w Waiter, opts ...TransportOption) *Transport {
	if base == nil {
		base = http.DefaultTransport
	}
	t := &Transport{base: base, waiter: w, key: KeyHost, adaptive: true, maxAttempts: 1, clock: SystemClock}
	for _, o := range opts {
		o(t)
	}
	return t
}

// KeyHost is the key of a request by its host: one limit per upstream,
// however its URL spells the host. The host is lower-cased, a trailing dot
// dropped, and the port kept unless it is the scheme's default (443 for
// https, 80 for http), so "API.example.com.:443" and "api.example.com"
// (https) are one key.
func KeyHost(r *http.Request) string {
	host, scheme := r.Host, "http"
	if r.URL != nil && r.URL.Host != "" {
		host, scheme = r.URL.Host, r.URL.Scheme
	}
	name, port := host, ""
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		name, port = host[:i], host[i+1:]
	}
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if (port == "443" && strings.EqualFold(scheme, "https")) || (port == "80" && strings.EqualFold(scheme, "http")) {
		port = ""
	}
	switch {
	case port != "":
		if name == host[:len(host)-len(port)-1] {
			return host // nothing to change: no allocation
		}
		return name + ":" + port
	case name == host:
		return host
	}
	return name
}

// Key returns the rate-limit key of r, by the Transport's key function.
func (t *Transport) Key(r *http.Request) string { return t.key(r) }

// RoundTrip implements http.RoundTripper.
func (t *Transport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.waiter == nil && t.maxAttempts <= 1 {
		return t.base.RoundTrip(req)
	}
	ctx := req.Context()
	key := t.Key(req)
	path := ""
	if req.URL != nil {
		path = req.URL.EscapedPath()
	}
	done, err := t.wait(ctx, req.Method, path, key)
	if err != nil {
		closeBody(req.Body)
		return nil, err
	}
	deadline := t.clock.Now().Add(t.budget)
	resp, d, limited, err := t.send(ctx, req, key, done)
	for attempt := 1; ; attempt++ {
		if err != nil {
			return nil, err
		}
		if !limited {
			return resp, nil
		}
		wait := t.held(d)
		if attempt >= t.maxAttempts || !replayable(req) || t.clock.Now().Add(d).After(deadline) {
			return resp, nil
		}
		retry, ok := rewind(req)
		if !ok {
			return resp, nil
		}
		done, ok := t.await(ctx, req.Method, path, key, wait, deadline)
		if !ok {
			closeBody(retry.Body)
			return resp, nil
		}
		drain(resp)
		resp, d, limited, err = t.send(ctx, retry, key, done)
	}
}

// wait waits on the Waiter, if any: Start when it is a Starter, whose
// done it returns; else Wait, and done is nil.
func (t *Transport) wait(ctx context.Context, method, path, key string) (done func(), err error) {
	switch w := t.waiter.(type) {
	case nil:
		return nil, nil
	case Starter:
		return w.Start(ctx, method, path, key)
	}
	return nil, t.waiter.Wait(ctx, method, path, key)
}

// send sends req, tells the Waiter what the response said, and returns
// with the response whether it is a rate-limit answer and the wait it asks
// for (throttled). done (nil: none) is called when the request is over: at
// once when it got no response (or one with no body), else when its body
// is closed.
func (t *Transport) send(ctx context.Context, req *http.Request, key string, done func()) (resp *http.Response, wait time.Duration, limited bool, err error) {
	resp, err = t.base.RoundTrip(req)
	if done != nil {
		resp = endWith(resp, err, done)
	}
	if err != nil {
		if t.waiter != nil {
			Report(ctx, t.waiter, key, Signal{})
		}
		return resp, 0, false, err
	}
	now := t.clock.Now()
	wait, limited = throttled(resp, now)
	if t.waiter == nil {
		return resp, wait, limited, nil
	}
	var s Signal
	if t.adaptive {
		s = ReadSignal(resp.Header.Get, now)
	}
	if limited {
		// What the answer asks for, also when it is a reset (a Delayer
		// reads only RetryAfter; Observe derives the same hold).
		s.RetryAfter = max(s.RetryAfter, wait)
	}
	Report(ctx, t.waiter, key, s)
	return resp, wait, limited, nil
}

// Report tells w what an upstream said of a request that started under
// key: Observe when w is an Observer; otherwise, when w is a Delayer and
// s asks for a wait (Retry-After), Delay for it; nothing else. A client
// of another protocol (package grpcrl's interceptors) reports through it
// as a Transport does: once per request that w let start, with a zero
// Signal when the request got no answer.
func Report(ctx context.Context, w Waiter, key string, s Signal) {
	switch w := w.(type) {
	case Observer:
		w.Observe(ctx, key, s)
	case Delayer:
		if s.RetryAfter > 0 {
			_ = w.Delay(ctx, key, s.RetryAfter)
		}
	}
}

// held returns how long the Transport must wait on its own before a retry
// after a response that asked for d: 0 when the Waiter holds keys (a
// Delayer: send told it), d when it may not.
func (t *Transport) held(d time.Duration) time.Duration {
	if _, ok := t.waiter.(Delayer); ok {
		return 0
	}
	return d
}

// await waits wait, then for the Waiter, both within the deadline and
// ctx, and reports whether the retry may start, with the done of its
// start (see wait).
func (t *Transport) await(ctx context.Context, method, path, key string, wait time.Duration, deadline time.Time) (done func(), ok bool) {
	bctx, cancel := context.WithTimeout(ctx, deadline.Sub(t.clock.Now())) // the budget left, on the Transport's clock
	defer cancel()
	if Sleep(bctx, t.clock, wait) != nil {
		return nil, false
	}
	s, starts := t.waiter.(Starter)
	if !starts {
		_, err := t.wait(bctx, method, path, key)
		return nil, err == nil
	}
	// The request a Starter starts holds its slot under a context of its
	// own, ended with ctx or the request (done), never with the budget,
	// whose end would give the slot back while the request runs: the
	// start waits on a goroutine, given up on at the budget's end.
	sctx, scancel := context.WithCancel(ctx)
	type started struct {
		done func()
		err  error
	}
	res := make(chan started, 1)
	go func() {
		d, err := s.Start(sctx, method, path, key)
		res <- started{d, err}
	}()
	var r started
	select {
	case r = <-res:
	case <-bctx.Done():
		scancel() // the start ends at once
		if r = <-res; r.err == nil {
			r.done() // admitted as the budget ended: not sent
		}
		return nil, false
	}
	if r.err != nil {
		scancel()
		return nil, false
	}
	return func() { r.done(); scancel() }, true
}

// endWith makes done run once the request that got resp (or err) is
// over: at once when it has no response or a response without a body,
// else when the body is closed (a body that is also an io.Writer, a
// protocol switch's, stays one).
func endWith(resp *http.Response, err error, done func()) *http.Response {
	if err != nil || resp == nil || resp.Body == nil || resp.Body == http.NoBody {
		done()
		return resp
	}
	b := &endBody{ReadCloser: resp.Body, done: done}
	if w, ok := resp.Body.(io.Writer); ok {
		resp.Body = &endRWBody{endBody: b, w: w}
	} else {
		resp.Body = b
	}
	return resp
}

// endBody is a response body that calls done when it is closed.
type endBody struct {
	io.ReadCloser
	once sync.Once
	done func()
}

func (b *endBody) Close() error {
	err := b.ReadCloser.Close()
	b.once.Do(b.done)
	return err
}

// endRWBody is an endBody over a body that is also an io.Writer.
type endRWBody struct {
	*endBody
	w io.Writer
}

func (b *endRWBody) Write(p []byte) (int, error) { return b.w.Write(p) }

// CloseIdleConnections closes the idle connections of the base transport,
// when it has such a method; http.Client.CloseIdleConnections calls it.
func (t *Transport) CloseIdleConnections() {
	if c, ok := t.base.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// throttled reports whether resp is a rate-limit answer, and the wait it
// asks for, at most MaxHold:
//
//   - a 429 or 403 with a valid Retry-After, or with a remaining count of
//     0 and a reset still ahead (as ReadSignal reads them, in any family:
//     X-RateLimit-Remaining: 0 with X-RateLimit-Reset as delta seconds or
//     a Unix time, RateLimit, RateLimit-Remaining): the later of the two;
//   - a 503 with a valid Retry-After: that.
//
// Any other response is not one: a 403 with neither (or with a remaining
// count above 0 and no Retry-After) is an ordinary 403. Only a 429 or 403
// costs more than a comparison.
func throttled(resp *http.Response, now time.Time) (time.Duration, bool) {
	switch resp.StatusCode {
	case http.StatusTooManyRequests, http.StatusForbidden:
	case http.StatusServiceUnavailable:
		return retryAfter(resp.Header.Get, now)
	default:
		return 0, false
	}
	d, ok := retryAfter(resp.Header.Get, now)
	if s := ReadSignal(resp.Header.Get, now); s.HasRemaining && s.Remaining == 0 && s.Reset > 0 {
		return max(d, s.Reset), true
	}
	return d, ok
}

// replayable reports whether req may be sent again after a rate-limit
// answer: when it is idempotent (by its method, or an idempotency key) and
// its body can be sent again.
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
