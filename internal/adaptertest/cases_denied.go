package adaptertest

import (
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/rlkit/rlkit/core"
)

// The application's own denied response (WithDeniedHandler) and the
// Decision of an allowed request in the handler's contexts
// (WithDecisionContext, DecisionOf), through every adapter.

// problemType is the media type of an RFC 9457 problem.
const problemType = "application/problem+json"

// problemFormat is the body problem writes: RFC 9457 members, then what
// it read from the Decision.
const problemFormat = `{"type":"about:blank","title":%q,"status":%d,"rule":%q,"limit":%d,"remaining":%d,"retry_after_ms":%d,"store_error":%t}`

// problem is the cases' denied handler (Setup.Denied): an RFC 9457
// application/problem+json body made of what it reads from the Decision.
func problem(d *core.Decision) (status int, contentType, body string) {
	status = d.Status()
	rule := ""
	if d.Rule != nil {
		rule = d.Rule.Name
	}
	body = fmt.Sprintf(problemFormat, http.StatusText(status), status, rule,
		d.Result.Limit.Count, d.Result.Remaining, d.Result.RetryAfter.Milliseconds(), d.Err != nil)
	return status, problemType, body
}

// problemBody is problem's body for the values given.
func problemBody(status int, rule string, limit, remaining, retryAfterMS int, storeError bool) string {
	return fmt.Sprintf(problemFormat, http.StatusText(status), status, rule, limit, remaining, retryAfterMS, storeError)
}

// problem429 is the answer of problem to a request over rule's limit:
// 429, Retry-After, the rate-limit headers rl and the body.
func problem429(rule string, limit, retryAfter int, rl ...string) want {
	body := problemBody(http.StatusTooManyRequests, rule, limit, 0, retryAfter*1000, false)
	return want{http.StatusTooManyRequests, headers(rl, hRetry, strconv.Itoa(retryAfter), hType, problemType, hLength, strconv.Itoa(len(body))), body}
}

// headOf is w without its body: the answer to HEAD.
func headOf(w want) want { w.body = ""; return w }

// problem503 is the answer of problem to a request under rule when the
// store failed closed: no rate-limit headers, Retry-After 1.
func problem503(rule string) want {
	body := problemBody(http.StatusServiceUnavailable, rule, 0, 0, 0, true)
	return want{http.StatusServiceUnavailable, headers(nil, hRetry, "1", hType, problemType, hLength, strconv.Itoa(len(body))), body}
}

// reportFormat is one Decision in report's body.
const reportFormat = `{"rule":%s,"allowed":%t,"limit":%d,"remaining":%d,"store_error":%t}`

// report is the cases' handler body (Setup.Report): what the handler
// found in the request's context and in the framework's, and whether the
// two are one Decision.
func report(inRequest, inFramework *core.Decision) string {
	one := func(d *core.Decision) string {
		if d == nil {
			return "null"
		}
		rule := "null"
		if d.Rule != nil {
			rule = strconv.Quote(d.Rule.Name)
		}
		return fmt.Sprintf(reportFormat, rule, d.Allowed, d.Result.Limit.Count, d.Result.Remaining, d.Err != nil)
	}
	same := inRequest != nil && inRequest == inFramework
	return `{"request":` + one(inRequest) + `,"framework":` + one(inFramework) + `,"same":` + strconv.FormatBool(same) + `}`
}

// found is report's body for a Decision found in both contexts: rule ""
// for none (nothing counted), storeError for a store that failed open.
func found(rule string, limit, remaining int, storeError bool) string {
	r := "null"
	if rule != "" {
		r = strconv.Quote(rule)
	}
	d := fmt.Sprintf(reportFormat, r, true, limit, remaining, storeError)
	return `{"request":` + d + `,"framework":` + d + `,"same":true}`
}

// notFound is report's body when neither context holds a Decision.
const notFound = `{"request":null,"framework":null,"same":false}`

// reported is the handler's 200 with body and the rate-limit headers rl.
func reported(body string, rl ...string) want {
	return want{http.StatusOK, headers(rl, hType, jsonType, hLength, strconv.Itoa(len(body))), body}
}

func deniedCases() []testCase {
	const (
		reindexAlice = "X-User:alice reindex 1"
		searchAlice  = "X-User:alice search 1"
		batchAlice   = "X-User:alice upload 10"
		batch        = "/api/kb/k/docs/upload/batch"
	)
	withProblem := func(s *Setup) { s.Denied = problem }
	withReport := func(s *Setup) { s.DecisionContext, s.Report = true, report }
	return []testCase{
		{
			// The application's handler writes status, type and body; the
			// rate-limit headers and Retry-After are the default's.
			name:   "DeniedHandlerProblem",
			config: ExampleConfig,
			setup:  withProblem,
			steps: seq(
				hit(get("/api/kb/a/reindex", alice...), ok(draft("reindex", 2, 60, 1, 60)...), reindexAlice),
				hit(get("/api/kb/a/reindex", alice...), ok(draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				hit(get("/api/kb/a/reindex", alice...), problem429("reindex", 2, 60, draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				advance(15*time.Second),
				hit(get("/api/kb/a/reindex", alice...), problem429("reindex", 2, 45, draft("reindex", 2, 60, 0, 45)...), reindexAlice),
				// HEAD: the same status and headers (Content-Length the
				// body's), no body.
				hit(do("HEAD", "/api/kb/a/reindex", alice...), headOf(problem429("reindex", 2, 45, draft("reindex", 2, 60, 0, 45)...)), reindexAlice),
				// A weighted request: the handler sees the rule it hit.
				hit(do("POST", batch, alice...), ok(draft("upload", 30, 60, 20, 45)...), batchAlice),
				hit(do("POST", batch, alice...), ok(draft("upload", 30, 60, 10, 45)...), batchAlice),
				hit(do("POST", batch, alice...), ok(draft("upload", 30, 60, 0, 45)...), batchAlice),
				hit(do("POST", batch, alice...), problem429("upload", 30, 45, draft("upload", 30, 60, 0, 45)...), batchAlice),
				// Not a denial: the key function's error, exempt, bypass.
				hit(get("/api/kb/a/reindex", bad...), unauthorized(), ""),
				hit(get("/health", alice...), ok(), ""),
				hit(get("/api/kb/a/reindex", superAdmin...), ok(), ""),
				hit(get("/api/kb/a/reindex"), ok(draft("reindex", 2, 60, 1, 45)...), "127.0.0.1 reindex 1"),
			),
		},
		{
			name:   "DeniedHandlerLegacyHeaders",
			config: ExampleConfig,
			setup: func(s *Setup) {
				withProblem(s)
				s.Headers = ptr(core.HeadersLegacy)
			},
			steps: seq(
				times(10, func(i int) step {
					return hit(get("/api/search", alice...), ok(legacy(10, 9-i, 1)...), searchAlice)
				}),
				hit(get("/api/search", alice...), problem429("search", 10, 1, legacy(10, 0, 1)...), searchAlice),
			),
		},
		{
			name:     "DeniedHandlerFailClosed",
			config:   ExampleConfig + "  failure: closed\n",
			setup:    withProblem,
			failing:  true,
			warnings: 1,
			steps: seq(
				hit(get("/api/search", alice...), problem503("search"), searchAlice),
				hit(do("POST", batch), problem503("upload"), "127.0.0.1 upload 10"),
				hit(get("/health"), ok(), ""),
				hit(get("/api/search", superAdmin...), ok(), ""),
				hit(get("/api/search", bad...), unauthorized(), ""),
			),
		},
		{
			// Failing open denies nothing: the handler is not called.
			name:     "DeniedHandlerFailOpen",
			config:   ExampleConfig,
			setup:    withProblem,
			failing:  true,
			warnings: 1,
			steps:    seq(hit(get("/api/search", alice...), ok(), searchAlice)),
		},
		{
			name:   "DecisionContext",
			config: ExampleConfig,
			setup:  withReport,
			steps: seq(
				hit(get("/api/search", alice...), reported(found("search", 10, 9, false), draft("search", 10, 1, 9, 1)...), searchAlice),
				hit(get("/api/search", alice...), reported(found("search", 10, 8, false), draft("search", 10, 1, 8, 1)...), searchAlice),
				hit(get("/api/search"), reported(found("search", 10, 9, false), draft("search", 10, 1, 9, 1)...), "127.0.0.1 search 1"),
				hit(do("POST", batch, alice...), reported(found("upload", 30, 20, false), draft("upload", 30, 60, 20, 60)...), batchAlice),
				hit(get("/api/kb/a/reindex", alice...), reported(found("reindex", 2, 1, false), draft("reindex", 2, 60, 1, 60)...), reindexAlice),
				hit(get("/api/kb/a/reindex", alice...), reported(found("reindex", 2, 0, false), draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				// A denial never reaches the handler; the default answers.
				hit(get("/api/kb/a/reindex", alice...), limited("reindex", "60", draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				// Nothing counted: a Decision without a rule.
				hit(get("/health", alice...), reported(found("", 0, 0, false)), ""),
				hit(get("/api/search", superAdmin...), reported(found("", 0, 0, false)), ""),
				hit(get("/api/search", bad...), unauthorized(), ""),
			),
		},
		{
			name:     "DecisionContextFailOpen",
			config:   ExampleConfig,
			setup:    withReport,
			failing:  true,
			warnings: 1,
			steps:    seq(hit(get("/api/search", alice...), reported(found("search", 0, 0, true)), searchAlice)),
		},
		{
			// Off by default: neither context holds a Decision.
			name:   "DecisionContextOff",
			config: ExampleConfig,
			setup:  func(s *Setup) { s.Report = report },
			steps: seq(
				hit(get("/api/search", alice...), reported(notFound, draft("search", 10, 1, 9, 1)...), searchAlice),
				hit(get("/health", alice...), reported(notFound), ""),
			),
		},
		{
			name:  "DecisionContextNilConfig",
			setup: withReport,
			steps: seq(hit(get("/api/search", alice...), reported(found("", 0, 0, false)), "")),
		},
		{
			// Both options with the application's own limiter, given to New.
			name:    "DeniedHandlerSharedLimiter",
			config:  ExampleConfig,
			limiter: true,
			setup: func(s *Setup) {
				withProblem(s)
				withReport(s)
			},
			steps: seq(
				hit(get("/api/kb/a/reindex", alice...), reported(found("reindex", 2, 1, false), draft("reindex", 2, 60, 1, 60)...), reindexAlice),
				hit(get("/api/kb/a/reindex", alice...), reported(found("reindex", 2, 0, false), draft("reindex", 2, 60, 0, 60)...), reindexAlice),
				hit(get("/api/kb/a/reindex", alice...), problem429("reindex", 2, 60, draft("reindex", 2, 60, 0, 60)...), reindexAlice),
			),
		},
	}
}
