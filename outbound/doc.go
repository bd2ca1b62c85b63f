// Package outbound paces the requests a program sends to other APIs. Where
// rlkit's adapters refuse requests over a limit, outbound waits: a request
// starts once the limit allows it, and a caller never gets a rate-limit
// error for being early.
//
// # Quick start
//
// The limits are the inbound side's rules and policies (core.Config, from
// YAML or core.NewConfig), applied to the requests a program sends:
//
//	cfg, err := core.ParseConfig([]byte(`
//	rate_limit:
//	  enabled: true
//	  algorithm: gcra
//	  rules:
//	    - name: search
//	      paths: ["/v1/search"]
//	      limit: "10/second"
//	      burst: 5
//	  default: "240/minute"
//	  exempt_paths: []
//	`), "upstream.yaml")
//	l, err := outbound.New(cfg, nil) // nil: an in-process store
//	client := &http.Client{Transport: outbound.NewTransport(nil, l)}
//
// For one limit on everything, Rate builds the configuration:
// outbound.Rate(240, time.Minute, 0) starts the requests of each key
// exactly 250 ms apart, with no burst.
//
// # Model
//
// A Limiter decides with a core.Limiter: the request's method and path
// find the rule (the first that matches, else the default), and the key
// is the identity the rule counts per. The Transport's key is the
// upstream's host by default (KeyHost); WithKey takes any function of the
// request: a token (wrap secrets in core.SecretIdentity, so that only a
// keyed hash is stored), worksclient's "METHOD normalized-path".
//
// Requests of one key under one rule wait in a queue, first come first
// served, within the process. Only the request at the head asks the
// store; denied, it sleeps the store's RetryAfter (on the Limiter's
// Clock) and asks again, so a long queue costs one store call per start.
// A request whose context ends leaves at once with ctx.Err() and takes no
// slot. Different keys never wait on each other. A cost above its rule's
// capacity, which no wait could admit, fails at once (ErrNeverAdmitted).
// Exempt paths and a disabled configuration count nothing (only the
// upstream's holds, below, apply to them); rules in shadow mode count and
// never hold a request back; a store failure starts
// the request or fails it as the configuration's failure policy says.
// Rules that count by outcome (count: failures or successes) are refused
// by New and SetConfig, since an outbound request is decided before its
// response exists; so are rules with a wait (core.RuleSpec.Wait), since
// the Limiter waits for the room itself.
//
// # Requests in flight
//
// A rule's concurrency limit (concurrent: N, core.RuleSpec.Concurrent)
// lets at most N requests of a key be in flight at once (GitHub asks its
// clients to send their requests one at a time: concurrent: 1). A request
// over it waits, as one over a rate limit does, in its key's queue, until
// a slot comes back or its context ends (ctx.Err(), no slot taken): a
// slot given back in this process wakes the head of the queue at once,
// one given back by another process sharing the store (Redis) is seen
// within 50 ms. The Transport holds the slot from the request's start
// until its response body is closed, or gives it back at once when the
// request gets no response (an error) or a response without a body; a
// retry takes a slot of its own, its wait bounded by the retry budget.
// The request's context ending gives the slot back too. Limiter.Start
// returns the done that gives it back (Starter); a request Wait starts
// gives its slot back when Observe is told of an answer under its key
// (Report). The store must bound requests in flight
// (store.ConcurrencyStore: memstore and redisstore do): New and SetConfig
// refuse the configuration otherwise.
//
// # Adapting to the upstream
//
// ReadSignal reads what a response says of the upstream's own limit: the
// IETF RateLimit headers (structured-field items `"name";r=R;t=T`, as rlkit
// servers write them, and the draft-07 dictionary), RateLimit-Remaining and
// -Reset, X-RateLimit-Remaining and -Reset (delta seconds or a Unix time),
// and Retry-After on any status. The Transport hands each Signal to the
// Limiter's Observe, which slows the key down before the upstream refuses
// it: Retry-After holds the key that long; a remaining count of 0 holds it
// until the reset; a positive count lets at most that many more requests
// start before the reset, less those still in flight. While the latest
// answer under a key reported a remaining count, the key, once its window
// has reset, starts one request and holds the others until its answer
// comes (at most a second), so that they do not all start at the reset.
// The requests a key starts before its first answer go unpaced, and so do
// those of other processes (budgets and probes stay in each process). No
// header holds a key longer
// than MaxHold. A Limiter with a nil configuration paces by these headers
// alone.
//
// With WithRetry, a rate-limit answer is retried, once the hold has
// passed, when the request is idempotent and its body can be sent again,
// within a number of attempts and a time budget. A rate-limit answer is a
// 429, 403 or 503 with Retry-After, or a 429 or 403 with a remaining count
// of 0 and a reset ahead (GitHub's X-RateLimit-Remaining: 0 with
// X-RateLimit-Reset); a 403 without those headers is an ordinary 403,
// returned as it is.
//
// # Several processes
//
// Counters are shared by giving every process's Limiter the same
// store.Store: package core/redisstore (with the same core.WithIdentityKey
// in WithCoreOptions when keys are secrets). Holds are shared through a
// HoldStore (WithHoldStore; package outbound/redishold keeps them in
// Redis). The budget derived from a remaining count stays in each process.
//
// # Bounds
//
// A Limiter's memory is bounded by the keys in use: a key's queue goes
// when it empties, and its state (holds, budget, requests in flight) when
// nothing of it is in force any more, by a sweep (when a shard's table
// doubles, and at least once a minute while it holds more than 64 keys).
// The store
// bounds its own counters (memstore.WithMaxKeys).
//
// # Time
//
// Waits run on a Clock: SystemClock (time.Now and time.NewTimer, which
// testing/synctest fakes) or a test's own (WithClock), which New also
// hands to the in-process store it makes, so a fake clock controls every
// decision.
package outbound
