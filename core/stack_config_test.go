package core_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/rlkit/rlkit/core"
)

// stackedRule is a rule file of a stacked rule at line 4 (its limit on
// line 7), whose other fields follow on lines 8 and after, then an
// ordinary rule.
func stackedRule(fields ...string) string {
	doc := "rate_limit:\n  enabled: true\n  rules:\n    - name: global\n      stack: true\n      paths: [\"/api/**\"]\n      limit: \"100/hour\"\n"
	for _, f := range fields {
		doc += "      " + f + "\n"
	}
	return doc + "    - name: search\n      paths: [\"/api/search\"]\n      limit: \"10/minute\"\n"
}

func TestStackConfig(t *testing.T) {
	cfg, err := core.ParseConfig([]byte(stackedRule("key: ip", "algorithm: gcra", "burst: 20", "weights: {\"/api/export\": 5}")), "t.yaml")
	if err != nil {
		t.Fatal(err)
	}
	// The stacked rule takes no path from the rule after it, which stays
	// reachable; both are rules of the file.
	if r, _ := cfg.Match("GET", "/api/search"); r == nil || r.Name != "search" {
		t.Errorf("Match /api/search: %v, want search", r)
	}
	if r, _ := cfg.Match("GET", "/api/other"); r == nil || r.Name != core.DefaultRuleName {
		t.Errorf("Match /api/other: %v, want the default (a stacked rule is matched apart)", r)
	}
	if g := cfg.Rule("global"); g == nil || !g.Stacked() || cfg.Rule("search").Stacked() {
		t.Errorf("Rule(global).Stacked() false, or search stacked")
	}
}

func TestStackConfigErrors(t *testing.T) {
	const at = `rate-limit config t.yaml:`
	const why = `a stacked rule (stack: true) is a limit counted beside the rule that applies, which alone has `
	tests := []struct {
		name string
		doc  string
		want []string
	}{
		{"count", stackedRule("count: failures"), []string{at + `8: rule "global": field "count": value "failures": ` + why + "count"}},
		{"clear_on_success", stackedRule("count: failures", "clear_on_success: true"), []string{
			at + `8: rule "global": field "count": value "failures": ` + why + "count",
			at + `9: rule "global": field "clear_on_success": value "true": ` + why + "clear_on_success",
		}},
		{"cost", stackedRule("algorithm: gcra", "cost: response"), []string{at + `9: rule "global": field "cost": value "response": ` + why + "cost"}},
		{"concurrent", stackedRule("concurrent: 2"), []string{at + `8: rule "global": field "concurrent": value "2": ` + why + "concurrent"}},
		{"lease", stackedRule("concurrent: 2", "lease: 1m"), []string{
			at + `8: rule "global": field "concurrent": value "2": ` + why + "concurrent",
			at + `9: rule "global": field "lease": value "1m": ` + why + "lease",
		}},
		{"wait", stackedRule("wait: 2s"), []string{at + `8: rule "global": field "wait": value "2s": ` + why + "wait"}},
		{"wait_queue", stackedRule("wait: 2s", "wait_queue: 5"), []string{
			at + `8: rule "global": field "wait": value "2s": ` + why + "wait",
			at + `9: rule "global": field "wait_queue": value "5": ` + why + "wait_queue",
		}},
		{"penalty", stackedRule("penalty: {after: 3, within: 1m, ban: 1h}"), []string{at + `8: rule "global": field "penalty": ` + why + "penalty"}},
		{"no limit", "rate_limit:\n  enabled: true\n  rules:\n    - name: global\n      stack: true\n      paths: [\"/**\"]\n",
			[]string{at + `4: rule "global": field "limit": no limit given`}},
		{"exempt", "rate_limit:\n  enabled: true\n  exempt_paths: [\"/static/**\"]\n  rules:\n    - name: global\n      stack: true\n      paths: [\"/static/css\"]\n      limit: \"1/second\"\n",
			[]string{at + `7: rule "global": field "paths": value "/static/css": exempt by exempt_paths "/static/**" (line 3): a request for this path is never counted (the rule would count only other spellings of it, that decode or clean to another path)`}},
		{"names", "rate_limit:\n  enabled: true\n  rules:\n    - name: api\n      stack: true\n      paths: [\"/**\"]\n      limit: [\"1/second\", \"100/hour\"]\n    - name: api-1h\n      paths: [\"/x\"]\n      limit: \"5/hour\"\n",
			[]string{at + `8: rule "api-1h": field "name": value "api-1h": its limit is named "api-1h" in the RateLimit headers, as one of rule "api", which a request may count under with it (stack: true): rename one`}},
		{"not a bool", "rate_limit:\n  enabled: true\n  rules:\n    - name: global\n      stack: maybe\n      paths: [\"/**\"]\n      limit: \"1/second\"\n",
			[]string{at + `5: rule "global": field "stack": value "maybe": want true or false`}},
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
			if !errors.As(err, &ce) || ce.File != "t.yaml" || ce.Line == 0 || ce.Rule == "" || ce.Field == "" {
				t.Fatalf("errors.As: %+v, want a ConfigError naming the file, line, rule and field", ce)
			}
		})
	}
}

func TestStackConfigTooMany(t *testing.T) {
	spec := core.Spec{Enabled: true}
	for i := range 9 {
		spec.Rules = append(spec.Rules, core.RuleSpec{Name: "s" + string(rune('a'+i)), Stack: true, Paths: []string{"/**"}, Limit: []string{"100/hour"}})
	}
	_, err := core.NewConfig(spec)
	want := `rate-limit config: rule "si": field "stack": value "true": 9 stacked rules, at most 8: a request counts under at most 9 rules`
	if err == nil || err.Error() != want {
		t.Fatalf("error %v, want %q", err, want)
	}
	spec.Rules = spec.Rules[:8]
	if _, err := core.NewConfig(spec); err != nil {
		t.Fatalf("8 stacked rules: %v", err)
	}
}
