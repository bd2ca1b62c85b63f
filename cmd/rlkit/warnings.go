package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/rlkit/rlkit/core"
	"go.yaml.in/yaml/v3"
)

// warnings returns what is risky in a file that loads: cfg is its
// configuration, data its text, read again here only for what the
// configuration does not tell (which fields were written, and where).
// keyVar is the variable that --identity-key-env names ("" when not
// given), and keySet whether it holds a key.
func warnings(file string, data []byte, cfg *core.Config, keyVar string, keySet bool) []finding {
	top, topLine := rateLimitNode(data)
	if top == nil {
		return nil
	}
	var out []finding
	warn := func(line int, rule, field, value, msg string) {
		out = append(out, finding{File: file, Line: line, Column: 1, Rule: rule, Field: field, Value: value, Message: message(core.ConfigError{Rule: rule, Field: field, Value: value, Msg: msg}), Severity: "warning"})
	}
	enabled := child(top, "enabled")
	rules := child(top, "rules")
	switch {
	case enabled == nil && rules != nil:
		warn(topLine, "", "enabled", "", `the file has rules but no "enabled" field: limiting is off`)
	case cfg.Enabled() && child(top, "default") == nil && cfg.Default() != nil:
		var limits []string
		for _, l := range cfg.Default().Policy.Limits {
			limits = append(limits, l.String())
		}
		warn(enabled.Line, "", "default", "",
			fmt.Sprintf(`no "default": requests no rule matches count against the built-in %s`, strings.Join(limits, ", ")))
	}
	if !keySet {
		publicKey := func(line int, rule, field, key, written string) { // key as Rule.Key gives it, written as the file does
			h := headerOf(key)
			if h == "" {
				return
			}
			why := "unless the service sets core.WithIdentityKey, that key is the public default, and anyone who reads the store's keys can test a guessed " + h + " against them (--identity-key-env names the variable that holds the service's key)"
			if keyVar != "" {
				why = "--identity-key-env " + keyVar + ": the variable is empty or not set, so the service may hash under the public default key, and anyone who reads the store's keys could test a guessed " + h + " against them"
			}
			warn(line, rule, field, written, "counts callers by the request header "+h+", kept as a keyed hash under the limiter's identity key: "+why)
		}
		if dk := child(top, "default_key"); dk != nil && cfg.Default() != nil {
			publicKey(dk.Line, "", "default_key", cfg.Default().Key(), scalar(dk))
		}
		if rules != nil && rules.Kind == yaml.SequenceNode {
			for _, rn := range rules.Content {
				rn = deref(rn)
				name := scalar(child(rn, "name"))
				if kn, r := child(rn, "key"), cfg.Rule(name); kn != nil && r != nil {
					publicKey(kn.Line, name, "key", r.Key(), scalar(kn))
				}
			}
		}
	}
	if rules != nil && rules.Kind == yaml.SequenceNode {
		for i, rn := range rules.Content {
			rn = deref(rn)
			name := scalar(child(rn, "name"))
			r := cfg.Rule(name)
			if r == nil || r.Count() != "failures" || r.Concurrent() > 0 || child(rn, "penalty") != nil {
				continue
			}
			line := rn.Line
			if cn := child(rn, "count"); cn != nil {
				line = cn.Line
			}
			if name == "" {
				name = fmt.Sprintf("rules[%d]", i)
			}
			warn(line, name, "count", "failures",
				"counts failures with neither concurrent nor penalty: requests in flight together all pass the check before the first failure is counted")
		}
	}
	if ex := child(top, "exempt_paths"); ex != nil && ex.Kind == yaml.SequenceNode {
		for _, pn := range ex.Content {
			pn = deref(pn)
			p := scalar(pn)
			i := strings.LastIndexByte(p, '/')
			if i < 0 {
				continue
			}
			switch last := p[i+1:]; {
			case last == "**":
				warn(pn.Line, "", "exempt_paths", p,
					fmt.Sprintf("a catch-all: no path under %s is ever counted, a rule's nor one added later", p[:i+1]))
			case last == "*" || strings.HasPrefix(last, ":") || strings.HasPrefix(last, "{") && strings.HasSuffix(last, "}"):
				warn(pn.Line, "", "exempt_paths", p,
					fmt.Sprintf("a wildcard: no path one segment under %s is ever counted, a rule's nor one added later", p[:i+1]))
			}
		}
	}
	slices.SortStableFunc(out, func(a, b finding) int { return a.Line - b.Line })
	return out
}

// headerOf is the header a rule's key (Rule.Key) counts by, "" when it
// counts by none.
func headerOf(key string) string {
	for part := range strings.SplitSeq(key, "+") {
		if h, ok := strings.CutPrefix(part, "header:"); ok {
			return h
		}
	}
	return ""
}

// rateLimitNode is the mapping under the file's rate_limit key, and that
// key's line; nil when the file has none (it loaded, so it is empty).
func rateLimitNode(data []byte) (*yaml.Node, int) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || doc.Kind != yaml.DocumentNode || len(doc.Content) == 0 {
		return nil, 0
	}
	root := deref(doc.Content[0])
	if root.Kind != yaml.MappingNode {
		return nil, 0
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		if root.Content[i].Value == "rate_limit" {
			if n := deref(root.Content[i+1]); n.Kind == yaml.MappingNode {
				return n, root.Content[i].Line
			}
		}
	}
	return nil, 0
}

// child is the value of key in mapping m, or nil.
func child(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return deref(m.Content[i+1])
		}
	}
	return nil
}

// deref follows an alias to the node it names.
func deref(n *yaml.Node) *yaml.Node {
	for n != nil && n.Kind == yaml.AliasNode {
		n = n.Alias
	}
	return n
}

// scalar is n's value when n is a scalar, else "".
func scalar(n *yaml.Node) string {
	if n == nil || n.Kind != yaml.ScalarNode {
		return ""
	}
	return n.Value
}
