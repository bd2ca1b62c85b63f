// Command rlkit is the operator's tool for rate limits: it checks and
// explains rule files, replays access logs through them, and reads and
// clears the counters a service keeps in Redis.
//
//	go install github.com/rlkit/rlkit/cmd/rlkit@latest
//	rlkit check ratelimit.yaml              # every error, as file:line:col: message
//	rlkit check --format json a.yaml b.yaml # one JSON array, for CI annotations
//	rlkit check --strict ratelimit.yaml     # warnings fail the check too
//	rlkit explain --config ratelimit.yaml GET /api/search
//	rlkit replay --config ratelimit.yaml access.log.1 access.log  # what it would have refused
//
// check loads each file as core.LoadConfig does and prints every problem of
// every file; it also warns of files that load but are risky: limiting on
// with the built-in default limit, a rule counting failures with neither
// concurrent nor penalty, an exempt catch-all. It exits 0 when every file
// loads, 1 when one does not (or, with --strict, warns), 2 on a usage error.
//
// explain tells what the limiter does with one request (-H headers, --ip,
// --identity, --plan, --bypass): the path's spellings and the exempt
// pattern each matches, the allow and ban entries that hold the caller,
// the rules that count it with their limits per plan and keys, their
// Redis keys, and the status and rate-limit headers a first request gets
// through the nethttp middleware on a fresh memory store. It exits 0 with
// its report, 1 when the file does not load, 2 on a usage error.
// See docs/cli.md.
//
// keys reads and clears the counters a service keeps in Redis, keyed as
// the service's limiter keys them (core.Limiter.RuleKey, and
// core/redisstore's Inspect, Scan and InFlight):
//
//	rlkit keys --redis redis://host:6379 inspect --rule upload --identity alice
//	rlkit keys --redis redis://host:6379 reset --rule login --key ip:203.0.113.7
//	rlkit keys --cluster --redis host:6379,host2:6379 top --rule search -n 20
//
// inspect shows a key's counters per limit (used, remaining, reset,
// Retry-After), its penalty's ban and its requests in flight, writing
// nothing; reset clears them as Limiter.ResetKey does; top lists the keys
// nearest or over the limit, or banned, found by SCAN with MATCH within
// --max-scan keys examined. --header names an API key caller, --key a
// key top printed as a digest. Connection failures exit 1, naming the
// address (never a password); so does a node of a Redis Cluster named
// without --cluster. See docs/cli.md.
//
// replay replays access logs (Common or Combined Log Format, JSON lines,
// nginx JSON, Caddy's or Envoy's default format) through the limiter on
// the logs' own clock and reports, per rule, the requests it would have
// refused, the keys refused most and the limits the traffic suggests;
// package internal/replay is its engine. See docs/cli.md.
package main
