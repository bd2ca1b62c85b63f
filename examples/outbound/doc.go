// Command outbound shows rlkit's outbound limiter: two processes that call
// one upstream API share one limit through Redis, and neither gets a 429.
//
//	go run ./examples/outbound                                   # starts a redis-server of its own
//	go run ./examples/outbound -redis redis://127.0.0.1:6379/0   # or uses yours
//
// The program plays three parts:
//
//   - The upstream: an API on 127.0.0.1 (rlkit's own net/http middleware)
//     that allows 10 requests a second for the partner's key, counted in a
//     fixed window, and answers with RateLimit headers.
//   - Two worker processes (this program started again with -worker), each
//     sending its requests, 3 at a time, through an outbound.Transport whose
//     Limiter counts in one Redis: the rule below allows 8 a second to the
//     upstream's host, spaced evenly (GCRA, burst 1), whichever process asks.
//   - The parent, which prints what each worker and the upstream saw.
//
// The workers together keep to 8 a second: the requests take about
// (all − 1) / 8 seconds from the first start to the last, as if one process
// sent them all. Without the shared store each would send 8 a second and
// the upstream would refuse the excess.
//
// Without -redis it starts redis-server (from PATH) on a free loopback
// port, without persistence, and stops it when done.
package main
