package replay

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/rlkit/rlkit/core"
)

// Rules is a rule file as the replay runs it: the configuration as the
// service loads it, and, when rules have a wait, the same without their
// waits, which the replay decides under while it replays the waits itself
// on the log's clock (see Replayer).
type Rules struct {
	// Config is the file's configuration, as core.LoadConfig loads it.
	Config *core.Config
	run    *core.Config        // what the limiter decides under
	waits  map[string]waitRule // the rules with a wait, by name
	// weighted names the rules with weights: a request costs 1 under any
	// other (see Replayer.weight).
	weighted map[string]bool
}

// waitRule is a rule's wait and wait_queue.
type waitRule struct {
	wait  time.Duration
	queue int
}

// defaultWaitQueue is wait_queue's default (core.RuleSpec.WaitQueue), and
// maxHeld the most requests a limiter holds at once.
const (
	defaultWaitQueue = 100
	maxHeld          = 10000
)

// Load compiles a rule file as core.ParseConfig does; its error is
// core.ParseConfig's (a *core.ConfigError, or several joined).
func Load(data []byte, file string) (*Rules, error) {
	cfg, err := core.ParseConfig(data, file)
	if err != nil {
		return nil, err
	}
	r := &Rules{Config: cfg, run: cfg, weighted: weightedRules(data)}
	for _, rule := range cfg.Rules() {
		if rule.Wait() > 0 {
			if r.waits == nil {
				r.waits = map[string]waitRule{}
			}
			r.waits[rule.Name] = waitRule{wait: rule.Wait(), queue: defaultWaitQueue}
		}
	}
	if r.waits == nil {
		return r, nil
	}
	stripped, err := stripWaits(data, r.waits)
	if err != nil {
		return nil, err
	}
	if r.run, err = core.ParseConfig(stripped, file); err != nil {
		return nil, fmt.Errorf("%s without its waits: %w", file, err)
	}
	return r, nil
}

// stripWaits returns the YAML data with the wait and wait_queue of every
// rule removed, and sets each rule's queue in waits from its wait_queue.
func stripWaits(data []byte, waits map[string]waitRule) ([]byte, error) {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil {
		return nil, err
	}
	section := value(doc.Content[0], "rate_limit")
	rules := value(section, "rules")
	if rules == nil || rules.Kind != yaml.SequenceNode {
		return data, nil
	}
	for _, rule := range rules.Content {
		if rule.Kind != yaml.MappingNode {
			continue
		}
		name := ""
		if n := value(rule, "name"); n != nil {
			name = n.Value
		}
		kept := rule.Content[:0]
		for i := 0; i+1 < len(rule.Content); i += 2 {
			switch rule.Content[i].Value {
			case "wait":
				continue
			case "wait_queue":
				if w, ok := waits[name]; ok {
					if q, err := strconv.Atoi(strings.TrimSpace(rule.Content[i+1].Value)); err == nil {
						w.queue = q
						waits[name] = w
					}
				}
				continue
			}
			kept = append(kept, rule.Content[i], rule.Content[i+1])
		}
		rule.Content = kept
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	if err := enc.Encode(&doc); err != nil {
		return nil, err
	}
	return out.Bytes(), enc.Close()
}

// weightedRules returns the names of the rules of the YAML data (which
// core.ParseConfig has loaded) that have weights.
func weightedRules(data []byte) map[string]bool {
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(data)).Decode(&doc); err != nil || len(doc.Content) == 0 {
		return nil
	}
	rules := value(value(doc.Content[0], "rate_limit"), "rules")
	if rules == nil || rules.Kind != yaml.SequenceNode {
		return nil
	}
	out := map[string]bool{}
	for _, rule := range rules.Content {
		n, w := value(rule, "name"), value(rule, "weights")
		if n != nil && w != nil && len(w.Content) > 0 {
			out[n.Value] = true
		}
	}
	return out
}

// value returns the value of key in the mapping m, nil when it has none.
func value(m *yaml.Node, key string) *yaml.Node {
	if m == nil || m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// headers returns the request headers the configuration's rules count per
// (RuleSpec.Key's header:<Name> parts), canonical.
func headers(cfg *core.Config) []string {
	seen := map[string]bool{}
	var out []string
	rules := append([]*core.Rule{cfg.Default()}, cfg.Rules()...)
	for _, plan := range cfg.Plans() {
		for _, r := range rules[:len(rules):len(rules)] {
			if v := cfg.PlanRule(plan, r.Name); v != nil {
				rules = append(rules, v)
			}
		}
	}
	for _, r := range rules {
		if r == nil {
			continue
		}
		for part := range strings.SplitSeq(r.Key(), "+") {
			if h, ok := strings.CutPrefix(part, "header:"); ok && !seen[h] {
				seen[h] = true
				out = append(out, h)
			}
		}
	}
	return out
}
