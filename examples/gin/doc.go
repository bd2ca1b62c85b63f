// Command gin is rlkit's demo service on Gin: the example rules
// (examples/internal/demo/ratelimit.yaml) in front of a few JSON endpoints,
// with ginrl right after gin.Recovery.
//
//	go run ./examples/gin                 # listens on 127.0.0.1:8080
//	go run ./examples/gin -addr :9000 -config ratelimit.yaml
//
// The server's timeouts and connection limits are demo.ServerLimitFlags'
// (-read-header-timeout, -read-timeout, -write-timeout, -idle-timeout,
// -max-header-bytes, -max-conns; -h lists them with their defaults).
//
// Callers are counted by their X-API-Key header (a stand-in for your
// authentication), or by their IP without one. On start it prints curl
// lines that reach a 429.
package main
