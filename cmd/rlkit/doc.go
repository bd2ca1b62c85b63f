// Command rlkit is the operator's tool for rate-limit configuration files.
//
//	go install github.com/rlkit/rlkit/cmd/rlkit@latest
//	rlkit check ratelimit.yaml              # every error, as file:line:col: message
//	rlkit check --format json a.yaml b.yaml # one JSON array, for CI annotations
//	rlkit check --strict ratelimit.yaml     # warnings fail the check too
//	rlkit replay --config ratelimit.yaml access.log.1 access.log  # what it would have refused
//
// check loads each file as core.LoadConfig does and prints every problem of
// every file; it also warns of files that load but are risky: limiting on
// with the built-in default limit, a rule counting failures with neither
// concurrent nor penalty, an exempt catch-all. It exits 0 when every file
// loads, 1 when one does not (or, with --strict, warns), 2 on a usage error.
//
// replay replays access logs (Common or Combined Log Format, JSON lines,
// nginx JSON, Caddy's or Envoy's default format) through the limiter on
// the logs' own clock and reports, per rule, the requests it would have
// refused, the keys refused most and the limits the traffic suggests;
// package internal/replay is its engine. See docs/cli.md.
package main
