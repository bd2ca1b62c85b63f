// Package grpcrl is rlkit for gRPC: server interceptors that limit calls
// under the same YAML rules, algorithms and stores as the HTTP adapters,
// and client interceptors that pace outbound calls and slow down when a
// server says its limit is near.
//
// # Server
//
//	cfg, err := core.LoadConfig("ratelimit.yaml")
//	if err != nil { ... }
//	rl := grpcrl.New(cfg,
//		grpcrl.WithKeyFunc(grpcrl.FirstKey(
//			grpcrl.JWTSubject(verify),      // a verified bearer token's subject,
//			grpcrl.MetadataKey("x-api-key"), // else an API key,
//		)), // else the peer's IP
//	)
//	srv := grpc.NewServer(
//		grpc.ChainUnaryInterceptor(rl.Unary()),
//		grpc.ChainStreamInterceptor(rl.Stream()),
//	)
//
// A call is decided as an HTTP request would be: method POST, path its
// full method name "/pkg.Service/Method", so a rule's paths name methods
// ("/pkg.Service/Search", or "/pkg.Service/*" for a whole service) and
// exempt_paths list methods never counted ("/grpc.health.v1.Health/Check").
// A stream is counted once, when it opens. The interceptors only translate:
// call → (method, path, identity, bypass) → core decision → status and
// metadata, through core.Flow, so for the same rules they give the same
// counts, rate-limit values and waits as the HTTP adapters. New takes a
// core.Limits: the *core.Config, counted in a memory store of the
// interceptors' own, or a *core.Limiter, whose core.Options say everything
// about the limiter itself (its store, metadata style, failure policy,
// observer, client IP, the Decision in the call's context), and which may
// be shared with an HTTP adapter serving the same API.
//
// # Identity
//
// A call counts under what its key function (WithKeyFunc) returns, else
// its peer's IP. The key functions here read incoming metadata, every entry
// of which the client controls:
//
//   - JWTSubject: the subject of an "authorization: Bearer <token>" entry,
//     as "sub:<subject>", from a verify function the application gives;
//     a token that fails verification rejects the call (Unauthenticated),
//     so a made-up token never picks its own identity;
//   - MetadataKey: an API key entry, stored and logged only as a keyed
//     hash (core.SecretIdentity), never in clear. Its value is taken as it
//     is: a client that sends a new key with each call gets a new quota
//     with each one, so check keys before the limiter (an authenticating
//     interceptor earlier in the chain) or keep a limit per peer IP too;
//   - FirstKey: the first of several that names the caller.
//
// The peer's IP is its TCP address; forwarding metadata (x-forwarded-for,
// forwarded, x-real-ip) is believed only from proxies core.WithClientIP trusts.
// The identities are those the HTTP adapters give for the same token, the
// same API key in the same-named header, or the same client IP, so a service
// that serves one API over both, on one store, counts a caller once.
//
// A rule's key (core.RuleSpec.Key) reads a call as it reads a request:
// ip is the peer's IP, header:<Name> the first value of the metadata entry
// of that name (hashed), and param:<name> the segment of the full method
// the rule's pattern names ("/shop.Orders/{method}" with param:method
// counts each method apart).
//
// # Answers
//
// Every call counted carries the rate-limit headers an HTTP adapter writes,
// as header metadata in lower case: ratelimit-policy and ratelimit (the IETF
// draft, by default), or x-ratelimit-limit, -remaining and -reset. A refused
// call also carries retry-after (whole seconds, rounded up) and ends with
// DeniedStatus: ResourceExhausted with a google.rpc.RetryInfo detail (the
// exact wait) over a limit, Unavailable when the store fails and the policy
// is fail-closed, PermissionDenied from a banned network; WithDeniedHandler
// gives the application's own. A rule counted by outcome (RuleSpec.Count)
// counts a call with the HTTP form of the status its handler returned
// (OK 200, NotFound 404, Internal 500...). core.WithDecisionContext(true) puts
// each call's Decision into the handler's context (DecisionOf), so that the
// handler can report the remaining quota.
//
// # Client
//
// UnaryClientInterceptor and StreamClientInterceptor pace calls with an
// outbound.Waiter (an outbound.Limiter under the same rules, whose paths are
// again full method names): each call waits for its turn under a key (by
// default the connection's target), and after it the interceptors read the
// server's rate-limit metadata and RetryInfo (outbound.ReadSignal) and hand
// them to the waiter, so that a client slows down before the server refuses
// it rather than after.
package grpcrl
