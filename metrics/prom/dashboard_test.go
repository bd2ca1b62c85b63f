package prom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"reflect"
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

// catalogue is what a query may name: the metric families New exports
// (label name → the values seen), the histograms among them, and the
// series recording rules record (name → their labels).
type catalogue struct {
	fams       map[string]map[string]map[string]bool
	histograms map[string]bool
	recorded   map[string]map[string]bool
}

// scrapeLabels are the labels Prometheus adds to every scraped series.
var scrapeLabels = map[string]bool{"instance": true, "job": true}

func newCatalogue(t *testing.T) *catalogue {
	fams, histograms := exported(t)
	return &catalogue{fams: fams, histograms: histograms, recorded: map[string]map[string]bool{}}
}

// labels returns the family a series name belongs to ("" for a recorded
// series) and the labels its series carry: the family's, with job,
// instance and, for a histogram's buckets, le; or the recorded labels.
func (c *catalogue) labels(name string) (fam string, labels map[string]bool, ok bool) {
	base := name
	if _, ok := c.fams[name]; !ok {
		for _, suf := range []string{"_bucket", "_sum", "_count"} {
			if b, cut := strings.CutSuffix(name, suf); cut && c.histograms[b] {
				base = b
			}
		}
	}
	if fl, ok := c.fams[base]; ok {
		labels = maps.Clone(scrapeLabels)
		for l := range fl {
			labels[l] = true
		}
		if strings.HasSuffix(name, "_bucket") && base != name {
			labels["le"] = true
		}
		return base, labels, true
	}
	if rl, ok := c.recorded[name]; ok {
		return "", rl, true
	}
	return "", nil, false
}

var wordsRE = regexp.MustCompile(`^\w+(\|\w+)*$`)

// closedLabels are the labels whose values prom alone chooses, all of
// which exported sees; the others (rule, kind, node) come from the
// configuration and the store.
var closedLabels = map[string]bool{"outcome": true, "state": true, "result": true, "store": true}

// check reports, as errors of t prefixed by where, what in expr names
// something rlkit does not export: a metric that is neither exported nor
// recorded, a label matcher's label the metric does not have, a literal
// value (= or =~ with plain words) a label of closedLabels never takes, a label
// of by, without, on, ignoring, group_left or group_right that none of the
// expression's metrics has, a label label_values reads that its metric
// does not have. It returns the parsed expression and the families named.
func (c *catalogue) check(t *testing.T, where, expr string) (promQL, []string) {
	t.Helper()
	q, err := parsePromQL(expr)
	if err != nil {
		t.Errorf("%s: %q: %v", where, expr, err)
		return q, nil
	}
	if len(q.selectors) == 0 {
		t.Errorf("%s: %q names no metric", where, expr)
	}
	var shown []string
	all := maps.Clone(scrapeLabels)
	for _, sel := range q.selectors {
		fam, labels, ok := c.labels(sel.name)
		if !ok {
			t.Errorf("%s: %q: prom exports no %q, and no rule records it", where, expr, sel.name)
			continue
		}
		if fam != "" {
			shown = append(shown, fam)
		}
		maps.Copy(all, labels)
		for _, m := range sel.matchers {
			if m.label == "__name__" {
				continue
			}
			if !labels[m.label] {
				t.Errorf("%s: %q: %s has no label %q (it has %v)", where, expr, sel.name, m.label, keys(labels))
				continue
			}
			vals, exported := c.fams[fam][m.label]
			if fam == "" || !exported || !closedLabels[m.label] || (m.op != "=" && m.op != "=~") || !wordsRE.MatchString(m.value) {
				continue
			}
			for v := range strings.SplitSeq(m.value, "|") {
				if !vals[v] {
					t.Errorf("%s: %q: %s{%s} never has the value %q (seen: %v)", where, expr, sel.name, m.label, v, keys(vals))
				}
			}
		}
	}
	for _, l := range q.grouping {
		if !all[l] {
			t.Errorf("%s: %q groups or matches by %q, which none of its metrics has", where, expr, l)
		}
	}
	for _, lv := range q.values {
		if _, labels, ok := c.labels(lv.metric); ok && !labels[lv.label] {
			t.Errorf("%s: %q: label_values of %s reads %q, which it does not have", where, expr, lv.metric, lv.label)
		}
	}
	return q, shown
}

// dashboardQuery is one PromQL expression of the dashboard and where it is.
type dashboardQuery struct {
	where, expr string
	variable    bool // a template variable's query
}

// queries returns every PromQL expression of the dashboard: its panels'
// targets (rows' nested panels too), its annotations' and its template
// variables' queries.
func queries(t *testing.T, dash map[string]any) []dashboardQuery {
	t.Helper()
	var out []dashboardQuery
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
				out = append(out, dashboardQuery{where: fmt.Sprintf("panel %q", p["title"]), expr: expr})
			}
		}
	}
	panels, _ := dash["panels"].([]any)
	walk(panels)
	ann, _ := dash["annotations"].(map[string]any)
	list, _ := ann["list"].([]any)
	for _, a := range list {
		a := a.(map[string]any)
		if expr, ok := a["expr"].(string); ok {
			out = append(out, dashboardQuery{where: fmt.Sprintf("annotation %q", a["name"]), expr: expr})
		}
	}
	tmpl, _ := dash["templating"].(map[string]any)
	vars, _ := tmpl["list"].([]any)
	for _, v := range vars {
		v := v.(map[string]any)
		if q, ok := v["query"].(map[string]any); ok {
			out = append(out, dashboardQuery{where: fmt.Sprintf("variable %q", v["name"]), expr: q["query"].(string), variable: true})
		}
	}
	return out
}

// readDashboard reads the dashboard's JSON.
func readDashboard(t *testing.T) map[string]any {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dash map[string]any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboardFile, err)
	}
	return dash
}

// TestDashboard checks the Grafana dashboard against what New exports, so
// that the two cannot drift: every metric a query names is exported (a
// histogram's _bucket, _sum and _count included), every label it matches,
// groups by or reads with label_values is one of that metric's (or
// instance, job, le), every literal value it matches a label against
// occurs, and every metric is shown somewhere. Every selector of a panel
// or an annotation applies the job and instance variables, and the rule
// variable where the metric has a rule label.
func TestDashboard(t *testing.T) {
	dash := readDashboard(t)
	c := newCatalogue(t)
	shown := map[string]bool{}
	qs := queries(t, dash)
	if len(qs) < 20 {
		t.Fatalf("%d queries in %s, want the panels' queries", len(qs), dashboardFile)
	}
	for _, dq := range qs {
		q, fams := c.check(t, dq.where, dq.expr)
		for _, f := range fams {
			shown[f] = true
		}
		if dq.variable {
			continue
		}
		for _, sel := range q.selectors {
			_, labels, ok := c.labels(sel.name)
			if !ok {
				continue
			}
			want := []matcher{{"job", "=~", "$job"}, {"instance", "=~", "$instance"}}
			if labels["rule"] {
				want = append(want, matcher{"rule", "=~", "$rule"})
			}
			for _, m := range want {
				if !slices.Contains(sel.matchers, m) {
					t.Errorf("%s: %q: %s lacks %s%s%q", dq.where, dq.expr, sel.name, m.label, m.op, m.value)
				}
			}
		}
	}
	for fam := range c.fams {
		if !shown[fam] {
			t.Errorf("%s is exported but on no panel of %s", fam, dashboardFile)
		}
	}
}

// variableRE finds the Grafana variables an expression uses: $name,
// ${name} and ${name:format}.
var variableRE = regexp.MustCompile(`\$\{?(\w+)`)

// TestDashboardImports checks what importing the dashboard into Grafana
// needs: a Prometheus data-source input that the datasource variable
// defaults to; every panel, target, annotation and variable query on that
// variable; the job, instance and rule variables; no query using an
// undefined variable; a unit and legends on every panel; unique panel ids
// and panels that neither overlap nor leave the 24-column grid.
func TestDashboardImports(t *testing.T) {
	dash := readDashboard(t)
	inputs, _ := dash["__inputs"].([]any)
	var input string
	for _, in := range inputs {
		in := in.(map[string]any)
		if in["type"] == "datasource" && in["pluginId"] == "prometheus" {
			input, _ = in["name"].(string)
		}
	}
	if input == "" {
		t.Fatalf("%s: no __inputs entry of type datasource, pluginId prometheus: %v", dashboardFile, inputs)
	}
	ds := map[string]any{"type": "prometheus", "uid": "${datasource}"}
	vars := map[string]map[string]any{}
	tmpl, _ := dash["templating"].(map[string]any)
	list, _ := tmpl["list"].([]any)
	for _, v := range list {
		v := v.(map[string]any)
		vars[v["name"].(string)] = v
	}
	if v := vars["datasource"]; v == nil || v["type"] != "datasource" || v["query"] != "prometheus" {
		t.Errorf("variable datasource = %v, want a datasource variable of Prometheus data sources", v)
	} else if cur, _ := v["current"].(map[string]any); cur["value"] != "${"+input+"}" {
		t.Errorf("variable datasource defaults to %v, want the input ${%s}", cur["value"], input)
	}
	for _, name := range []string{"job", "instance", "rule"} {
		v := vars[name]
		if v == nil || v["type"] != "query" || v["includeAll"] != true || v["multi"] != true || v["allValue"] != ".*" {
			t.Errorf("variable %s = %v, want a query variable, multi-valued with All (.*)", name, v)
			continue
		}
		if !reflect.DeepEqual(v["datasource"], ds) {
			t.Errorf("variable %s: datasource %v, want %v", name, v["datasource"], ds)
		}
	}
	builtin := map[string]bool{"__rate_interval": true, "__interval": true, "__range": true}
	for _, dq := range queries(t, dash) {
		for _, m := range variableRE.FindAllStringSubmatch(dq.expr, -1) {
			if vars[m[1]] == nil && !builtin[m[1]] {
				t.Errorf("%s: %q uses $%s, which the dashboard does not define", dq.where, dq.expr, m[1])
			}
		}
	}
	ann, _ := dash["annotations"].(map[string]any)
	anns, _ := ann["list"].([]any)
	for _, a := range anns {
		if a := a.(map[string]any); a["expr"] != nil && !reflect.DeepEqual(a["datasource"], ds) {
			t.Errorf("annotation %q: datasource %v, want %v", a["name"], a["datasource"], ds)
		}
	}
	ids := map[float64]bool{}
	var boxes [][4]float64
	var titles []string
	var panels []any
	top, _ := dash["panels"].([]any)
	for _, p := range top {
		panels = append(panels, p)
		sub, _ := p.(map[string]any)["panels"].([]any)
		panels = append(panels, sub...) // a collapsed row's
	}
	for _, p := range panels {
		p := p.(map[string]any)
		title := p["title"]
		id, _ := p["id"].(float64)
		if ids[id] {
			t.Errorf("panel %q: id %v is taken", title, id)
		}
		ids[id] = true
		g, _ := p["gridPos"].(map[string]any)
		x, y, w, h := g["x"].(float64), g["y"].(float64), g["w"].(float64), g["h"].(float64)
		if x < 0 || w <= 0 || h <= 0 || x+w > 24 {
			t.Errorf("panel %q: gridPos %v leaves the 24-column grid", title, g)
		}
		box := [4]float64{x, y, x + w, y + h}
		for i, b := range boxes {
			if box[0] < b[2] && b[0] < box[2] && box[1] < b[3] && b[1] < box[3] {
				t.Errorf("panel %q overlaps panel %q", title, titles[i])
			}
		}
		boxes, titles = append(boxes, box), append(titles, fmt.Sprint(title))
		if p["type"] == "row" {
			continue
		}
		if desc, _ := p["description"].(string); desc == "" {
			t.Errorf("panel %q has no description", title)
		}
		if !reflect.DeepEqual(p["datasource"], ds) {
			t.Errorf("panel %q: datasource %v, want %v", title, p["datasource"], ds)
		}
		fc, _ := p["fieldConfig"].(map[string]any)
		defaults, _ := fc["defaults"].(map[string]any)
		if unit, _ := defaults["unit"].(string); unit == "" {
			t.Errorf("panel %q has no unit", title)
		}
		targets, _ := p["targets"].([]any)
		refs := map[string]bool{}
		for _, tg := range targets {
			tg := tg.(map[string]any)
			if !reflect.DeepEqual(tg["datasource"], ds) {
				t.Errorf("panel %q: a target's datasource is %v, want %v", title, tg["datasource"], ds)
			}
			if lf, _ := tg["legendFormat"].(string); lf == "" {
				t.Errorf("panel %q: target %v has no legend", title, tg["refId"])
			}
			ref, _ := tg["refId"].(string)
			if ref == "" || refs[ref] {
				t.Errorf("panel %q: refId %q missing or taken", title, ref)
			}
			refs[ref] = true
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
