package core_test

import (
	"context"
	"fmt"
	"net/http"

	"github.com/rlkit/rlkit/core"
)

// ExampleLimiter_Complete shows a concurrency limit: two reports of one
// caller may run at once; the third is refused until one is completed.
func ExampleLimiter_Complete() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: reports
      paths: ["/api/reports"]
      concurrent: 2
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	lim := core.NewLimiter(cfg)
	ctx := context.Background()
	a := lim.Decide(ctx, "POST", "/api/reports", "alice", false)
	b := lim.Decide(ctx, "POST", "/api/reports", "alice", false)
	c := lim.Decide(ctx, "POST", "/api/reports", "alice", false)
	fmt.Println(a.Allowed, b.Allowed, c.Allowed, c.ConcurrencyDenied, c.Status(), c.RetryAfterSeconds())
	lim.Complete(ctx, &a, http.StatusOK) // a's report is done: its slot goes back
	d := lim.Decide(ctx, "POST", "/api/reports", "alice", false)
	fmt.Println(d.Allowed, d.Deferred())
	// Output:
	// true true false true 429 1
	// true true
}
