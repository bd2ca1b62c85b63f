package worksclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// DefaultBaseURL is the base URL of the Works API; paths such as
// "/v1.0/users" follow it.
const DefaultBaseURL = "https://www.worksapis.com"

// DefaultTimeout bounds each call of a Client made without WithHTTPClient,
// its wait for the rate limiter included.
const DefaultTimeout = 30 * time.Second

// maxErrorBody is how much of an error response an APIError keeps.
const maxErrorBody = 64 << 10

// TokenSource supplies the OAuth access token sent with each request as
// "Authorization: Bearer <token>". It is called once per request, so it
// should cache the token until it expires.
type TokenSource interface {
	Token(ctx context.Context) (string, error)
}

// TokenFunc is a function that is a TokenSource.
type TokenFunc func(ctx context.Context) (string, error)

// Token implements TokenSource.
func (f TokenFunc) Token(ctx context.Context) (string, error) { return f(ctx) }

// ClientOption configures a Client.
type ClientOption func(*Client)

// WithHTTPClient sets the http.Client that sends the requests. The Client
// never modifies it; WithRateLimiter makes a copy. Default: a client with
// a DefaultTimeout (30s) timeout over http.DefaultTransport.
func WithHTTPClient(hc *http.Client) ClientOption {
	return func(c *Client) {
		if hc != nil {
			c.hc = hc
		}
	}
}

// WithTokenSource sets where the access token of each request comes from.
// Default: none, no Authorization header.
func WithTokenSource(ts TokenSource) ClientOption {
	return func(c *Client) { c.tokens = ts }
}

// WithTransportOptions sets the options of the Transport that
// WithRateLimiter puts in the copies it makes (WithRetry, WithTemplates,
// ...). Default: none.
func WithTransportOptions(opts ...TransportOption) ClientOption {
	return func(c *Client) { c.topts = append(c.topts, opts...) }
}

// Client calls the Works API: JSON in and out, a bearer token from a
// TokenSource. The Client from NewClient paces nothing; WithRateLimiter
// returns a copy that does, for the callers that must (the relay worker),
// while admin screens and other callers keep the unpaced original.
// A Client is safe for concurrent use.
type Client struct {
	base   string // scheme://host[/path], without a trailing slash
	hc     *http.Client
	tokens TokenSource
	topts  []TransportOption
}

// NewClient returns a Client for the API at baseURL (DefaultBaseURL for
// the Works API), an absolute http or https URL without query or fragment.
func NewClient(baseURL string, opts ...ClientOption) (*Client, error) {
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("worksclient: base URL: %w", err)
	case u.Scheme != "http" && u.Scheme != "https", u.Host == "":
		return nil, fmt.Errorf("worksclient: base URL %q is not an absolute http or https URL", baseURL)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return nil, fmt.Errorf("worksclient: base URL %q has a query or fragment", baseURL)
	}
	c := &Client{
		base: strings.TrimRight(u.String(), "/"),
		hc:   &http.Client{Timeout: DefaultTimeout},
	}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// WithRateLimiter returns a copy of c whose requests are paced by l: the
// copy's http.Client is a copy of c's whose Transport is a Transport over
// c's transport (http.DefaultTransport when nil), with the
// WithTransportOptions of c. c itself is unchanged and stays unpaced. A
// nil l returns a plain copy. Calling it on a paced copy paces by both
// limiters.
func (c *Client) WithRateLimiter(l RateLimiter) *Client {
	cp := *c
	if l == nil {
		return &cp
	}
	hc := *c.hc
	hc.Transport = NewTransport(c.hc.Transport, l, c.topts...)
	cp.hc = &hc
	return &cp
}

// HTTPClient returns the http.Client that sends c's requests, paced when c
// came from WithRateLimiter: for calls that Do does not cover.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// BaseURL returns the base URL requests are sent to.
func (c *Client) BaseURL() string { return c.base }

// Do sends method path (the path after the base URL, starting with '/',
// with a query if any) with body, when not nil, encoded as JSON, and
// decodes a 2xx response's JSON body into out, when not nil and the body
// is not empty. A response outside 2xx is an *APIError. ctx bounds the
// call, its wait for the rate limiter included.
func (c *Client) Do(ctx context.Context, method, path string, body, out any) error {
	if !strings.HasPrefix(path, "/") {
		return fmt.Errorf("worksclient: path %q does not start with '/'", path)
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("worksclient: %s %s: encode body: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return fmt.Errorf("worksclient: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.tokens != nil {
		tok, err := c.tokens.Token(ctx)
		if err != nil {
			return fmt.Errorf("worksclient: %s %s: token: %w", method, path, err)
		}
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer drain(resp)
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		return &APIError{Method: req.Method, Path: path, Status: resp.StatusCode, Header: resp.Header, Body: b}
	}
	if out == nil || resp.StatusCode == http.StatusNoContent {
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("worksclient: %s %s: decode response: %w", req.Method, path, err)
	}
	return nil
}

// APIError is a response outside 2xx.
type APIError struct {
	Method string
	Path   string // as given to Do
	Status int    // the status code
	Header http.Header
	Body   []byte // the first 64 KiB of the body
}

// Error returns the method, path, status and the start of the body.
func (e *APIError) Error() string {
	var b strings.Builder
	b.WriteString("worksclient: ")
	b.WriteString(e.Method)
	b.WriteByte(' ')
	b.WriteString(e.Path)
	b.WriteString(": ")
	b.WriteString(strconv.Itoa(e.Status))
	if t := http.StatusText(e.Status); t != "" {
		b.WriteByte(' ')
		b.WriteString(t)
	}
	if body := bytes.TrimSpace(e.Body); len(body) > 0 {
		const max = 200
		if len(body) > max {
			body = body[:max]
			for len(body) > 0 && !utf8.Valid(body) {
				body = body[:len(body)-1]
			}
			body = append(body[:len(body):len(body)], "..."...)
		}
		b.WriteString(": ")
		b.Write(body)
	}
	return b.String()
}
