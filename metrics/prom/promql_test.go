package prom_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
)

// promQL is what an expression refers to: its vector selectors, the label
// names it groups or matches by, and the labels Grafana's label_values
// reads.
type promQL struct {
	selectors []selector
	grouping  []string // by, without, on, ignoring, group_left, group_right
	by        []string // by alone: the labels an aggregation keeps
	values    []labelOf
}

// selector is one vector selector: a metric name (or "" when only
// matchers name it) and its label matchers.
type selector struct {
	name     string
	matchers []matcher
}

type matcher struct{ label, op, value string }

// labelOf is label_values(metric, label) of a Grafana template variable.
type labelOf struct{ metric, label string }

// token kinds of PromQL (and of the Grafana variables in dashboards).
const (
	tIdent  = iota // a name: metric, label, function, keyword
	tString        // a quoted string, unquoted
	tNumber        // a number or a duration
	tVar           // a Grafana variable: $name, ${name}
	tPunct         // ( ) { } [ ] , and operators
)

type token struct {
	kind int
	text string
}

// lexPromQL splits expr into tokens, or fails on a character PromQL does
// not have or a string that never ends.
func lexPromQL(expr string) ([]token, error) {
	var out []token
	isIdent := func(r byte, first bool) bool {
		return r == '_' || r == ':' || 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || !first && '0' <= r && r <= '9'
	}
	for i := 0; i < len(expr); {
		c := expr[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#': // a comment, to the end of the line
			for i < len(expr) && expr[i] != '\n' {
				i++
			}
		case c == '"' || c == '\'' || c == '`':
			var b strings.Builder
			j := i + 1
			for ; j < len(expr) && expr[j] != c; j++ {
				if expr[j] == '\\' && c != '`' && j+1 < len(expr) {
					j++
				}
				b.WriteByte(expr[j])
			}
			if j == len(expr) {
				return nil, fmt.Errorf("string at %d never ends", i)
			}
			out = append(out, token{tString, b.String()})
			i = j + 1
		case '0' <= c && c <= '9' || c == '.' && i+1 < len(expr) && '0' <= expr[i+1] && expr[i+1] <= '9':
			j := i
			for j < len(expr) && (expr[j] == '.' || isIdent(expr[j], false)) {
				if (expr[j] == 'e' || expr[j] == 'E') && j+1 < len(expr) && (expr[j+1] == '+' || expr[j+1] == '-') && !strings.ContainsAny(expr[i:j], "xX") {
					j++
				}
				j++
			}
			out = append(out, token{tNumber, expr[i:j]})
			i = j
		case isIdent(c, true):
			j := i
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			out = append(out, token{tIdent, expr[i:j]})
			i = j
		case c == '$':
			j := i + 1
			if j < len(expr) && expr[j] == '{' {
				k := strings.IndexByte(expr[j:], '}')
				if k < 0 {
					return nil, fmt.Errorf("${ at %d never ends", i)
				}
				name, _, _ := strings.Cut(expr[j+1:j+k], ":")
				out = append(out, token{tVar, name})
				i = j + k + 1
				continue
			}
			for j < len(expr) && isIdent(expr[j], false) {
				j++
			}
			if j == i+1 {
				return nil, fmt.Errorf("$ at %d names no variable", i)
			}
			out = append(out, token{tVar, expr[i+1 : j]})
			i = j
		default:
			if i+1 < len(expr) {
				switch two := expr[i : i+2]; two {
				case "==", "!=", "<=", ">=", "=~", "!~":
					out = append(out, token{tPunct, two})
					i += 2
					continue
				}
			}
			if !strings.ContainsRune("(){}[],=<>+-*/%^@:", rune(c)) {
				return nil, fmt.Errorf("unexpected %q at %d", c, i)
			}
			out = append(out, token{tPunct, string(c)})
			i++
		}
	}
	return out, nil
}

// Words of PromQL that are not metric names.
var (
	aggregators = set("sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk", "quantile", "limitk", "limit_ratio")
	functions   = set("abs", "absent", "absent_over_time", "acos", "acosh", "asin", "asinh", "atan", "atanh", "avg_over_time", "ceil", "changes", "clamp", "clamp_max", "clamp_min", "cos", "cosh", "count_over_time", "day_of_month", "day_of_week", "day_of_year", "days_in_month", "deg", "delta", "deriv", "exp", "floor", "histogram_avg", "histogram_count", "histogram_fraction", "histogram_quantile", "histogram_stddev", "histogram_stdvar", "histogram_sum", "hour", "idelta", "increase", "irate", "label_join", "label_replace", "last_over_time", "ln", "log10", "log2", "mad_over_time", "max_over_time", "min_over_time", "minute", "month", "pi", "predict_linear", "present_over_time", "quantile_over_time", "rad", "rate", "resets", "round", "scalar", "sgn", "sin", "sinh", "sort", "sort_desc", "sort_by_label", "sort_by_label_desc", "sqrt", "stddev_over_time", "stdvar_over_time", "sum_over_time", "tan", "tanh", "time", "timestamp", "vector", "year")
	// labelLists are the keywords a list of label names follows.
	labelLists = set("by", "without", "on", "ignoring", "group_left", "group_right")
	keywords   = set("and", "or", "unless", "bool", "offset", "atan2", "start", "end")
	numbers    = set("inf", "nan")
)

func set(words ...string) map[string]bool {
	m := map[string]bool{}
	for _, w := range words {
		m[w] = true
	}
	return m
}

// parsePromQL finds what expr refers to. It is not a whole PromQL parser:
// it finds the metric names (a name that is not a function, an
// aggregation or a keyword, and is not followed by "("), their label
// matchers, and the label lists of by, without, on, ignoring, group_left
// and group_right; and it fails on an unknown function, a matcher it
// cannot read, or brackets that do not pair.
func parsePromQL(expr string) (promQL, error) {
	toks, err := lexPromQL(expr)
	if err != nil {
		return promQL{}, err
	}
	var (
		out   promQL
		depth []string // the open brackets
	)
	next := func(i int) token {
		if i+1 < len(toks) {
			return toks[i+1]
		}
		return token{}
	}
	for i := 0; i < len(toks); i++ {
		t := toks[i]
		switch {
		case t.kind == tPunct && (t.text == "(" || t.text == "["):
			depth = append(depth, t.text)
			if t.text == "[" { // a range or subquery: durations and variables only
				j := i + 1
				for j < len(toks) && toks[j].text != "]" {
					if toks[j].kind == tIdent || toks[j].kind == tString {
						return promQL{}, fmt.Errorf("%q inside [ ]", toks[j].text)
					}
					j++
				}
				i = j - 1
			}
		case t.kind == tPunct && (t.text == ")" || t.text == "]"):
			want := map[string]string{")": "(", "]": "["}[t.text]
			if len(depth) == 0 || depth[len(depth)-1] != want {
				return promQL{}, fmt.Errorf("unpaired %q", t.text)
			}
			depth = depth[:len(depth)-1]
		case t.kind == tPunct && t.text == "{":
			sel, j, err := matchers(toks, i)
			if err != nil {
				return promQL{}, err
			}
			for _, m := range sel.matchers {
				if m.label == "__name__" && m.op == "=" {
					sel.name = m.value
				}
			}
			out.selectors = append(out.selectors, sel)
			i = j
		case t.kind == tPunct && t.text == "}":
			return promQL{}, fmt.Errorf("unpaired }")
		case t.kind != tIdent:
		case labelLists[strings.ToLower(t.text)]:
			if next(i).text != "(" {
				if strings.HasPrefix(strings.ToLower(t.text), "group_") {
					continue
				}
				return promQL{}, fmt.Errorf("%s without a label list", t.text)
			}
			j := i + 2
			for ; j < len(toks) && toks[j].text != ")"; j++ {
				switch {
				case toks[j].kind == tIdent:
					out.grouping = append(out.grouping, toks[j].text)
					if strings.ToLower(t.text) == "by" {
						out.by = append(out.by, toks[j].text)
					}
				case toks[j].text != ",":
					return promQL{}, fmt.Errorf("%s (...): unexpected %q", t.text, toks[j].text)
				}
			}
			if j == len(toks) {
				return promQL{}, fmt.Errorf("%s ( never ends", t.text)
			}
			i = j
		case keywords[strings.ToLower(t.text)] || numbers[strings.ToLower(t.text)]:
		case aggregators[t.text] && (next(i).text == "(" || labelLists[next(i).text]):
		case next(i).text == "(" && t.text == "label_values":
			lv, sel, j, err := labelValues(toks, i)
			if err != nil {
				return promQL{}, err
			}
			out.values = append(out.values, lv)
			if sel != nil {
				out.selectors = append(out.selectors, *sel)
			}
			i = j
		case next(i).text == "(":
			if !functions[t.text] {
				return promQL{}, fmt.Errorf("unknown function %s", t.text)
			}
		default: // a metric name, and its matchers if any
			sel := selector{name: t.text}
			if next(i).text == "{" {
				s, j, err := matchers(toks, i+1)
				if err != nil {
					return promQL{}, err
				}
				sel.matchers, i = s.matchers, j
			}
			out.selectors = append(out.selectors, sel)
		}
	}
	if len(depth) > 0 {
		return promQL{}, fmt.Errorf("unclosed %q", depth[len(depth)-1])
	}
	return out, nil
}

// matchers reads the label matchers from the "{" at toks[i]; it returns
// the index of the closing "}".
func matchers(toks []token, i int) (selector, int, error) {
	var sel selector
	j := i + 1
	for j < len(toks) && toks[j].text != "}" {
		if j+2 >= len(toks) || toks[j].kind != tIdent || toks[j+1].kind != tPunct || !set("=", "!=", "=~", "!~")[toks[j+1].text] || toks[j+2].kind != tString {
			return sel, 0, fmt.Errorf("label matcher at %q: want label, operator, quoted value", toks[j].text)
		}
		sel.matchers = append(sel.matchers, matcher{toks[j].text, toks[j+1].text, toks[j+2].text})
		j += 3
		if j < len(toks) && toks[j].text == "," {
			j++
		}
	}
	if j == len(toks) {
		return sel, 0, fmt.Errorf("{ never ends")
	}
	return sel, j, nil
}

// labelValues reads Grafana's label_values(metric{...}, label) or
// label_values(label) at toks[i]; it returns the index of its ")".
func labelValues(toks []token, i int) (labelOf, *selector, int, error) {
	j := i + 2 // after "label_values ("
	if j+1 < len(toks) && toks[j].kind == tIdent && toks[j+1].text == ")" {
		return labelOf{label: toks[j].text}, nil, j + 1, nil
	}
	if j >= len(toks) || toks[j].kind != tIdent {
		return labelOf{}, nil, 0, fmt.Errorf("label_values: want a metric name")
	}
	sel := &selector{name: toks[j].text}
	k := j + 1
	if k < len(toks) && toks[k].text == "{" {
		s, end, err := matchers(toks, k)
		if err != nil {
			return labelOf{}, nil, 0, err
		}
		sel.matchers, k = s.matchers, end+1
	}
	if k+2 >= len(toks) || toks[k].text != "," || toks[k+1].kind != tIdent || toks[k+2].text != ")" {
		return labelOf{}, nil, 0, fmt.Errorf("label_values(%s ...): want , label )", sel.name)
	}
	return labelOf{sel.name, toks[k+1].text}, sel, k + 2, nil
}

// TestParsePromQL pins what parsePromQL finds: metric names and not the
// words around them, matchers, grouping labels, and its errors.
func TestParsePromQL(t *testing.T) {
	for _, c := range []struct {
		expr     string
		names    []string
		matchers []matcher
		grouping []string
		values   []labelOf
		err      string
	}{
		{expr: `sum by (outcome) (rate(rlkit_decisions_total{instance=~"$instance", outcome!="x"}[$__rate_interval]))`,
			names: []string{"rlkit_decisions_total"}, matchers: []matcher{{"instance", "=~", "$instance"}, {"outcome", "!=", "x"}}, grouping: []string{"outcome"}},
		{expr: "histogram_quantile(0.99, sum by (le, rule) (rate(rlkit_store_duration_seconds_bucket[5m])))",
			names: []string{"rlkit_store_duration_seconds_bucket"}, grouping: []string{"le", "rule"}},
		{expr: "job:a:ratio_rate5m > 2 * job:a:ratio_rate6h offset 5m and on (job) b >= bool 1 unless ignoring (x) c or d * on (job) group_left (rule) e",
			names: []string{"job:a:ratio_rate5m", "job:a:ratio_rate6h", "b", "c", "d", "e"}, grouping: []string{"job", "x", "job", "rule"}},
		{expr: "max without (state) (avg_over_time(m{state=\"open\"}[5m:1m])) > 0.5e-1 or vector(0) and Inf > NaN",
			names: []string{"m"}, matchers: []matcher{{"state", "=", "open"}}, grouping: []string{"state"}},
		{expr: "sum(x) by (job) # a comment naming no_metric\n+ y{a='it\\'s {}'}",
			names: []string{"x", "y"}, matchers: []matcher{{"a", "=", "it's {}"}}, grouping: []string{"job"}},
		{expr: `{__name__="rlkit_store_keys", store="memory"}`,
			names: []string{"rlkit_store_keys"}, matchers: []matcher{{"__name__", "=", "rlkit_store_keys"}, {"store", "=", "memory"}}},
		{expr: `label_values(rlkit_decisions_total{job=~"$job"}, instance)`,
			names: []string{"rlkit_decisions_total"}, matchers: []matcher{{"job", "=~", "$job"}}, values: []labelOf{{"rlkit_decisions_total", "instance"}}},
		{expr: `label_values(rlkit_decisions_total, job)`, names: []string{"rlkit_decisions_total"}, values: []labelOf{{"rlkit_decisions_total", "job"}}},
		{expr: "rat(x[5m])", err: "unknown function rat"},
		{expr: "sum by job (x)", err: "by without a label list"},
		{expr: `x{a=b}`, err: "label matcher"},
		{expr: `rate(x[5m]`, err: "unclosed"},
		{expr: `x{a="b"`, err: "never ends"},
		{expr: `x{a="b}`, err: "never ends"},
		{expr: `x ; y`, err: "unexpected"},
	} {
		got, err := parsePromQL(c.expr)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("parsePromQL(%q): error %v, want one containing %q", c.expr, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("parsePromQL(%q): %v", c.expr, err)
			continue
		}
		var names []string
		var ms []matcher
		for _, s := range got.selectors {
			names = append(names, s.name)
			ms = append(ms, s.matchers...)
		}
		if !reflect.DeepEqual(names, c.names) || !reflect.DeepEqual(ms, c.matchers) || !reflect.DeepEqual(got.grouping, c.grouping) || !reflect.DeepEqual(got.values, c.values) {
			t.Errorf("parsePromQL(%q):\n got names %q matchers %q grouping %q values %q\nwant names %q matchers %q grouping %q values %q",
				c.expr, names, ms, got.grouping, got.values, c.names, c.matchers, c.grouping, c.values)
		}
	}
}
