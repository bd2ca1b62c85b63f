package core

import (
	"log/slog"
	"slices"
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
// Counters belong to a rule's policy: its name, algorithm and limits. A
// rule whose policy is the same in cfg keeps counting where it was (its
// paths, methods, weights and mode may change); a rule whose policy
// changed, or that is new or renamed, starts from zero (a store may say
// otherwise: see redisstore.WithIncrExpireKeys). The swap is logged with
// the rules in each case.
func (l *Limiter) SetConfig(cfg *Config) {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	l.swap(cfg, "")
}

// ReloadFile loads the configuration in file (LoadConfig) and swaps it in
// (see SetConfig). When the file does not load, the running configuration
// stays: the error is returned, logged, and counted in ReloadStats.
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
	if err != nil {
		l.reloadMu.Lock()
		l.reload.Failures++
		l.reload.LastError = err
		l.reloadMu.Unlock()
		l.log.Error("rlkit: rate-limit config reload failed; the running configuration stays",
			slog.String("file", file), slog.String("error", err.Error()))
		return err
	}
	l.swap(cfg, file)
	return nil
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
		slog.Any("changed", ch.changed),
		slog.Any("added", ch.added),
		slog.Any("removed", ch.removed),
	}
	attrs = append(attrs, tierAttrs(old, cfg)...)
	if file != "" {
		attrs = append([]any{slog.String("file", file)}, attrs...)
	}
	l.log.Info("rlkit: rate-limit config swapped in (kept rules keep their counters; changed and added rules start from zero)", attrs...)
	// What loosens limiting is said louder.
	if old.Enabled() && !cfg.Enabled() {
		l.log.Warn("rlkit: rate-limit config swapped in with limiting off: every request now passes uncounted", attrs[:min(len(attrs), 2)]...)
	}
	if len(ch.shadowed) > 0 && cfg.Enabled() {
		l.log.Warn("rlkit: rate-limit config swapped in with enforced rules now in shadow mode: they deny nothing", slog.Any("rules", ch.shadowed))
	}
}

// ruleChanges sorts the rule names of two configurations by what became
// of their counters.
type ruleChanges struct {
	kept     []string // same policy: counters carry over
	changed  []string // policy or key changed: counters start from zero
	added    []string // new: counters start from zero
	removed  []string
	shadowed []string // enforced before (limiting on), in shadow mode now
}

// diffRules compares the rules (with the default) of old and new by name,
// policy fingerprint and key (RuleSpec.Key: a rule counted per another key
// finds none of its old counters), in one pass over each.
func diffRules(old, new *Config) ruleChanges {
	before := map[string]*Rule{}
	for _, r := range withDefault(old) {
		before[r.Name] = r
	}
	ch := ruleChanges{kept: []string{}, changed: []string{}, added: []string{}, removed: []string{}}
	for _, r := range withDefault(new) {
		o := before[r.Name]
		delete(before, r.Name)
		switch {
		case o == nil:
			ch.added = append(ch.added, r.Name)
			continue
		case o.Policy.Fingerprint() == r.Policy.Fingerprint() && o.Key() == r.Key():
			ch.kept = append(ch.kept, r.Name)
		default:
			ch.changed = append(ch.changed, r.Name)
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

// withDefault is c's default rule, if any, then its rules.
func withDefault(c *Config) []*Rule {
	if c.Default() == nil {
		return c.Rules()
	}
	return append([]*Rule{c.Default()}, c.Rules()...)
}
