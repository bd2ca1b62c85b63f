package adaptertest

import (
	"context"
	"strconv"
	"time"

	"github.com/rlkit/rlkit/core"
)

// CostHeader, when a request has it, holds the cost the handler behind
// the adapter reports once it has served the request (ReportCost), for
// the rules charged by response.
const CostHeader = "X-Cost"

// BatchHeader holds the cost of a request known before the handler: every
// wiring passes the adapter's WithCost a function returning BatchCost of
// its value.
const BatchHeader = "X-Batch"

// ReportCost is what the handler behind the adapter does with the
// CostHeader value v: core.SetCost(ctx, v) when v is an integer, ctx being
// the context the adapter hands the handler.
func ReportCost(ctx context.Context, v string) {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		core.SetCost(ctx, n)
	}
}

// BatchCost is the cost a BatchHeader value v gives: the integer it
// holds, else 0 (the rule's weights).
func BatchCost(v string) int64 {
	n, _ := strconv.ParseInt(v, 10, 64)
	return n
}

// costConfig has a rule charged by response (an LLM endpoint: 100 tokens
// a minute, as a token bucket) and one whose cost the request gives
// before the handler.
const costConfig = `
rate_limit:
  enabled: true
  rules:
    - name: llm
      paths: ["/v1/chat"]
      limit: "100/minute"
      algorithm: token_bucket
      cost: response
    - name: batch
      paths: ["/v1/batch"]
      limit: "10/minute"
      algorithm: gcra
  default: "100/minute"
`

// costCases are the cases of costs known after the response (cost:
// response, the handler's core.SetCost) and before the handler from the
// request (the adapter's WithCost).
func costCases() []testCase {
	chat := func(cost string) req {
		if cost == "" {
			return do("POST", "/v1/chat", alice...)
		}
		return do("POST", "/v1/chat", with(alice, []string{CostHeader, cost})...)
	}
	batch := func(n string) req { return do("POST", "/v1/batch", with(alice, []string{BatchHeader, n})...) }
	const peek = "peek X-User:alice llm 1"
	charge := func(n int) string { return peek + "; charge X-User:alice llm " + strconv.Itoa(n) }
	llm := func(r, t int) []string { return draft("llm", 100, 60, r, t) }
	return []testCase{
		{
			name:   "CostResponse",
			config: costConfig,
			redis:  true,
			steps: []step{
				// Admitted while a unit is left (a peek of cost 1); each
				// charged what its handler reported.
				{req: chat("98"), want: ok(llm(99, 1)...), take: charge(98)},
				{req: chat(""), want: ok(llm(1, 60)...), take: charge(1)}, // none reported: 1
				// One unit left, and the answer costs 30: 29 owed.
				{req: chat("30"), want: ok(llm(0, 60)...), take: charge(30)},
				// In debt: refused until 30 units have come back (18s), the
				// reset that of the debt (129 units: 77.4s).
				{req: chat("5"), want: limited("llm", "18", llm(0, 78)...), take: peek},
				{adv: 17 * time.Second},
				{req: chat("5"), want: limited("llm", "1", llm(0, 61)...), take: peek},
				{adv: time.Second},
				{req: chat("0"), want: ok(llm(0, 60)...), take: charge(0)},
				{req: chat("2"), want: ok(llm(0, 60)...), take: charge(2)},
				{req: chat(""), want: limited("llm", "2", llm(0, 61)...), take: peek},
			},
		},
		{
			name:   "CostBeforeTheHandler",
			config: costConfig,
			redis:  true,
			steps: []step{
				{req: batch("4"), want: ok(draft("batch", 10, 60, 6, 24)...), take: "X-User:alice batch 4"},
				{req: batch(""), want: ok(draft("batch", 10, 60, 5, 30)...), take: "X-User:alice batch 1"}, // none: 1
				{req: batch("-3"), want: ok(draft("batch", 10, 60, 4, 36)...), take: "X-User:alice batch 1"},
				// Over the capacity: refused as a request with no room
				// is, and nothing taken.
				{req: batch("11"), want: limited("batch", "60", draft("batch", 10, 60, 4, 36)...), take: "X-User:alice batch 11"},
				{req: batch("4"), want: ok(draft("batch", 10, 60, 0, 60)...), take: "X-User:alice batch 4"},
				// A cost known before the handler is charged by response
				// when the handler reports none.
				{req: do("POST", "/v1/chat", with(alice, []string{BatchHeader, "40"})...), want: ok(llm(99, 1)...), take: charge(40)},
				{req: do("POST", "/v1/chat", alice...), want: ok(llm(59, 25)...), take: charge(1)},
			},
		},
	}
}
