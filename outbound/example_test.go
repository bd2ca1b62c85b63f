package outbound_test

import (
	"fmt"
	"net/http"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/outbound"
)

func ExampleReadSignal() {
	h := http.Header{}
	h.Set("RateLimit-Policy", `"default";q=100;w=60`)
	h.Set("RateLimit", `"default";r=0;t=12`)
	s := outbound.ReadSignal(h.Get, time.Now())
	fmt.Println(s.HasRemaining, s.Remaining, s.Reset)

	h = http.Header{}
	h.Set("X-RateLimit-Remaining", "42")
	h.Set("X-RateLimit-Reset", "30")
	h.Set("Retry-After", "5")
	s = outbound.ReadSignal(h.Get, time.Now())
	fmt.Println(s.HasRemaining, s.Remaining, s.Reset, s.RetryAfter)
	// Output:
	// true 0 12s
	// true 42 30s 5s
}

func ExampleNewTransport() {
	cfg, err := core.ParseConfig([]byte(`
rate_limit:
  enabled: true
  algorithm: gcra
  rules:
    - name: search
      paths: ["/v1/search"]
      limit: "10/second"
      burst: 5
  default: "240/minute"
  exempt_paths: []
`), "upstream.yaml")
	if err != nil {
		panic(err)
	}
	l, err := outbound.New(cfg, nil)
	if err != nil {
		panic(err)
	}
	client := &http.Client{Transport: outbound.NewTransport(nil, l,
		outbound.WithKey(func(r *http.Request) string {
			return core.SecretIdentity("token", r.Header.Get("Authorization"))
		}),
		outbound.WithRetry(3, 30*time.Second),
	)}
	_ = client
}

func ExampleRate() {
	// worksclient's pacing: each key's requests start 250 ms apart.
	cfg, err := outbound.Rate(240, time.Minute, 0)
	if err != nil {
		panic(err)
	}
	fmt.Println(cfg.Default().Policy.Algorithm, cfg.Default().Policy.Limits[0].Period/240)
	// Output: gcra 250ms
}
