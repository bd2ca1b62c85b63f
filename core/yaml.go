package core

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// parseSpec reads the YAML form of a Spec, recording the line of every
// field so that compile can name it. err is a problem that stops reading
// (bad text, bad YAML, no document); errs are the problems of fields
// (unknown, of the wrong kind), every one found, returned with what could
// be read of the Spec so that compile can check the rest.
func parseSpec(data []byte, file string) (spec Spec, ln lines, errs []error, err error) {
	spec, ln, err = readSpec(data, file)
	if j, ok := err.(interface{ Unwrap() []error }); ok && errors.Is(err, errFields) {
		return spec, ln, j.Unwrap()[1:], nil
	}
	return spec, ln, nil, err
}

// errFields heads the joined field errors readSpec returns with a Spec.
var errFields = errors.New("field errors")

func readSpec(data []byte, file string) (Spec, lines, error) {
	data = trimBOM(data)
	if err := checkText(data, file); err != nil {
		return Spec{}, nil, err
	}
	w := &walker{file: file, ln: lines{}}
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return Spec{}, nil, &ConfigError{File: file, Msg: "the file is empty (want a rate_limit section)"}
		}
		return Spec{}, nil, yamlError(data, file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return Spec{}, nil, &ConfigError{File: file, Line: extra.Line, Msg: "more than one YAML document"}
	}
	var spec Spec
	root := doc.Content[0]
	w.mapping(root, "", "", func(key string, k, v *yaml.Node) {
		if key != "rate_limit" {
			w.fail(k, "", key, "", "unknown field (want rate_limit)")
			return
		}
		spec = w.section(v)
		spec.Enabled = spec.Enabled && len(w.errs) == 0
	})
	if root.Kind == yaml.MappingNode && len(w.errs) == 0 && w.ln["rate_limit"] == 0 {
		w.fail(root, "", "rate_limit", "", "missing section")
	}
	if len(w.errs) > 0 {
		return spec, w.ln, errors.Join(append([]error{errFields}, w.errs...)...)
	}
	return spec, w.ln, nil
}

// yamlLineRE finds the line the YAML parser names in its error.
var yamlLineRE = regexp.MustCompile(`^yaml: line ([0-9]+): `)

// yamlError is the ConfigError of the YAML parser's error err for data. The
// parser names the line of most errors, not all: for the others the line
// is found by parsing ever longer prefixes of data (in a binary search),
// the first that fails the same way ending on it. The one bad text the
// parser finds after checkText, a tag's %-escape that decodes to bytes
// that are not UTF-8, is named as such.
func yamlError(data []byte, file string, err error) *ConfigError {
	msg := err.Error()
	ce := &ConfigError{File: file}
	if m := yamlLineRE.FindStringSubmatch(msg); m != nil {
		ce.Line, _ = strconv.Atoi(m[1])
		msg = "yaml: " + msg[len(m[0]):]
	} else {
		ce.Line = failingLine(data, msg)
	}
	if strings.Contains(msg, "UTF-8 octet") || strings.Contains(msg, "URI escaped octet") {
		ce.Msg = "invalid YAML tag: a %-escape in a tag (the text after '!') is not a UTF-8 character; a configuration needs no tags"
		return ce
	}
	ce.Msg = "invalid YAML: " + msg
	return ce
}

// failingLine returns the number of the first line of data at whose end
// parsing data fails with msg, or 0 when none does.
func failingLine(data []byte, msg string) int {
	ends := []int{}
	for i, c := range data {
		if c == '\n' {
			ends = append(ends, i+1)
		}
	}
	if len(ends) == 0 || ends[len(ends)-1] != len(data) {
		ends = append(ends, len(data))
	}
	fails := func(k int) bool {
		var doc yaml.Node
		err := yaml.NewDecoder(bytes.NewReader(data[:ends[k]])).Decode(&doc)
		return err != nil && err.Error() == msg
	}
	k := sort.Search(len(ends), fails)
	if k == len(ends) {
		return 0
	}
	return k + 1
}

// checkText reports, with its line and column, the first character of
// data (after its byte order mark) that a configuration may not hold: a
// byte that is not UTF-8, or a character YAML 1.2 does not allow (the C0
// and C1 controls but tab, line feed and carriage return; U+FFFE and
// U+FFFF). It also refuses a byte order mark after the start, and U+2028
// and U+2029, which the YAML parser takes for line breaks while editors
// do not, so that every line it reports is the line an editor shows.
// A UTF-16 file is refused as such. The YAML parser finds the same
// problems but names no line.
func checkText(data []byte, file string) error {
	fail := func(line, col int, format string, args ...any) error {
		return &ConfigError{File: file, Line: line, Column: col, Msg: fmt.Sprintf(format, args...)}
	}
	if len(data) >= 2 && (data[0] == 0xff && data[1] == 0xfe || data[0] == 0xfe && data[1] == 0xff) {
		return fail(1, 1, "the file is UTF-16 (byte order mark 0x%02x 0x%02x): save it as UTF-8", data[0], data[1])
	}
	line, col := 1, 1
	for i := 0; i < len(data); {
		r, size := utf8.DecodeRune(data[i:])
		switch {
		case r == '\n' || r == '\r' && (i+1 == len(data) || data[i+1] != '\n'):
			line, col = line+1, 0
		case r == '\t', r == '\r':
		case r == utf8.RuneError && size == 1:
			return fail(line, col, "invalid UTF-8 (byte 0x%02x)", data[i])
		case r < 0x20, r >= 0x7f && r <= 0x9f:
			return fail(line, col, "control character U+%04X is not allowed", r)
		case r == 0xfeff:
			return fail(line, col, "byte order mark U+FEFF is allowed only at the start of the file")
		case r == 0x2028, r == 0x2029:
			return fail(line, col, "U+%04X is not allowed: end lines with \\n", r)
		case r == 0xfffe, r == 0xffff:
			return fail(line, col, "noncharacter U+%04X is not allowed", r)
		}
		i += size
		col++
	}
	return nil
}

type walker struct {
	file string
	ln   lines
	errs []error
}

func (w *walker) fail(n *yaml.Node, rule, field, value, format string, args ...any) {
	w.errs = append(w.errs, &ConfigError{File: w.file, Line: n.Line, Rule: rule, Field: field, Value: value, Msg: fmt.Sprintf(format, args...)})
}

// check rejects aliases (they could multiply the work of a small file) and
// reports whether n is of the wanted kind.
func (w *walker) check(n *yaml.Node, kind yaml.Kind, rule, field, want string) bool {
	if n.Kind == yaml.AliasNode || n.Anchor != "" {
		w.fail(n, rule, field, "", "YAML anchors and aliases are not supported")
		return false
	}
	if n.Kind != kind || kind == yaml.ScalarNode && n.Tag == "!!null" {
		w.fail(n, rule, field, n.Value, "want %s", want)
		return false
	}
	return true
}

// mapping calls fn for each key of a mapping, rejecting duplicate keys.
func (w *walker) mapping(n *yaml.Node, rule, field string, fn func(key string, k, v *yaml.Node)) {
	if !w.check(n, yaml.MappingNode, rule, field, "a mapping") {
		return
	}
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if !w.check(k, yaml.ScalarNode, rule, field, "a plain key") {
			continue
		}
		if seen[k.Value] {
			w.fail(k, rule, k.Value, "", "field given twice")
			continue
		}
		seen[k.Value] = true
		fn(k.Value, k, v)
	}
}

func (w *walker) str(n *yaml.Node, rule, field string) string {
	if !w.check(n, yaml.ScalarNode, rule, field, "a string") {
		return ""
	}
	return n.Value
}

// strs reads a list of strings; a single string is a list of one when one is set.
func (w *walker) strs(n *yaml.Node, key, rule, field string, one bool) []string {
	if one && n.Kind == yaml.ScalarNode && n.Tag != "!!null" && n.Anchor == "" {
		w.ln[key+".0"] = n.Line
		return []string{n.Value}
	}
	want := "a list of strings"
	if one {
		want = "a string or a list of strings"
	}
	if !w.check(n, yaml.SequenceNode, rule, field, want) {
		return nil
	}
	out := []string{}
	for i, e := range n.Content {
		w.ln[key+"."+strconv.Itoa(i)] = e.Line
		if w.check(e, yaml.ScalarNode, rule, field, "a string") {
			out = append(out, e.Value)
		}
	}
	return out
}

func (w *walker) int(n *yaml.Node, rule, field string) int64 {
	var v int64
	if !w.check(n, yaml.ScalarNode, rule, field, "an integer") {
		return 0
	}
	if n.Tag != "!!int" || n.Decode(&v) != nil {
		w.fail(n, rule, field, n.Value, "want an integer")
	}
	return v
}

// bool reads a true or false.
func (w *walker) bool(n *yaml.Node, rule, field string) bool {
	var b bool
	if w.check(n, yaml.ScalarNode, rule, field, "true or false") && (n.Tag != "!!bool" || n.Decode(&b) != nil) {
		w.fail(n, rule, field, n.Value, "want true or false")
	}
	return b
}

func (w *walker) section(n *yaml.Node) Spec {
	var s Spec
	w.ln["rate_limit"] = n.Line
	w.mapping(n, "", "rate_limit", func(key string, k, v *yaml.Node) {
		w.ln[key] = v.Line
		switch key {
		case "enabled":
			s.Enabled = w.bool(v, "", key)
		case "algorithm":
			s.Algorithm = w.str(v, "", key)
		case "headers":
			s.Headers = w.str(v, "", key)
		case "failure":
			s.Failure = w.str(v, "", key)
		case "mode":
			s.Mode = w.str(v, "", key)
		case "default":
			s.Default = w.strs(v, key, "", key, true)
		case "default_window":
			s.DefaultWindow = w.str(v, "", key)
		case "default_timezone":
			s.DefaultTimezone = w.str(v, "", key)
		case "default_key":
			s.DefaultKey = w.str(v, "", key)
		case "exempt_paths":
			s.ExemptPaths = w.strs(v, key, "", key, false)
		case "allow":
			s.Allow = w.allow(v)
		case "ban":
			s.Ban = w.ban(v)
		case "consistency":
			s.Consistency = w.str(v, "", key)
		case "lease_block":
			s.LeaseBlock = w.int(v, "", key)
		case "rules":
			if !w.check(v, yaml.SequenceNode, "", key, "a list of rules") {
				return
			}
			for i, r := range v.Content {
				s.Rules = append(s.Rules, w.rule(r, i))
			}
		case "tiers":
			s.Tiers = w.tiers(v)
		default:
			w.fail(k, "", key, "", "unknown field (want enabled, algorithm, rules, default, default_window, default_timezone, default_key, exempt_paths, headers, failure, mode, tiers, allow, ban, consistency or lease_block)")
		}
	})
	return s
}

func (w *walker) rule(n *yaml.Node, i int) RuleSpec {
	var r RuleSpec
	prefix := "rules." + strconv.Itoa(i)
	w.ln[prefix] = n.Line
	label := "rules[" + strconv.Itoa(i) + "]"
	// Find the name first so that every error about this rule can use it.
	if n.Kind == yaml.MappingNode {
		for j := 0; j+1 < len(n.Content); j += 2 {
			if n.Content[j].Value == "name" && n.Content[j+1].Kind == yaml.ScalarNode && n.Content[j+1].Value != "" {
				label = n.Content[j+1].Value
			}
		}
	}
	w.mapping(n, label, "", func(key string, k, v *yaml.Node) {
		fkey := prefix + "." + key
		w.ln[fkey] = v.Line
		switch key {
		case "name":
			r.Name = w.str(v, label, key)
		case "paths":
			r.Paths = w.strs(v, fkey, label, key, false)
		case "methods":
			r.Methods = w.strs(v, fkey, label, key, false)
		case "limit":
			r.Limit = w.strs(v, fkey, label, key, true)
		case "algorithm":
			r.Algorithm = w.str(v, label, key)
		case "window":
			r.Window = w.str(v, label, key)
		case "timezone":
			r.Timezone = w.str(v, label, key)
		case "burst":
			r.Burst = w.int(v, label, key)
		case "mode":
			r.Mode = w.str(v, label, key)
		case "count":
			r.Count = w.str(v, label, key)
		case "wait":
			r.Wait = w.str(v, label, key)
		case "wait_queue":
			r.WaitQueue = w.int(v, label, key)
		case "cost":
			r.Cost = w.str(v, label, key)
		case "penalty":
			r.Penalty = w.penalty(v, fkey, label)
		case "clear_on_success":
			r.ClearOnSuccess = w.bool(v, label, key)
		case "concurrent":
			r.Concurrent = w.int(v, label, key)
		case "lease":
			r.Lease = w.str(v, label, key)
		case "key":
			r.Key = w.str(v, label, key)
		case "stack":
			r.Stack = w.bool(v, label, key)
		case "consistency":
			r.Consistency = w.str(v, label, key)
		case "lease_block":
			r.LeaseBlock = w.int(v, label, key)
		case "weights":
			w.mapping(v, label, key, func(path string, _, c *yaml.Node) {
				w.ln[fkey+"."+path] = c.Line
				r.Weights = append(r.Weights, WeightSpec{Path: path, Cost: w.int(c, label, key)})
			})
		default:
			w.fail(k, label, key, "", "unknown field (want name, paths, methods, limit, algorithm, window, timezone, burst, weights, mode, count, cost, clear_on_success, penalty, wait, wait_queue, concurrent, lease, key, stack, consistency or lease_block)")
		}
	})
	return r
}

// tiers reads the tiers section: plan name → {default, rules}, each rule
// name → a limit, a list of limits, or {limit, burst}. Lines go under
// "tiers.<plan>", "tiers.<plan>.default", "tiers.<plan>.rules.<rule>"
// and its ".limit" and ".burst".
func (w *walker) tiers(n *yaml.Node) []TierSpec {
	var out []TierSpec
	w.mapping(n, "", "tiers", func(plan string, k, v *yaml.Node) {
		key := "tiers." + plan
		w.ln[key] = k.Line
		t := TierSpec{Name: plan}
		w.mapping(v, "", key, func(field string, fk, fv *yaml.Node) {
			w.ln[key+"."+field] = fv.Line
			switch field {
			case "default":
				t.Default = w.strs(fv, key+".default.limit", "", key+".default", true)
			case "rules":
				w.mapping(fv, "", key+".rules", func(rule string, rk, rv *yaml.Node) {
					t.Rules = append(t.Rules, w.tierRule(rv, key+".rules."+rule, key, rule, rk.Line))
				})
			default:
				w.fail(fk, "", key+"."+field, "", "unknown field (want default or rules)")
			}
		})
		out = append(out, t)
	})
	return out
}

// tierRule reads a plan's limits of one rule, at rkey (its key on line).
func (w *walker) tierRule(n *yaml.Node, rkey, key, rule string, line int) TierRuleSpec {
	w.ln[rkey] = line
	tr := TierRuleSpec{Rule: rule}
	if n.Kind != yaml.MappingNode {
		w.ln[rkey+".limit"] = n.Line
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" || n.Kind != yaml.ScalarNode && n.Kind != yaml.SequenceNode && n.Kind != yaml.AliasNode {
			w.fail(n, rule, key+".limit", n.Value, "want a limit, a list of limits or {limit: ..., burst: N}")
			return tr
		}
		tr.Limit = w.strs(n, rkey+".limit", rule, key+".limit", true)
		return tr
	}
	w.mapping(n, rule, key+".rules", func(field string, fk, fv *yaml.Node) {
		w.ln[rkey+"."+field] = fv.Line
		switch field {
		case "limit":
			tr.Limit = w.strs(fv, rkey+".limit", rule, key+".limit", true)
		case "burst":
			tr.Burst = w.int(fv, rule, key+".burst")
		default:
			w.fail(fk, rule, key+"."+field, "", "unknown field (want limit or burst)")
		}
	})
	return tr
}
