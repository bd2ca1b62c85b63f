package prom_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The Prometheus rules for these metrics, and their promtool unit tests.
const (
	rulesDir      = "../../deploy/prometheus"
	rulesFile     = "rlkit-alerts.yaml"
	rulesTestFile = "rlkit-alerts.test.yaml"
	// runbook is where every alert's runbook_url points, then #alertname
	// in lower case (a heading of docs/operations.md; internal/docs checks
	// that it exists).
	runbook = "https://github.com/rlkit/rlkit/blob/main/docs/operations.md#"
)

type ruleFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []rule `yaml:"rules"`
	} `yaml:"groups"`
}

type rule struct {
	Record      string            `yaml:"record"`
	Alert       string            `yaml:"alert"`
	Expr        string            `yaml:"expr"`
	For         string            `yaml:"for"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

type ruleTests struct {
	RuleFiles []string `yaml:"rule_files"`
	Tests     []struct {
		InputSeries []struct {
			Series string `yaml:"series"`
		} `yaml:"input_series"`
		AlertRuleTest []struct {
			Alertname string `yaml:"alertname"`
			ExpAlerts []any  `yaml:"exp_alerts"`
		} `yaml:"alert_rule_test"`
		PromQLExprTest []struct {
			Expr string `yaml:"expr"`
		} `yaml:"promql_expr_test"`
	} `yaml:"tests"`
}

func readYAML(t *testing.T, name string, v any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(rulesDir, name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// recordedLabels are the labels of what a recording rule records: those
// its aggregations keep (by), else those of the series it reads.
func recordedLabels(c *catalogue, q promQL) map[string]bool {
	out := map[string]bool{}
	if len(q.by) > 0 {
		for _, l := range q.by {
			out[l] = true
		}
		return out
	}
	for _, sel := range q.selectors {
		if _, labels, ok := c.labels(sel.name); ok {
			for l := range labels {
				out[l] = true
			}
		}
	}
	return out
}

// TestAlertRules checks the rules against what New exports: every metric
// an expression names is exported or recorded by a rule of the file, and
// every label it matches or groups by is one that series has, every
// literal label value one prom uses. A recorded name's level (before its
// first colon) lists its labels ("job_rule": job and rule). Every alert
// waits (for), has a severity, a summary, a description and a runbook_url
// to its section of docs/operations.md; the alerts are one group. The
// unit tests' input series are exported metrics with their own labels,
// and each alert is tested both firing and not.
func TestAlertRules(t *testing.T) {
	var rf ruleFile
	readYAML(t, rulesFile, &rf)
	c := newCatalogue(t)
	alertGroups := 0
	var alerts []string
	for _, g := range rf.Groups {
		hasAlert := false
		for _, r := range g.Rules {
			where := g.Name + ": " + r.Record + r.Alert
			if r.Record == "" {
				hasAlert = true
				continue
			}
			q, _ := c.check(t, where, r.Expr)
			labels := recordedLabels(c, q)
			c.recorded[r.Record] = labels
			level, _, _ := strings.Cut(r.Record, ":")
			if want := strings.Split(level, "_"); !strings.Contains(r.Record, ":") || !slices.Equal(keys(labels), slicesSorted(want)) {
				t.Errorf("%s: records the labels %v; its name's level %q says %v", where, keys(labels), level, want)
			}
		}
		if hasAlert {
			alertGroups++
		}
	}
	if alertGroups != 1 {
		t.Errorf("%s: alerts in %d groups, want one", rulesFile, alertGroups)
	}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			where := g.Name + ": " + r.Alert
			alerts = append(alerts, r.Alert)
			c.check(t, where, r.Expr)
			if d, err := time.ParseDuration(r.For); err != nil || d <= 0 {
				t.Errorf("%s: for %q, want a duration", where, r.For)
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q, want warning or critical", where, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("%s: no %s annotation", where, a)
				}
			}
			if got, want := r.Annotations["runbook_url"], runbook+strings.ToLower(r.Alert); got != want {
				t.Errorf("%s: runbook_url %q, want %q", where, got, want)
			}
		}
	}
	if len(alerts) < 5 {
		t.Fatalf("%s: %d alerts, want the store, fail-open, breaker, reload and denial-ratio alerts", rulesFile, len(alerts))
	}

	var rt ruleTests
	readYAML(t, rulesTestFile, &rt)
	if !slices.Equal(rt.RuleFiles, []string{rulesFile}) {
		t.Errorf("%s: rule_files %q, want [%s]", rulesTestFile, rt.RuleFiles, rulesFile)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range rt.Tests {
		for _, in := range tc.InputSeries {
			q, _ := c.check(t, rulesTestFile+": input series", in.Series)
			for _, sel := range q.selectors {
				if fam, _, _ := c.labels(sel.name); fam == "" {
					t.Errorf("%s: input series %q: want an exported metric", rulesTestFile, in.Series)
				}
			}
		}
		for _, e := range tc.PromQLExprTest {
			c.check(t, rulesTestFile+": promql_expr_test", e.Expr)
		}
		for _, a := range tc.AlertRuleTest {
			if !slices.Contains(alerts, a.Alertname) {
				t.Errorf("%s: tests %q, which %s does not define", rulesTestFile, a.Alertname, rulesFile)
			}
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a] || !quiet[a] {
			t.Errorf("%s: %s tested firing %v, not firing %v; want both", rulesTestFile, a, fires[a], quiet[a])
		}
	}
}

func slicesSorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// requirePromtool is the environment variable that, set to "1", turns a
// missing promtool from a skipped test into a failed one (CI sets it).
const requirePromtool = "RLKIT_REQUIRE_PROMTOOL"

// TestPromtool runs promtool check rules and promtool test rules on the
// rules: Prometheus's own parser and the unit tests of every alert. It
// skips when promtool is not in PATH, unless RLKIT_REQUIRE_PROMTOOL=1.
func TestPromtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv(requirePromtool) == "1" {
			t.Fatalf("promtool is required (%s=1) but not in PATH: %v; install it, e.g. apt-get install prometheus", requirePromtool, err)
		}
		t.Skipf("promtool not in PATH; skipping (set %s=1 to fail instead)", requirePromtool)
	}
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = rulesDir
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		case err != nil:
			t.Fatalf("promtool %s: %v", strings.Join(args, " "), err)
		case !strings.Contains(string(out), "SUCCESS"):
			t.Errorf("promtool %s: no SUCCESS in its output:\n%s", strings.Join(args, " "), out)
		}
	}
}
