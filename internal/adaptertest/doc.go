// Package adaptertest is the conformance suite every rlkit adapter passes:
// nethttp, ginrl, echorl and fiberrl. One table of cases runs against each
// adapter through the framework's real server on loopback, and every case
// checks the whole answer: the status, the exact set of rate-limit headers
// and their values, Content-Type, Content-Length and the body (and no
// header but those and Date), plus the exact store calls (key, rule, cost)
// and observer events the request made, and whether it reached the handler.
//
// An adapter is wired once, in a start function that builds it as Setup
// says and serves it:
//
//	func TestGin(t *testing.T) { adaptertest.Run(t, startGin) }
//
//	func startGin(t *testing.T, s adaptertest.Setup) (baseURL string) {
//		r := gin.New()
//		lim := s.NewLimiter()
//		r.Use(ginrl.New(lim, ginrl.WithKeyFunc(...), ...))
//		r.NoRoute(func(c *gin.Context) {
//			s.Served(ginrl.Identity(c, lim))
//			c.Data(200, "application/json", []byte(adaptertest.OKBody))
//		})
//		return adaptertest.ServeHTTP(t, r)
//	}
//
// The handler answers with the status a request's X-Status header asks
// for (StatusHeader; 200 without it), so that the cases of rules counted
// by outcome can send failures and successes.
//
// Every wiring implements the same identity convention: the identity is
// the X-User header through the adapter's built-in HeaderKey("X-User"),
// except that X-User "bad" makes the key function fail (so the default
// error handler answers 401); "X-Role: super-admin" bypasses the limiter.
// When Setup.PlanHeader is set, the wiring gives the adapter's WithPlan a
// function returning Setup.Plan of that header's value (the plan cases use
// "X-Plan"; Setup.Plan lets them count the lookups).
//
// The application's own denied response and the Decision in the handler's
// contexts have cases of their own (cases_denied.go): the wiring passes
// Setup.Denied to the adapter's WithDeniedHandler (Setup.NewLimiter gives
// Setup.DecisionContext to core.WithDecisionContext), and with
// Setup.Report answers with what its
// handler found through core.FromContext and the adapter's DecisionOf.
//
// Same runs the table through several adapters and fails unless their
// responses are identical: same status, same headers (all but Date), same
// body, same store keys, same runs of the handler.
//
// RunPathSpellings runs a second table, the spellings of one path
// ("/api%2Fsearch", "/health/", "/health%2F", "/%68ealth", dot segments,
// double escapes), against several adapters, with the same checks, and
// compares their answers as Same does: the fault suite's
// TestFaultPathSpellings.
//
// RunWaitClientGone runs the case of a request held by its rule's wait
// whose client goes away: the wiring says whether its framework ends the
// request's context then (net/http, Gin and Echo do; Fiber does not).
//
// The stores read a store.ManualClock, so every Reset and Retry-After value
// is exact; the suite moves the clock and never sleeps. The limiters' waits
// run on the same clock's timers, which tell the cases when a request is
// held. Some cases run a second time, named "<case>Redis", over the Redis
// store (its scripts in miniredis, whose clock the suite sets before each
// call), with the same expectations; the cases of stacked rules
// (cases_stack.go) do once the Redis store is a store.MultiTaker.
package adaptertest
