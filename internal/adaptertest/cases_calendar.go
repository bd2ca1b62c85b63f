package adaptertest

import (
	"fmt"
	"strings"
	"time"
	_ "time/tzdata" // Europe/Berlin, on machines without a zone database
)

// calendarConfig is ExampleConfig with an LLM API's quota: 3 calls a
// calendar day and 5 a calendar month in Europe/Berlin (small, for the
// cases).
const calendarConfig = ExampleConfig + `    - name: llm
      paths: ["/v1/chat"]
      window: calendar
      timezone: Europe/Berlin
      limit: ["3/day", "5/month"]
`

// calendarRules moves ExampleConfig's default and exempt paths after the
// rules calendarConfig appends.
func calendarRules(yaml string) string {
	tail := "  default: \"120/minute\"\n  exempt_paths: [\"/health\", \"/ready\", \"/docs\", \"/redoc\", \"/openapi.json\"]\n"
	return strings.Replace(yaml, tail, "", 1) + tail
}

// llmDraft is the draft headers of the llm rule: each limit's window w
// (the period's length), remaining r and seconds t to the period's end.
func llmDraft(dayW, monthW, dayR, dayT, monthR, monthT int) []string {
	return []string{
		hPolicy, fmt.Sprintf(`"llm-day";q=3;w=%d, "llm-month";q=5;w=%d`, dayW, monthW),
		hRateLimit, fmt.Sprintf(`"llm-day";r=%d;t=%d, "llm-month";r=%d;t=%d`, dayR, dayT, monthR, monthT),
	}
}

// calendarCases count a rule per calendar day and month of
// Europe/Berlin through every adapter, across 2024-03-31, a day of 23
// hours (the clocks skip 02:00), in a March of 31 days less an hour: the
// draft headers show each period's length and the seconds to its end,
// Retry-After the wait to the next midnight (or month), and the legacy
// headers the deciding limit's.
func calendarCases() []testCase {
	const take = "X-User:alice llm 1"
	chat := get("/v1/chat", alice...)
	const day, h = 24 * time.Hour, time.Hour
	// The suite's clock starts at 2023-11-14 23:14 CET: 46 minutes and
	// 136 days to 2024-03-30 00:00 CET.
	toMarch30 := 136*day + 46*time.Minute
	return []testCase{
		{
			name:   "CalendarDraft",
			config: calendarRules(calendarConfig),
			steps: seq(
				advance(toMarch30),
				hit(chat, ok(llmDraft(86400, 2674800, 2, 86400, 4, 169200)...), take),
				hit(chat, ok(llmDraft(86400, 2674800, 1, 86400, 3, 169200)...), take),
				hit(chat, ok(llmDraft(86400, 2674800, 0, 86400, 2, 169200)...), take),
				hit(chat, limited("llm", "86400", llmDraft(86400, 2674800, 0, 86400, 2, 169200)...), take),
				advance(day), // March 31st: 23 hours
				hit(chat, ok(llmDraft(82800, 2674800, 2, 82800, 1, 82800)...), take),
				hit(chat, ok(llmDraft(82800, 2674800, 1, 82800, 0, 82800)...), take),
				advance(23*h-time.Second),
				hit(chat, limited("llm", "1", llmDraft(82800, 2674800, 1, 1, 0, 1)...), take), // the month denies
				advance(time.Second), // April 1st, 00:00 CEST
				hit(chat, ok(llmDraft(86400, 2592000, 2, 86400, 4, 2592000)...), take),
			),
		},
		{
			name:   "CalendarLegacy",
			config: calendarRules(strings.Replace(calendarConfig, "  enabled: true\n", "  enabled: true\n  headers: legacy\n", 1)),
			steps: seq(
				// 46 minutes to midnight: the day decides with 2 left.
				hit(chat, ok(legacy(3, 2, 2760)...), take),
				hit(chat, ok(legacy(3, 1, 2760)...), take),
				hit(chat, ok(legacy(3, 0, 2760)...), take),
				hit(chat, limited("llm", "2760", legacy(3, 0, 2760)...), take),
				advance(46*time.Minute),
				// November 15th: the month, 2 left, has fewer units than the day.
				hit(chat, ok(legacy(5, 1, 16*86400)...), take),
			),
		},
	}
}
