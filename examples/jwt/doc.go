// Command jwt is rlkit's token-issuance demo: a net/http login service
// that issues access and refresh tokens through jwtissuer, with two limits
// in front of brute force:
//
//   - per user, on issuance: jwtissuer's built-in token bucket, 6 tokens
//     per minute per user. A login issues two tokens (access and refresh),
//     so the 4th login of a user within a minute answers 429 with
//     Retry-After and {"detail": "...", "retry_after": 20};
//   - per client IP, on requests: nethttp's middleware allows 10 POST
//     /login per minute per IP, failed logins included, and answers 429
//     {"detail": "Rate limit exceeded for 'login' requests"} past it.
//
// Validating a token (GET /me) is never limited by the issuer.
//
//	go run ./examples/jwt                 # listens on 127.0.0.1:8080
//	go run ./examples/jwt -addr :9000
//
// The server's timeouts and connection limits are demo.ServerLimitFlags'
// (-read-header-timeout, -read-timeout, -write-timeout, -idle-timeout,
// -max-header-bytes, -max-conns; -h lists them with their defaults).
//
// Endpoints: POST /login {"user": "...", "password": "..."} (demo users
// alice / wonderland and bob / builder), POST /refresh {"refresh_token":
// "..."}, GET /me with "Authorization: Bearer <access token>", GET /health.
// Tokens are HS256, signed with $RLKIT_JWT_SECRET or, without it, a public
// development secret. On start it prints curl lines that reach the 429.
package main
