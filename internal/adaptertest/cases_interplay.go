package adaptertest

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core"
)

// interplayCases check the customer features together (lists,
// penalties, counting by outcome, plans), through every adapter: the application's denied handler for a banned network (403),
// a penalty (429) and a rule counted by outcome; the Decision in context
// for a request counted by outcome; a plan beside a penalty.
func interplayCases() []testCase {
	withProblem := func(s *Setup) { s.Denied = problem }
	withReport := func(s *Setup) { s.DecisionContext, s.Report = true, report }
	const penaltyConfig = `
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "2/minute"
      penalty: {after: 1, within: 1m, ban: 15m}
`
	const (
		ban     = "X-User:alice login!ban 0"
		count   = ban + "; X-User:alice login 1"
		denial  = count + "; X-User:alice login!denials 1"
		setBan  = denial + "; X-User:alice login!ban 1"
		loginOK = "X-User:alice"
	)
	forbiddenProblem := func() want {
		body := problemBody(http.StatusForbidden, "", 0, 0, 0, false)
		return want{http.StatusForbidden, headers(nil, hType, problemType, hLength, strconv.Itoa(len(body))), body}
	}
	loginFail := func() req { return answering("POST", "/login", alice, 401) }
	return []testCase{
		{
			name:   "InterplayBannedDeniedHandler",
			config: strings.Replace(ExampleConfig, "  default:", "  ban:\n    networks: [\"127.0.0.0/8\"]\n  default:", 1),
			setup:  withProblem,
			steps: seq(
				func() step { s := banned(get("/api/search", alice...)); s.want = forbiddenProblem(); return s }(),
				func() step {
					s := banned(do(http.MethodHead, "/api/search", alice...))
					s.want = headOf(forbiddenProblem())
					return s
				}(),
			),
		},
		{
			name:   "InterplayPenaltyDeniedHandler",
			config: penaltyConfig,
			setup:  withProblem,
			steps: seq(
				penalized(do(http.MethodPost, "/login", alice...), ok(draft("login", 2, 60, 1, 60)...), count, "login", loginOK, core.OutcomeAllowed),
				penalized(do(http.MethodPost, "/login", alice...), ok(draft("login", 2, 60, 0, 60)...), count, "login", loginOK, core.OutcomeAllowed),
				penalized(do(http.MethodPost, "/login", alice...), problem429("login", 2, 900, draft("login", 2, 60, 0, 900)...), setBan, "login", loginOK, core.OutcomeDenied),
				advance(time.Minute),
				penalized(do(http.MethodPost, "/login", alice...), problem429("login", 2, 840, draft("login", 2, 60, 0, 840)...), ban, "login", loginOK, core.OutcomePenalized),
			),
		},
		{
			name:   "InterplayCountFailuresDeniedHandler",
			config: outcomeConfig,
			setup:  withProblem,
			steps: []step{
				{req: loginFail(), want: answered(401, draft("login", 3, 60, 2, 60)...), take: "peek X-User:alice login 1; X-User:alice login 1"},
				{req: loginFail(), want: answered(401, draft("login", 3, 60, 1, 60)...), take: "peek X-User:alice login 1; X-User:alice login 1"},
				{req: loginFail(), want: answered(401, draft("login", 3, 60, 0, 60)...), take: "peek X-User:alice login 1; X-User:alice login 1"},
				{req: loginFail(), want: problem429("login", 3, 60, draft("login", 3, 60, 0, 60)...), take: "peek X-User:alice login 1"},
			},
		},
		{
			// A request counted by outcome reaches the handler with its
			// Decision in both contexts.
			name:   "InterplayCountSuccessesDecisionContext",
			config: outcomeConfig,
			setup:  withReport,
			steps: []step{
				{req: get("/export", alice...), want: reported(found("export", 2, 1, false), draft("export", 2, 60, 1, 60)...), take: "peek X-User:alice export 1; X-User:alice export 1"},
				{req: get("/export", alice...), want: reported(found("export", 2, 0, false), draft("export", 2, 60, 0, 60)...), take: "peek X-User:alice export 1; X-User:alice export 1"},
				{req: get("/export", alice...), want: limited("export", "60", draft("export", 2, 60, 0, 60)...), take: "peek X-User:alice export 1"},
			},
		},
	}
}
