package core

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// pathClaim is a compiled path of a rule or of exempt_paths, with what
// error messages say about it.
type pathClaim struct {
	key     string // its field path, for its line; "" for a default exempt path
	label   string // the rule's name (or "rules[i]")
	pat     pattern
	methods []string // the rule's methods; nil: every method
}

// exemptPaths compiles exempt_paths (nil: DefaultExemptPaths).
func (cc *compiler) exemptPaths(paths []string) []pathClaim {
	def := paths == nil
	if def {
		paths = DefaultExemptPaths
	}
	var out []pathClaim
	for j, p := range paths {
		key := "exempt_paths." + strconv.Itoa(j)
		pat, err := compilePattern(p)
		if err != nil {
			cc.fail(key, "", "exempt_paths", p, "%v", err)
			continue
		}
		if def {
			key = "" // not in the file
		}
		out = append(out, pathClaim{key: key, pat: pat})
	}
	return out
}

// paths compiles the paths of the rule at key and refuses each one that could
// never count a request: one that an exempt path covers, one that an
// earlier rule's path takes for every method of this rule, and one that
// another path of the same rule already covers. It appends the rule's
// paths to taken.
func (cc *compiler) paths(key, label string, rs RuleSpec, taken *[]pathClaim, exempt []pathClaim) []pattern {
	if len(rs.Paths) == 0 {
		cc.fail(key, label, "paths", "", "a rule needs at least one path")
		return nil
	}
	earlier := len(*taken)
	var out []pattern
	for j, p := range rs.Paths {
		pkey := key + ".paths." + strconv.Itoa(j)
		pat, err := compilePattern(p)
		if err != nil {
			cc.fail(pkey, label, "paths", p, "%v", err)
			continue
		}
		*taken = append(*taken, pathClaim{key: pkey, label: label, pat: pat, methods: withHead(rs.Methods)})
		out = append(out, pat)
	}
	own := (*taken)[earlier:]
	for j := range own {
		p := &own[j]
		if msg := cc.shadowed(p, exempt, (*taken)[:earlier], own, j); msg != "" {
			cc.fail(p.key, label, "paths", p.pat.raw, "%s", msg)
		}
	}
	return out
}

// shadowed says why the path p (own[j], own being its rule's paths) could never
// count a request, or returns "" when it can: exempt_paths covers it, the
// rules before it (earlier) take it for every method p's rule counts, or
// another path of its own rule covers it (of two equal paths, the second).
// A pattern covers another exactly when it matches every path the other
// matches, so these are exactly the paths no request is ever counted on.
func (cc *compiler) shadowed(p *pathClaim, exempt, earlier, own []pathClaim, j int) string {
	for k := range exempt {
		if e := &exempt[k]; e.pat.covers(&p.pat) {
			// What a rule could still count: a catch-all exempts the
			// trailing slash too.
			others := "such as with a trailing slash"
			if e.pat.rest {
				others = "that decode or clean to another path"
			}
			if e.key == "" {
				return fmt.Sprintf("exempt by %q of the default exempt_paths: a request for this path is never counted (the rule would count only other spellings of it, %s) (list your own exempt_paths to change that)", e.pat.raw, others)
			}
			return fmt.Sprintf("exempt by exempt_paths %q%s: a request for this path is never counted (the rule would count only other spellings of it, %s)", e.pat.raw, paren(cc.lineOf(e.key)), others)
		}
	}
	for k := range own {
		o := &own[k]
		if k != j && o.pat.covers(&p.pat) && (k < j || !p.pat.covers(&o.pat)) {
			return fmt.Sprintf("already matched by %q%s, a path of the same rule: this path is redundant", o.pat.raw, paren(cc.lineOf(o.key)))
		}
	}
	// The first earlier path that takes p for each method p's rule counts
	// (for all of them when it names none).
	methods := p.methods
	if len(methods) == 0 {
		methods = []string{""}
	}
	by := make([]*pathClaim, len(methods))
	for m, method := range methods {
		for k := range earlier {
			e := &earlier[k]
			if e.pat.covers(&p.pat) && (len(e.methods) == 0 || slices.Contains(e.methods, method)) {
				by[m] = e
				break
			}
		}
		if by[m] == nil {
			return ""
		}
	}
	name := func(e *pathClaim) string {
		where := fmt.Sprintf("path %q", e.pat.raw)
		if l := cc.lineOf(e.key); l != "" {
			where += ", " + l
		}
		return fmt.Sprintf("rule %q (%s)", e.label, where)
	}
	if !slices.ContainsFunc(by, func(e *pathClaim) bool { return e != by[0] }) {
		return "already matched by " + name(by[0]) + ", which comes first: this path would never apply here"
	}
	var b strings.Builder
	b.WriteString("already matched")
	for m, e := range by {
		if slices.Index(by, e) != m {
			continue // named with its first method
		}
		if m > 0 {
			b.WriteString(" and")
		}
		b.WriteString(" by " + name(e) + " for ")
		var ms []string
		for n := range by {
			if by[n] == e {
				ms = append(ms, methods[n])
			}
		}
		b.WriteString(strings.Join(ms, ", "))
	}
	b.WriteString(", which come first: this path would never apply here")
	return b.String()
}
