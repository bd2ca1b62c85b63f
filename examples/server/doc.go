// Command server is rlkit's config-driven demo: a net/http server whose every
// path is rate limited by the rules of a YAML file (by default the bundled
// ratelimit.yaml, the example rule file).
//
//	go run ./examples/server
//
// It shows the usual way to wire rlkit into a service:
//
//   - An auth middleware verifies the HS256 bearer token once per request
//     and puts its claims in the request context; an invalid token gets
//     401 {"detail": "Invalid token"}, except on exempt paths (/health, ...).
//   - nethttp's middleware then counts the request under "user:<sub>"
//     (a request without a token counts under its client IP) and lets a
//     token with "role": "super-admin" through uncounted.
//   - A token's "plan" claim picks its plan (nethttp.WithPlan): the tiers
//     section of the configuration gives the plan "pro" higher limits,
//     counted apart from the rules' own; any other caller gets the rules'.
//   - Over the limit it answers 429 with Retry-After and, through its own
//     denied handler (nethttp.WithDeniedHandler), an RFC 9457 problem
//     document (Content-Type application/problem+json) whose members are
//     type, title, status, detail ("Rate limit exceeded for '<rule>'
//     requests", as the default body's), rule, plan and retry_after; a
//     store failure under "failure: closed" gets a 503 one. Every limited
//     response carries the RateLimit-Policy and RateLimit headers.
//   - POST /login takes {"user": ..., "password": "demo-password"} and
//     answers a token, or 401. Its rule counts only failures (count:
//     failures, 5/minute per client IP, token or not): a right password
//     is never counted,
//     and after 5 failures within the minute every login is refused before
//     the handler runs.
//
// On start it prints tokens for a demo user, a user of the pro plan and a
// super-admin, and curl commands that reach each limit.
//
// With -config FILE it follows the file while it serves: a change to the
// file (written in place, renamed over, or a switched symbolic link, as a
// Kubernetes ConfigMap is updated) is reloaded within a fraction of a
// second (-watch=false turns that off), and SIGHUP reloads it at once.
// The new rules take effect atomically; a rule whose name, algorithm and
// limits did not change keeps its counters, a changed one starts from
// zero. A file that does not load leaves the running rules in place and
// logs why (level=ERROR, with the file, line and field at fault).
//
// Its server bounds what a client connection can hold (see
// examples/internal/demo.ServerLimits): -read-header-timeout (5s),
// -read-timeout (30s), -write-timeout (60s), -idle-timeout (120s),
// -max-header-bytes (16384) and -max-conns (half the open-file limit, at
// most 10,000; at the cap a new connection closes the one idle longest).
//
// With -metrics ADDR it serves Prometheus metrics (package metrics/prom)
// at http://ADDR/metrics, on a listener of its own (at most 16
// connections, the longest idle closed for a new one): decisions by rule and
// outcome, store errors and call durations, the store's keys and
// evictions, and the configuration's reloads.
//
// By default counters live in memory, in this process. With -redis or
// -redis-cluster (not both) they live in Redis, through core/redisstore:
//
//	go run ./examples/server -redis redis://[user:pass@]host:port/db
//	go run ./examples/server -redis rediss://[user:pass@]host:port/db
//	go run ./examples/server -redis-cluster host:port,host:port,...
//
// -redis takes the URL of one Redis server (rediss:// for TLS; the URL is
// parsed by go-redis's ParseURL, query options included), -redis-cluster the
// addresses of some nodes of a Redis Cluster, from which the client learns
// the others. Two servers pointed at one Redis share every limit: a user gets
// each rule's limit once in total across them, not once per server. The
// banner names the store (a URL's password shown as xxxxx). On start the
// server PINGs Redis once; when Redis does not answer within 2s it prints a
// warning and starts anyway: the limiter fails open, so requests pass
// uncounted and without rate-limit headers until Redis answers (with
// "failure: closed" in the configuration, limited paths answer 503 instead).
// With -redis-cluster, when a node has cluster-require-full-coverage yes
// (Redis's default, under which one dead master stops the counting of
// every user), it logs a warning to stderr naming the nodes and the
// section "Cluster full coverage" of docs/redis.md.
package main
