package core_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

func ExampleParseLimit() {
	for _, s := range []string{"10/second", "500/hour", "30/m", "100/5min"} {
		l, err := algo.ParseLimit(s)
		fmt.Println(l.Count, l.Period, err)
	}
	_, err := algo.ParseLimit("10/fortnight")
	fmt.Println(err)
	// Output:
	// 10 1s <nil>
	// 500 1h0m0s <nil>
	// 30 1m0s <nil>
	// 100 5m0s <nil>
	// limit "10/fortnight": unknown unit "fortnight" (want second, minute, hour or day)
}

func ExampleParseConfig() {
	_, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: upload
      paths: ["/api/upload"]
      limit: "5/minute"
      weights:
        "/api/upload": 10
`), "ratelimit.yaml")
	fmt.Println(err)
	// Output:
	// rate-limit config ratelimit.yaml:9: rule "upload": field "weights": value "10": weight of "/api/upload" exceeds the rule's capacity 5 (5/minute): such a request could never pass
}

func ExampleLimiter_Decide() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/second"
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock))))
	for range 3 {
		d := lim.Decide(context.Background(), "GET", "/api/search", "alice", false)
		w := httptest.NewRecorder()
		if d.Allowed {
			d.SetHeaders(w.Header())
		} else {
			d.WriteDenied(w)
		}
		fmt.Printf("%d %s|%s|%s\n", w.Code, w.Header().Get("RateLimit"), w.Header().Get("Retry-After"), w.Body)
	}
	// Output:
	// 200 "search";r=1;t=1||
	// 200 "search";r=0;t=1||
	// 429 "search";r=0;t=1|1|{"detail": "Rate limit exceeded for 'search' requests"}
}
