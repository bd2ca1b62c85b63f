package core_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/rlkit/rlkit/core"
)

// concurrentRule is a rule file of one rule at line 3, whose fields
// follow on lines 6 and after.
func concurrentRule(fields ...string) string {
	return "rate_limit:\n  enabled: true\n  rules:\n    - name: api\n      paths: [\"/api\"]\n" +
		"      " + strings.Join(fields, "\n      ") + "\n"
}

func TestConcurrentConfig(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(`rate_limit:
  enabled: true
  rules:
    - name: reports
      paths: ["/reports"]
      concurrent: 2
    - name: search
      paths: ["/search"]
      limit: "10/second"
      concurrent: 5
      lease: 2m
    - name: plain
      paths: ["/plain"]
      limit: "1/second"
    - name: export
      paths: ["/export"]
      concurrent: 1
      wait: 2s
      wait_queue: 3
`), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		rule   string
		want   int64
		limits int
	}{{"reports", 2, 0}, {"search", 5, 1}, {"plain", 0, 1}, {"export", 1, 0}, {"default", 0, 1}} {
		r := cfg.Rule(c.rule)
		if r.Concurrent() != c.want || len(r.Policy.Limits) != c.limits {
			t.Errorf("rule %s: Concurrent() = %d, %d limits; want %d, %d", c.rule, r.Concurrent(), len(r.Policy.Limits), c.want, c.limits)
		}
	}
	// A wait on a rule that bounds requests in flight only: a request
	// waits for a slot.
	if w := cfg.Rule("export").Wait(); w != 2*time.Second {
		t.Errorf("export: Wait() = %v, want 2s", w)
	}
	// In code, 0 means none.
	if _, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{{Name: "a", Paths: []string{"/a"}, Limit: []string{"1/second"}, Concurrent: 0}}}); err != nil {
		t.Errorf("Concurrent 0 in code: %v, want none", err)
	}
	if _, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{{Name: "a", Paths: []string{"/a"}, Concurrent: 3, Lease: "1s"}}}); err != nil {
		t.Errorf("Concurrent 3 alone in code: %v", err)
	}
}

func TestConcurrentConfigErrors(t *testing.T) {
	const at = `rate-limit config t.yaml:`
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"zero", concurrentRule(`limit: "1/second"`, "concurrent: 0"),
			[]string{at + `7: rule "api": field "concurrent": value "0": want the most requests of one identity in flight at once: at least 1`}},
		{"zero alone", concurrentRule("concurrent: 0"),
			[]string{at + `6: rule "api": field "concurrent": value "0": want the most requests of one identity in flight at once: at least 1`}},
		{"negative", concurrentRule("concurrent: -3"),
			[]string{at + `6: rule "api": field "concurrent": value "-3": want the most requests of one identity in flight at once: at least 1`}},
		{"too many", concurrentRule("concurrent: 2147483648"),
			[]string{at + `6: rule "api": field "concurrent": value "2147483648": at most 2147483647`}},
		{"not an integer", concurrentRule("concurrent: many"),
			[]string{at + `6: rule "api": field "concurrent": value "many": want an integer`}},
		{"lease without concurrent", concurrentRule(`limit: "1/second"`, "lease: 30s"),
			[]string{at + `7: rule "api": field "lease": value "30s": a lease is a concurrency limit's: it needs concurrent`}},
		{"lease under a second", concurrentRule("concurrent: 2", "lease: 500ms"),
			[]string{at + `7: rule "api": field "lease": value "500ms": unknown unit "ms" (want second, minute, hour or day): a lease is a count and a unit, such as 30s, 2m or 1h`}},
		{"lease of zero seconds", concurrentRule("concurrent: 2", "lease: 0s"),
			[]string{at + `7: rule "api": field "lease": value "0s": period multiplier "0" is not an integer in [1, 1048576]: a lease is a count and a unit, such as 30s, 2m or 1h`}},
		{"lease of no unit", concurrentRule("concurrent: 2", "lease: soon"),
			[]string{at + `7: rule "api": field "lease": value "soon": unknown unit "soon" (want second, minute, hour or day): a lease is a count and a unit, such as 30s, 2m or 1h`}},
		{"lease over a day", concurrentRule("concurrent: 2", "lease: 2d"),
			[]string{at + `7: rule "api": field "lease": value "2d": at most a day: a process that dies holding slots loses them for that long`}},
		{"lease not a string", concurrentRule("concurrent: 2", "lease: [1s]"),
			[]string{at + `7: rule "api": field "lease": want a string`}},
		{"no limit nor concurrent", concurrentRule("mode: enforce"),
			[]string{at + `4: rule "api": field "limit": no limit given`}},
		{"burst without limit", concurrentRule("concurrent: 2", "algorithm: gcra", "burst: 3"),
			[]string{
				at + `7: rule "api": field "algorithm": value "gcra": an algorithm counts a rule's limits, and the rule has no limit (concurrent alone bounds requests in flight, one slot each)`,
				at + `8: rule "api": field "burst": value "3": a burst is a limit's, and the rule has no limit (concurrent alone bounds requests in flight, one slot each)`,
			}},
		{"weights without limit", concurrentRule("concurrent: 2", "weights: {\"/api\": 2}"),
			[]string{at + `7: rule "api": field "weights": value "/api": weights are costs against a rule's limits, and the rule has no limit (concurrent alone bounds requests in flight, one slot each)`}},
		{"count without limit", concurrentRule("concurrent: 2", "count: failures"),
			[]string{at + `7: rule "api": field "count": value "failures": count says which requests a rule's limits count, and the rule has no limit (concurrent alone bounds requests in flight, one slot each)`}},
		{"penalty without limit", concurrentRule("concurrent: 2", "penalty: {after: 3, within: 1m, ban: 1h}"),
			[]string{at + `7: rule "api": field "penalty": a penalty follows denials by a rule's limits, and the rule has no limit (concurrent alone bounds requests in flight, one slot each)`}},
		{"wait in shadow mode without limit", concurrentRule("concurrent: 2", "mode: shadow", "wait: 2s"),
			[]string{at + `8: rule "api": field "wait": value "2s": a rule in shadow mode refuses nothing, so no request would wait`}},
		{"wait_queue without wait", concurrentRule("concurrent: 2", "wait_queue: 5"),
			[]string{at + `7: rule "api": field "wait_queue": value "5": wait_queue needs wait: it bounds the requests held by the rule's wait`}},
		{"calendar without limit", concurrentRule("concurrent: 2", "window: calendar", "timezone: Europe/Berlin"),
			[]string{
				at + `7: rule "api": field "window": value "calendar": a window counts a rule's limits, and the rule has no limit (concurrent alone bounds requests in flight, one slot each)`,
				at + `8: rule "api": field "timezone": value "Europe/Berlin": a time zone places a calendar rule's periods, and the rule has no limit (concurrent alone bounds requests in flight, one slot each)`,
			}},
		{"cost without limit", concurrentRule("concurrent: 2", "cost: response"),
			[]string{at + `7: rule "api": field "cost": value "response": a cost is charged against a rule's limits, and the rule has no limit (concurrent alone bounds requests in flight, one slot each)`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := core.ParseConfig([]byte(tt.doc), "t.yaml")
			if err == nil {
				t.Fatalf("loaded %v, want errors %q", cfg, tt.want)
			}
			if got := err.Error(); got != strings.Join(tt.want, "\n") {
				t.Fatalf("error text:\n got %q\nwant %q", got, strings.Join(tt.want, "\n"))
			}
			var ce *core.ConfigError
			if !errors.As(err, &ce) || ce.File != "t.yaml" || ce.Line == 0 || ce.Rule != "api" || ce.Field == "" {
				t.Fatalf("errors.As: %+v, want a ConfigError naming the file, line, rule and field", ce)
			}
		})
	}
	// In code: a negative count and a lease without concurrent.
	_, err := core.NewConfig(core.Spec{Enabled: true, Rules: []core.RuleSpec{
		{Name: "a", Paths: []string{"/a"}, Concurrent: -1},
		{Name: "b", Paths: []string{"/b"}, Limit: []string{"1/second"}, Lease: "10s"},
	}})
	want := `rate-limit config: rule "a": field "concurrent": value "-1": want the most requests of one identity in flight at once: at least 1` + "\n" +
		`rate-limit config: rule "b": field "lease": value "10s": a lease is a concurrency limit's: it needs concurrent`
	if err == nil || err.Error() != want {
		t.Fatalf("NewConfig: got %v\nwant %s", err, want)
	}
}
