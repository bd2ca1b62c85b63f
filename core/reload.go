package core

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/rlkit/rlkit/core/algo"
	"github.com/rlkit/rlkit/core/store"
)

// ReloadStats counts a Limiter's configuration reloads.
type ReloadStats struct {
	// Reloads counts the configurations swapped in (SetConfig,
	// ReloadFile).
	Reloads uint64
	// Failures counts the reloads refused (a file that does not load);
	// the running configuration stayed.
	Failures uint64
	// LastError is the error of the last reload attempt; nil when it
	// succeeded.
	LastError error
	// LastReload is when the last configuration was swapped in, in Unix
	// nanoseconds of the limiter's clock; 0 if none has been.
	LastReload int64
}

// ReloadStats returns the limiter's reload counts.
func (l *Limiter) ReloadStats() ReloadStats {
	l.reloadMu.Lock()
	defer l.reloadMu.Unlock()
	return l.reload
}

// SetConfig swaps cfg in as the limiter's configuration (nil or disabled
// turns limiting off). Requests being decided finish under the
// configuration they started with; each later one is decided wholly under
// cfg. No lock is taken on the request path.
//
// Each limit of a rule counts under the rule's name and algorithm and the
// limit's period. A rule that keeps them in cfg keeps what each caller
// spent in the current window, counted against its new count and burst
// (its paths, methods, weights, mode and place in the file may change
// too); a rule that is new or renamed, or whose algorithm changed, starts
// from zero, and so does a limit of a new period (the rule's other limits
// keep their counts). The swap is logged with the rules in each case.
//
// A cfg with a rule charged by response (RuleSpec.Cost) over a store that
// is not a store.Charger is refused as a file that does not load is: the
// running configuration stays, and the error is logged and counted in
// ReloadStats. So is a cfg with a rule that bounds requests in flight
// (RuleSpec.Concurrent) while the store cannot (it is no
// store.ConcurrencyStore), and one with stacked rules (RuleSpec.Stack)
// while the store cannot take several limits at once (it is no
// store.MultiTaker).
func (l *Limiter) SetConfig(cfg *Config) {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	if err := l.chargeError(cfg); err != nil {
		l.refuse(err, "")
		return
	}
	if err := l.runnable(cfg); err != nil {
		l.refuse(fmt.Errorf("rate-limit config: %w", err), "")
		return
	}
	l.swap(cfg, "")
}

// ReloadFile loads the configuration in file (LoadConfig) and swaps it in
// (see SetConfig). When the file does not load, or cannot run on the
// store (see SetConfig), the running configuration stays: the error is
// returned, logged, and counted in ReloadStats.
func (l *Limiter) ReloadFile(file string) error {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	data, err := ReadConfigFile(file)
	return l.reloadData(data, err, file)
}

// reloadData swaps in the configuration in data, read from file, or
// reports the error of reading or compiling it. l.loadMu is held.
func (l *Limiter) reloadData(data []byte, err error, file string) error {
	var cfg *Config
	if err == nil {
		cfg, err = parseConfig(data, file, l.log)
	}
	if err == nil {
		err = l.chargeError(cfg)
		if err == nil {
			if err = l.runnable(cfg); err != nil {
				err = fmt.Errorf("rate-limit config %s: %w", file, err)
			}
		}
	}
	if err != nil {
		l.refuse(err, file)
		return err
	}
	l.swap(cfg, file)
	return nil
}

// refuse counts and logs a reload refused with err (of file, "" for
// SetConfig). l.loadMu is held.
func (l *Limiter) refuse(err error, file string) {
	l.reloadMu.Lock()
	l.reload.Failures++
	l.reload.LastError = err
	l.reloadMu.Unlock()
	l.log.Error("rlkit: rate-limit config reload failed; the running configuration stays",
		slog.String("file", file), slog.String("error", err.Error()))
}

func (l *Limiter) swap(cfg *Config, file string) {
	l.reloadMu.Lock()
	old := l.cfg.Swap(cfg)
	l.reload.Reloads++
	l.reload.LastError = nil
	l.reload.LastReload = l.clock.Now()
	l.reloadMu.Unlock()
	ch := diffRules(old, cfg)
	attrs := []any{
		slog.Bool("enabled", cfg.Enabled()),
		slog.Int("rules", len(cfg.Rules())),
		slog.Any("kept", ch.kept),
		slog.Any("new_terms", ch.newTerms),
		slog.Any("afresh", ch.afresh),
		slog.Any("added", ch.added),
		slog.Any("removed", ch.removed),
	}
	attrs = append(attrs, tierAttrs(old, cfg)...)
	if file != "" {
		attrs = append([]any{slog.String("file", file)}, attrs...)
	}
	l.log.Info(swappedIn, attrs...)
	// What loosens limiting is said louder.
	if old.Enabled() && !cfg.Enabled() {
		l.log.Warn("rlkit: rate-limit config swapped in with limiting off: every request now passes uncounted", attrs[:min(len(attrs), 2)]...)
	}
	if len(ch.shadowed) > 0 && cfg.Enabled() {
		l.log.Warn("rlkit: rate-limit config swapped in with enforced rules now in shadow mode: they deny nothing", slog.Any("rules", ch.shadowed))
	}
}

// swappedIn is the message of a configuration swapped in.
const swappedIn = "rlkit: rate-limit config swapped in (kept and new_terms rules keep their counts; afresh and added rules start from zero)"

// ruleChanges sorts the rule names of two configurations by what became
// of their counters.
type ruleChanges struct {
	kept []string // same terms: counters carry over
	// newTerms: a count, a burst or the limits' order changed; the
	// counters carry over, counted against the new terms.
	newTerms []string
	// afresh: the algorithm changed, or no limit's period stayed, and the
	// rule starts from zero ("api"); or a limit of a new period starts
	// from zero beside limits that carry over ("api(1000/day)", the rule
	// then in newTerms); or the rule counts per another key (RuleSpec.Key),
	// under which it finds none of its old counters.
	afresh   []string
	added    []string // new (or renamed): counters start from zero
	removed  []string
	shadowed []string // enforced before (limiting on), in shadow mode now
}

// diffRules compares the rules (with the default) of old and new by name
// and policy: its fingerprint (the terms), then its counters' identity
// (algorithm and periods), and key (RuleSpec.Key: a rule counted per
// another key finds none of its old counters), in one pass over each.
func diffRules(old, new *Config) ruleChanges {
	before := map[string]*Rule{}
	for _, r := range withDefault(old) {
		before[r.Name] = r
	}
	ch := ruleChanges{kept: []string{}, newTerms: []string{}, afresh: []string{}, added: []string{}, removed: []string{}}
	for _, r := range withDefault(new) {
		o := before[r.Name]
		delete(before, r.Name)
		switch {
		case o == nil:
			ch.added = append(ch.added, r.Name)
			continue
		case o.Key() != r.Key():
			ch.afresh = append(ch.afresh, r.Name)
		case o.Policy.Fingerprint() == r.Policy.Fingerprint():
			ch.kept = append(ch.kept, r.Name)
		default:
			ch.sortTerms(o.Policy, r.Policy)
		}
		if r.shadow && !o.shadow && old.Enabled() {
			ch.shadowed = append(ch.shadowed, r.Name)
		}
	}
	for name := range before {
		ch.removed = append(ch.removed, name)
	}
	slices.Sort(ch.removed)
	return ch
}

// sortTerms files the rule whose policy went from o to p, of the same
// name and other terms: afresh when no counter of o is one of p's (an
// algorithm or every period changed), else under new terms, with the
// limits of new periods afresh.
func (ch *ruleChanges) sortTerms(o, p *store.Policy) {
	var fresh []string
	for _, l := range p.Limits {
		if o.Algorithm != p.Algorithm || !slices.ContainsFunc(o.Limits, func(m algo.Limit) bool { return m.Period == l.Period }) {
			fresh = append(fresh, p.Name+"("+l.String()+")")
		}
	}
	if len(fresh) == len(p.Limits) {
		ch.afresh = append(ch.afresh, p.Name)
		return
	}
	ch.newTerms = append(ch.newTerms, p.Name)
	ch.afresh = append(ch.afresh, fresh...)
}

// withDefault is c's default rule, if any, then its rules.
func withDefault(c *Config) []*Rule {
	if c.Default() == nil {
		return c.Rules()
	}
	return append([]*Rule{c.Default()}, c.Rules()...)
}
