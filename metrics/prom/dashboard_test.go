package prom_test

import (
	"context"
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/rlkit/rlkit/core"
	"github.com/rlkit/rlkit/core/memstore"
	"github.com/rlkit/rlkit/core/store"
	"github.com/rlkit/rlkit/metrics/internal/rlmetricstest"
)

// dashboardFile is the Grafana dashboard for these metrics.
const dashboardFile = "../../deploy/grafana/rlkit-dashboard.json"

// exported returns every metric family New exports once every kind of
// event has been seen and a store with every figure is watched, memory and
// Redis alike: family name → label name → the values seen; and the names
// of the histograms.
func exported(t *testing.T) (map[string]map[string]map[string]bool, map[string]bool) {
	t.Helper()
	out := map[string]map[string]map[string]bool{}
	histograms := map[string]bool{}
	for _, st := range []store.Stats{
		{Store: "memory", Keys: 5, MaxKeys: 100, Evictions: 1},
		{Store: "redis", Keys: -1, DenyCacheHits: 2, Nodes: []store.NodeStats{{Node: "127.0.0.1:6379", Breaker: store.BreakerOpen}}},
	} {
		m, reg := newMetrics(t)
		for o := range core.NumOutcomes {
			ev := core.Event{Rule: "search", Outcome: core.Outcome(o), Latency: time.Millisecond}
			if ev.Outcome == core.OutcomeStoreError {
				ev.Err = context.DeadlineExceeded
			}
			m.Observe(ev)
		}
		m.Watch(&rlmetricstest.Source{S: rlmetricstest.NewStatsStore(memstore.New(), st), R: core.ReloadStats{Reloads: 1, LastReload: 1}})
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetType() == dto.MetricType_HISTOGRAM {
				histograms[mf.GetName()] = true
			}
			labels := out[mf.GetName()]
			if labels == nil {
				labels = map[string]map[string]bool{}
				out[mf.GetName()] = labels
			}
			for _, mt := range mf.GetMetric() {
				for _, lp := range mt.GetLabel() {
					if labels[lp.GetName()] == nil {
						labels[lp.GetName()] = map[string]bool{}
					}
					labels[lp.GetName()][lp.GetValue()] = true
				}
			}
		}
	}
	return out, histograms
}

// queries returns every PromQL expression of the dashboard: its panels'
// targets (rows' nested panels too) and its template variables' queries.
func queries(t *testing.T, dash map[string]any) []string {
	t.Helper()
	var out []string
	var walk func(panels []any)
	walk = func(panels []any) {
		for _, p := range panels {
			p := p.(map[string]any)
			if sub, ok := p["panels"].([]any); ok {
				walk(sub)
			}
			if p["type"] == "row" {
				continue
			}
			targets, _ := p["targets"].([]any)
			if len(targets) == 0 {
				t.Errorf("panel %q has no query", p["title"])
			}
			for _, tg := range targets {
				expr, _ := tg.(map[string]any)["expr"].(string)
				if expr == "" {
					t.Errorf("panel %q has a target without expr", p["title"])
				}
				out = append(out, expr)
			}
		}
	}
	panels, _ := dash["panels"].([]any)
	walk(panels)
	tmpl, _ := dash["templating"].(map[string]any)
	vars, _ := tmpl["list"].([]any)
	for _, v := range vars {
		if q, ok := v.(map[string]any)["query"].(map[string]any); ok {
			out = append(out, q["query"].(string))
		}
	}
	return out
}

var (
	metricRE  = regexp.MustCompile(`\brlkit_\w+`)
	selectRE  = regexp.MustCompile(`\b(rlkit_\w+)\{([^}]*)\}`)
	matcherRE = regexp.MustCompile(`(\w+)\s*(=~|!~|!=|=)\s*"([^"]*)"`)
	byRE      = regexp.MustCompile(`\bby\s*\(([^)]*)\)`)
	wordsRE   = regexp.MustCompile(`^\w+(\|\w+)*$`)
)

// TestDashboard checks the Grafana dashboard against what New exports, so
// that the two cannot drift: every metric a query names is exported (a
// histogram's _bucket, _sum and _count included), every label it selects
// or aggregates by is one of that metric's (or instance, job, le), every
// literal value it matches a label against occurs, and every metric is
// shown somewhere.
func TestDashboard(t *testing.T) {
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	fams, histograms := exported(t)
	family := func(name string) (string, bool) {
		if _, ok := fams[name]; ok {
			return name, true
		}
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suf); ok && histograms[base] {
				return base, true
			}
		}
		return "", false
	}
	scrape := map[string]bool{"instance": true, "job": true}
	shown := map[string]bool{}
	qs := queries(t, dash)
	if len(qs) < 10 {
		t.Fatalf("%d queries in %s, want the panels' queries", len(qs), dashboardFile)
	}
	for _, q := range qs {
		names := metricRE.FindAllString(q, -1)
		if len(names) == 0 {
			t.Errorf("query %q names no rlkit metric", q)
		}
		labels := map[string]bool{}
		for _, n := range names {
			fam, ok := family(n)
			if !ok {
				t.Errorf("query %q: prom exports no %s", q, n)
				continue
			}
			shown[fam] = true
			for l := range fams[fam] {
				labels[l] = true
			}
			if fam != n && strings.HasSuffix(n, "_bucket") {
				labels["le"] = true
			}
		}
		for _, sel := range selectRE.FindAllStringSubmatch(q, -1) {
			fam, _ := family(sel[1])
			for _, mt := range matcherRE.FindAllStringSubmatch(sel[2], -1) {
				label, op, value := mt[1], mt[2], mt[3]
				if scrape[label] {
					continue
				}
				vals, ok := fams[fam][label]
				if !ok {
					t.Errorf("query %q: %s has no label %q", q, sel[1], label)
					continue
				}
				if (op == "=" || op == "=~") && wordsRE.MatchString(value) {
					for v := range strings.SplitSeq(value, "|") {
						if !vals[v] {
							t.Errorf("query %q: %s{%s} never has the value %q (seen: %v)", q, sel[1], label, v, keys(vals))
						}
					}
				}
			}
		}
		for _, by := range byRE.FindAllStringSubmatch(q, -1) {
			for l := range strings.SplitSeq(by[1], ",") {
				if l = strings.TrimSpace(l); !labels[l] && !scrape[l] {
					t.Errorf("query %q aggregates by %q, which none of its metrics has", q, l)
				}
			}
		}
	}
	for fam := range fams {
		if !shown[fam] {
			t.Errorf("%s is exported but on no panel of %s", fam, dashboardFile)
		}
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
