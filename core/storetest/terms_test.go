package storetest_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/core/storetest"
)

// TestExampleStore runs the suite against the example's store.
func TestExampleStore(t *testing.T) { conformance(t) }

// termsKeyed is the example's store keyed by the policy's terms: each
// policy is counted under a name that holds its Fingerprint, so a new
// count or burst starts afresh.
type termsKeyed struct{ *mapStore }

func (s termsKeyed) policy(p *store.Policy) *store.Policy {
	return &store.Policy{Name: fmt.Sprintf("%s@%x", p.Name, p.Fingerprint()), Algorithm: p.Algorithm, Limits: p.Limits, Location: p.Location}
}

func (s termsKeyed) Take(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.mapStore.Take(ctx, key, s.policy(p), cost)
}

func (s termsKeyed) Peek(ctx context.Context, key string, p *store.Policy, cost int64) (store.Result, error) {
	return s.mapStore.Peek(ctx, key, s.policy(p), cost)
}

func (s termsKeyed) Reset(ctx context.Context, key string, p *store.Policy) (bool, error) {
	return s.mapStore.Reset(ctx, key, s.policy(p))
}

// TestSuiteFailsATermsKeyedStore: a store that keys its counters by the
// policy's terms passes every check but those of new terms, which it
// fails for every algorithm. The suite runs in a child process, whose
// failures are this test's evidence.
func TestSuiteFailsATermsKeyedStore(t *testing.T) {
	if os.Getenv("STORETEST_TERMS_KEYED") == "1" {
		clock := store.NewManualClock(time.Unix(1_700_000_000, 0))
		storetest.Run(t, func() store.Store { return termsKeyed{newMapStore(clock)} }, storetest.WithClock(clock))
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestSuiteFailsATermsKeyedStore$", "-test.v")
	cmd.Env = append(os.Environ(), "STORETEST_TERMS_KEYED=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the suite passed a store keyed by terms:\n%s", out)
	}
	var failed []string
	for _, m := range regexp.MustCompile(`--- FAIL: TestSuiteFailsATermsKeyedStore/(\S+)`).FindAllSubmatch(out, -1) {
		failed = append(failed, string(m[1]))
	}
	slices.Sort(failed)
	var want []string
	for _, check := range []string{"NewTerms", "NewTermsSeveralLimits"} {
		for _, a := range []string{"fixed_window", "gcra", "sliding_window", "token_bucket"} {
			want = append(want, check+"/"+a)
		}
	}
	slices.Sort(want)
	if !slices.Equal(failed, want) {
		t.Fatalf("failed checks %q, want %q:\n%s", failed, want, out)
	}
}
