package core_test

import (
	"context"
	"fmt"
	"net/http/httptest"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
)

// A banned network gets 403 before anything is counted, an allowed
// identity passes uncounted, and a caller denied twice within a minute
// is refused for 15 minutes without counting.
func Example_allowBanPenalty() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: login
      paths: ["/login"]
      limit: "1/minute"
      penalty: {after: 2, within: 1m, ban: 15m}
  allow:
    identities: ["sub:ops-bot"]
  ban:
    networks: ["198.51.100.0/24"]
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_040, 0))
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock))))
	show := func(identity string) {
		d := lim.Decide(context.Background(), "POST", "/login", identity, false)
		w := httptest.NewRecorder()
		if d.Allowed {
			d.SetHeaders(w.Header())
		} else {
			d.WriteDenied(w)
		}
		rule := "-"
		if d.Rule != nil {
			rule = d.Rule.Name
		}
		fmt.Printf("%-13s %d rule=%-5s penalty=%-5v Retry-After=%q %s\n", identity, w.Code, rule, d.Penalty, w.Header().Get("Retry-After"), w.Body.String()+"|")
	}
	show("198.51.100.7")
	show("sub:ops-bot")
	show("sub:ops-bot")
	show("sub:alice")
	show("sub:alice")
	show("sub:alice") // the second denial sets the ban
	clock.Advance(5 * time.Minute)
	show("sub:alice")
	// Output:
	// 198.51.100.7  403 rule=-     penalty=false Retry-After="" {"detail": "Forbidden"}|
	// sub:ops-bot   200 rule=-     penalty=false Retry-After="" |
	// sub:ops-bot   200 rule=-     penalty=false Retry-After="" |
	// sub:alice     200 rule=login penalty=false Retry-After="" |
	// sub:alice     429 rule=login penalty=false Retry-After="60" {"detail": "Rate limit exceeded for 'login' requests"}|
	// sub:alice     429 rule=login penalty=true  Retry-After="900" {"detail": "Rate limit exceeded for 'login' requests"}|
	// sub:alice     429 rule=login penalty=true  Retry-After="600" {"detail": "Rate limit exceeded for 'login' requests"}|
}
