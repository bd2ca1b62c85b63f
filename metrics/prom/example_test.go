package prom_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/metrics/prom"
)

func Example() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  rules:
    - name: search
      paths: ["/api/search"]
      limit: "2/minute"
`), "ratelimit.yaml")
	if err != nil {
		panic(err)
	}
	reg := prometheus.NewRegistry() // or the default: leave out WithRegisterer
	m, err := prom.New(prom.WithRegisterer(reg))
	if err != nil {
		panic(err)
	}
	clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
	lim := core.NewLimiter(cfg, core.WithStore(memstore.New(memstore.WithClock(clock))), core.WithObserver(m.Observe))
	m.Watch(lim)
	for range 3 {
		lim.Decide(context.Background(), "GET", "/api/search", "alice", false)
	}

	// What Prometheus scrapes from promhttp.HandlerFor(reg, ...).
	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "rlkit_decisions_total") {
			fmt.Println(sc.Text())
		}
	}
	// Output:
	// rlkit_decisions_total{outcome="allowed",rule="search"} 2
	// rlkit_decisions_total{outcome="denied",rule="search"} 1
}
