// Command grpc shows rlkit on gRPC: a server whose calls are limited by
// package grpcrl under YAML rules on full method names, a client that
// calls it as fast as it can and is refused, and a client paced by the
// server's own rate-limit metadata that never is.
//
//	go run ./examples/grpc                          # server and both clients, then exit
//	go run ./examples/grpc -serve 127.0.0.1:50051   # the server only, until Ctrl-C
//
// The service, demo.Greeter, has one unary method, Hello, limited to 5 calls
// a second per API key (the x-api-key metadata entry; calls without one
// count under the peer's IP), and one stream, Chat, limited to 2 streams a
// minute (a stream counts once, when it opens). Its messages are protobuf's
// StringValue, so the example needs no generated code.
//
// The first client (API key team-a) sends 8 Hello calls at once: 5 pass,
// 3 end with ResourceExhausted, a google.rpc.RetryInfo detail saying how
// long to wait, and the ratelimit and retry-after metadata. The second
// (team-b) sends 12 calls through grpcrl.UnaryClientInterceptor on an
// outbound.Limiter whose own limit is far above the server's: it is paced
// only by what the server answers (ratelimit: r=0 → wait for the reset), so
// all 12 pass, in about 2 seconds.
package main
