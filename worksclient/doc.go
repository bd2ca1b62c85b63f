// Package worksclient paces calls to the Works API (LINE WORKS / NAVER
// WORKS) so that a relay worker never exceeds its limit of 240 requests a
// minute per API. Its Redis parts (a pacer shared by replicas, the leader
// lock that lets only one replica relay at a time) are in the subpackage
// worksredis, so that a program without Redis compiles no Redis client.
//
// # Keys
//
// The limit applies per API: per method and normalized path. APIKey makes
// that key: the query is dropped and every segment that holds a resource
// id becomes "{id}", so that
//
//	PATCH /v1.0/users/a1b2c3@example.com?x=1  →  PATCH /v1.0/users/{id}
//	PATCH /scim/v2/Users/7f0c3e2a-…           →  PATCH /scim/v2/Users/{id}
//	POST  /oauth2/v2.0/token                  →  POST /oauth2/v2.0/token
//
// A Transport keys by APIKey unless given explicit templates
// (WithTemplates) or its own key function (WithKeyFunc).
//
// # Pacing
//
// A RateLimiter decides when a request may start. 240 a minute is taken as
// what the Works API means by it: request starts at least 250 ms apart for
// the same key, one at a time, with no burst; different keys never wait on
// each other. A request whose context is cancelled while it waits fails
// with ctx.Err() at once and takes no slot.
//
// Both pacers are one configuration of package outbound's Limiter,
// outbound.Rate(1, interval, 0) (GCRA, no burst), so that pacing is
// written once in the module:
//
//   - Pacer paces within one process: a FIFO queue per key, in a memory
//     store, no goroutine, bounded memory.
//   - worksredis.Pacer paces every process that shares a Redis, on the
//     server's clock (core/redisstore, and outbound/redishold for holds).
//
// Transport is the http.RoundTripper that waits on the limiter before each
// request: an outbound.Transport keyed by Key. A rate-limit answer (a 429,
// 403 or 503 with Retry-After, or a 429 or 403 with X-RateLimit-Remaining: 0
// and a reset ahead, see outbound.WithRetry) holds its key back until then
// (through the optional Delayer interface both pacers implement) and, with
// WithRetry, is retried, when it is idempotent (by its method or an
// idempotency key) and its body can be sent again, within a number of
// attempts and a time budget. The rate-limit headers of other responses
// are not read: for an API that sends them, use an outbound.Transport over
// an outbound.Limiter, which slows down before a 429.
//
// # Client
//
// Client is a small JSON client for the API. The client NewClient returns
// paces nothing, so that admin screens, manual sync requests and outbox
// writes are never slowed; the relay worker gets a paced copy:
//
//	api, err := worksclient.NewClient(worksclient.DefaultBaseURL, worksclient.WithTokenSource(tokens))
//	...
//	relayAPI := api.WithRateLimiter(worksclient.NewPacer(worksclient.DefaultInterval))
//
// # Leader lock
//
// worksredis.LeaderLock lets one replica at a time run the relay: the
// holder of a Redis key ("baron:worksmobile:relay:leader" by default, TTL
// 30 s). Without Redis there is nothing to take: a single instance just
// runs the relay.
package worksclient
