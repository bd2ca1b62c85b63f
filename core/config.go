package core

import (
	"crypto/sha256"
	"strconv"
)

// defaultLimit is the limit of requests no rule matches, unless the
// configuration says otherwise.
const defaultLimit = "120/minute"

// DefaultRuleName is the name of the rule that applies when no rule matches.
const DefaultRuleName = "default"

// DefaultExemptPaths never touch a counter unless the configuration lists
// its own exempt_paths.
var DefaultExemptPaths = []string{"/health", "/ready", "/docs", "/redoc", "/openapi.json"}

// HeaderStyle selects the rate-limit headers written on limited responses.
type HeaderStyle uint8

const (
	// HeadersDraft writes the IETF httpapi draft headers:
	//   RateLimit-Policy: "<rule>";q=<count>;w=<window seconds>
	//   RateLimit: "<rule>";r=<remaining>;t=<seconds to reset>
	// with one list item per limit of the rule. A rule with one limit
	// names its item after the rule; a rule with several names each
	// "<rule>-<window>", the window in the largest of the units s, m, h
	// and d that divides it ("api-1s", "api-5m", "api-1h"), or its
	// calendar period ("llm-day", "llm-month"), so no name repeats. The
	// window of a calendar limit is the length of the period it counts in
	// now (82800 for a day of 23 hours, 2678400 for a month of 31 days),
	// and t the time to the next period's start. It is the default.
	HeadersDraft HeaderStyle = iota
	// HeadersLegacy writes X-RateLimit-Limit, X-RateLimit-Remaining and
	// X-RateLimit-Reset (seconds until reset) for the deciding limit.
	HeadersLegacy
	// HeadersNone writes no rate-limit headers (Retry-After still goes on 429s).
	HeadersNone
)

var headerStyleNames = [...]string{"draft", "legacy", "none"}

func (s HeaderStyle) String() string {
	if int(s) < len(headerStyleNames) {
		return headerStyleNames[s]
	}
	return "headers(" + strconv.Itoa(int(s)) + ")"
}

// Config is a checked, compiled configuration. Build one with LoadConfig,
// ParseConfig or NewConfig. The zero Config (and a nil *Config) is disabled:
// every request passes. A Config is immutable and safe for concurrent use.
type Config struct {
	enabled bool
	// extras: the configuration has allow or ban lists, or plans. Without
	// them a request tests this one flag (beside enabled) for them, and is
	// decided by its rules alone.
	extras bool
	// keyed: a rule or the default counts per a key of its own
	// (RuleSpec.Key); without one a request tests this flag for keys.
	keyed      bool
	rules      []*Rule
	def        *Rule
	exempt     []pattern
	headers    HeaderStyle
	failClosed bool // false, the zero value, is fail-open
	shadow     bool // the file's mode is shadow
	// The rules of each mode, in order, and the default in its own:
	// requests are matched against each set apart (see Spec.Mode).
	enforced, shadows []*Rule
	enfDef, shadowDef *Rule
	// stacks are the stacked rules (RuleSpec.Stack), of either mode, in
	// order: each counts every request it matches, beside the rule that
	// applies.
	stacks []*Rule
	// upper: a rule or weight pattern holds an ASCII upper-case letter, so
	// that a route's answer (worked out case by case) may differ from
	// matching without regard to case.
	upper bool

	routes routes // answers per (method, route); see route.go
	lists  *lists // allow and ban lists; nil when none (see lists.go)

	tiers map[string]*tier // by plan name; nil: no plans (see tiers.go)

	digest [sha256.Size]byte // of the file it was parsed from; zero: built in code
}

// Loaded reports whether c was parsed (ParseConfig, LoadConfig) from data:
// a watcher of the file (package reload) tells with it whether the
// limiter runs the file as it is.
func (c *Config) Loaded(data []byte) bool {
	return c != nil && c.digest != [sha256.Size]byte{} && c.digest == sha256.Sum256(data)
}

// Enabled reports whether limiting is on.
func (c *Config) Enabled() bool { return c != nil && c.enabled }

// Rules returns the rules in match order, without the default rule.
func (c *Config) Rules() []*Rule {
	if c == nil {
		return nil
	}
	return c.rules
}

// Default returns the rule that applies when no rule matches.
func (c *Config) Default() *Rule {
	if c == nil {
		return nil
	}
	return c.def
}

// Rule returns the rule named name ("default" for the default limit), or
// nil when there is none.
func (c *Config) Rule(name string) *Rule {
	if c == nil {
		return nil
	}
	if c.def != nil && c.def.Name == name {
		return c.def
	}
	for _, r := range c.rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Headers returns the configured header style.
func (c *Config) Headers() HeaderStyle {
	if c == nil {
		return HeadersDraft
	}
	return c.headers
}

// FailOpen reports whether requests pass when the store fails.
func (c *Config) FailOpen() bool { return c == nil || !c.failClosed }
