package outbound

import (
	"fmt"
	"time"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/algo"
)

// Rate is the configuration of one limit for every request: count per
// period per key, with a burst of burst requests that may start at once
// (0 means 1: starts evenly spaced period/count apart, no burst), counted
// with GCRA; no path is exempt. Rate(240, time.Minute, 0) starts the
// requests of one key exactly 250 ms apart, worksclient's pacing.
// The error names the bad value.
func Rate(count int64, period time.Duration, burst int64) (*core.Config, error) {
	if burst == 0 {
		burst = 1
	}
	cfg, err := core.RateConfig(algo.GCRA, algo.Limit{Count: count, Period: period, Burst: burst})
	if err != nil {
		return nil, fmt.Errorf("outbound: rate %d per %v, burst %d: %w", count, period, burst, err)
	}
	return cfg, nil
}
