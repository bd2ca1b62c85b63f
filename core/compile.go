package core

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/internal/clip"
	"github.com/rlkit/rlkit/core/store"
)

// NewConfig checks and compiles a Spec built in code.
func NewConfig(spec Spec) (*Config, error) { return compile(spec, "", nil) }

var ruleNameRE = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,64}$`)

var methodRE = regexp.MustCompile(`^[A-Z]{1,16}$`)

// lines maps a field path ("rules.2.limit", "default") to its line.
type lines map[string]int

// compiler collects the problems of one configuration, each with its line.
type compiler struct {
	file string
	ln   lines // nil for a Spec built in code
	errs []error

	// What the rules are compiled against.
	defAlgo algo.Algorithm // the file's algorithm
	shadow  bool           // the file's mode is shadow
	exempt  []pathClaim    // exempt_paths, compiled
	seen    map[string]int // the rule names so far, with their index
	taken   [2][]pathClaim // the paths of the rules so far, enforced [0] and shadow [1]
	// The file's consistency: lease (leaseBlock > 0: the rules that name
	// none take blocks of at most leaseBlock units) or exact (0); leased
	// is set once a rule or the file takes blocks.
	leaseBlock int64
	fileBlock  int64 // the file's lease_block, whatever its consistency (0: none)
	leased     bool
}

// line is the line of the field at key; a missing field ("rules.0.limit")
// has none, so its parent's is used. 0 when unknown.
func (cc *compiler) line(key string) int {
	line := cc.ln[key]
	for k := key; line == 0 && strings.Contains(k, "."); {
		k = k[:strings.LastIndexByte(k, '.')]
		line = cc.ln[k]
	}
	return line
}

// fail records a problem with the field at key.
func (cc *compiler) fail(key, rule, field, value, format string, args ...any) {
	cc.errs = append(cc.errs, &ConfigError{File: cc.file, Line: cc.line(key), Rule: rule, Field: field, Value: value, Msg: fmt.Sprintf(format, args...)})
}

// lineOf is "line N" for the field at key, or "" when lines are unknown:
// for messages that name another field than the one at fault.
func (cc *compiler) lineOf(key string) string {
	if l := cc.line(key); l > 0 {
		return "line " + strconv.Itoa(l)
	}
	return ""
}

// paren is " (s)", or "" for an empty s.
func paren(s string) string {
	if s == "" {
		return ""
	}
	return " (" + s + ")"
}

func compile(spec Spec, file string, ln lines) (*Config, error) {
	cc := &compiler{file: file, ln: ln}
	c := &Config{enabled: spec.Enabled}
	switch spec.Headers {
	case "", "draft":
	case "legacy":
		c.headers = HeadersLegacy
	case "none":
		c.headers = HeadersNone
	default:
		cc.fail("headers", "", "headers", spec.Headers, "want draft, legacy or none")
	}
	switch spec.Failure {
	case "", "open":
	case "closed":
		c.failClosed = true
	default:
		cc.fail("failure", "", "failure", spec.Failure, "want open or closed")
	}
	c.shadow = cc.mode("mode", "", spec.Mode, false)
	defAlgo := algo.FixedWindow
	if spec.Algorithm != "" {
		a, err := algo.ParseAlgorithm(spec.Algorithm)
		if err != nil {
			cc.fail("algorithm", "", "algorithm", spec.Algorithm, "%v", err)
		}
		defAlgo = a
	}

	// Exempt paths are compiled first, for the rules' paths to be checked
	// against them; their problems are reported with the others, in line
	// order.
	ex := &compiler{file: file, ln: ln}
	exempt := ex.exemptPaths(spec.ExemptPaths)
	c.exempt = make([]pattern, len(exempt))
	for i := range exempt {
		c.exempt[i] = exempt[i].pat
	}

	cc.defAlgo, cc.shadow, cc.exempt = defAlgo, c.shadow, exempt
	cc.fileConsistency(spec)
	cc.seen = map[string]int{DefaultRuleName: -1}
	for i, rs := range spec.Rules {
		if r := cc.rule(i, rs); r != nil {
			c.rules = append(c.rules, r)
			if r.stack {
				c.stacks = append(c.stacks, r)
			} else if r.shadow {
				c.shadows = append(c.shadows, r)
			} else {
				c.enforced = append(c.enforced, r)
			}
			c.upper = c.upper || r.hasUpper()
		}
	}

	def := spec.Default
	if len(def) == 0 {
		def = []string{defaultLimit}
	}
	defAlgoKey := ""
	if spec.Algorithm != "" {
		defAlgoKey = "algorithm"
	}
	defKey := cc.key("default_key", "", "default_key", spec.DefaultKey, nil, true)
	defWin := cc.window(windowSpec{prefix: "default_", rule: DefaultRuleName, window: spec.DefaultWindow, timezone: spec.DefaultTimezone, algorithm: defAlgo, algorithmKey: defAlgoKey})
	if defWin.loc != nil && len(spec.Default) == 0 {
		cc.fail("default_window", DefaultRuleName, "default_window", spec.DefaultWindow, "a calendar default limit needs a default of limits per day, month or year (default: \"10000/day\"): the built-in %s is not one", defaultLimit)
	} else if lims := cc.limits("default", "default", DefaultRuleName, def, 0, defWin); lims != nil {
		c.def = &Rule{Name: DefaultRuleName, Policy: &store.Policy{Name: DefaultRuleName, Algorithm: defAlgo, Limits: lims, Location: defWin.loc}, shadow: c.shadow, key: defKey, block: cc.leaseBlock}
		c.def.prepare()
		if c.shadow {
			c.shadowDef = c.def
		} else {
			c.enfDef = c.def
		}
	}
	cc.stackNames(spec.Rules, c)
	cc.fileLeaseBlock(spec)
	cc.tiers(spec.Tiers, c)
	c.lists = cc.lists(spec.Allow, spec.Ban)
	c.extras = c.lists != nil || c.tiers != nil
	c.keyed = c.def != nil && c.def.key != nil
	for _, r := range c.rules {
		c.keyed = c.keyed || r.key != nil
	}
	cc.errs = append(cc.errs, ex.errs...)
	if len(cc.errs) > 0 {
		return nil, joinErrors(cc.errs)
	}
	return c, nil
}

// rule compiles rules[i]; nil when it has a problem. Its name goes to
// cc.seen, its paths to cc.taken.
func (cc *compiler) rule(i int, rs RuleSpec) *Rule {
	key := "rules." + strconv.Itoa(i)
	name := rs.Name
	label := name
	if label == "" {
		label = "rules[" + strconv.Itoa(i) + "]"
	}
	n := len(cc.errs)
	switch prev, dup := cc.seen[name]; {
	case name == "":
		cc.fail(key, label, "name", "", "a rule needs a name")
	case !ruleNameRE.MatchString(name):
		cc.fail(key+".name", label, "name", name, "names are 1 to 64 letters, digits, '_', '.' or '-'")
	case dup && prev < 0:
		cc.fail(key+".name", label, "name", name, "%q is the name of the default limit", DefaultRuleName)
	case dup:
		cc.fail(key+".name", label, "name", name, "duplicate rule name (also rules[%d])", prev)
	}
	cc.seen[name] = i
	a := cc.defAlgo
	if rs.Algorithm != "" {
		var err error
		if a, err = algo.ParseAlgorithm(rs.Algorithm); err != nil {
			cc.fail(key+".algorithm", label, "algorithm", rs.Algorithm, "%v", err)
		}
	}
	if rs.Burst != 0 && !burstAlgorithm(a) {
		cc.fail(key+".burst", label, "burst", strconv.FormatInt(rs.Burst, 10), "burst applies to token_bucket and gcra only, not %v", a)
	}
	r := &Rule{Name: name, shadow: cc.mode(key+".mode", label, rs.Mode, cc.shadow), count: cc.countMode(key+".count", label, rs.Count)}
	if rs.ClearOnSuccess {
		if r.count == countFailures {
			r.clear = true
		} else {
			cc.fail(key+".clear_on_success", label, "clear_on_success", "true", "a success clears the failures counted: it needs count: failures (the rule counts %s)", countModeNames[r.count])
		}
	}
	set := &cc.taken[0] // a rule's paths are taken from the earlier rules of its mode
	if r.shadow {
		set = &cc.taken[1]
	}
	if rs.Stack {
		// A stacked rule takes no path from the rules after it, and none
		// from it: its paths are checked against exempt_paths and one
		// another only.
		r.stack = true
		set = new([]pathClaim)
		cc.stacked(key, label, rs)
	}
	r.paths = cc.paths(key, label, rs, set, cc.exempt)
	r.key = cc.key(key+".key", label, "key", rs.Key, r.paths, false)
	for j, m := range rs.Methods {
		if !methodRE.MatchString(m) {
			cc.fail(key+".methods."+strconv.Itoa(j), label, "methods", m, "a method is an upper-case token such as GET")
		}
		r.methods = append(r.methods, m)
	}
	r.methods = withHead(r.methods)
	algoKey := ""
	if rs.Algorithm != "" {
		algoKey = key + ".algorithm"
	}
	win := cc.window(windowSpec{prefix: key + ".", rule: label, window: rs.Window, timezone: rs.Timezone, algorithm: a, algorithmKey: algoKey})
	var lims []algo.Limit
	bounded := rs.Concurrent != 0 || cc.ln[key+".concurrent"] != 0 // concurrent written, even badly
	r.conc = cc.concurrency(key, label, name, rs)
	if len(rs.Limit) > 0 || !bounded {
		lims = cc.limits(key+".limit", key+".burst", label, rs.Limit, rs.Burst, win)
	} else {
		cc.unlimited(key, label, rs)
	}
	r.Policy = &store.Policy{Name: name, Algorithm: a, Limits: lims, Location: win.loc}
	r.weights = cc.weights(key, label, rs, r)
	cc.cost(key, label, rs, r)
	r.penalty = cc.penalty(key+".penalty", label, name, rs.Penalty)
	cc.compileWait(key, label, rs, r)
	cc.consistency(key, label, rs, r)
	if len(cc.errs) > n || lims == nil && r.conc == nil {
		return nil
	}
	r.prepare()
	return r
}

// weights compiles the weights of the rule r at key, whose paths and
// policy are compiled (its limits nil when bad).
func (cc *compiler) weights(key, label string, rs RuleSpec, r *Rule) []weight {
	var out []weight
	for _, w := range rs.Weights {
		wkey := key + ".weights." + w.Path
		pat, err := compilePattern(w.Path)
		if err != nil {
			cc.fail(wkey, label, "weights", w.Path, "%v", err)
			continue
		}
		overlaps := false
		for k := range r.paths {
			overlaps = overlaps || r.paths[k].overlaps(&pat)
		}
		switch {
		case !overlaps && len(r.paths) > 0:
			cc.fail(wkey, label, "weights", w.Path, "the pattern matches none of the rule's paths, so the weight could never apply")
		case w.Cost < 1:
			cc.fail(wkey, label, "weights", strconv.FormatInt(w.Cost, 10), "weight of %q must be at least 1", w.Path)
		case r.Policy.Limits != nil && w.Cost > r.Policy.Capacity():
			cc.fail(wkey, label, "weights", strconv.FormatInt(w.Cost, 10), "weight of %q exceeds the rule's capacity %d (%s): such a request could never pass", w.Path, r.Policy.Capacity(), strings.Join(rs.Limit, ", "))
		}
		out = append(out, weight{pat: pat, cost: w.Cost})
	}
	return out
}

// mode compiles a mode field at key ("" gives def): whether it is shadow.
func (cc *compiler) mode(key, rule, mode string, def bool) bool {
	switch mode {
	case "":
		return def
	case "enforce":
		return false
	case "shadow":
		return true
	}
	cc.fail(key, rule, "mode", mode, "want enforce or shadow")
	return def
}

// limits compiles a list of limits with burst, counted in win; nil when
// one is bad.
func (cc *compiler) limits(key, burstKey, rule string, vals []string, burst int64, win window) []algo.Limit {
	if len(vals) == 0 {
		cc.fail(key, rule, "limit", "", "no limit given")
		return nil
	}
	if len(vals) > store.MaxLimits {
		cc.fail(key, rule, "limit", strings.Join(vals, ", "), "%d limits, at most %d", len(vals), store.MaxLimits)
		return nil
	}
	var out []algo.Limit
	for i, v := range vals {
		l, err := win.parse(v)
		if err != nil {
			cc.fail(key+"."+strconv.Itoa(i), rule, "limit", v, "%v", err)
			continue
		}
		l.Burst = burst
		if err := l.Validate(); err != nil {
			cc.fail(burstKey, rule, "burst", strconv.FormatInt(burst, 10), "%v", err)
			continue
		}
		for _, m := range out {
			switch {
			case m.Period != l.Period:
			case l.Calendar != 0:
				cc.fail(key+"."+strconv.Itoa(i), rule, "limit", v, "a second limit per calendar %v (first: %s)", l.Calendar, m)
			default:
				cc.fail(key+"."+strconv.Itoa(i), rule, "limit", v, "a second limit per %v (first: %s)", l.Period, m)
			}
		}
		out = append(out, l)
	}
	if len(out) != len(vals) {
		return nil
	}
	return out
}

// window is how a list of limits counts: in windows of each limit's
// period, or, when loc is set, per calendar period of loc.
type window struct {
	loc *time.Location // nil: not calendar
	// field asks for calendar periods where the limits are written:
	// "window" for a rule's, "default_window" for the default's.
	field string
}

// parse parses one limit of the list: algo.ParseCalendarLimit for a
// calendar window; else algo.ParseLimit, whose refusal of a month or a
// year names the field that would count it.
func (w window) parse(v string) (algo.Limit, error) {
	if w.loc != nil {
		return algo.ParseCalendarLimit(v)
	}
	l, err := algo.ParseLimit(v)
	if err != nil {
		if c, cerr := algo.ParseCalendarLimit(v); cerr == nil && c.Calendar != algo.CalendarDay {
			where := "the rule"
			if w.field == "default_window" {
				where = "the rate_limit section"
			}
			return l, fmt.Errorf("limit %q: a %v is a calendar period: add %s: calendar to %s (its limits then count per calendar day, month or year)", clip.String(v), c.Calendar, w.field, where)
		}
	}
	return l, err
}

// windowSpec is the window and timezone fields of a rule, or of the
// default limit, and the algorithm its limits count with.
type windowSpec struct {
	prefix           string // the fields' key, less "window" or "timezone": "rules.2." or "default_"
	rule             string // the rule's label
	window, timezone string
	algorithm        algo.Algorithm
	algorithmKey     string // the key of the field that set the algorithm; "" for the file's default
}

// window compiles ws.
func (cc *compiler) window(ws windowSpec) window {
	winField, tzField := "window", "timezone"
	if ws.prefix == "default_" {
		winField, tzField = "default_window", "default_timezone"
	}
	w := window{field: winField}
	switch ws.window {
	case "":
		if ws.timezone != "" {
			cc.fail(ws.prefix+"timezone", ws.rule, tzField, ws.timezone, "a time zone applies to %s: calendar only", winField)
		}
		return w
	case "calendar":
	default:
		cc.fail(ws.prefix+"window", ws.rule, winField, ws.window, "want calendar (limits per calendar day, month or year), or no %s for windows of each limit's own period", winField)
		return w
	}
	if ws.algorithm != algo.FixedWindow {
		if ws.algorithmKey != "" {
			cc.fail(ws.algorithmKey, ws.rule, "algorithm", ws.algorithm.String(), "calendar windows count with fixed_window, not %v (%s: calendar)", ws.algorithm, winField)
		} else {
			cc.fail(ws.prefix+"window", ws.rule, winField, ws.window, "calendar windows count with fixed_window, not %v (the file's algorithm): set algorithm: fixed_window on the rule", ws.algorithm)
		}
	}
	loc, err := loadZone(ws.timezone)
	if err != nil {
		cc.fail(ws.prefix+"timezone", ws.rule, tzField, ws.timezone, "%v", err)
		loc = time.UTC // the limits are still checked
	}
	w.loc = loc
	return w
}

// loadZone loads the IANA time zone name; "" is UTC. "Local", the
// machine's own zone, is refused: replicas may not share it.
func loadZone(name string) (*time.Location, error) {
	switch name {
	case "":
		return time.UTC, nil
	case "Local":
		return nil, errors.New(`"Local" is this machine's time zone, which other replicas may not share: name the zone, such as UTC or Europe/Berlin`)
	}
	loc, err := time.LoadLocation(name)
	if err != nil {
		return nil, fmt.Errorf("unknown time zone %q: want an IANA name such as Europe/Berlin, or UTC (a program on a system without a time zone database embeds Go's with import _ \"time/tzdata\")", clip.String(name))
	}
	return loc, nil
}
